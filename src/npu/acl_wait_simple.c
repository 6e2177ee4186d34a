/* The simplest correct wait policy: a thread with nothing to do sleeps on its futex at once, and
 * every published task wakes the device thread. What the tuned policy adds on top of this (spins,
 * the host running the queue, cpu placement) changes speed, never results. */
#include "acl_stream_impl.h"

static void simple_init(struct acl_stream *s)
{
    (void)s;
}

static bool simple_device_wait(struct acl_stream *s)
{
    for (;;) {
        const unsigned seen = atomic_load(&s->work_seq);
        if (acl_stream_has_work(s))
            return true;
        if (atomic_load(&s->stop))
            return false;
        acl_futex_wait(&s->work_seq, seen);
    }
}

static void simple_host_wait(struct acl_stream *s, uint64_t target)
{
    acl_stream_sleep_until(s, target);
}

static void simple_committed(struct acl_stream *s)
{
    acl_futex_bump(&s->work_seq);
}

static void simple_host_away(struct acl_stream *s, bool away)
{
    atomic_store(&s->host_away, away);
}

const struct acl_wait_policy acl_wait_simple = {
    .name = "simple",
    .init = simple_init,
    .device_wait = simple_device_wait,
    .host_wait = simple_host_wait,
    .committed = simple_committed,
    .host_away = simple_host_away,
};
