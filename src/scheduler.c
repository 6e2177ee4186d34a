#include "scheduler.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define UNASSIGNED (-1)

static int cpu_of(const struct llm_sched_query *q)
{
    return q->n_backends - 1;
}

static bool runs(const struct llm_sched_query *q, int b, const struct llm_tensor *node)
{
    return b == cpu_of(q) || q->supports(q->user, b, node);
}

int llm_sched_memory_backend(const struct llm_tensor *t)
{
    while (t->view_src)
        t = t->view_src;
    return t->backend;
}

/* The leaf whose preallocated memory t views (t itself when a leaf), NULL for computed memory. */
static const struct llm_tensor *preallocated(const struct llm_tensor *t)
{
    while (t->view_src)
        t = t->view_src;
    return t->op == LLM_OP_NONE ? t : NULL;
}

/* Op offload: the highest-priority backend that runs node when node is a batch of at least
 * op_offload_min_batch rows reading a weight in the cpu's memory (GET_ROWS reads a few rows of its
 * weight: never); UNASSIGNED otherwise. */
static int offload_backend(const struct llm_sched_query *q, const struct llm_tensor *node)
{
    if (q->op_offload_min_batch <= 0 || node->op == LLM_OP_GET_ROWS || node->ne[1] < q->op_offload_min_batch)
        return UNASSIGNED;
    bool host_weight = false;
    for (int s = 0; s < LLM_MAX_SRC; s++) {
        const struct llm_tensor *mem = node->src[s] ? preallocated(node->src[s]) : NULL;
        host_weight = host_weight || (mem && (mem->flags & LLM_TENSOR_WEIGHT) && mem->backend == cpu_of(q));
    }
    for (int b = 0; host_weight && b < cpu_of(q); b++)
        if (q->supports(q->user, b, node))
            return b;
    return UNASSIGNED;
}

/* Pass 1: leaves where their memory is; nodes that read or write preallocated memory other than
 * the graph's inputs (weights, the KV cache) where that memory is, or a device for a large batch
 * over a host weight (op offload). */
static void pass_memory(struct llm_graph *g, const struct llm_sched_query *q)
{
    for (int i = 0; i < g->n_leafs; i++) {
        struct llm_tensor *leaf = g->leafs[i];
        int b = q->leaf_backend(q->user, leaf);
        leaf->backend = b >= 0 && b < q->n_backends ? b : cpu_of(q);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *node = g->nodes[i];
        node->backend = UNASSIGNED;
        if (llm_op_is_noop(node->op))
            continue;
        const struct llm_tensor *own = node->view_src ? preallocated(node) : NULL; /* SET_ROWS, CPY */
        if (own && !(own->flags & LLM_TENSOR_INPUT)) {
            node->backend = own->backend;
            continue;
        }
        for (int s = 0; s < LLM_MAX_SRC && node->backend == UNASSIGNED; s++) {
            const struct llm_tensor *mem = node->src[s] ? preallocated(node->src[s]) : NULL;
            if (mem && !(mem->flags & LLM_TENSOR_INPUT) && runs(q, mem->backend, node))
                node->backend = mem->backend;
        }
        const int offload = node->backend == cpu_of(q) ? offload_backend(q, node) : UNASSIGNED;
        if (offload != UNASSIGNED)
            node->backend = offload;
    }
}

/* One direction of pass 2: the last non-cpu backend seen spreads to unassigned nodes it runs. */
static void spread(struct llm_graph *g, const struct llm_sched_query *q, int from, int to, int step)
{
    int cur = UNASSIGNED;
    for (int i = from; i != to; i += step) {
        struct llm_tensor *node = g->nodes[i];
        if (llm_op_is_noop(node->op))
            continue;
        if (node->backend != UNASSIGNED)
            cur = node->backend == cpu_of(q) ? UNASSIGNED : node->backend;
        else if (cur != UNASSIGNED && runs(q, cur, node))
            node->backend = cur;
    }
}

/* Sources of node whose memory is on backend b. */
static int sources_on(const struct llm_tensor *node, int b)
{
    int n = 0;
    for (int s = 0; s < LLM_MAX_SRC; s++)
        n += node->src[s] && llm_sched_memory_backend(node->src[s]) == b;
    return n;
}

/* Pass 3: the unassigned to the backend, among those that run them, holding most of their sources
 * (ties to the higher priority). ggml also moves assigned nodes up to a higher-priority backend
 * that can use their sources' buffers in place; here every buffer belongs to one backend and an
 * assigned node sits with the buffer it reads or writes, so that never applies. */
static void pass_place(struct llm_graph *g, const struct llm_sched_query *q)
{
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *node = g->nodes[i];
        if (llm_op_is_noop(node->op) || node->backend != UNASSIGNED)
            continue;
        int best = UNASSIGNED, best_n = -1;
        for (int b = 0; b < q->n_backends; b++) {
            int n = runs(q, b, node) ? sources_on(node, b) : -1;
            if (n > best_n) {
                best = b;
                best_n = n;
            }
        }
        node->backend = best;
    }
}

/* Pass 4: views where the memory they view is; whatever is left on the cpu. */
static void pass_views(struct llm_graph *g, const struct llm_sched_query *q)
{
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *node = g->nodes[i];
        if (node->backend != UNASSIGNED)
            continue;
        int b = node->view_src ? llm_sched_memory_backend(node->view_src) : UNASSIGNED;
        node->backend = b == UNASSIGNED ? cpu_of(q) : b;
    }
}

