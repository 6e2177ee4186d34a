/* Streams, kernel launches, capture and model run instances of the emulated runtime.
 *
 * A stream is a ring of task slots filled by the host (one producer) and emptied in order by the
 * stream's device thread, which is worker 0 of the stream's llm_threadpool (the other workers join
 * for kernels launched with block_dim 0). The device thread and the host in synchronize busy-wait
 * briefly, then sleep (see DEVICE_SPIN_NS); a host that waits for a device thread asleep on its own
 * cpu runs the queue itself instead (see host_runs_queue). A replayed graph runs as one task: its
 * kernels one after the other, each on worker 0 alone or split over the pool as when launched
 * eagerly (one pool run per split kernel: the other workers never wait at barriers through the long
 * runs of small kernels). */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../threadpool.h"
#include "acl_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define RING_SLOTS 256            /* tasks in flight per stream before the host waits          */
/* How long the device thread (waiting for the next task) and the host (in synchronize) busy-wait
 * before they sleep. Neither polls with sched_yield: a poller looks idle to the scheduler, which
 * then holds back the thread that has the work (EEVDF runs it only once the pollers have caught up
 * on CPU time), so a replay that ended was seen by the host late. While the host (unless it
 * sleeps), the device thread and the device's other awake workers outnumber the cores ("crowded"),
 * a waiting thread sleeps almost at once and leaves its core to a thread with work; otherwise it
 * has a core of its own and spins through a whole replay, sparing a wake-up per token, which is
 * slow on a VM whose idle vCPU halted (src/npu/README.md: the wait policy). */
#define DEVICE_SPIN_NS 100000
#define HOST_SPIN_NS 2000000
#define CROWDED_SPIN_NS 3000
/* Device workers other than the device thread busy-wait this long for the next split kernel before
 * they sleep: long enough to bridge the single-worker kernels between two split ones within a
 * token (waking a sleeping worker for each split kernel was measured to cost a large model much of
 * its speed: bench/README.md), short enough to leave the core to the host soon after the device
 * goes idle. */
#define WORKER_SPIN_US 300

enum task_kind { TASK_KERNEL, TASK_GRAPH, TASK_COPY };

/* Who may take tasks from the ring: the device thread while RUNNING; nobody while it SLEEPS, until
 * it wakes (SLEEPING -> RUNNING) or the host takes its place (SLEEPING -> LENT -> SLEEPING). */
enum device_state { DEVICE_RUNNING, DEVICE_SLEEPING, DEVICE_LENT };

struct task {
    enum task_kind kind;
    uint32_t block_dim;
    aclrtKernel kernel;
    aclmdlRI ri;
    void *dst;
    const void *src;
    size_t n;
    _Alignas(64) unsigned char args[ACL_KERNEL_ARGS_MAX];
};

struct acl_model_ri {
    struct task *tasks;
    size_t n, cap;
    atomic_int in_flight; /* enqueued executions not yet finished */
    struct acl_stream *last_stream; /* where it was last executed */
};

