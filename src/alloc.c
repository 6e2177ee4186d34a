#include "alloc.h"

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
    int users;      /* readers not yet run                */
    bool owned;     /* memory planned by this allocator   */
    size_t offs;
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

/* Plan offsets for g. With arena != NULL also place the nodes in it. Returns the peak in *peak. */
static int plan_graph(const struct llm_graph *g, struct llm_buffer *arena, size_t *peak, struct llm_error *err)
{
    struct table tb = { .cap = 16 };
    while (tb.cap < (size_t)(g->n_nodes + g->n_leafs) * 2)
        tb.cap *= 2;
    tb.s = calloc(tb.cap, sizeof *tb.s);
    struct plan p = { 0 };
    int rc = LLM_OK;
    if (!tb.s)
        return llm_fail(err, LLM_ERR_NOMEM, "graph allocator: out of memory");

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

    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *n = g->nodes[i];
        if (n->view_src) {
            if (arena) {
                n->data = (char *)n->view_src->data + n->view_offs;
                n->buffer = n->view_src->buffer;
            }
        } else {
            struct slot *s = lookup(&tb, n);
            if (!plan_alloc(&p, llm_nbytes(n), &s->offs)) {
                rc = llm_fail(err, LLM_ERR_NOMEM, "graph allocator: out of memory");
                goto out;
            }
            s->owned = true;
            if (arena)
                llm_buffer_place(arena, n, s->offs);
        }
        for (int j = 0; j < LLM_MAX_SRC; j++) {
            if (!n->src[j])
                continue;
            struct llm_tensor *r = llm_view_root(n->src[j]);
            struct slot *s = lookup(&tb, r);
            if (--s->users == 0 && s->owned && !(r->flags & LLM_TENSOR_OUTPUT)) {
                if (!plan_release(&p, s->offs, llm_nbytes(r))) {
                    rc = llm_fail(err, LLM_ERR_NOMEM, "graph allocator: out of memory");
                    goto out;
                }
            }
        }
    }
    *peak = p.peak;
out:
    free(tb.s);
    free(p.free);
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

int llm_allocator_reserve(struct llm_allocator *a, const struct llm_graph *g, struct llm_error *err)
{
    size_t peak = 0;
    int rc = plan_graph(g, NULL, &peak, err);
    return rc ? rc : grow(a, peak, err);
}

int llm_allocator_alloc_graph(struct llm_allocator *a, struct llm_graph *g, struct llm_error *err)
{
    int rc = llm_allocator_reserve(a, g, err);
    if (rc)
        return rc;
    size_t peak;
    return plan_graph(g, a->arena, &peak, err);
}

unsigned llm_allocator_generation(const struct llm_allocator *a)
{
    return a->generation;
}

size_t llm_allocator_size(const struct llm_allocator *a)
{
    return a->size;
}
