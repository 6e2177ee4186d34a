/* What the tests running contexts on the npu share: its settings and its figures. */
#ifndef LLM_TESTS_NPU_HARNESS_H
#define LLM_TESTS_NPU_HARNESS_H

#include "model/context.h"
#include "npu/npu_backend.h"

/* The npu of p in graph mode on (1) or off (0), at launch_us host µs per eager launch (< 0: the
 * environment's); opts (2 slots) must live until llm_context_new returns. */
static inline void test_npu_options(struct llm_context_params *p, struct llm_backend_option opts[2], int graph,
                                    double launch_us)
{
    opts[0] = (struct llm_backend_option){ LLM_DEVICE_NPU, "acl_graph", graph };
    opts[1] = (struct llm_backend_option){ LLM_DEVICE_NPU, "launch_us", launch_us };
    p->backend_options = opts;
    p->n_backend_options = launch_us < 0 ? 1 : 2;
}

/* The npu's figures in c; zero when c runs on the cpu alone. */
static inline void test_npu_stats(const struct llm_context *c, struct llm_npu_stats *out)
{
    *out = (struct llm_npu_stats){ 0 };
    if (llm_context_device(c))
        llm_npu_get_stats(llm_context_device(c), out);
}

#endif
