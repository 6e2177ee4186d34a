/* The cost model of a real NPU driver: LLM_NPU_LAUNCH_US microseconds of host time per eager
 * launch. The host thread sleeps instead of spinning, so the emulated device workers keep the
 * cores. A sleep cannot be shorter than the kernel's wake-up latency (tens of µs on a VM), so the
 * cost is kept as a debt: each launch adds its cost, and once the debt reaches SLEEP_MIN the thread
 * sleeps it off; the time actually slept (overshoot included) is subtracted, so a late wake-up is
 * paid back by the following launches. Over a token the host time added equals launches × cost to
 * within one wake-up overshoot. */
#ifndef LLM_NPU_LAUNCH_COST_H
#define LLM_NPU_LAUNCH_COST_H

#include <stdint.h>

#include "acl.h"

struct npu_launch_cost {
    double us;       /* cost per launch; 0 = off */
    int64_t debt_ns; /* cost owed and not yet slept; negative after an overshoot */
};

/* us < 0: from LLM_NPU_LAUNCH_US (unset or not a non-negative number: 0). */
void npu_launch_cost_init(struct npu_launch_cost *c, double us);
/* Charge one launch made on stream; while the host sleeps, the stream is told it is away
 * (aclrtStreamSetHostAway): its sleeps stand for a driver's own core. */
void npu_launch_cost_pay(struct npu_launch_cost *c, aclrtStream stream);

#endif
