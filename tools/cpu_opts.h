/* llama.cpp's process-wide cpu options shared by llm-run and llm-bench: --prio and --numa. */
#ifndef LLM_TOOLS_CPU_OPTS_H
#define LLM_TOOLS_CPU_OPTS_H

#include <stdbool.h>

/* --prio: the process's nice value now and the threads' class in the thread policy from now on.
 * Prints the error line (a raise the system refuses) and returns -1 then. */
int tool_set_priority(int prio);

/* --numa MODE ("" when not given): with verbose, one line saying what it does here (with one NUMA
 * node, nothing; threads are never placed by node). prog names the line. */
void tool_numa_note(const char *mode, bool verbose, const char *prog);

#endif
