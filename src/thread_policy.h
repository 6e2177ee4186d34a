/* Where the library's threads run and how long they busy-wait: llama.cpp's cpu parameters (-C /
 * --cpu-mask, --cpu-strict, --poll, --prio). The policy is process-wide: a tool sets it before it
 * makes a context, and every thread pool created afterwards (the cpu backend's, the npu's device
 * workers) and the npu's device thread take it; pools that already exist keep theirs. */
#ifndef LLM_THREAD_POLICY_H
#define LLM_THREAD_POLICY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define LLM_MAX_CPUS 1024

/* llama.cpp's priority levels (--prio). */
enum llm_prio { LLM_PRIO_LOW = -1, LLM_PRIO_NORMAL = 0, LLM_PRIO_MEDIUM = 1, LLM_PRIO_HIGH = 2, LLM_PRIO_REALTIME = 3 };

struct llm_thread_policy {
    uint64_t mask[LLM_MAX_CPUS / 64]; /* cpus the threads may run on; all zero: wherever the process may */
    bool strict;                      /* with a mask: each thread on one cpu of it, taken in turn; else every
                                         thread on the whole mask */
    int poll;                         /* 0..100: busy-wait budgets in % of twice the default (50: as
                                         without a policy; 0: a waiting thread sleeps at once) */
    int prio;                         /* enum llm_prio: the threads' scheduling class (llm_process_priority
                                         sets the process's nice value) */
};

/* No mask, not strict, poll 50, normal priority. */
struct llm_thread_policy llm_thread_policy_default(void);

/* Parse a hex cpu mask as llama.cpp writes it ("0x3", "ff00", bit i = cpu i; at most LLM_MAX_CPUS
 * bits). Returns 0, or -1 when s is not such a mask. */
int llm_cpu_mask_parse(const char *s, uint64_t mask[LLM_MAX_CPUS / 64]);
/* How many cpus of mask the process may run on (its own affinity): 0 means the mask is unusable. */
int llm_cpu_mask_usable(const uint64_t mask[LLM_MAX_CPUS / 64]);

/* Make p the policy of the pools and threads created from now on (copied). */
void llm_thread_policy_set(const struct llm_thread_policy *p);
/* The policy in force (the default until set). */
const struct llm_thread_policy *llm_thread_policy_get(void);

/* Reserve n placement slots: a pool's thread i takes slot first + i, so that strict placement
 * hands out the mask's cpus in turn across every pool and thread. */
int llm_thread_policy_reserve(int n);
/* Place thread as slot says under policy p: affinity (one cpu when strict, the mask otherwise,
 * nothing without a mask) and scheduling class. A class the system refuses (real-time classes need
 * root or CAP_SYS_NICE) is a warning, once: the thread runs on as before. The creator of a thread
 * places it, so it is placed before it runs at all. */
void llm_thread_place(const struct llm_thread_policy *p, int slot, pthread_t thread);

/* Busy-wait budget default_ns scaled by p's poll level. */
uint64_t llm_thread_poll_ns(const struct llm_thread_policy *p, uint64_t default_ns);

/* Set the process's nice value for prio as llama.cpp does (low 5, normal 0, medium -5, high -10,
 * realtime -20). A raise the system refuses is an error naming the option and the reason. */
int llm_process_priority(int prio, struct llm_error *err);

#endif
