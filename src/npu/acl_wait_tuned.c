/* The tuned wait policy (the default): a waiting thread busy-waits briefly before it sleeps, and the
 * host and the device thread keep out of each other's way when the scheduler puts them on one cpu.
 * Each rule below was a measured loss on the 2-core VMs this project runs on (bench/results). */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "acl_stream_impl.h"
#include "clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long the device thread (waiting for the next task) and the host (in synchronize) busy-wait
 * before they sleep. Neither polls with sched_yield: a poller looks idle to the scheduler, which
 * then holds back the thread that has the work (EEVDF runs it only once the pollers have caught up
 * on CPU time). While the host (unless it sleeps), the device thread and the device's other awake
 * workers outnumber the cores ("crowded"), a waiting thread sleeps almost at once and leaves its
 * core to a thread with work; otherwise it has a core of its own and spins through a whole replay,
 * sparing a wake-up per token (a VM's halted idle vCPU takes long to wake). */
#define DEVICE_SPIN_NS 100000
#define HOST_SPIN_NS 2000000
#define CROWDED_SPIN_NS 3000
/* Device workers other than the device thread busy-wait this long for the next split kernel before
 * they sleep: long enough to bridge the single-worker kernels between two split ones within a
 * token, short enough to leave the core to the host soon after the device goes idle. */
#define WORKER_SPIN_US 300

static void tuned_init(struct acl_stream *s)
{
    if (s->cores <= s->n_workers) /* the host needs a core back once the device idles */
        llm_threadpool_set_idle_spin(s->pool, WORKER_SPIN_US);
}

/* How long a waiting host or device thread may busy-wait (see DEVICE_SPIN_NS). */
static uint64_t spin_budget(struct acl_stream *s, uint64_t uncrowded_ns)
{
    const int host = !atomic_load_explicit(&s->host_away, memory_order_relaxed);
    const uint64_t ns = host + 1 + llm_threadpool_n_awake(s->pool) > s->cores ? CROWDED_SPIN_NS : uncrowded_ns;
    return ns * s->spin_scale_pct / 50u;
}

/* Sleeps while the host runs the queue in the device thread's place (see host_runs_queue). */
static void wait_while_lent(struct acl_stream *s)
{
    atomic_store(&s->lent_waiter, 1);
    while (atomic_load(&s->device_state) == DEVICE_LENT)
        acl_futex_wait((atomic_uint *)&s->device_state, DEVICE_LENT);
    atomic_store(&s->lent_waiter, 0);
}

/* Spins, then sleeps until the device thread may take a task (the ring's head is then its own
 * until it sleeps again), or stop. */
/* The scheduler may put the device thread on the host's core (a woken thread goes where its waker
 * runs) and leave them there: each spinning wait then holds the core the other thread needs until
 * its time slice runs out. A thread that shares the core with the one it waits for sleeps at once
 * instead (acl_on_cpu_of). */
static bool tuned_device_wait(struct acl_stream *s)
{
    const uint64_t t0 = llm_now_ns(), budget = spin_budget(s, DEVICE_SPIN_NS);
    while (!acl_stream_has_work(s) && !atomic_load(&s->stop) && llm_now_ns() - t0 < budget &&
           !acl_on_cpu_of(&s->host_cpu))
        cpu_relax();
    if (acl_stream_has_work(s))
        return true;
    for (;;) {
        atomic_store(&s->device_state, DEVICE_SLEEPING);
        for (;;) {
            const unsigned seen = atomic_load(&s->work_seq);
            if (acl_stream_has_work(s) || atomic_load(&s->stop))
                break;
            acl_futex_wait(&s->work_seq, seen);
        }
        int sleeping = DEVICE_SLEEPING;
        if (!atomic_compare_exchange_strong(&s->device_state, &sleeping, DEVICE_RUNNING)) {
            wait_while_lent(s);
            continue;
        }
        if (acl_stream_has_work(s))
            return true;
        if (atomic_load(&s->stop))
            return false;
        /* the host ran what woke it: sleep again */
    }
}

/* Wakes the device thread if tuned_committed left that to the host's next stop. */
static void pay_wake(struct acl_stream *s)
{
    if (s->wake_owed) {
        s->wake_owed = false;
        s->wakeups++;
        acl_futex_bump(&s->work_seq);
    }
}

/* A device thread asleep on the host's cpu could only run there once the host stops, at the price
 * of two context switches and a replay that finds its caches and TLB cold: the waiting host, on
 * that cpu, runs the queue up to target itself, as that thread would, its time counted as device
 * time. False when the device thread is not asleep. */
static bool host_runs_queue(struct acl_stream *s, uint64_t target)
{
    int sleeping = DEVICE_SLEEPING;
    if (!atomic_compare_exchange_strong(&s->device_state, &sleeping, DEVICE_LENT))
        return false;
    for (uint64_t head = atomic_load(&s->head); head < target; head++) {
        acl_stream_run_at(s, head, llm_now_ns());
        s->host_ran++;
    }
    if (!acl_stream_has_work(s))
        s->wake_owed = false;
    atomic_store(&s->device_state, DEVICE_SLEEPING);
    if (atomic_load(&s->lent_waiter))
        syscall(SYS_futex, (unsigned *)&s->device_state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    return true;
}

/* Nothing else wakes a device thread asleep on the host's cpu at 0 us of launch cost, so the
 * placement the scheduler drew at its last wake-up would hold for the whole process, with the
 * other cores idle and every token's kernels run after its launches (S + H + D instead of
 * S + max(H, D): the draw, made once per process, decided an eager run's speed). Every
 * PLACEMENT_PROBE_WAITS-th wait that finds it there wakes it instead, so the scheduler may put it
 * on an idle core; where none is, a probe costs two context switches over that many waits. */
#define PLACEMENT_PROBE_WAITS 64

static void tuned_host_wait(struct acl_stream *s, uint64_t target)
{
    if (acl_on_cpu_of(&s->device_cpu) && s->waits_shared_cpu % PLACEMENT_PROBE_WAITS != 0 &&
        host_runs_queue(s, target))
        return;
    pay_wake(s);
    const uint64_t t0 = llm_now_ns(), budget = spin_budget(s, HOST_SPIN_NS);
    while (atomic_load(&s->head) < target && llm_now_ns() - t0 < budget && !acl_on_cpu_of(&s->device_cpu))
        cpu_relax();
    if (atomic_load(&s->head) < target)
        acl_stream_sleep_until(s, target);
}

/* A sleeping device thread last seen on the host's cpu is not woken: woken at once, it would take
 * the cpu from the host for each task (two context switches per eager launch). A host that waits
 * runs the queue itself (host_runs_queue); one that sleeps through a launch cost wakes it then. */
static void tuned_committed(struct acl_stream *s)
{
    if (atomic_load(&s->device_state) != DEVICE_SLEEPING)
        return;
    if (acl_on_cpu_of(&s->device_cpu)) {
        s->wake_owed = true;
    } else {
        s->wakeups++;
        acl_futex_bump(&s->work_seq);
    }
}

static void tuned_host_away(struct acl_stream *s, bool away)
{
    if (away)
        pay_wake(s);
    atomic_store(&s->host_away, away);
}

const struct acl_wait_policy acl_wait_tuned = {
    .name = "tuned",
    .init = tuned_init,
    .device_wait = tuned_device_wait,
    .host_wait = tuned_host_wait,
    .committed = tuned_committed,
    .host_away = tuned_host_away,
};
