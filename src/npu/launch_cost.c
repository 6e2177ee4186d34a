#include "launch_cost.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#include "clock.h"
#include "log.h"

#define SLEEP_MIN_NS 50000 /* sleep once at least this much is owed */

void npu_launch_cost_init(struct npu_launch_cost *c, double us)
{
    c->debt_ns = 0;
    c->us = us;
    if (us >= 0)
        return;
    c->us = 0;
    const char *env = getenv("LLM_NPU_LAUNCH_US");
    if (!env)
        return;
    char *end;
    errno = 0;
    double v = strtod(env, &end);
    if (end == env || *end || errno || !isfinite(v) || v < 0 || v > 1e6)
        llm_log(LLM_LOG_WARN, "LLM_NPU_LAUNCH_US='%s' is not a number of microseconds in [0, 1e6]; using 0", env);
    else
        c->us = v;
}

void npu_launch_cost_pay(struct npu_launch_cost *c, aclrtStream stream)
{
    if (c->us <= 0)
        return;
    c->debt_ns += (int64_t)llround(c->us * 1000.0);
    if (c->debt_ns < SLEEP_MIN_NS)
        return;
    /* 1 ns timer slack for this thread: the default 50 µs would add that much to every sleep. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    int64_t t0 = (int64_t)llm_now_ns();
    struct timespec ts = { .tv_sec = c->debt_ns / 1000000000, .tv_nsec = c->debt_ns % 1000000000 };
    aclrtStreamSetHostAway(stream, 1);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    aclrtStreamSetHostAway(stream, 0);
    c->debt_ns -= (int64_t)llm_now_ns() - t0;
}
