/* Persistent worker threads. llm_threadpool_run() runs fn on every thread (the caller is thread 0)
 * and returns when all are done; inside fn, llm_threadpool_barrier() synchronises all threads.
 * Workers spin briefly between runs (decode graphs come back within microseconds), poll with
 * sched_yield for a while, then sleep. */
#ifndef LLM_THREADPOOL_H
#define LLM_THREADPOOL_H

struct llm_threadpool;

/* n_threads >= 1. NULL when threads cannot be created. */
struct llm_threadpool *llm_threadpool_new(int n_threads);
void llm_threadpool_free(struct llm_threadpool *p);
int llm_threadpool_n_threads(const struct llm_threadpool *p);
/* Workers (other than the caller's thread 0) not asleep between runs: running or busy-waiting. A
 * snapshot for choosing how long to busy-wait; it may change at once. */
int llm_threadpool_n_awake(struct llm_threadpool *p);
/* Between runs, workers busy-wait up to spin_us (<= 0: the default short busy-wait), then sleep,
 * without polling with sched_yield first: for a pool that shares the cores with another busy
 * thread (an emulated device and its host). A thread that yields in a loop looks idle to the
 * scheduler, which then holds back the thread that has real work (EEVDF lets it run only once the
 * pollers have caught up on CPU time): milliseconds of stall per wait. Call before the first run. */
void llm_threadpool_sleep_early(struct llm_threadpool *p, int spin_us);

void llm_threadpool_run(struct llm_threadpool *p, void (*fn)(int ith, int nth, void *arg), void *arg);

/* All threads of the current run must call it the same number of times. Takes void * so kernels
 * can receive it as a plain callback. */
void llm_threadpool_barrier(void *pool);

#endif
