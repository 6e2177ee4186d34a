/* Issue 28: -C/--cpu-mask, --cpu-strict, --poll and --prio act on every thread the library runs,
 * seen from outside: after a decode on the cpu and on the npu, every thread of the process (the
 * host, the cpu pool's workers, the npu's device thread and device workers) has the affinity the
 * policy asks (sched_getaffinity through /proc/self/task), strict placement gives each its own
 * cpu, a later test without a mask gets the process's cpus back; --poll scales every busy-wait
 * budget; --prio sets the nice value and the threads' scheduling class. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"
#include "model/context.h"
#include "model/model.h"
#include "thread_policy.h"

static void test_mask_parse(void)
{
    uint64_t m[LLM_MAX_CPUS / 64];
    CHECK(llm_cpu_mask_parse("0x3", m) == 0 && m[0] == 3 && m[1] == 0, "0x3");
    CHECK(llm_cpu_mask_parse("ff00", m) == 0 && m[0] == 0xff00, "ff00");
    CHECK(llm_cpu_mask_parse("0X1" "0000000000000000", m) == 0 && m[0] == 0 && m[1] == 1, "cpu 64");
    CHECK(llm_cpu_mask_parse("0x", m) == -1, "no digits");
    CHECK(llm_cpu_mask_parse("0x3g", m) == -1, "not hex");
    char longest[LLM_MAX_CPUS / 4 + 2];
    memset(longest, 'f', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    CHECK(llm_cpu_mask_parse(longest + 1, m) == 0 && llm_cpu_mask_parse(longest, m) == -1, "more than %d cpus",
          LLM_MAX_CPUS);
    struct llm_thread_policy p = llm_thread_policy_default();
    CHECK(llm_thread_poll_ns(&p, 1000) == 1000, "poll 50 keeps the budget");
    p.poll = 0;
    CHECK(llm_thread_poll_ns(&p, 1000) == 0, "poll 0: no busy-wait");
    p.poll = 100;
    CHECK(llm_thread_poll_ns(&p, 1000) == 2000, "poll 100: twice the budget");
}

/* Each thread of the process: its cpu set as a bit mask (cpus < 64), in *n entries. */
static int thread_masks(uint64_t *out, int cap)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) && n < cap) {
        const int tid = atoi(e->d_name);
        cpu_set_t set;
        if (tid <= 0 || sched_getaffinity(tid, sizeof set, &set) != 0)
            continue;
        uint64_t m = 0;
        for (int c = 0; c < 64; c++)
            m |= CPU_ISSET(c, &set) ? 1ull << c : 0;
        out[n++] = m;
    }
    if (d)
        closedir(d);
    return n;
}

static int popcount(uint64_t m)
{
    return __builtin_popcountll(m);
}

/* One prompt then one decode step on device dev with 2 threads under policy p; every thread's
 * mask of the process, while the context lives, in masks (returns how many). */
static int decode_under(struct llm_model *m, enum llm_device dev, const struct llm_thread_policy *p,
                        uint64_t *masks, int cap)
{
    llm_thread_policy_set(p);
    struct llm_context_params cp = llm_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.device = dev;
    struct llm_context *c = NULL;
    struct llm_error err = { 0 };
    int n = 0;
    CHECK(llm_context_new(m, &cp, &c, &err) == 0, "%s", err.msg);
    if (c) {
        int32_t toks[4] = { 1, 400, 401, 402 }, next = 403;
        CHECK(llm_decode(c, toks, 4, false, &err) == 0 && llm_decode(c, &next, 1, false, &err) == 0, "%s", err.msg);
        n = thread_masks(masks, cap);
        llm_context_free(c);
    }
    return n;
}

