#include "threadpool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "thread_policy.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Busy-wait budgets before sleeping: a barrier or the end of a run covers one node's imbalance
 * (microseconds, unless the machine is busy); between runs, the host's work between two graphs. */
#define SYNC_SPIN_NS 100000
#define IDLE_SPIN_US 1000

struct llm_threadpool {
    int n;
    pthread_t *threads;
    void (*fn)(int, int, void *);
    void *arg;
    _Atomic uint64_t idle_spin_ns; /* atomic: set after the workers started (they read it idle) */
    uint64_t sync_spin_ns;   /* SYNC_SPIN_NS scaled by the policy's poll level */
    struct llm_thread_policy policy; /* the thread policy when the pool was made */
    int first_slot;          /* thread i's placement slot is first_slot + i */
    atomic_flag caller_placed; /* thread 0 (the first thread that runs the pool) is placed */
    /* the futex words, each bumped by the thread that ends a wait on it */
    atomic_uint run_gen;     /* a run starts (or the pool stops)  */
    atomic_uint n_done;      /* workers finished the current run  */
    atomic_uint bar_gen;     /* a barrier opens                    */
    atomic_uint bar_count;   /* arrivals at the current barrier    */
    atomic_int stop;
    atomic_int sleepers;     /* threads asleep on any of the words */
    atomic_int idle_sleepers; /* workers asleep between runs        */
    atomic_bool count_waits; /* barrier waits are timed into wait_ns */
    _Atomic uint64_t wait_ns;
};

struct worker_arg {
    struct llm_threadpool *p;
    int ith;
};

static void futex(atomic_uint *word, int op, unsigned val)
{
    syscall(SYS_futex, (unsigned *)word, op, val, NULL, NULL, 0);
}

/* Waits until *word != old: busy-waits up to spin_ns, then sleeps (counted in *also when given).
 * The sleeper announces itself before its last look at the word and bump() changes the word
 * before it looks for sleepers (both sequentially consistent), so one of them sees the other; and
 * FUTEX_WAIT sleeps only while the word still holds old. */
static void wait_change(struct llm_threadpool *p, atomic_uint *word, unsigned old, uint64_t spin_ns,
                        atomic_int *also)
{
    const uint64_t t0 = llm_now_ns();
    do {
        for (int k = 0; k < 32; k++) {
            if (atomic_load_explicit(word, memory_order_acquire) != old)
                return;
            cpu_relax();
        }
    } while (llm_now_ns() - t0 < spin_ns);
    atomic_fetch_add(&p->sleepers, 1);
    if (also)
        atomic_fetch_add(also, 1);
    while (atomic_load(word) == old)
        futex(word, FUTEX_WAIT_PRIVATE, old);
    if (also)
        atomic_fetch_sub(also, 1);
    atomic_fetch_sub(&p->sleepers, 1);
}

static void bump(struct llm_threadpool *p, atomic_uint *word)
{
    atomic_fetch_add(word, 1);
    if (atomic_load(&p->sleepers))
        futex(word, FUTEX_WAKE_PRIVATE, INT_MAX);
}

void llm_threadpool_barrier(void *pool)
{
    struct llm_threadpool *p = pool;
    if (p->n == 1)
        return;
    unsigned gen = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == (unsigned)p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        bump(p, &p->bar_gen);
        return;
    }
    const bool timed = atomic_load_explicit(&p->count_waits, memory_order_relaxed);
    const uint64_t t0 = timed ? llm_now_ns() : 0;
    wait_change(p, &p->bar_gen, gen, p->sync_spin_ns, NULL);
    if (timed)
        atomic_fetch_add_explicit(&p->wait_ns, llm_now_ns() - t0, memory_order_relaxed);
}

void llm_threadpool_count_waits(struct llm_threadpool *p, bool on)
{
    atomic_store_explicit(&p->count_waits, on, memory_order_relaxed);
}

uint64_t llm_threadpool_wait_ns(struct llm_threadpool *p)
{
    return atomic_load_explicit(&p->wait_ns, memory_order_relaxed);
}

static void *worker(void *arg)
{
    struct worker_arg *wa = arg;
    struct llm_threadpool *p = wa->p;
    const int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        wait_change(p, &p->run_gen, seen, atomic_load_explicit(&p->idle_spin_ns, memory_order_relaxed),
                    &p->idle_sleepers);
        if (atomic_load(&p->stop))
            return NULL;
        seen = atomic_load(&p->run_gen);
        p->fn(ith, p->n, p->arg);
        bump(p, &p->n_done);
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
    p->policy = *llm_thread_policy_get();
    p->first_slot = llm_thread_policy_reserve(n_threads);
    p->sync_spin_ns = llm_thread_poll_ns(&p->policy, SYNC_SPIN_NS);
    atomic_flag_clear(&p->caller_placed);
    atomic_init(&p->idle_spin_ns, llm_thread_poll_ns(&p->policy, (uint64_t)IDLE_SPIN_US * 1000u));
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
        llm_thread_place(&p->policy, p->first_slot + i, p->threads[i]);
    }
    return p;
}

void llm_threadpool_free(struct llm_threadpool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    bump(p, &p->run_gen);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p);
}

void llm_threadpool_set_idle_spin(struct llm_threadpool *p, int spin_us)
{
    const uint64_t ns = spin_us > 0 ? llm_thread_poll_ns(&p->policy, (uint64_t)spin_us * 1000u) : 0;
    atomic_store_explicit(&p->idle_spin_ns, ns, memory_order_relaxed);
}

int llm_threadpool_n_threads(const struct llm_threadpool *p)
{
    return p->n;
}

int llm_threadpool_n_awake(struct llm_threadpool *p)
{
    return p->n - 1 - atomic_load_explicit(&p->idle_sleepers, memory_order_relaxed);
}

void llm_threadpool_place_owner(struct llm_threadpool *p, pthread_t thread)
{
    if (!atomic_flag_test_and_set(&p->caller_placed))
        llm_thread_place(&p->policy, p->first_slot, thread);
}

void llm_threadpool_run(struct llm_threadpool *p, void (*fn)(int ith, int nth, void *arg), void *arg)
{
    llm_threadpool_place_owner(p, pthread_self());
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    bump(p, &p->run_gen);
    fn(0, p->n, arg);
    for (unsigned done; (done = atomic_load_explicit(&p->n_done, memory_order_acquire)) < (unsigned)p->n - 1;)
        wait_change(p, &p->n_done, done, p->sync_spin_ns, NULL);
}
