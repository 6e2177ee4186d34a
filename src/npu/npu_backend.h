/* The npu backend: an emulated Ascend NPU behind struct llm_backend. Weights, KV cache, inputs and
 * compute buffers live in device memory (aclrtMalloc); each op is an aclnn-style two-phase launch
 * on a device stream; with graph mode on, decode graphs are captured once and replayed from an LRU
 * cache (src/graphcache). */
#ifndef LLM_NPU_BACKEND_H
#define LLM_NPU_BACKEND_H

#include "backend.h"

/* p->n_threads device worker threads. Options: acl_graph (graph mode, 1 or 0) and launch_us (host µs
 * per eager launch); not given, they come from GGML_CANN_ACL_GRAPH (default on) and
 * LLM_NPU_LAUNCH_US (default 0). NULL with err filled on failure. */
struct llm_backend *llm_backend_npu_new(const struct llm_backend_params *p, struct llm_error *err);

/* What the npu did since it was created; get_stats lists the same figures by these names. */
struct llm_npu_stats {
    uint64_t captures;       /* graphs captured (one per cache miss)                        */
    uint64_t replays;        /* captured graphs executed (hits + captures)                  */
    uint64_t hits, misses;   /* cache lookups                                               */
    uint64_t evictions;      /* captured graphs dropped from a full cache                   */
    uint64_t eager_graphs;   /* graph computes run op by op without the cache               */
    uint64_t eager_launches; /* kernels launched one by one (eager graphs and captures): one per
                                computing node, plus each RoPE table fill                   */
    uint64_t ops_replayed;   /* kernels run inside replays, counted as eager_launches counts */
    uint64_t kernels_run;    /* kernels the device ran: eager launches (not those a capture
                                records) and the kernels inside replays, RoPE table fills too */
    uint64_t kernels_run_unfused; /* what kernels_run would be with the same graphs unfused:
                                plus the nodes fusion absorbed in each graph run                */
    uint64_t operator_fusion; /* 1 when GGML_CANN_OPERATOR_FUSION is on, else 0               */
    uint64_t layout_pads;    /* CHANNEL_NORM kernels (pads, unpads) the layout pass put in the
                                graphs launched or captured (LLM_NPU_LAYOUT_ALIGN), counted
                                among eager_launches too                                     */
    uint64_t rope_tables;    /* RoPE sin/cos table fills launched or captured: one per graph
                                and per distinct set of ROPE parameters in it               */
    double host_launch_us;   /* host time building executors and enqueuing eager launches,
                                the launch cost model included, waits for a full queue not  */
    double host_match_us;    /* host time matching graphs against the cache / recording them */
    double host_serial_us;   /* host time between the end of one graph and the submission of the
                                next (logits, sampling, inputs): work the device cannot overlap */
    double device_us;        /* time the device spent running tasks                         */
    uint64_t host_waits;     /* times the host waited for the device (synchronize, full queue) */
    uint64_t host_waits_shared_cpu; /* of those, waits with the device thread on the host's cpu:
                                the two took turns on one core instead of overlapping        */
    uint64_t device_kernels; /* kernels the device ran, counted by the device: kernels_run  */
    uint64_t split_kernels;  /* of those, kernels split over the device's workers: the same
                                per token eagerly and replayed                              */
    uint64_t device_wakeups; /* times the host woke the sleeping device thread              */
    uint64_t host_ran_tasks; /* tasks the host ran in the place of a device thread asleep on
                                its cpu                                                     */
};

/* b must be an npu backend (llm_backend_npu_new). */
void llm_npu_get_stats(struct llm_backend *b, struct llm_npu_stats *out);

#endif
