#include "cpu_opts.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "thread_policy.h"

int tool_set_priority(int prio)
{
    struct llm_error err = { 0 };
    if (llm_process_priority(prio, &err) != 0) {
        tool_error("%s", err.msg);
        return -1;
    }
    struct llm_thread_policy tp = *llm_thread_policy_get();
    tp.prio = prio;
    llm_thread_policy_set(&tp);
    return 0;
}

/* NUMA nodes of this machine (sysfs node<N> entries), at least 1. */
static int numa_nodes(void)
{
    DIR *d = opendir("/sys/devices/system/node");
    int n = 0, id;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += sscanf(e->d_name, "node%d", &id) == 1;
    if (d)
        closedir(d);
    return n > 0 ? n : 1;
}

void tool_numa_note(const char *mode, bool verbose, const char *prog)
{
    if (!verbose || !*mode)
        return;
    const int n = numa_nodes();
    if (n == 1)
        fprintf(stderr, "%s: --numa %s: one NUMA node, nothing to place\n", prog, mode);
    else
        fprintf(stderr, "%s: --numa %s: %d NUMA nodes, but threads are not placed by node (use -C)\n", prog, mode,
                n);
}
