/* Persistent worker threads. llm_threadpool_run() runs fn on every thread (the caller is thread 0)
 * and returns when all are done; inside fn, llm_threadpool_barrier() synchronises all threads.
 * Workers spin briefly between runs (decode graphs come back within microseconds), then sleep. */
#ifndef LLM_THREADPOOL_H
#define LLM_THREADPOOL_H

struct llm_threadpool;

/* n_threads >= 1. NULL when threads cannot be created. */
struct llm_threadpool *llm_threadpool_new(int n_threads);
void llm_threadpool_free(struct llm_threadpool *p);
int llm_threadpool_n_threads(const struct llm_threadpool *p);
/* Between runs, workers yield their core at once instead of busy-waiting first: for a pool driven
 * by a thread that is not the only other runnable one (an emulated device whose host thread needs a
 * core between runs). Call before the first run. */
void llm_threadpool_yield_early(struct llm_threadpool *p);

void llm_threadpool_run(struct llm_threadpool *p, void (*fn)(int ith, int nth, void *arg), void *arg);

/* All threads of the current run must call it the same number of times. Takes void * so kernels
 * can receive it as a plain callback. */
void llm_threadpool_barrier(void *pool);

#endif
