/* Backend interface: a vtable so that the emulated npu plugs in beside cpu. A backend computes
 * whole graphs whose tensors already have data (see alloc.h); it owns its buffers. Backend memory
 * may not be host memory: callers move data in and out only through tensor_set / tensor_get /
 * tensor_memset / tensor_copy, never through ->data. */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "graph.h"

struct llm_backend;
struct llm_profile;
struct llm_trace;

/* What a backend did since it was created (all zero on cpu, which has no graph cache). */
struct llm_graph_stats {
    uint64_t captures;       /* graphs captured (one per cache miss)                        */
    uint64_t replays;        /* captured graphs executed (hits + captures)                  */
    uint64_t hits, misses;   /* cache lookups                                               */
    uint64_t evictions;      /* captured graphs dropped from a full cache                   */
    uint64_t eager_graphs;   /* graph computes run op by op without the cache               */
    uint64_t eager_launches; /* kernels launched one by one (eager graphs and captures): one per
                                computing node, plus each RoPE table fill                   */
    uint64_t ops_replayed;   /* kernels run inside replays, counted as eager_launches counts */
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
};

struct llm_backend_iface {
    const char *name;
    /* Can this backend run node (op, types, shapes)? */
    bool (*supports_op)(struct llm_backend *b, const struct llm_tensor *node);
    /* Can weights of this type live in this backend's memory and be used by its kernels? */
    bool (*supports_type)(struct llm_backend *b, enum llm_type type);
    /* Optional (NULL: nothing to do): rewrite nodes [first, end) of g, a split this backend runs,
     * before they get memory: the npu's operator fusion (src/npu/fusion.h). */
    void (*graph_optimize)(struct llm_backend *b, struct llm_graph *g, int first, int end);
    /* Size every internal buffer (scratch, workspaces, rope tables) for graphs up to g's sizes, so
     * that nothing is reallocated while graphs run. Call once per largest graph before computing. */
    int (*graph_reserve)(struct llm_backend *b, const struct llm_graph *g, struct llm_error *err);
    /* Compute every node of g in order. May return before completion (see synchronize). */
    int (*graph_compute)(struct llm_backend *b, struct llm_graph *g, struct llm_error *err);
    /* Wait until all submitted work is done. */
    void (*synchronize)(struct llm_backend *b);
    /* Backend memory for compute arenas, caches, inputs and uploaded weights. */
    void *(*buffer_alloc)(struct llm_backend *b, size_t size);
    void (*buffer_free)(struct llm_backend *b, void *ptr);
    /* True when ->data of this backend's tensors is host memory the host may read in place (then
     * weights in a mapped file are used where they are, not uploaded). */
    bool host_memory;
    /* Data movement between host memory and t's bytes [offset, offset + size) (t contiguous in that
     * range); memset fills them with value; copy moves all of src into dst (same byte size). Each
     * returns after the data has moved (ordered after work already submitted). */
    int (*tensor_set)(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t offset,
                      size_t size, struct llm_error *err);
    int (*tensor_get)(struct llm_backend *b, const struct llm_tensor *t, void *data, size_t offset,
                      size_t size, struct llm_error *err);
    int (*tensor_memset)(struct llm_backend *b, struct llm_tensor *t, int value, size_t offset,
                         size_t size, struct llm_error *err);
    int (*tensor_copy)(struct llm_backend *b, const struct llm_tensor *src, struct llm_tensor *dst,
                       struct llm_error *err);
    /* As tensor_set of all of t, but queued: ordered before the work submitted after it, and it may
     * return at once, so data must stay unchanged until the backend is synchronized. */
    int (*tensor_set_async)(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t size,
                            struct llm_error *err);
    /* Statistics so far (graph cache, launches, host and device time). */
    void (*get_stats)(struct llm_backend *b, struct llm_graph_stats *out);
    /* From now on record every executed node in prof and trace every node and host step in trace
     * (either may be NULL; both must outlive the backend or the next observe call). */
    void (*observe)(struct llm_backend *b, struct llm_profile *prof, struct llm_trace *trace);
    void (*free)(struct llm_backend *b);
};

struct llm_backend {
    const struct llm_backend_iface *iface;
    void *ctx; /* backend-private state */
};

enum llm_device { LLM_DEVICE_CPU, LLM_DEVICE_NPU };

/* How to create a backend. */
struct llm_backend_params {
    enum llm_device device;
    int n_threads;        /* cpu: pool threads; npu: device worker threads                */
    int acl_graph;        /* npu graph mode: 1 on, 0 off, -1 from GGML_CANN_ACL_GRAPH (default on) */
    double launch_us;     /* npu host cost per eager launch; < 0: LLM_NPU_LAUNCH_US (default 0) */
    int idle_spin_us;     /* cpu: how long idle pool threads busy-wait before sleeping (0: the
                             pool's default); short beside a device, whose threads need the cores */
};

const char *llm_device_name(enum llm_device d);
/* "cpu" / "npu" -> device; -1 when unknown. */
int llm_device_from_name(const char *name);

/* A backend of p->device; NULL with err filled on failure. */
struct llm_backend *llm_backend_new(const struct llm_backend_params *p, struct llm_error *err);

/* The cpu backend with n_threads persistent threads (idle_spin_us as in llm_backend_params); NULL on
 * failure. */
struct llm_backend *llm_backend_cpu_new(int n_threads, int idle_spin_us);

/* Submit g and wait for it. */
static inline int llm_backend_compute(struct llm_backend *b, struct llm_graph *g, struct llm_error *err)
{
    int rc = b->iface->graph_compute(b, g, err);
    if (rc == 0)
        b->iface->synchronize(b);
    return rc;
}

static inline void llm_backend_free(struct llm_backend *b)
{
    if (b)
        b->iface->free(b);
}

#endif
