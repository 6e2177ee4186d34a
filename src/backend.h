/* Backend interface: a vtable so that the emulated npu plugs in beside cpu. A backend computes
 * whole graphs whose tensors already have data (see alloc.h); it owns its buffers. */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "graph.h"

struct llm_backend;

struct llm_backend_iface {
    const char *name;
    /* Can this backend run node (op, types, shapes)? */
    bool (*supports_op)(struct llm_backend *b, const struct llm_tensor *node);
    /* Can weights of this type live in this backend's memory and be used by its kernels? */
    bool (*supports_type)(struct llm_backend *b, enum llm_type type);
    /* Compute every node of g in order. May return before completion (see synchronize). */
    int (*graph_compute)(struct llm_backend *b, struct llm_graph *g, struct llm_error *err);
    /* Wait until all submitted work is done. */
    void (*synchronize)(struct llm_backend *b);
    /* Backend memory for compute arenas and caches (host memory for cpu). */
    void *(*buffer_alloc)(struct llm_backend *b, size_t size);
    void (*buffer_free)(struct llm_backend *b, void *ptr);
    void (*free)(struct llm_backend *b);
};

struct llm_backend {
    const struct llm_backend_iface *iface;
    void *ctx; /* backend-private state */
};

/* Convenience wrappers. */
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

/* The cpu backend with n_threads persistent threads; NULL on failure. */
struct llm_backend *llm_backend_cpu_new(int n_threads);

#endif
