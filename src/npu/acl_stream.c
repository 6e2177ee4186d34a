/* Streams, kernel launches, capture and model run instances of the emulated runtime.
 *
 * A stream is a ring of task slots filled by the host (one producer) and emptied in order by the
 * stream's device thread, which is worker 0 of the stream's llm_threadpool (the other workers join
 * for kernels launched with block_dim 0). How the two wait for each other when one has nothing to
 * do is the stream's wait policy (acl_stream_impl.h; LLM_NPU_WAIT picks it). A replayed graph runs
 * as one task: its kernels one after the other, each on worker 0 alone or split over the pool as
 * when launched eagerly (one pool run per split kernel: the other workers never wait at barriers
 * through the long runs of small kernels). */
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "acl_stream_impl.h"
#include "clock.h"
#include "thread_policy.h"

void acl_futex_wait(atomic_uint *word, unsigned seen)
{
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

void acl_futex_bump(atomic_uint *word)
{
    atomic_fetch_add(word, 1);
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

const struct acl_wait_policy *acl_wait_policy_named(const char *name)
{
    static const struct acl_wait_policy *const policies[] = { &acl_wait_tuned, &acl_wait_simple };
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (!strcmp(name, policies[i]->name))
            return policies[i];
    return NULL;
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

/* One kernel or copy: on worker 0 alone, or split over every worker of the stream's pool. Returns
 * whether it was split. */
static bool run_one(struct acl_stream *s, const struct task *t)
{
    if (t->kind == TASK_KERNEL && t->block_dim != 1 && s->n_workers > 1) {
        struct split_run r = { t, s->pool };
        llm_threadpool_run(s->pool, split_kernel, &r);
        return true;
    }
    run_alone(t);
    return false;
}

/* A replay runs the recorded tasks exactly as eager ones run, minus taking each from the ring.
 * Kernels are counted here, where eager and replayed ones meet, so the two modes' counts can be
 * compared; once per task, not per kernel. */
static void run_task(struct acl_stream *s, struct task *t)
{
    const struct task *first = t->kind == TASK_GRAPH ? t->ri->tasks : t;
    const size_t n = t->kind == TASK_GRAPH ? t->ri->n : 1;
    uint64_t kernels = 0, split = 0;
    for (size_t i = 0; i < n; i++) {
        split += run_one(s, &first[i]);
        kernels += first[i].kind == TASK_KERNEL;
    }
    atomic_fetch_add_explicit(&s->kernels, kernels, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->kernels_split, split, memory_order_relaxed);
    if (t->kind == TASK_GRAPH)
        atomic_fetch_sub(&t->ri->in_flight, 1);
}

uint64_t acl_stream_run_at(struct acl_stream *s, uint64_t head, uint64_t t0)
{
    run_task(s, &s->ring[head % RING_SLOTS]);
    const uint64_t end = llm_now_ns();
    atomic_fetch_add_explicit(&s->device_ns, end - t0, memory_order_relaxed);
    atomic_store(&s->head, head + 1);
    if (head + 1 >= atomic_load(&s->wake_at)) /* one wake-up per wait, not one per task */
        acl_futex_bump(&s->done_seq);
    return end;
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
            if (!s->wait->device_wait(s))
                return NULL;
            head = atomic_load(&s->head); /* the host may have run tasks while it slept */
        }
        const uint64_t t0 = queued && prev_end ? prev_end : llm_now_ns();
        atomic_store_explicit(&s->device_cpu, sched_getcpu(), memory_order_relaxed);
        prev_end = acl_stream_run_at(s, head, t0);
    }
}

/* ---- host side --------------------------------------------------------------------------------- */

void acl_stream_sleep_until(struct acl_stream *s, uint64_t target)
{
    atomic_store(&s->wake_at, target);
    atomic_store(&s->host_away, 1);
    for (;;) {
        const unsigned seen = atomic_load(&s->done_seq);
        if (atomic_load(&s->head) >= target)
            break;
        acl_futex_wait(&s->done_seq, seen);
    }
    atomic_store(&s->host_away, 0);
    atomic_store(&s->wake_at, UINT64_MAX);
}

/* Waits until at least `target` tasks have finished. One host thread drives a stream, so there is
 * at most one sleeping waiter. */
static void wait_done(struct acl_stream *s, uint64_t target)
{
    if (atomic_load(&s->head) >= target)
        return;
    s->waits++;
    s->waits_shared_cpu += acl_on_cpu_of(&s->device_cpu);
    s->wait->host_wait(s, target);
}

/* The next free slot (waiting while the ring is full); publish it with commit(). A full ring is
 * waited on until half of it is free: waking the host for every finished task kept three threads
 * switching on two cores (bench/results/kernel_choices.md). */
static struct task *slot_begin(struct acl_stream *s)
{
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
    if (tail - atomic_load(&s->head) >= RING_SLOTS) {
        uint64_t t0 = llm_now_ns();
        wait_done(s, tail - RING_SLOTS / 2);
        s->host_blocked_ns += llm_now_ns() - t0;
    }
    return &s->ring[tail % RING_SLOTS];
}

static void slot_commit(struct acl_stream *s)
{
    atomic_store_explicit(&s->host_cpu, sched_getcpu(), memory_order_relaxed);
    atomic_fetch_add(&s->tail, 1);
    s->wait->committed(s);
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
    const char *policy = getenv("LLM_NPU_WAIT");
    s->wait = acl_wait_policy_named(policy && *policy ? policy : "tuned");
    if (!s->wait) {
        free(s);
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: LLM_NPU_WAIT=%s (tuned or simple)", policy);
    }
    s->n_workers = n_workers;
    s->spin_scale_pct = (uint64_t)llm_thread_policy_get()->poll;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    atomic_store(&s->wake_at, UINT64_MAX);
    atomic_store(&s->host_cpu, -1);
    atomic_store(&s->device_cpu, -1);
    s->ring = aligned_alloc(64, RING_SLOTS * sizeof *s->ring);
    s->pool = llm_threadpool_new(n_workers);
    s->cores = cores > 0 ? (int)cores : 1;
    if (s->pool)
        s->wait->init(s);
    if (!s->ring || !s->pool || pthread_create(&s->thread, NULL, device_thread, s) != 0) {
        llm_threadpool_free(s->pool);
        free(s->ring);
        free(s);
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtCreateStream: cannot start %d device workers", n_workers);
    }
    llm_threadpool_place_owner(s->pool, s->thread); /* the device thread runs the pool */
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
    acl_futex_bump(&s->work_seq);
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
    if (atomic_load(&ri->in_flight) > 0) /* a replay still queued must run for the wait to end */
        wait_done(ri->last_stream, atomic_load(&ri->last_stream->tail));
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
    s->wait->host_away(s, away != 0);
}

void aclrtStreamGetStats(aclrtStream s, struct aclrtStreamStats *st)
{
    *st = (struct aclrtStreamStats){ 0 };
    if (!s)
        return;
    st->device_ns = atomic_load(&s->device_ns);
    st->kernels = atomic_load(&s->kernels);
    st->kernels_split = atomic_load(&s->kernels_split);
    st->host_blocked_ns = s->host_blocked_ns;
    st->host_waits = s->waits;
    st->host_waits_shared_cpu = s->waits_shared_cpu;
    st->device_wakeups = s->wakeups;
    st->host_ran_tasks = s->host_ran;
}
