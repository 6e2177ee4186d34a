#include "split_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llm_split_exec_init(struct llm_split_exec *x, struct llm_backend **backends, int n, struct llm_error *err)
{
    memset(x, 0, sizeof *x);
    if (n < 1 || n > LLM_SCHED_MAX_BACKENDS)
        return llm_fail(err, LLM_ERR_ARG, "%d backends (1..%d)", n, LLM_SCHED_MAX_BACKENDS);
    x->n_backends = n;
    for (int b = 0; b < n; b++) {
        x->backends[b] = backends[b];
        x->alloc[b] = llm_allocator_new(backends[b]);
        if (!x->alloc[b])
            return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    }
    return LLM_OK;
}

static void drop_graph(struct llm_split_exec *x)
{
    free(x->copies);
    free(x->sub);
    x->copies = NULL;
    x->sub = NULL;
    x->n_copies = 0;
}

void llm_split_exec_release(struct llm_split_exec *x)
{
    for (int b = 0; b < x->n_backends; b++)
        llm_allocator_free(x->alloc[b]);
    drop_graph(x);
    llm_sched_release(&x->plan);
    memset(x, 0, sizeof *x);
}

/* A copy of t with its shape, strides and layout (so the same bytes, read the same way), in the
 * arena of the split's backend. */
static void make_copy(struct llm_tensor *c, const struct llm_tensor *t, int backend)
{
    *c = (struct llm_tensor){ .type = t->type, .op = LLM_OP_NONE, .backend = backend,
                              .flags = t->flags & LLM_TENSOR_REPACKED };
    memcpy(c->ne, t->ne, sizeof c->ne);
    memcpy(c->nb, t->nb, sizeof c->nb);
    snprintf(c->name, sizeof c->name, "%.50s (copy)", t->name);
}

/* Give every split input its copy and point the split's nodes at it. */
static int rewire(struct llm_split_exec *x, struct llm_graph *g)
{
    const struct llm_sched *s = &x->plan;
    x->copies = calloc((size_t)s->n_inputs + 1, sizeof *x->copies);
    x->sub = calloc((size_t)s->n_splits + 1, sizeof *x->sub);
    if (!x->copies || !x->sub)
        return -1;
    x->n_copies = s->n_inputs;
    for (int k = 0; k < s->n_splits; k++) {
        const struct llm_sched_split *sp = &s->splits[k];
        for (int m = sp->first_input; m < sp->first_input + sp->n_inputs; m++)
            make_copy(&x->copies[m], s->inputs[m], sp->backend);
        for (int i = sp->first; i < sp->end; i++)
            for (int j = 0; j < LLM_MAX_SRC; j++)
                for (int m = sp->first_input; g->nodes[i]->src[j] && m < sp->first_input + sp->n_inputs; m++)
                    if (g->nodes[i]->src[j] == s->inputs[m])
                        g->nodes[i]->src[j] = &x->copies[m];
        x->sub[k] = (struct llm_graph){ .nodes = g->nodes + sp->first, .n_nodes = sp->end - sp->first };
    }
    return 0;
}

/* Point the split's nodes back at the tensors the copies were made of. */
static void unwire(struct llm_split_exec *x, struct llm_graph *g)
{
    const struct llm_sched *s = &x->plan;
    for (int k = 0; k < s->n_splits; k++)
        for (int i = s->splits[k].first; i < s->splits[k].end; i++)
            for (int j = 0; j < LLM_MAX_SRC; j++) {
                const struct llm_tensor *src = g->nodes[i]->src[j];
                if (src >= x->copies && src < x->copies + x->n_copies)
                    g->nodes[i]->src[j] = s->inputs[src - x->copies];
            }
}

/* The node list backend b's allocator plans: its copies at their split's start, the nodes whose
 * memory is b's, and, where another backend's split copies tensors of b, a reader that keeps them
 * alive until then (a view, so it takes no memory). */
struct arena_list {
    struct llm_graph g;
    struct llm_tensor *readers;
    int n_readers;
};

static void push(struct arena_list *l, struct llm_tensor *t)
{
    l->g.nodes[l->g.n_nodes++] = t;
}

static void add_readers(struct arena_list *l, const struct llm_sched *s, const struct llm_sched_split *sp, int b)
{
    struct llm_tensor *r = NULL;
    int used = LLM_MAX_SRC;
    for (int m = sp->first_input; m < sp->first_input + sp->n_inputs; m++) {
        struct llm_tensor *t = s->inputs[m];
        if (llm_sched_memory_backend(t) != b)
            continue;
        if (used == LLM_MAX_SRC) {
            r = &l->readers[l->n_readers++];
            *r = (struct llm_tensor){ .op = LLM_OP_VIEW, .view_src = t, .type = t->type };
            push(l, r);
            used = 0;
        }
        r->src[used++] = t;
    }
}

