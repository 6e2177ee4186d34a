#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Spins before yielding or sleeping: long enough to cover a node's imbalance, short enough not
 * to steal a core from the other thread when threads outnumber cores. */
#define SPIN_PAUSES 2048
#define SPIN_YIELDS 20000

struct llm_threadpool {
    int n;
    pthread_t *threads;
    void (*fn)(int, int, void *);
    void *arg;
    atomic_uint run_gen;     /* bumped to start a run          */
    atomic_int n_done;       /* workers finished the run       */
    atomic_int stop;
    int idle_yields;         /* sched_yield polls between runs, after the busy-wait, before sleeping */
    uint64_t idle_spin_ns;   /* busy-wait between runs by time instead of SPIN_PAUSES, when set */
    atomic_uint bar_count;   /* barrier arrivals               */
    atomic_uint bar_gen;     /* barrier generation             */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int sleeping;     /* workers blocked on cv (changed under mu) */
};

struct worker_arg {
    struct llm_threadpool *p;
    int ith;
};

static void spin_wait(atomic_uint *var, unsigned old)
{
    for (int i = 0; atomic_load_explicit(var, memory_order_acquire) == old; i++) {
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
}

void llm_threadpool_barrier(void *pool)
{
    struct llm_threadpool *p = pool;
    if (p->n == 1)
        return;
    unsigned gen = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == (unsigned)p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_gen, 1, memory_order_release);
        return;
    }
    spin_wait(&p->bar_gen, gen);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool run_pending(struct llm_threadpool *p, unsigned seen)
{
    return atomic_load_explicit(&p->run_gen, memory_order_acquire) != seen || atomic_load(&p->stop);
}

/* Between runs: busy-wait (SPIN_PAUSES pauses, or idle_spin_ns when set), then poll with
 * sched_yield idle_yields times, then sleep on the condition variable. */
static void wait_for_run(struct llm_threadpool *p, unsigned seen)
{
    if (p->idle_spin_ns) {
        const uint64_t t0 = now_ns();
        while (!run_pending(p, seen) && now_ns() - t0 < p->idle_spin_ns)
            for (int k = 0; k < 16; k++)
                cpu_relax();
    } else {
        for (int i = 0; i < SPIN_PAUSES && !run_pending(p, seen); i++)
            cpu_relax();
    }
    for (int i = 0; i < p->idle_yields && !run_pending(p, seen); i++)
        sched_yield();
    if (run_pending(p, seen))
        return;
    pthread_mutex_lock(&p->mu);
    p->sleeping++;
    while (!run_pending(p, seen))
        pthread_cond_wait(&p->cv, &p->mu);
    p->sleeping--;
    pthread_mutex_unlock(&p->mu);
}

static void *worker(void *arg)
{
    struct worker_arg *wa = arg;
    struct llm_threadpool *p = wa->p;
    const int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        wait_for_run(p, seen);
        if (atomic_load(&p->stop))
            return NULL;
        seen = atomic_load(&p->run_gen);
        p->fn(ith, p->n, p->arg);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_release);
    }
}

struct llm_threadpool *llm_threadpool_new(int n_threads)
{
    struct llm_threadpool *p = calloc(1, sizeof *p);
    if (!p || n_threads < 1) {
        free(p);
        return NULL;
    }
    p->n = n_threads;
    p->idle_yields = SPIN_YIELDS;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        llm_threadpool_free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->p = p;
            wa->ith = i;
        }
        if (!wa || pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
            free(wa);
            p->n = i; /* only the threads that exist are joined */
            llm_threadpool_free(p);
            return NULL;
        }
    }
    return p;
}

void llm_threadpool_free(struct llm_threadpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

void llm_threadpool_sleep_early(struct llm_threadpool *p, int spin_us)
{
    p->idle_yields = 0;
    p->idle_spin_ns = spin_us > 0 ? (uint64_t)spin_us * 1000u : 0;
}

int llm_threadpool_n_threads(const struct llm_threadpool *p)
{
    return p->n;
}

int llm_threadpool_n_awake(struct llm_threadpool *p)
{
    return p->n - 1 - atomic_load_explicit(&p->sleeping, memory_order_relaxed);
}

void llm_threadpool_run(struct llm_threadpool *p, void (*fn)(int ith, int nth, void *arg), void *arg)
{
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->run_gen, 1, memory_order_release);
    if (p->sleeping)
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(0, p->n, arg);
    for (int i = 0; atomic_load_explicit(&p->n_done, memory_order_acquire) < p->n - 1; i++) {
        if (i < SPIN_PAUSES)
            cpu_relax();
        else
            sched_yield();
    }
}
