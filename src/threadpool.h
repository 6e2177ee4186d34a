/* Persistent worker threads. llm_threadpool_run() runs fn on every thread (the caller is thread 0)
 * and returns when all are done; inside fn, llm_threadpool_barrier() synchronises all threads.
 *
 * Every wait in the pool (a worker between runs, a barrier, the caller waiting for the workers)
 * busy-waits for a while, then sleeps in the kernel until woken: decode graphs come back within
 * microseconds, but a thread must not hold a core for long when threads outnumber cores. No wait
 * polls with sched_yield: a thread that yields in a loop looks idle to the scheduler, which then
 * holds back the thread that has the work (EEVDF runs it only once the pollers have caught up on
 * CPU time), which slowed a busy machine's decode many times over
 * (bench/results/kernel_choices.md). */
#ifndef LLM_THREADPOOL_H
#define LLM_THREADPOOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct llm_threadpool;

/* n_threads >= 1. NULL when threads cannot be created. The pool takes the thread policy in force
 * (thread_policy.h): its workers are placed as they are created, thread 0 (the first thread to run
 * the pool, or llm_threadpool_place_owner's) once, and every busy-wait budget follows its poll level. */
struct llm_threadpool *llm_threadpool_new(int n_threads);
void llm_threadpool_free(struct llm_threadpool *p);
int llm_threadpool_n_threads(const struct llm_threadpool *p);
/* Workers (other than the caller's thread 0) not asleep between runs: running or busy-waiting. A
 * snapshot for choosing how long to busy-wait; it may change at once. */
int llm_threadpool_n_awake(struct llm_threadpool *p);
/* How long workers busy-wait between runs before they sleep (default 1000 us, both scaled by the
 * policy's poll level): shorter for a pool
 * that shares the cores with another busy thread (an emulated device and its host). Call before
 * the first run. */
void llm_threadpool_set_idle_spin(struct llm_threadpool *p, int spin_us);

void llm_threadpool_run(struct llm_threadpool *p, void (*fn)(int ith, int nth, void *arg), void *arg);
/* Place thread as the pool's thread 0, unless a thread was placed so already: for the thread that
 * owns the pool (the host for the cpu's; the npu's device thread, which its creator places). */
void llm_threadpool_place_owner(struct llm_threadpool *p, pthread_t thread);

/* All threads of the current run must call it the same number of times. Takes void * so kernels
 * can receive it as a plain callback. */
void llm_threadpool_barrier(void *pool);

/* Barrier waits, timed while counting is on (off by default: two clock reads per wait): the
 * nanoseconds threads have spent waiting for the slowest one, summed over threads, since the pool
 * was made. Where decode loses time to uneven shares or to nodes that run on one thread. */
void llm_threadpool_count_waits(struct llm_threadpool *p, bool on);
uint64_t llm_threadpool_wait_ns(struct llm_threadpool *p);

#endif