void llm_sched_assign(struct llm_graph *g, const struct llm_sched_query *q, int last_pass)
{
    pass_memory(g, q);
    if (last_pass >= 2) {
        spread(g, q, 0, g->n_nodes, 1);
        spread(g, q, g->n_nodes - 1, -1, -1);
    }
    if (last_pass >= 3)
        pass_place(g, q);
    if (last_pass >= 4)
        pass_views(g, q);
}

/* ---- splits -------------------------------------------------------------------------------- */

static bool grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return true;
    int cap2 = *cap ? *cap : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *p = realloc(*arr, (size_t)cap2 * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = cap2;
    return true;
}

/* Has split already listed t? Marks it listed when not. The table holds at most one entry per
 * source edge of the graph, at under half load. */
static bool seen_before(struct llm_sched *s, const struct llm_tensor *t, int split)
{
    uintptr_t h = ((uintptr_t)t >> 4) * (uintptr_t)0x9E3779B97F4A7C15ull;
    for (int i = (int)(h & (uintptr_t)(s->cap_seen - 1));; i = (i + 1) & (s->cap_seen - 1)) {
        if (s->seen_split[i] == split && s->seen[i] == t)
            return true;
        if (s->seen_split[i] != split) {
            s->seen[i] = t;
            s->seen_split[i] = split;
            return false;
        }
    }
}

static int prepare_seen(struct llm_sched *s, const struct llm_graph *g)
{
    int need = 16;
    while (need < 2 * LLM_MAX_SRC * (g->n_nodes + 1))
        need *= 2;
    if (need > s->cap_seen) {
        free(s->seen);
        free(s->seen_split);
        s->seen = malloc((size_t)need * sizeof *s->seen);
        s->seen_split = malloc((size_t)need * sizeof *s->seen_split);
        s->cap_seen = s->seen && s->seen_split ? need : 0;
        if (!s->cap_seen)
            return -1;
    }
    for (int i = 0; i < s->cap_seen; i++)
        s->seen_split[i] = -1;
    return 0;
}

static int add_split(struct llm_sched *s, int backend, int first)
{
    if (!grow((void **)&s->splits, &s->cap_splits, s->n_splits + 1, sizeof *s->splits))
        return -1;
    s->splits[s->n_splits++] = (struct llm_sched_split){ .backend = backend, .first = first, .end = first,
                                                         .first_input = s->n_inputs };
    return 0;
}

/* The sources of node that split (on backend b) must copy in. */
static int list_inputs(struct llm_sched *s, const struct llm_tensor *node, int b)
{
    struct llm_sched_split *sp = &s->splits[s->n_splits - 1];
    for (int k = 0; k < LLM_MAX_SRC; k++) {
        struct llm_tensor *src = node->src[k];
        if (!src || llm_sched_memory_backend(src) == b || seen_before(s, src, s->n_splits - 1))
            continue;
        if (!grow((void **)&s->inputs, &s->cap_inputs, s->n_inputs + 1, sizeof *s->inputs))
            return -1;
        s->inputs[s->n_inputs++] = src;
        sp->n_inputs++;
    }
    return 0;
}

int llm_sched_plan(struct llm_sched *s, struct llm_graph *g, const struct llm_sched_query *q,
                   struct llm_error *err)
{
    if (q->n_backends < 1 || q->n_backends > LLM_SCHED_MAX_BACKENDS)
        return llm_fail(err, LLM_ERR_ARG, "scheduler: %d backends (1..%d)", q->n_backends, LLM_SCHED_MAX_BACKENDS);
    llm_sched_assign(g, q, 4);
    for (int i = 0; i < g->n_nodes; i++) { /* only a node writing memory of a backend that cannot run it */
        const struct llm_tensor *node = g->nodes[i];
        if (!llm_op_is_noop(node->op) && !runs(q, node->backend, node))
            return llm_fail(err, LLM_ERR_UNSUPPORTED, "scheduler: %s node '%s' writes memory of backend %d, which cannot run it",
                            llm_op_name(node->op), node->name, node->backend);
    }
    s->n_splits = s->n_inputs = 0;
    if (prepare_seen(s, g))
        return llm_fail(err, LLM_ERR_NOMEM, "scheduler: out of memory");
    bool computed = false; /* the current split has a computing node: views alone take any backend */
    for (int i = 0; i < g->n_nodes; i++) {
        const struct llm_tensor *node = g->nodes[i];
        const bool computes = !llm_op_is_noop(node->op);
        if (s->n_splits == 0 || (computes && computed && node->backend != s->splits[s->n_splits - 1].backend)) {
            if (add_split(s, node->backend, i))
                return llm_fail(err, LLM_ERR_NOMEM, "scheduler: out of memory");
            computed = false;
        }
        if (computes && !computed)
            s->splits[s->n_splits - 1].backend = node->backend;
        computed = computed || computes;
        s->splits[s->n_splits - 1].end = i + 1;
        if (computes && list_inputs(s, node, node->backend))
            return llm_fail(err, LLM_ERR_NOMEM, "scheduler: out of memory");
    }
    return LLM_OK;
}

void llm_sched_release(struct llm_sched *s)
{
    free(s->splits);
    free(s->inputs);
    free(s->seen);
    free(s->seen_split);
    memset(s, 0, sizeof *s);
}
