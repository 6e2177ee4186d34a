/* ROPE (NORMAL: adjacent pairs, NEOX: halves) and the per-graph cache of its cos/sin table.
 * Every layer ropes q and k with the same positions and parameters, so the table is computed by the
 * first ROPE node of a graph and reused by the others (2·n_layer nodes per graph). The reference
 * kernel at the end computes its angles on its own, so that it can catch a wrong angle here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define ROPE_CACHE_MAX 8 /* distinct (positions, params) keys in one graph; more run uncached */

struct rope_key {
    const void *pos;     /* positions tensor data (the graph's input; fixed within one compute) */
    int64_t n_pos;
    int n_dims, mode;
    float base, scale, attn;
    const void *factors; /* freq factors data or NULL */
};

struct rope_entry {
    struct rope_key key;
    float *cs;  /* [n_pos][n_dims/2] pairs (cos, sin), times attn_factor */
    size_t cap; /* floats allocated in cs; kept across resets */
};

struct llm_rope_cache {
    struct rope_entry e[ROPE_CACHE_MAX];
    int n;
};

struct llm_rope_cache *llm_rope_cache_new(void)
{
    return calloc(1, sizeof(struct llm_rope_cache));
}

void llm_rope_cache_reset(struct llm_rope_cache *c)
{
    if (c)
        c->n = 0;
}

void llm_rope_cache_free(struct llm_rope_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < ROPE_CACHE_MAX; i++)
        free(c->e[i].cs);
    free(c);
}

struct rope_params {
    int n_dims, mode;
    float base, scale, attn;
    const float *factors;
};

static struct rope_params rope_params(const struct llm_tensor *dst)
{
    const struct llm_tensor *ff = dst->src[2];
    return (struct rope_params){
        .n_dims = dst->op_params[1],
        .mode = dst->op_params[2],
        .base = llm_get_op_f32(dst, 5),
        .scale = llm_get_op_f32(dst, 6),
        .attn = llm_get_op_f32(dst, 8),
        .factors = ff ? (const float *)ff->data : NULL,
    };
}

/* cos and sin of θ_i = pos·scale·base^(-2i/n_dims) / factor_i, times attn_factor (ext_factor 0). */
static void rope_angle(const struct rope_params *rp, int32_t pos, int i, float *c, float *s)
{
    double theta = pos * (double)rp->scale * pow(rp->base, -2.0 * i / rp->n_dims);
    if (rp->factors)
        theta /= rp->factors[i];
    *c = (float)(cos(theta) * rp->attn);
    *s = (float)(sin(theta) * rp->attn);
}

static void fill_angles(const struct rope_params *rp, int32_t pos, float *cs)
{
    for (int i = 0; i < rp->n_dims / 2; i++)
        rope_angle(rp, pos, i, &cs[2 * i], &cs[2 * i + 1]);
}

static bool key_eq(const struct rope_key *a, const struct rope_key *b)
{
    return a->pos == b->pos && a->n_pos == b->n_pos && a->n_dims == b->n_dims && a->mode == b->mode &&
           a->base == b->base && a->scale == b->scale && a->attn == b->attn && a->factors == b->factors;
}

static int cache_find(const struct llm_rope_cache *c, const struct rope_key *k)
{
    for (int i = 0; i < c->n; i++)
        if (key_eq(&c->e[i].key, k))
            return i;
    return -1;
}

/* Adds an entry when one is free and its reserved table is large enough (tables never grow while
 * a graph runs: llm_rope_cache_reserve sized them); otherwise the node runs uncached. */
static void cache_insert(struct llm_rope_cache *c, const struct rope_key *k)
{
    if (c->n == ROPE_CACHE_MAX || (size_t)k->n_pos * (size_t)k->n_dims > c->e[c->n].cap)
        return;
    c->e[c->n].key = *k;
    c->n++;
}

size_t llm_rope_table_floats(const struct llm_tensor *rope)
{
    return (size_t)rope->src[1]->ne[0] * (size_t)rope->op_params[1];
}

bool llm_rope_cache_reserve(struct llm_rope_cache *c, const struct llm_tensor *rope)
{
    size_t need = llm_rope_table_floats(rope);
    for (int i = 0; i < ROPE_CACHE_MAX; i++) {
        struct rope_entry *e = &c->e[i];
        if (need <= e->cap)
            continue;
        float *cs = realloc(e->cs, need * sizeof(float));
        if (!cs)
            return false;
        e->cs = cs;
        e->cap = need;
    }
    return true;
}

