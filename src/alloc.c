#include "alloc.h"

#include "ops/cpu/op_table.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64

struct block {
    size_t offs, size;
};

struct llm_allocator {
    struct llm_backend *backend; /* whose memory the arena is; NULL: host memory */
    struct llm_buffer *arena;
    size_t size;
    unsigned generation;
};

/* Free list over a virtual arena [0, top) that grows on demand; records the peak. */
struct plan {
    struct block *free;
    int n_free, cap_free;
    size_t top, peak;
};

/* Per-tensor bookkeeping, found by pointer. */
struct slot {
    const struct llm_tensor *t;
    int users;      /* readers not yet run                          */
    bool owned;     /* its block planned by this allocator, and its  */
    int block;      /* index (struct lifetime)                       */
};

struct table {
    struct slot *s;
    size_t cap;
};

static struct slot *lookup(struct table *tb, const struct llm_tensor *t)
{
    size_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull;
    for (size_t i = h & (tb->cap - 1);; i = (i + 1) & (tb->cap - 1)) {
        if (tb->s[i].t == t)
            return &tb->s[i];
        if (!tb->s[i].t) {
            tb->s[i].t = t;
            return &tb->s[i];
        }
    }
}

static size_t align_up(size_t n)
{
    return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static bool plan_alloc(struct plan *p, size_t size, size_t *offs)
{
    size = align_up(size ? size : 1);
    int best = -1;
    for (int i = 0; i < p->n_free; i++)
        if (p->free[i].size >= size && (best < 0 || p->free[i].size < p->free[best].size))
            best = i;
    if (best >= 0) {
        *offs = p->free[best].offs;
        p->free[best].offs += size;
        p->free[best].size -= size;
        if (p->free[best].size == 0) {
            memmove(&p->free[best], &p->free[best + 1], (size_t)(p->n_free - best - 1) * sizeof *p->free);
            p->n_free--;
        }
        return true;
    }
    /* Extend from the top, absorbing a free block that ends at the top. */
    if (p->n_free > 0 && p->free[p->n_free - 1].offs + p->free[p->n_free - 1].size == p->top) {
        p->top = p->free[p->n_free - 1].offs;
        p->n_free--;
    }
    *offs = p->top;
    p->top += size;
    if (p->top > p->peak)
        p->peak = p->top;
    return true;
}

static bool plan_release(struct plan *p, size_t offs, size_t size)
{
    size = align_up(size ? size : 1);
    int i = 0;
    while (i < p->n_free && p->free[i].offs < offs)
        i++;
    if (p->n_free == p->cap_free) {
        int cap = p->cap_free ? p->cap_free * 2 : 64;
        struct block *nf = realloc(p->free, (size_t)cap * sizeof *nf);
        if (!nf)
            return false;
        p->free = nf;
        p->cap_free = cap;
    }
    memmove(&p->free[i + 1], &p->free[i], (size_t)(p->n_free - i) * sizeof *p->free);
    p->free[i] = (struct block){ offs, size };
    p->n_free++;
    /* merge with the next, then the previous neighbour */
    if (i + 1 < p->n_free && p->free[i].offs + p->free[i].size == p->free[i + 1].offs) {
        p->free[i].size += p->free[i + 1].size;
        memmove(&p->free[i + 1], &p->free[i + 2], (size_t)(p->n_free - i - 2) * sizeof *p->free);
        p->n_free--;
    }
    if (i > 0 && p->free[i - 1].offs + p->free[i - 1].size == p->free[i].offs) {
        p->free[i - 1].size += p->free[i].size;
        memmove(&p->free[i], &p->free[i + 1], (size_t)(p->n_free - i - 1) * sizeof *p->free);
        p->n_free--;
    }
    return true;
}

/* The block n's first source is in, when n may write its result over it: n's op computes in place
 * (op_table.h); the source is laid out as n and covers the whole of a block this allocator placed
 * (the block itself, or a reshape of it) that is not an output; and no node after n reads the
 * block, nor does n through another view (which could read rows already overwritten). */
static struct slot *block_to_take_over(struct table *tb, const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0];
    if (!llm_op_traits(n->op)->in_place || !a || a->type != n->type || !llm_is_contiguous(a))
        return NULL;
    for (int d = 0; d < LLM_MAX_DIMS; d++)
        if (a->ne[d] != n->ne[d] || a->nb[d] != n->nb[d])
            return NULL;
    const struct llm_tensor *r = llm_view_root(n->src[0]);
    if ((r->flags & LLM_TENSOR_OUTPUT) || llm_nbytes(r) != llm_nbytes(n)) /* a, as large, is all of r */
        return NULL;
    int reads = 0;
    for (int j = 0; j < LLM_MAX_SRC; j++) {
        if (n->src[j] && llm_view_root(n->src[j]) == r) {
            if (n->src[j] != a)
                return NULL;
            reads++;
        }
    }
    struct slot *s = lookup(tb, r);
    return s->owned && s->users == reads ? s : NULL;
}

