/* The cpu backend: runs a graph node by node on the thread pool. Nodes too small to repay a
 * barrier round trip (most of a tiny model's decode graph) run on thread 0 alone; the other threads
 * skip them and meet it again at the next node worth splitting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu.h"
#include "profile.h"
#include "threadpool.h"
#include "trace.h"

struct cpu_backend {
    struct llm_threadpool *pool;
    struct llm_rope_cache *rope;
    void *work;          /* scratch shared by the threads, grown on demand */
    size_t work_size;
    bool *split;         /* per node of the current graph: run on all threads? */
    int split_cap;
    struct llm_profile *prof; /* observers (NULL when off) */
    struct llm_trace *trace;
};

struct run {
    struct cpu_backend *cb;
    struct llm_graph *g;
};

static void no_barrier(void *pool)
{
    (void)pool;
}

static void compute_nodes(int ith, int nth, void *arg)
{
    struct run *r = arg;
    struct llm_cpu_params split = {
        .ith = ith, .nth = nth,
        .wdata = r->cb->work, .wsize = r->cb->work_size,
        .barrier = llm_threadpool_barrier, .pool = r->cb->pool,
        .rope = r->cb->rope,
    };
    struct llm_cpu_params alone = split;
    alone.ith = 0;
    alone.nth = 1;
    alone.barrier = no_barrier;
    struct llm_profile *prof = r->cb->prof;
    struct llm_trace *trace = r->cb->trace;
    const bool watch = prof || trace;
    const int tid = LLM_TRACE_WORKER + ith;
    bool behind = false; /* thread 0 ran nodes alone since the last barrier */
    for (int i = 0; i < r->g->n_nodes; i++) {
        struct llm_tensor *node = r->g->nodes[i];
        if (llm_op_is_noop(node->op))
            continue;
        double t0 = watch ? llm_now_us() : 0.0;
        if (!r->cb->split[i]) {
            if (ith == 0) {
                llm_cpu_compute(&alone, node);
                if (watch)
                    llm_observe_node(prof, trace, tid, true, node, t0);
            }
            behind = true;
            continue;
        }
        if (behind) /* the others must see what thread 0 wrote */
            llm_threadpool_barrier(r->cb->pool);
        llm_cpu_compute(&split, node);
        llm_threadpool_barrier(r->cb->pool);
        if (watch) /* thread 0's span includes the wait for the slowest thread: the node's wall time */
            llm_observe_node(prof, trace, tid, ith == 0, node, t0);
        behind = false;
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
    return llm_cpu_supports_type(type);
}

/* Checks every node and grows the scratch and rope tables to what g needs (outside any run). */
static int cpu_graph_reserve(struct llm_backend *b, const struct llm_graph *g, struct llm_error *err)
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
        if ((node->op == LLM_OP_ROPE || node->op == LLM_OP_ROPE_QK) && !llm_rope_cache_reserve(cb->rope, node))
            return llm_fail(err, LLM_ERR_NOMEM, "cpu backend: out of memory for rope tables");
    }
    if (need > cb->work_size) {
        free(cb->work);
        cb->work = aligned_alloc(64, (need + 63) & ~(size_t)63);
        cb->work_size = cb->work ? need : 0;
        if (!cb->work)
            return llm_fail(err, LLM_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes of scratch", need);
    }
    return LLM_OK;
}

static int cpu_graph_compute(struct llm_backend *b, struct llm_graph *g, struct llm_error *err)
{
    struct cpu_backend *cb = b->ctx;
    const int nth = llm_threadpool_n_threads(cb->pool);
    int rc = cpu_graph_reserve(b, g, err); /* a no-op for graphs within the reserved sizes */
    if (rc)
        return rc;
    if (g->n_nodes > cb->split_cap) {
        bool *ns = realloc(cb->split, (size_t)g->n_nodes * sizeof *ns);
        if (!ns)
            return llm_fail(err, LLM_ERR_NOMEM, "cpu backend: out of memory");
        cb->split = ns;
        cb->split_cap = g->n_nodes;
    }
    bool any_split = false;
    for (int i = 0; i < g->n_nodes; i++)
        any_split |= cb->split[i] = nth > 1 && llm_cpu_worth_splitting(g->nodes[i]);
    llm_rope_cache_reset(cb->rope);
    struct run r = { cb, g };
    if (any_split) {
        const uint64_t waited = cb->prof ? llm_threadpool_wait_ns(cb->pool) : 0;
        llm_threadpool_run(cb->pool, compute_nodes, &r);
        /* the threads' time at barriers, summed over them: uneven shares, nodes run alone */
        if (cb->prof)
            llm_profile_host(cb->prof, "barrier_wait", (double)(llm_threadpool_wait_ns(cb->pool) - waited) / 1e3);
    } else /* every node runs alone: the sleeping workers need not wake (a small split's case) */
        compute_nodes(0, 1, &r);
    return LLM_OK;
}

static void cpu_synchronize(struct llm_backend *b)
{
    (void)b; /* graph_compute is synchronous */
}

static void *cpu_mem_alloc(struct llm_backend *b, size_t size)
{
    (void)b;
    return aligned_alloc(64, (size + 63) & ~(size_t)63);
}

