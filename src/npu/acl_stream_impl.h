/* The state of a stream of the emulated runtime, shared by the stream proper (acl_stream.c: the
 * ring, kernels, copies, capture and replay) and its wait policies (how the host thread and the
 * stream's device thread wait for each other: acl_wait_simple.c, acl_wait_tuned.c). */
#ifndef LLM_NPU_ACL_STREAM_IMPL_H
#define LLM_NPU_ACL_STREAM_IMPL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "acl_internal.h"
#include "threadpool.h"

#define RING_SLOTS 256 /* tasks in flight per stream before the host waits */

enum task_kind { TASK_KERNEL, TASK_GRAPH, TASK_COPY };

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

/* How the host and the device thread of a stream wait for each other. The ring itself is lock-free
 * (one producer, one consumer); a policy only decides how a thread that finds nothing to do waits
 * and who wakes it. Every policy sleeps on the two futex words below: work_seq (the device thread
 * waits for tasks) and done_seq (the host waits for head to reach wake_at). */
struct acl_wait_policy {
    const char *name;
    /* the stream was created (its pool started) */
    void (*init)(struct acl_stream *s);
    /* device thread, ring empty: wait until there is work (true), or stop with nothing left (false) */
    bool (*device_wait)(struct acl_stream *s);
    /* host: wait until head >= target (> head now) */
    void (*host_wait)(struct acl_stream *s, uint64_t target);
    /* host: a task was published (tail advanced) */
    void (*committed)(struct acl_stream *s);
    /* host: it sleeps outside a wait (away, an emulated launch cost) or is back; away also makes
     * sure the device thread will run what is queued */
    void (*host_away)(struct acl_stream *s, bool away);
};

/* LLM_NPU_WAIT: "tuned" (the default) or "simple"; NULL for another name. */
const struct acl_wait_policy *acl_wait_policy_named(const char *name);
extern const struct acl_wait_policy acl_wait_simple, acl_wait_tuned;

struct acl_model_ri {
    struct task *tasks;
    size_t n, cap;
    atomic_int in_flight;           /* enqueued executions not yet finished */
    struct acl_stream *last_stream; /* where it was last executed */
};

/* Who may take tasks from the ring in the tuned policy: the device thread while RUNNING; nobody
 * while it SLEEPS, until it wakes (SLEEPING -> RUNNING) or the host takes its place (SLEEPING ->
 * LENT -> SLEEPING). */
enum device_state { DEVICE_RUNNING, DEVICE_SLEEPING, DEVICE_LENT };

struct acl_stream {
    struct task *ring;
    const struct acl_wait_policy *wait;
    uint64_t spin_scale_pct;      /* the thread policy's poll level (50: the tuned budgets as they are) */
    /* Written by the host, read by the device thread; on its own cache line so that the device's
     * writes below do not evict it from the host's cache at every task (and the reverse). */
    _Alignas(64) atomic_uint_fast64_t tail;  /* tasks enqueued */
    atomic_uint work_seq;         /* futex word: bumped when a sleeping device thread is to look again */
    atomic_int host_cpu;          /* where the host last enqueued */
    atomic_uint_fast64_t wake_at; /* a sleeping host waits for head to reach this; UINT64_MAX: none */
    uint64_t host_blocked_ns;     /* host time spent waiting for room in a full ring */
    /* Written by the device thread, read by a waiting host. */
    _Alignas(64) atomic_uint_fast64_t head;  /* tasks finished */
    atomic_uint done_seq;         /* futex word: bumped when head reached a sleeping host's wake_at */
    atomic_int device_cpu;        /* where the device thread last took a task */
    /* The tuned policy's (the host reads device_state at every launch). */
    atomic_int device_state;      /* enum device_state; futex word while LENT */
    atomic_int lent_waiter;       /* the device thread woke while LENT and sleeps on device_state */
    /* Written by whoever runs the tasks, read only by aclrtStreamGetStats: a line of their own, as
     * a counter beside head made every kernel of a replay steal head's line back from the host
     * polling it (tests/test_acl.c checks the layout). */
    _Alignas(64) atomic_uint_fast64_t device_ns;
    atomic_uint_fast64_t kernels, kernels_split; /* kernels run (replayed ones too); of those, split */
    _Alignas(64) atomic_int stop;
    pthread_t thread;
    struct llm_threadpool *pool;
    int n_workers;
    int cores;
    atomic_int host_away; /* the host is asleep (a wait, or an emulated launch cost) */
    bool wake_owed;       /* host only: work was enqueued for a sleeping device thread on its cpu */
    uint64_t wakeups;     /* host only: times it woke the sleeping device thread */
    uint64_t host_ran;    /* host only: tasks it ran in the sleeping device thread's place */
    uint64_t waits, waits_shared_cpu; /* host only: see struct aclrtStreamStats */
    /* capture state, touched by the host thread only */
    bool capturing;
    aclmdlRICaptureMode capture_mode;
    struct acl_model_ri *recording;
};

/* Is the calling thread on the cpu where the thread it waits for was last seen (host_cpu or
 * device_cpu)? */
static inline bool acl_on_cpu_of(const atomic_int *cpu)
{
    return atomic_load_explicit(cpu, memory_order_relaxed) == sched_getcpu();
}

static inline bool acl_stream_has_work(struct acl_stream *s)
{
    return atomic_load(&s->tail) != atomic_load(&s->head);
}

/* Sleeps while *word still holds seen. Futexes rather than a mutex and condition variables: on the
 * one cpu the scheduler often gives host and device thread, a wake-up under a mutex made the woken
 * thread preempt the waker and then block on the mutex it still held, four context switches per
 * token instead of two. */
void acl_futex_wait(atomic_uint *word, unsigned seen);
/* Changes *word and wakes its sleepers. The sleeper reads the word before its last look at the
 * condition, the waker changes the condition before it bumps (all sequentially consistent), so
 * either the sleeper sees the new condition or its wait finds the word changed or is woken. */
void acl_futex_bump(atomic_uint *word);

/* Runs the task at ring position head on the calling thread and publishes it finished, its device
 * time counted from t0 (the device thread's loop, or a host running the queue in its place);
 * returns when it ended. */
uint64_t acl_stream_run_at(struct acl_stream *s, uint64_t head, uint64_t t0);

/* Host: sleeps until head >= target (wake_at and done_seq). */
void acl_stream_sleep_until(struct acl_stream *s, uint64_t target);

#endif