struct acl_stream {
    struct task *ring;
    /* Written by the host, read by the device thread; on its own cache line so that the device's
     * writes below do not evict it from the host's cache at every task (and the reverse). */
    _Alignas(64) atomic_uint_fast64_t tail;  /* tasks enqueued */
    atomic_uint work_seq;         /* futex word: bumped when a sleeping device thread is to look again */
    atomic_int host_cpu;          /* where the host last enqueued (see on_cpu_of) */
    atomic_uint_fast64_t wake_at; /* a sleeping host waits for head to reach this; UINT64_MAX: none */
    uint64_t host_blocked_ns;     /* host time spent waiting for room in a full ring */
    /* Written by the device thread. */
    _Alignas(64) atomic_uint_fast64_t head;  /* tasks finished */
    atomic_uint done_seq;         /* futex word: bumped when head reached a sleeping host's wake_at */
    atomic_uint_fast64_t device_ns;
    atomic_int device_state;      /* enum device_state; futex word while LENT (see lent_waiter) */
    atomic_int lent_waiter;       /* the device thread woke while LENT and sleeps on device_state */
    atomic_int device_cpu;        /* where the device thread last took a task */
    _Alignas(64) atomic_int stop;
    pthread_t thread;
    struct llm_threadpool *pool;
    int n_workers;
    int cores;
    atomic_int host_away; /* the host is asleep (synchronize, or an emulated launch cost) */
    bool wake_owed;       /* host only: work was enqueued for a sleeping device thread on its cpu */
    uint64_t wakeups;     /* host only: times it woke the sleeping device thread */
    uint64_t host_ran;    /* host only: tasks it ran in the sleeping device thread's place */
    uint64_t waits, waits_shared_cpu; /* host only: see struct aclrtStreamStats */
    /* capture state, touched by the host thread only */
    bool capturing;
    aclmdlRICaptureMode capture_mode;
    struct acl_model_ri *recording;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeps while *word still holds seen. The waits below are futexes rather than a mutex and
 * condition variables: on the one cpu the scheduler often gives host and device thread, a wake-up
 * under a mutex made the woken thread preempt the waker and then block on the mutex it still
 * held, four context switches per token instead of two. */
static void futex_wait(atomic_uint *word, unsigned seen)
{
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

/* Changes *word and wakes its sleepers. The sleeper announces itself and reads the word before
 * its last look at the condition, the waker changes the condition before it looks for sleepers
 * (all sequentially consistent), so either the sleeper sees the new condition or its futex_wait
 * finds the word changed or is woken. */
static void futex_bump(atomic_uint *word)
{
    atomic_fetch_add(word, 1);
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ---- device side ----------------------------------------------------------------------------- */

static void no_barrier(void *pool)
{
    (void)pool;
}

static void run_alone(const struct task *t)
{
    if (t->kind == TASK_COPY) {
        memcpy(t->dst, t->src, t->n);
        return;
    }
    struct acl_kernel_ctx k = { .ith = 0, .nth = 1, .barrier = no_barrier };
    t->kernel(&k, (void *)t->args);
}

struct split_run {
    const struct task *t;
    struct llm_threadpool *pool;
};

static void split_kernel(int ith, int nth, void *arg)
{
    const struct split_run *r = arg;
    struct acl_kernel_ctx k = { .ith = ith, .nth = nth, .barrier = llm_threadpool_barrier, .pool = r->pool };
    r->t->kernel(&k, (void *)r->t->args);
}

/* One kernel or copy: on worker 0 alone, or split over every worker of the stream's pool. */
static void run_one(struct acl_stream *s, const struct task *t)
{
    if (t->kind == TASK_KERNEL && t->block_dim != 1 && s->n_workers > 1) {
        struct split_run r = { t, s->pool };
        llm_threadpool_run(s->pool, split_kernel, &r);
    } else {
        run_alone(t);
    }
}

/* A replay runs the recorded tasks exactly as eager ones run, minus taking each from the ring. */
static void run_task(struct acl_stream *s, struct task *t)
{
    if (t->kind != TASK_GRAPH) {
        run_one(s, t);
        return;
    }
    for (size_t i = 0; i < t->ri->n; i++)
        run_one(s, &t->ri->tasks[i]);
    atomic_fetch_sub(&t->ri->in_flight, 1);
}

/* Is the calling thread on the cpu where the thread it waits for was last seen? The scheduler may
 * put the device thread on the host's core (a woken thread goes where its waker runs) and leave
 * them there for whole runs: each spinning wait then holds the core the other thread needs until
 * its time slice runs out (bench/results/kernel_choices.md). A thread that shares the core with the
 * one it waits for sleeps at once instead. */
static bool on_cpu_of(const atomic_int *cpu)
{
    return atomic_load_explicit(cpu, memory_order_relaxed) == sched_getcpu();
}

/* How long a waiting host or device thread may busy-wait (see DEVICE_SPIN_NS). */
static uint64_t spin_budget(struct acl_stream *s, uint64_t uncrowded_ns)
{
    const int host = !atomic_load_explicit(&s->host_away, memory_order_relaxed);
    return host + 1 + llm_threadpool_n_awake(s->pool) > s->cores ? CROWDED_SPIN_NS : uncrowded_ns;
}

static bool has_work(struct acl_stream *s)
{
    return atomic_load(&s->tail) != atomic_load(&s->head);
}

/* Sleeps while the host runs the queue in the device thread's place (see host_runs_queue). */
static void wait_while_lent(struct acl_stream *s)
{
    atomic_store(&s->lent_waiter, 1);
    while (atomic_load(&s->device_state) == DEVICE_LENT)
        futex_wait((atomic_uint *)&s->device_state, DEVICE_LENT);
    atomic_store(&s->lent_waiter, 0);
}

/* Waits until the device thread may take a task (the ring's head is then its own until it sleeps
 * again), or stop; false when stopping with nothing left. */
static bool wait_for_work(struct acl_stream *s)
{
    const uint64_t t0 = now_ns(), budget = spin_budget(s, DEVICE_SPIN_NS);
    while (!has_work(s) && !atomic_load(&s->stop) && now_ns() - t0 < budget && !on_cpu_of(&s->host_cpu))
        cpu_relax();
    if (has_work(s))
        return true;
    for (;;) {
        atomic_store(&s->device_state, DEVICE_SLEEPING);
        for (;;) {
            const unsigned seen = atomic_load(&s->work_seq);
            if (has_work(s) || atomic_load(&s->stop))
                break;
            futex_wait(&s->work_seq, seen);
        }
        int sleeping = DEVICE_SLEEPING;
        if (!atomic_compare_exchange_strong(&s->device_state, &sleeping, DEVICE_RUNNING)) {
            wait_while_lent(s);
            continue;
        }
        if (has_work(s))
            return true;
        if (atomic_load(&s->stop))
            return false;
        /* the host ran what woke it: sleep again */
    }
}

/* Publishes the task at head as finished, after [t0, end) of device time. */
static void finish_task(struct acl_stream *s, uint64_t head, uint64_t t0, uint64_t end)
{
    atomic_fetch_add_explicit(&s->device_ns, end - t0, memory_order_relaxed);
    atomic_store(&s->head, head + 1);
    if (head + 1 >= atomic_load(&s->wake_at)) /* one wake-up per wait, not one per task */
        futex_bump(&s->done_seq);
}

/* Device time is busy time, as a device profiler shows it: a task that was already queued when the
 * previous one finished is charged from that moment, so the device's own cost of taking the next
 * task counts too; after an empty queue the clock starts when the task is seen. */
static void *device_thread(void *arg)
{
    struct acl_stream *s = arg;
    uint64_t prev_end = 0;
    for (;;) {
        uint64_t head = atomic_load(&s->head);
        const bool queued = atomic_load(&s->tail) != head;
        if (!queued) {
            if (!wait_for_work(s))
                return NULL;
            head = atomic_load(&s->head); /* the host may have run tasks while it slept */
        }
        uint64_t t0 = queued && prev_end ? prev_end : now_ns();
        atomic_store_explicit(&s->device_cpu, sched_getcpu(), memory_order_relaxed);
        run_task(s, &s->ring[head % RING_SLOTS]);
        prev_end = now_ns();
        finish_task(s, head, t0, prev_end);
    }
}

/* ---- host side --------------------------------------------------------------------------------- */

/* Wakes the device thread if slot_commit left that to the host's next stop. */
static void pay_wake(struct acl_stream *s)
{
    if (s->wake_owed) {
        s->wake_owed = false;
        s->wakeups++;
        futex_bump(&s->work_seq);
    }
}

/* A device thread asleep on the host's cpu could only run there once the host stops, at the price
 * of two context switches and of a replay that finds its caches and TLB cold
 * (bench/results/kernel_choices.md): the waiting host, on that cpu, runs the queue up to target
 * itself, as that thread would, its time counted as device time. False when the device thread is
 * not asleep. */
static bool host_runs_queue(struct acl_stream *s, uint64_t target)
{
    int sleeping = DEVICE_SLEEPING;
    if (!atomic_compare_exchange_strong(&s->device_state, &sleeping, DEVICE_LENT))
        return false;
    for (uint64_t head = atomic_load(&s->head); head < target; head++) {
        const uint64_t t0 = now_ns();
        run_task(s, &s->ring[head % RING_SLOTS]);
        finish_task(s, head, t0, now_ns());
        s->host_ran++;
    }
    if (!has_work(s))
        s->wake_owed = false;
    atomic_store(&s->device_state, DEVICE_SLEEPING);
    if (atomic_load(&s->lent_waiter))
        syscall(SYS_futex, (unsigned *)&s->device_state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    return true;
}

/* Waits until at least `target` tasks have finished. One host thread drives a stream, so there is
 * at most one sleeping waiter. */
static void wait_done(struct acl_stream *s, uint64_t target)
{
    if (atomic_load(&s->head) >= target)
        return;
    const bool shared_cpu = on_cpu_of(&s->device_cpu);
    s->waits++;
    s->waits_shared_cpu += shared_cpu;
    if (shared_cpu && host_runs_queue(s, target))
        return;
    pay_wake(s);
    const uint64_t t0 = now_ns(), budget = spin_budget(s, HOST_SPIN_NS);
    while (atomic_load(&s->head) < target && now_ns() - t0 < budget && !on_cpu_of(&s->device_cpu))
        cpu_relax();
    if (atomic_load(&s->head) >= target)
        return;
    atomic_store(&s->wake_at, target);
    atomic_store(&s->host_away, 1);
    for (;;) {
        const unsigned seen = atomic_load(&s->done_seq);
        if (atomic_load(&s->head) >= target)
            break;
        futex_wait(&s->done_seq, seen);
    }
    atomic_store(&s->host_away, 0);
    atomic_store(&s->wake_at, UINT64_MAX);
}

/* The next free slot (waiting while the ring is full); publish it with commit(). A full ring is
 * waited on until half of it is free: waking the host for every finished task kept three threads
 * switching on two cores (the 0.5B shape's eager decode lost a third of its speed). */
static struct task *slot_begin(struct acl_stream *s)
{
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
    if (tail - atomic_load(&s->head) >= RING_SLOTS) {
        uint64_t t0 = now_ns();
        wait_done(s, tail - RING_SLOTS / 2);
        s->host_blocked_ns += now_ns() - t0;
    }
    return &s->ring[tail % RING_SLOTS];
}

/* A sleeping device thread last seen on the host's cpu is not woken: woken at once, it would take
 * the cpu from the host for each task (two context switches per eager launch). A host that waits
 * runs the queue itself (host_runs_queue); one that sleeps through a launch cost wakes it then. */
static void slot_commit(struct acl_stream *s)
{
    atomic_store_explicit(&s->host_cpu, sched_getcpu(), memory_order_relaxed);
    atomic_fetch_add(&s->tail, 1);
    if (atomic_load(&s->device_state) != DEVICE_SLEEPING)
        return;
    if (on_cpu_of(&s->device_cpu)) {
        s->wake_owed = true;
    } else {
        s->wakeups++;
        futex_bump(&s->work_seq);
    }
}

/* Faults in the whole pages of [p, p + n) with one system call: a recording's tasks (2 KiB each)
 * are written once at capture, and a page fault per page written cost a small model's capture
 * most of its time on a paravirtualized VM (bench/results/kernel_choices.md). Best effort: a
 * kernel without MADV_POPULATE_WRITE leaves the pages to fault as before. */
static void populate(void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) & ~(page - 1),
                    b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_POPULATE_WRITE);
}

/* Where a task issued on s goes: the recording of an open capture, else the ring. */
static struct task *task_begin(struct acl_stream *s)
{
    if (!s->capturing)
        return slot_begin(s);
    struct acl_model_ri *ri = s->recording;
    if (ri->n == ri->cap) {
        size_t cap = ri->cap ? 2 * ri->cap : 64;
        struct task *nt = realloc(ri->tasks, cap * sizeof *nt);
        if (!nt)
            return NULL;
        ri->tasks = nt;
        ri->cap = cap;
        populate(nt + ri->n, (cap - ri->n) * sizeof *nt);
    }
    return &ri->tasks[ri->n];
}

static void task_commit(struct acl_stream *s)
{
    if (s->capturing)
        s->recording->n++;
    else
        slot_commit(s);
}

aclError aclrtCreateStreamWithWorkers(aclrtStream *stream, int n_workers)
{
    aclError rc = acl_check_init();
    if (rc)
        return rc;
    if (!stream || n_workers < 1)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: bad arguments (%d workers)", n_workers);
    struct acl_stream *s = aligned_alloc(_Alignof(struct acl_stream), sizeof *s);
    if (!s)
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtCreateStream: out of memory");
    memset(s, 0, sizeof *s);
    s->n_workers = n_workers;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    atomic_store(&s->wake_at, UINT64_MAX);
    atomic_store(&s->host_cpu, -1);
    atomic_store(&s->device_cpu, -1);
    s->ring = aligned_alloc(64, RING_SLOTS * sizeof *s->ring);
    s->pool = llm_threadpool_new(n_workers);
    s->cores = cores > 0 ? (int)cores : 1;
    if (s->pool && s->cores <= n_workers) /* the host needs a core back once the device idles */
        llm_threadpool_set_idle_spin(s->pool, WORKER_SPIN_US);
    if (!s->ring || !s->pool || pthread_create(&s->thread, NULL, device_thread, s) != 0) {
        llm_threadpool_free(s->pool);
        free(s->ring);
        free(s);
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtCreateStream: cannot start %d device workers", n_workers);
    }
    *stream = s;
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream *stream)
{
    return aclrtCreateStreamWithWorkers(stream, 1);
}

static void free_ri(struct acl_model_ri *ri)
{
    if (ri) {
        free(ri->tasks);
        free(ri);
    }
}

aclError aclrtDestroyStream(aclrtStream s)
{
    if (!s)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: null stream");
    if (s->capturing) { /* an abandoned capture: drop what it recorded */
        acl_capture_closed(s->capture_mode);
        free_ri(s->recording);
    }
    wait_done(s, atomic_load(&s->tail));
    atomic_store(&s->stop, 1);
    futex_bump(&s->work_seq);
    pthread_join(s->thread, NULL);
    llm_threadpool_free(s->pool);
    free(s->ring);
    free(s);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream s)
{
    if (!s)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeStream: null stream");
    if (s->capturing)
        return acl_set_error(ACL_ERROR_RT_STREAM_CAPTURE_SYNC, "Not allow to synchronize captured stream");
    wait_done(s, atomic_load(&s->tail));
    return ACL_SUCCESS;
}

aclError aclrtLaunchKernel(aclrtKernel kernel, uint32_t block_dim, const void *args, size_t args_size,
                           aclrtStream s)
{
    if (!s || !kernel || args_size > ACL_KERNEL_ARGS_MAX || (args_size && !args))
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtLaunchKernel: bad arguments (%zu bytes of args)",
                             args_size);
    struct task *t = task_begin(s);
    if (!t)
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtLaunchKernel: out of memory while capturing");
    t->kind = TASK_KERNEL;
    t->kernel = kernel;
    t->block_dim = block_dim;
    if (args_size)
        memcpy(t->args, args, args_size);
    task_commit(s);
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void *dst, size_t dest_max, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream s)
{
    if (!s)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: null stream");
    if ((acl_capture_forbids() && kind == ACL_MEMCPY_HOST_TO_DEVICE) ||
        (s->capturing && kind != ACL_MEMCPY_DEVICE_TO_DEVICE))
        return acl_set_error(ACL_ERROR_RT_STREAM_CAPTURE_UNSUPPORTED,
                             "aclrtMemcpyAsync: current capture mode does not support this operation");
    aclError rc = acl_check_copy(dst, dest_max, src, count, kind, "aclrtMemcpyAsync");
    if (rc)
        return rc;
    struct task *t = task_begin(s);
    if (!t)
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtMemcpyAsync: out of memory while capturing");
    t->kind = TASK_COPY;
    t->dst = dst;
    t->src = src;
    t->n = count;
    task_commit(s);
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureBegin(aclrtStream s, aclmdlRICaptureMode mode)
{
    if (!s || (unsigned)mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureBegin: bad arguments");
    if (s->capturing)
        return acl_set_error(ACL_ERROR_RT_PARAM_INVALID, "aclmdlRICaptureBegin: the stream is already capturing");
    s->recording = calloc(1, sizeof *s->recording);
    if (!s->recording)
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclmdlRICaptureBegin: out of memory");
    s->capturing = true;
    s->capture_mode = mode;
    acl_capture_opened(mode);
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureEnd(aclrtStream s, aclmdlRI *model_ri)
{
    if (!s || !model_ri)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureEnd: bad arguments");
    if (!s->capturing)
        return acl_set_error(ACL_ERROR_RT_STREAM_NOT_CAPTURED, "aclmdlRICaptureEnd: the stream is not capturing");
    s->capturing = false;
    acl_capture_closed(s->capture_mode);
    *model_ri = s->recording;
    s->recording = NULL;
    return ACL_SUCCESS;
}

aclError aclmdlRIExecuteAsync(aclmdlRI ri, aclrtStream s)
{
    if (!ri || !s)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclmdlRIExecuteAsync: bad arguments");
    if (s->capturing)
        return acl_set_error(ACL_ERROR_RT_STREAM_CAPTURE_UNSUPPORTED,
                             "aclmdlRIExecuteAsync: current capture mode does not support this operation");
    atomic_fetch_add(&ri->in_flight, 1);
    ri->last_stream = s;
    struct task *t = slot_begin(s);
    t->kind = TASK_GRAPH;
    t->ri = ri;
    slot_commit(s);
    return ACL_SUCCESS;
}

aclError aclmdlRIDestroy(aclmdlRI ri)
{
    if (!ri)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclmdlRIDestroy: null instance");
    if (atomic_load(&ri->in_flight) > 0)
        pay_wake(ri->last_stream); /* a replay still queued must run for the wait to end */
    while (atomic_load(&ri->in_flight) > 0)
        sched_yield();
    free_ri(ri);
    return ACL_SUCCESS;
}

size_t aclmdlRITaskCount(aclmdlRI ri)
{
    return ri ? ri->n : 0;
}

void aclrtStreamSetHostAway(aclrtStream s, int away)
{
    if (!s)
        return;
    if (away)
        pay_wake(s);
    atomic_store(&s->host_away, away != 0);
}

void aclrtStreamGetStats(aclrtStream s, struct aclrtStreamStats *st)
{
    *st = (struct aclrtStreamStats){ 0 };
    if (!s)
        return;
    st->device_ns = atomic_load(&s->device_ns);
    st->host_blocked_ns = s->host_blocked_ns;
    st->host_waits = s->waits;
    st->host_waits_shared_cpu = s->waits_shared_cpu;
    st->device_wakeups = s->wakeups;
    st->host_ran_tasks = s->host_ran;
}