/* A block of the arena: a computing node's result, or a chain of them each written over the one
 * before (in place), live from the node that makes it to the one after which no node reads it. */
struct lifetime {
    size_t size, offs;
    int first, last; /* node indices, both live; last = n_nodes: never freed (an output) */
};

/* The blocks of g (*n_b of them, in order of their first node) and each computing node's block in
 * its slot. */
static void live_ranges(const struct llm_graph *g, struct table *tb, struct lifetime *b, int *n_b)
{
    *n_b = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *n = g->nodes[i];
        if (!n->view_src) {
            struct slot *s = lookup(tb, n), *from = block_to_take_over(tb, n);
            if (from) { /* its source's block passes to n, so the source does not end it below */
                s->block = from->block;
                from->owned = false;
            } else {
                s->block = (*n_b)++;
                b[s->block] = (struct lifetime){ align_up(llm_nbytes(n) ? llm_nbytes(n) : 1), 0, i, g->n_nodes };
            }
            s->owned = true;
        }
        for (int j = 0; j < LLM_MAX_SRC; j++) {
            if (!n->src[j])
                continue;
            struct llm_tensor *r = llm_view_root(n->src[j]);
            struct slot *s = lookup(tb, r);
            if (--s->users == 0 && s->owned && !(r->flags & LLM_TENSOR_OUTPUT))
                b[s->block].last = i;
        }
    }
}

static int by_last(const void *x, const void *y)
{
    const struct lifetime *a = *(const struct lifetime *const *)x, *c = *(const struct lifetime *const *)y;
    const int d = (a->last > c->last) - (a->last < c->last);
    return d ? d : (a > c) - (a < c);
}

/* Offsets in node order: each block takes the smallest free block it fits (else the top grows)
 * when its first node runs, and is freed after its last. The peak, or 0 when out of memory. */
static size_t pack_in_order(struct lifetime *b, int n_b)
{
    struct plan p = { 0 };
    struct lifetime **ends = malloc((size_t)(n_b ? n_b : 1) * sizeof *ends);
    size_t peak = 0;
    if (!ends)
        return 0;
    for (int k = 0; k < n_b; k++)
        ends[k] = &b[k];
    qsort(ends, (size_t)n_b, sizeof *ends, by_last);
    bool ok = true;
    for (int k = 0, e = 0; k < n_b && ok; k++) {
        for (; e < n_b && ends[e]->last < b[k].first && ok; e++)
            ok = plan_release(&p, ends[e]->offs, ends[e]->size);
        ok = ok && plan_alloc(&p, b[k].size, &b[k].offs);
    }
    peak = ok ? p.peak : 0;
    free(p.free);
    free(ends);
    return peak;
}

static int by_size(const void *x, const void *y)
{
    const struct lifetime *a = *(const struct lifetime *const *)x, *c = *(const struct lifetime *const *)y;
    const int d = (a->size < c->size) - (a->size > c->size);
    return d ? d : (a > c) - (a < c);
}

static int by_offs(const void *x, const void *y)
{
    const struct lifetime *a = *(const struct lifetime *const *)x, *c = *(const struct lifetime *const *)y;
    return (a->offs > c->offs) - (a->offs < c->offs);
}

/* Offsets largest block first: each at the lowest offset clear of the blocks placed before whose
 * lives overlap its own. The peak, or 0 when out of memory. */
static size_t pack_by_size(struct lifetime *b, int n_b)
{
    struct lifetime **order = malloc((size_t)(n_b ? n_b : 1) * sizeof *order);
    struct lifetime **near = malloc((size_t)(n_b ? n_b : 1) * sizeof *near);
    size_t peak = 0;
    if (!order || !near) {
        free(order);
        free(near);
        return 0;
    }
    for (int k = 0; k < n_b; k++)
        order[k] = &b[k];
    qsort(order, (size_t)n_b, sizeof *order, by_size);
    for (int k = 0; k < n_b; k++) {
        struct lifetime *t = order[k];
        int m = 0;
        for (int j = 0; j < k; j++)
            if (order[j]->first <= t->last && t->first <= order[j]->last)
                near[m++] = order[j];
        qsort(near, (size_t)m, sizeof *near, by_offs);
        t->offs = 0;
        for (int j = 0; j < m && near[j]->offs < t->offs + t->size; j++)
            if (near[j]->offs + near[j]->size > t->offs)
                t->offs = near[j]->offs + near[j]->size;
        peak = t->offs + t->size > peak ? t->offs + t->size : peak;
    }
    free(order);
    free(near);
    return peak;
}