static int arena_list_build(struct arena_list *l, const struct llm_split_exec *x, const struct llm_graph *g, int b)
{
    const struct llm_sched *s = &x->plan;
    /* the graph's leaves: weights, caches and inputs have data; they size the allocator's table */
    l->g = (struct llm_graph){ .nodes = malloc(((size_t)g->n_nodes + 2 * (size_t)s->n_inputs + 1) * sizeof *l->g.nodes),
                               .leafs = g->leafs, .n_leafs = g->n_leafs };
    l->readers = calloc((size_t)s->n_inputs + 1, sizeof *l->readers);
    l->n_readers = 0;
    if (!l->g.nodes || !l->readers)
        return -1;
    for (int k = 0; k < s->n_splits; k++) {
        const struct llm_sched_split *sp = &s->splits[k];
        if (sp->backend == b)
            for (int m = sp->first_input; m < sp->first_input + sp->n_inputs; m++)
                push(l, &x->copies[m]);
        else
            add_readers(l, s, sp, b);
        for (int i = sp->first; i < sp->end; i++) {
            struct llm_tensor *node = g->nodes[i];
            if (llm_sched_memory_backend(node) == b && (node->view_src || node->backend == b))
                push(l, node);
        }
    }
    return 0;
}

static void arena_list_free(struct arena_list *l)
{
    free(l->g.nodes);
    free(l->readers);
}

/* Let each backend size its own buffers (workspaces, tables) for the splits it runs. */
static int reserve_backends(struct llm_split_exec *x, struct llm_error *err)
{
    for (int k = 0; k < x->plan.n_splits; k++) {
        struct llm_backend *b = x->backends[x->plan.splits[k].backend];
        int rc = b->iface->graph_reserve(b, &x->sub[k], err);
        if (rc)
            return rc;
    }
    return LLM_OK;
}

int llm_split_exec_prepare(struct llm_split_exec *x, struct llm_graph *g, const struct llm_sched_query *q,
                           bool reserve_only, struct llm_error *err)
{
    drop_graph(x);
    int rc = llm_sched_plan(&x->plan, g, q, err);
    if (rc)
        return rc;
    for (int k = 0; k < x->plan.n_splits; k++) { /* before the copies are wired in: readers are all seen */
        struct llm_sched_split *sp = &x->plan.splits[k];
        struct llm_backend *b = x->backends[sp->backend];
        const int added = b->iface->graph_optimize ? b->iface->graph_optimize(b, g, sp->first, sp->end) : 0;
        if (added < 0)
            return llm_fail(err, LLM_ERR_NOMEM, "out of memory in the %s backend's graph passes", b->iface->name);
        sp->end += added;
        for (int l = k + 1; l < x->plan.n_splits; l++) { /* the nodes after the split moved */
            x->plan.splits[l].first += added;
            x->plan.splits[l].end += added;
        }
    }
    if (rewire(x, g))
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory for the split inputs");
    for (int b = 0; b < x->n_backends && !rc; b++) {
        struct arena_list l;
        if (arena_list_build(&l, x, g, b))
            rc = llm_fail(err, LLM_ERR_NOMEM, "out of memory");
        else if (reserve_only)
            rc = llm_allocator_reserve(x->alloc[b], &l.g, err);
        else
            rc = llm_allocator_alloc_graph(x->alloc[b], &l.g, err);
        arena_list_free(&l);
    }
    if (!rc && reserve_only)
        rc = reserve_backends(x, err);
    if (reserve_only)
        unwire(x, g);
    return rc;
}

int llm_split_exec_run(struct llm_split_exec *x, struct llm_error *err)
{
    const struct llm_sched *s = &x->plan;
    bool queued[LLM_SCHED_MAX_BACKENDS] = { false }; /* devices with copies from or to host memory */
    int rc = LLM_OK;
    for (int k = 0; k < s->n_splits && !rc; k++) {
        const struct llm_sched_split *sp = &s->splits[k];
        struct llm_backend *b = x->backends[sp->backend];
        for (int m = sp->first_input; m < sp->first_input + sp->n_inputs && !rc; m++) {
            struct llm_backend *pending;
            rc = llm_tensor_copy_async(s->inputs[m], &x->copies[m], &pending, err); /* after its producer */
            for (int d = 0; d < x->n_backends && pending; d++)
                queued[d] = queued[d] || x->backends[d] == pending;
        }
        /* a host split reads what the devices copy out, and its memory is reused by the next one:
         * the queued copies finish first */
        for (int d = 0; d < x->n_backends && b->iface->host_memory; d++)
            if (queued[d]) {
                x->backends[d]->iface->synchronize(x->backends[d]);
                queued[d] = false;
            }
        if (!rc)
            rc = b->iface->graph_compute(b, &x->sub[k], err);
    }
    for (int b = 0; b < x->n_backends; b++)
        x->backends[b]->iface->synchronize(x->backends[b]);
    return rc;
}

unsigned llm_split_exec_generation(const struct llm_split_exec *x)
{
    unsigned gen = 0;
    for (int b = 0; b < x->n_backends; b++)
        gen = gen * 31u + llm_allocator_generation(x->alloc[b]);
    return gen;
}