/* Rotates one row of hd floats (x may equal z); cs holds n_dims/2 (cos, sin) pairs. */
static void rope_row(const struct llm_tensor *a, const char *x, struct llm_tensor *dst, char *z,
                     int n_dims, int mode, const float *cs)
{
    int64_t sx = a->nb[0], sz = dst->nb[0];
    int half = n_dims / 2;
    /* element index of the two halves of pair i: NORMAL (2i, 2i+1), NEOX (i, i + n_dims/2) */
    int step = mode == 2 ? 1 : 2, off = mode == 2 ? half : 1;
    for (int i = 0; i < half; i++) {
        int64_t j0 = (int64_t)i * step, j1 = j0 + off;
        float x0 = *(const float *)(x + j0 * sx), x1 = *(const float *)(x + j1 * sx);
        float c = cs[2 * i], s = cs[2 * i + 1];
        *(float *)(z + j0 * sz) = x0 * c - x1 * s;
        *(float *)(z + j1 * sz) = x0 * s + x1 * c;
    }
    for (int64_t j = n_dims; j < dst->ne[0]; j++)
        *(float *)(z + j * sz) = *(const float *)(x + j * sx);
}

void llm_cpu_rope_fill_table(const struct llm_cpu_params *p, const struct llm_tensor *node, float *table)
{
    const struct llm_tensor first = node->op == LLM_OP_ROPE_QK ? llm_rope_qk_part(node, 0) : *node;
    const struct llm_tensor *dst = &first, *pos = dst->src[1];
    struct rope_params rp = rope_params(dst);
    int64_t r0, r1;
    thread_rows(pos->ne[0], p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        fill_angles(&rp, ((const int32_t *)pos->data)[r], table + r * rp.n_dims);
}

/* The cached table for this node, computed by all threads when missing; NULL when uncached. The
 * cache changes only between barriers, so every thread takes the same branches. */
static const float *rope_table(const struct llm_cpu_params *p, const struct llm_tensor *dst,
                               const struct rope_params *rp)
{
    struct llm_rope_cache *c = p->rope;
    const struct llm_tensor *pos = dst->src[1];
    if (!c)
        return NULL;
    struct rope_key k = { .pos = pos->data, .n_pos = pos->ne[0], .n_dims = rp->n_dims,
                          .mode = rp->mode, .base = rp->base, .scale = rp->scale, .attn = rp->attn,
                          .factors = rp->factors };
    int idx = cache_find(c, &k);
    if (idx >= 0)
        return c->e[idx].cs;
    pool_barrier(p); /* all threads have looked before the cache changes */
    if (p->ith == 0)
        cache_insert(c, &k);
    pool_barrier(p);
    idx = cache_find(c, &k);
    if (idx < 0)
        return NULL;
    llm_cpu_rope_fill_table(p, dst, c->e[idx].cs);
    pool_barrier(p);
    return c->e[idx].cs;
}

static void rope_apply(const struct llm_cpu_params *p, struct llm_tensor *dst, const float *table)
{
    const struct llm_tensor *a = dst->src[0], *pos = dst->src[1];
    struct rope_params rp = rope_params(dst);
    float local[2 * 512]; /* angles of the current position when uncached (n_dims <= 1024) */
    int64_t last_i2 = -1, r0, r1;
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        const float *cs = table ? table + i2 * rp.n_dims : local;
        if (!table && i2 != last_i2) {
            fill_angles(&rp, ((const int32_t *)pos->data)[i2], local);
            last_i2 = i2;
        }
        rope_row(a, tensor_at(a, 0, i1, i2, i3), dst, tensor_at(dst, 0, i1, i2, i3), rp.n_dims,
                 rp.mode, cs);
    }
}

void llm_cpu_rope_apply(const struct llm_cpu_params *p, struct llm_tensor *node, const float *table)
{
    if (node->op != LLM_OP_ROPE_QK) {
        rope_apply(p, node, table);
        return;
    }
    for (int part = 0; part < 2; part++) {
        struct llm_tensor r = llm_rope_qk_part(node, part);
        rope_apply(p, &r, table);
    }
}

void cpu_rope(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    struct rope_params rp = rope_params(dst);
    rope_apply(p, dst, rope_table(p, dst, &rp));
}