static void cpu_mem_free(struct llm_backend *b, void *ptr)
{
    (void)b;
    free(ptr);
}

static int cpu_tensor_set(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t offset,
                          size_t size, struct llm_error *err)
{
    (void)b;
    (void)err;
    memcpy((char *)t->data + offset, data, size);
    return LLM_OK;
}

static int cpu_tensor_set_async(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t size,
                                struct llm_error *err)
{
    return cpu_tensor_set(b, t, data, 0, size, err); /* nothing is queued on the cpu */
}

static int cpu_tensor_get(struct llm_backend *b, const struct llm_tensor *t, void *data, size_t offset,
                          size_t size, struct llm_error *err)
{
    (void)b;
    (void)err;
    memcpy(data, (const char *)t->data + offset, size);
    return LLM_OK;
}

static int cpu_tensor_get_async(struct llm_backend *b, const struct llm_tensor *t, void *data, size_t size,
                                struct llm_error *err)
{
    return cpu_tensor_get(b, t, data, 0, size, err);
}

static int cpu_tensor_memset(struct llm_backend *b, struct llm_tensor *t, int value, size_t offset,
                             size_t size, struct llm_error *err)
{
    (void)b;
    (void)err;
    memset((char *)t->data + offset, value, size);
    return LLM_OK;
}

static int cpu_tensor_copy(struct llm_backend *b, const struct llm_tensor *src, struct llm_tensor *dst,
                           struct llm_error *err)
{
    (void)b;
    if (llm_nbytes(src) != llm_nbytes(dst))
        return llm_fail(err, LLM_ERR_ARG, "tensor copy: %zu bytes into %zu", llm_nbytes(src), llm_nbytes(dst));
    memcpy(dst->data, src->data, llm_nbytes(src));
    return LLM_OK;
}

static int cpu_get_stats(struct llm_backend *b, struct llm_backend_stat *out, int cap)
{
    (void)b;
    (void)out;
    (void)cap;
    return 0; /* no graph cache, no queue: nothing a profile does not show */
}

static void cpu_observe(struct llm_backend *b, struct llm_profile *prof, struct llm_trace *trace)
{
    struct cpu_backend *cb = b->ctx;
    cb->prof = prof;
    cb->trace = trace;
    llm_threadpool_count_waits(cb->pool, prof != NULL);
    for (int i = 0; i < llm_threadpool_n_threads(cb->pool); i++) {
        char name[32];
        snprintf(name, sizeof name, "cpu thread %d", i);
        llm_trace_track(trace, LLM_TRACE_WORKER + i, name);
    }
}

static void cpu_free(struct llm_backend *b)
{
    struct cpu_backend *cb = b->ctx;
    llm_threadpool_free(cb->pool);
    llm_rope_cache_free(cb->rope);
    free(cb->work);
    free(cb->split);
    free(cb);
    free(b);
}

static const struct llm_backend_iface cpu_iface = {
    .name = "cpu",
    .supports_op = cpu_supports_op,
    .supports_type = cpu_supports_type,
    .graph_reserve = cpu_graph_reserve,
    .graph_compute = cpu_graph_compute,
    .synchronize = cpu_synchronize,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .host_memory = true,
    .tensor_set = cpu_tensor_set,
    .tensor_get = cpu_tensor_get,
    .tensor_memset = cpu_tensor_memset,
    .tensor_copy = cpu_tensor_copy,
    .tensor_set_async = cpu_tensor_set_async,
    .tensor_get_async = cpu_tensor_get_async,
    .get_stats = cpu_get_stats,
    .observe = cpu_observe,
    .free = cpu_free,
};

static const struct llm_backend_option_info cpu_options[] = {
    { "idle_spin_us", 0, 1e6, "µs an idle pool thread busy-waits before it sleeps (0: the pool's default)" },
};

struct llm_backend *llm_backend_cpu_new(const struct llm_backend_params *p, struct llm_error *err)
{
    if (llm_backend_options_check(p, cpu_options, (int)(sizeof cpu_options / sizeof cpu_options[0]), err))
        return NULL;
    const int n_threads = p->n_threads, idle_spin_us = (int)llm_backend_option(p, "idle_spin_us", 0);
    struct llm_backend *b = calloc(1, sizeof *b);
    struct cpu_backend *cb = calloc(1, sizeof *cb);
    if (!b || !cb) {
        free(b);
        free(cb);
        llm_fail(err, LLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    cb->pool = llm_threadpool_new(n_threads);
    cb->rope = llm_rope_cache_new();
    if (!cb->pool || !cb->rope) {
        llm_threadpool_free(cb->pool);
        llm_rope_cache_free(cb->rope);
        free(cb);
        free(b);
        llm_fail(err, LLM_ERR_NOMEM, "cannot start %d threads", n_threads);
        return NULL;
    }
    if (idle_spin_us > 0)
        llm_threadpool_set_idle_spin(cb->pool, idle_spin_us);
    llm_threadpool_place_owner(cb->pool, pthread_self()); /* the host, even when no graph wakes the pool */
    b->iface = &cpu_iface;
    b->ctx = cb;
    return b;
}