static int grow(struct llm_allocator *a, size_t need, struct llm_error *err)
{
    if (need <= a->size && a->arena)
        return LLM_OK;
    llm_buffer_free(a->arena);
    a->size = 0;
    a->arena = llm_buffer_new(a->backend, need ? need : ALIGN);
    if (!a->arena) /* one line with the bytes needed and, in a device's memory, those available */
        return a->backend ? llm_backend_alloc_failed(a->backend, "compute buffer", need, err)
                          : llm_fail(err, LLM_ERR_NOMEM, "cannot allocate a compute buffer of %zu bytes", need);
    a->size = need;
    a->generation++;
    return LLM_OK;
}

/* Plans g's blocks, makes a's arena at least their peak and, with place, puts the nodes in it.
 * In node order, a large block may find only holes too small below the top (a prefill's FFN
 * result above the first layer's attention), so a graph whose peak reaches PACK_BY_SIZE_FROM is
 * also packed largest block first, and keeps the lower peak. Below it the holes cost little, and
 * the second packing, quadratic in the blocks, would cost a decoded token its time. */
#define PACK_BY_SIZE_FROM (8u << 20)
static int plan_graph(struct llm_allocator *al, const struct llm_graph *g, bool place, struct llm_error *err)
{
    struct table tb = { .cap = 16 };
    while (tb.cap < (size_t)(g->n_nodes + g->n_leafs) * 2)
        tb.cap *= 2;
    tb.s = calloc(tb.cap, sizeof *tb.s);
    struct lifetime *b = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * 2 * sizeof *b);
    int rc = LLM_OK, n_b = 0;
    if (!tb.s || !b) {
        rc = llm_fail(err, LLM_ERR_NOMEM, "graph allocator: out of memory");
        goto out;
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (!g->leafs[i]->data) {
            rc = llm_fail(err, LLM_ERR_ARG, "graph allocator: leaf '%s' has no data", g->leafs[i]->name);
            goto out;
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < LLM_MAX_SRC; j++)
            if (g->nodes[i]->src[j])
                lookup(&tb, llm_view_root(g->nodes[i]->src[j]))->users++;
    live_ranges(g, &tb, b, &n_b);
    size_t peak = pack_in_order(b, n_b);
    if (peak >= PACK_BY_SIZE_FROM) {
        struct lifetime *by = b + g->n_nodes;
        memcpy(by, b, (size_t)n_b * sizeof *b);
        const size_t other = pack_by_size(by, n_b);
        if (other && other < peak) {
            memcpy(b, by, (size_t)n_b * sizeof *b);
            peak = other;
        }
    }
    rc = n_b && !peak ? llm_fail(err, LLM_ERR_NOMEM, "graph allocator: out of memory") : grow(al, peak, err);
    for (int i = 0; !rc && place && i < g->n_nodes; i++) {
        struct llm_tensor *n = g->nodes[i];
        if (n->view_src) {
            n->data = (char *)n->view_src->data + n->view_offs;
            n->buffer = n->view_src->buffer;
        } else {
            llm_buffer_place(al->arena, n, b[lookup(&tb, n)->block].offs);
        }
    }
out:
    free(tb.s);
    free(b);
    return rc;
}

struct llm_allocator *llm_allocator_new(struct llm_backend *backend)
{
    struct llm_allocator *a = calloc(1, sizeof *a);
    if (a)
        a->backend = backend;
    return a;
}

void llm_allocator_free(struct llm_allocator *a)
{
    if (!a)
        return;
    llm_buffer_free(a->arena);
    free(a);
}

int llm_allocator_reserve(struct llm_allocator *a, const struct llm_graph *g, struct llm_error *err)
{
    return plan_graph(a, g, false, err);
}

int llm_allocator_alloc_graph(struct llm_allocator *a, struct llm_graph *g, struct llm_error *err)
{
    return plan_graph(a, g, true, err);
}

unsigned llm_allocator_generation(const struct llm_allocator *a)
{
    return a->generation;
}

size_t llm_allocator_size(const struct llm_allocator *a)
{
    return a->size;
}
