/* The cpu backend: runs a graph node by node on the thread pool, one barrier between nodes. */
#include <stdlib.h>

#include "../backend.h"
#include "../threadpool.h"
#include "cpu.h"
#include "types.h"

struct cpu_backend {
    struct llm_threadpool *pool;
    struct llm_rope_cache *rope;
    void *work;          /* scratch shared by the threads, grown on demand */
    size_t work_size;
};

struct run {
    struct cpu_backend *cb;
    struct llm_graph *g;
};

static void compute_nodes(int ith, int nth, void *arg)
{
    struct run *r = arg;
    struct llm_cpu_params p = {
        .ith = ith, .nth = nth,
        .wdata = r->cb->work, .wsize = r->cb->work_size,
        .barrier = llm_threadpool_barrier, .pool = r->cb->pool,
        .rope = r->cb->rope,
    };
    for (int i = 0; i < r->g->n_nodes; i++) {
        struct llm_tensor *node = r->g->nodes[i];
        if (llm_op_is_noop(node->op))
            continue;
        llm_cpu_compute(&p, node);
        llm_threadpool_barrier(r->cb->pool);
    }
}

static bool cpu_supports_op(struct llm_backend *b, const struct llm_tensor *node)
{
    (void)b;
    return llm_cpu_supports(node);
}

static bool cpu_supports_type(struct llm_backend *b, enum llm_type type)
{
    (void)b;
    const struct llm_type_traits *tt = llm_type_traits(type);
    return tt && tt->to_float;
}

static int cpu_graph_compute(struct llm_backend *b, struct llm_graph *g, struct llm_error *err)
{
    struct cpu_backend *cb = b->ctx;
    const int nth = llm_threadpool_n_threads(cb->pool);
    size_t need = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *node = g->nodes[i];
        if (llm_op_is_noop(node->op))
            continue;
        if (!llm_cpu_supports(node))
            return llm_fail(err, LLM_ERR_UNSUPPORTED, "cpu backend: op %s on %s tensors is not supported (node '%s')",
                            llm_op_name(node->op), llm_type_name(node->src[0] ? node->src[0]->type : node->type),
                            node->name);
        size_t w = llm_cpu_work_size(node, nth);
        if (w > need)
            need = w;
    }
    if (need > cb->work_size) {
        free(cb->work);
        cb->work = aligned_alloc(64, (need + 63) & ~(size_t)63);
        cb->work_size = cb->work ? need : 0;
        if (!cb->work)
            return llm_fail(err, LLM_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes of scratch", need);
    }
    llm_rope_cache_reset(cb->rope);
    struct run r = { cb, g };
    llm_threadpool_run(cb->pool, compute_nodes, &r);
    return LLM_OK;
}

static void cpu_synchronize(struct llm_backend *b)
{
    (void)b; /* graph_compute is synchronous */
}

static void *cpu_buffer_alloc(struct llm_backend *b, size_t size)
{
    (void)b;
    return aligned_alloc(64, (size + 63) & ~(size_t)63);
}

static void cpu_buffer_free(struct llm_backend *b, void *ptr)
{
    (void)b;
    free(ptr);
}

static void cpu_free(struct llm_backend *b)
{
    struct cpu_backend *cb = b->ctx;
    llm_threadpool_free(cb->pool);
    llm_rope_cache_free(cb->rope);
    free(cb->work);
    free(cb);
    free(b);
}

static const struct llm_backend_iface cpu_iface = {
    .name = "cpu",
    .supports_op = cpu_supports_op,
    .supports_type = cpu_supports_type,
    .graph_compute = cpu_graph_compute,
    .synchronize = cpu_synchronize,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .free = cpu_free,
};

struct llm_backend *llm_backend_cpu_new(int n_threads)
{
    struct llm_backend *b = calloc(1, sizeof *b);
    struct cpu_backend *cb = calloc(1, sizeof *cb);
    if (!b || !cb) {
        free(b);
        free(cb);
        return NULL;
    }
    cb->pool = llm_threadpool_new(n_threads);
    cb->rope = llm_rope_cache_new();
    if (!cb->pool || !cb->rope) {
        llm_threadpool_free(cb->pool);
        llm_rope_cache_free(cb->rope);
        free(cb);
        free(b);
        return NULL;
    }
    b->iface = &cpu_iface;
    b->ctx = cb;
    return b;
}