static void test_affinity(void)
{
    cpu_set_t own;
    CHECK(sched_getaffinity(0, sizeof own, &own) == 0, "sched_getaffinity");
    int cpus[2], n_cpu = 0;
    for (int c = 0; c < 64 && n_cpu < 2; c++)
        if (CPU_ISSET(c, &own))
            cpus[n_cpu++] = c;
    if (n_cpu < 2) {
        SKIP("affinity needs two usable cpus below 64");
        return;
    }
    const uint64_t both = (1ull << cpus[0]) | (1ull << cpus[1]);
    uint64_t all = 0;
    for (int c = 0; c < 64; c++)
        all |= CPU_ISSET(c, &own) ? 1ull << c : 0;
    struct llm_error err = { 0 };
    struct llm_model *m = NULL;
    CHECK(llm_model_load(test_path("models/stories260K.gguf"), &m, &err) == 0, "%s", err.msg);
    if (!m)
        return;
    uint64_t masks[64];
    const enum llm_device devs[] = { LLM_DEVICE_CPU, LLM_DEVICE_NPU };
    for (int d = 0; d < 2; d++) {
        const char *dev = d ? "npu" : "cpu";
        /* -C <first cpu>: every thread there */
        struct llm_thread_policy p = llm_thread_policy_default();
        p.mask[0] = 1ull << cpus[0];
        int n = decode_under(m, devs[d], &p, masks, 64);
        CHECK(n >= (d ? 4 : 2), "%s: %d threads", dev, n);
        for (int i = 0; i < n; i++)
            CHECK(masks[i] == 1ull << cpus[0], "%s -C: thread %d on %#llx", dev, i, (unsigned long long)masks[i]);
        /* --cpu-strict 1 over two cpus: each thread on one of them, both used */
        p.mask[0] = both;
        p.strict = true;
        n = decode_under(m, devs[d], &p, masks, 64);
        uint64_t used = 0;
        for (int i = 0; i < n; i++) {
            CHECK(popcount(masks[i]) == 1 && (masks[i] & both), "%s strict: thread %d on %#llx", dev, i,
                  (unsigned long long)masks[i]);
            used |= masks[i];
        }
        CHECK(used == both, "%s strict: cpus %#llx used of %#llx", dev, (unsigned long long)used,
              (unsigned long long)both);
        /* no mask after a masked test: the process's cpus again */
        p = llm_thread_policy_default();
        n = decode_under(m, devs[d], &p, masks, 64);
        for (int i = 0; i < n; i++)
            CHECK(masks[i] == all, "%s no mask: thread %d on %#llx, not %#llx", dev, i, (unsigned long long)masks[i],
                  (unsigned long long)all);
    }
    llm_model_free(m);
}

static void *class_of_placed(void *arg)
{
    llm_thread_place(arg, 0, pthread_self());
    return (void *)(intptr_t)sched_getscheduler(0);
}

static void test_priority(void)
{
    struct llm_error err = { 0 };
    CHECK(llm_process_priority(4, &err) != 0 && strstr(err.msg, "--prio"), "--prio 4: %s", err.msg);
    CHECK(llm_process_priority(-1, &err) == 0 && getpriority(PRIO_PROCESS, 0) == 5, "--prio -1: nice %d",
          getpriority(PRIO_PROCESS, 0));
    if (geteuid() != 0) {
        CHECK(llm_process_priority(2, &err) != 0 && strstr(err.msg, "CAP_SYS_NICE"), "--prio 2 unprivileged: %s",
              err.msg);
        SKIP("raising the priority needs root");
        return;
    }
    CHECK(llm_process_priority(2, &err) == 0 && getpriority(PRIO_PROCESS, 0) == -10, "--prio 2: nice %d",
          getpriority(PRIO_PROCESS, 0));
    CHECK(llm_process_priority(0, &err) == 0 && getpriority(PRIO_PROCESS, 0) == 0, "--prio 0: nice %d",
          getpriority(PRIO_PROCESS, 0));
    static const struct { int prio, policy; } classes[] = { { -1, SCHED_BATCH }, { 0, SCHED_OTHER }, { 2, SCHED_FIFO } };
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        struct llm_thread_policy p = llm_thread_policy_default();
        p.prio = classes[i].prio;
        pthread_t t;
        void *got = NULL;
        CHECK(pthread_create(&t, NULL, class_of_placed, &p) == 0 && pthread_join(t, &got) == 0, "thread");
        CHECK((intptr_t)got == classes[i].policy, "--prio %d: class %d, want %d", classes[i].prio, (int)(intptr_t)got,
              classes[i].policy);
    }
}

int main(void)
{
    test_mask_parse();
    test_affinity();
    test_priority();
    return test_done("test_thread_policy");
}
