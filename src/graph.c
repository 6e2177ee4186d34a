#include "graph.h"

#include "ops/cpu/op_table.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct llm_ctx {
    struct llm_tensor *pool;
    int cap;
    int used;
    bool overflow;
    char error[160]; /* the first shape rule a constructor found broken since the reset, or "" */
};

/* Returned when the pool is exhausted, so builders need no NULL checks; the overflow flag makes
 * the whole graph invalid. */
static struct llm_tensor overflow_sink;

struct llm_ctx *llm_ctx_new(int max_tensors)
{
    struct llm_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->pool = calloc((size_t)max_tensors, sizeof *ctx->pool);
    if (!ctx->pool) {
        free(ctx);
        return NULL;
    }
    ctx->cap = max_tensors;
    return ctx;
}

void llm_ctx_free(struct llm_ctx *ctx)
{
    if (!ctx)
        return;
    free(ctx->pool);
    free(ctx);
}

void llm_ctx_reset(struct llm_ctx *ctx)
{
    memset(ctx->pool, 0, (size_t)ctx->used * sizeof *ctx->pool);
    ctx->used = 0;
    ctx->overflow = false;
    ctx->error[0] = '\0';
}

bool llm_ctx_overflowed(const struct llm_ctx *ctx)
{
    return ctx->overflow;
}

const char *llm_ctx_error(const struct llm_ctx *ctx)
{
    return ctx->error[0] ? ctx->error : NULL;
}

/* The op's shape rules (op_table.h), run on every node a constructor makes. */
static struct llm_tensor *checked(struct llm_ctx *ctx, struct llm_tensor *t)
{
    const char *why = ctx->overflow ? NULL : llm_op_check(t);
    if (why && !ctx->error[0])
        snprintf(ctx->error, sizeof ctx->error, "%s: %s", llm_op_name(t->op), why);
    return t;
}

static struct llm_tensor *alloc_tensor(struct llm_ctx *ctx)
{
    if (ctx->used == ctx->cap) {
        ctx->overflow = true;
        memset(&overflow_sink, 0, sizeof overflow_sink);
        return &overflow_sink;
    }
    return &ctx->pool[ctx->used++];
}

static void set_contiguous_strides(struct llm_tensor *t)
{
    const struct llm_type_info *ti = llm_type_info(t->type);
    t->nb[0] = ti->type_size;
    t->nb[1] = t->nb[0] * (size_t)(t->ne[0] / ti->blck_size);
    for (int i = 2; i < LLM_MAX_DIMS; i++)
        t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
}

struct llm_tensor *llm_new_tensor(struct llm_ctx *ctx, enum llm_type type, int n_dims,
                                  const int64_t *ne)
{
    struct llm_tensor *t = alloc_tensor(ctx);
    t->type = type;
    for (int i = 0; i < LLM_MAX_DIMS; i++)
        t->ne[i] = i < n_dims ? ne[i] : 1;
    set_contiguous_strides(t);
    return t;
}

struct llm_tensor *llm_new_tensor_1d(struct llm_ctx *ctx, enum llm_type type, int64_t ne0)
{
    return llm_new_tensor(ctx, type, 1, &ne0);
}

struct llm_tensor *llm_new_tensor_2d(struct llm_ctx *ctx, enum llm_type type, int64_t ne0,
                                     int64_t ne1)
{
    const int64_t ne[2] = { ne0, ne1 };
    return llm_new_tensor(ctx, type, 2, ne);
}

void llm_set_name(struct llm_tensor *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}

/* A result tensor of op with a's type or an explicit one, shaped like ne. */
static struct llm_tensor *new_op(struct llm_ctx *ctx, enum llm_op op, enum llm_type type,
                                 const int64_t *ne, struct llm_tensor *s0, struct llm_tensor *s1,
                                 struct llm_tensor *s2, struct llm_tensor *s3)
{
    struct llm_tensor *t = llm_new_tensor(ctx, type, LLM_MAX_DIMS, ne);
    t->op = op;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    t->src[3] = s3;
    return t;
}

static struct llm_tensor *new_view(struct llm_ctx *ctx, enum llm_op op, struct llm_tensor *a,
                                   const int64_t *ne, const size_t *nb, size_t offs)
{
    struct llm_tensor *t = alloc_tensor(ctx);
    t->type = a->type;
    memcpy(t->ne, ne, sizeof t->ne);
    memcpy(t->nb, nb, sizeof t->nb);
    t->op = op;
    t->src[0] = a;
    t->view_src = a->view_src ? a->view_src : a;
    t->view_offs = a->view_offs + offs;
    if (t->view_src->data)
        t->data = (char *)t->view_src->data + t->view_offs;
    return t;
}

struct llm_tensor *llm_view_1d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, size_t offs)
{
    const int64_t ne[4] = { ne0, 1, 1, 1 };
    const size_t rs = llm_row_size(a->type, ne0);
    const size_t nb[4] = { a->nb[0], rs, rs, rs };
    return new_view(ctx, LLM_OP_VIEW, a, ne, nb, offs);
}

struct llm_tensor *llm_view_2d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1,
                               size_t nb1, size_t offs)
{
    const int64_t ne[4] = { ne0, ne1, 1, 1 };
    const size_t nb[4] = { a->nb[0], nb1, nb1 * (size_t)ne1, nb1 * (size_t)ne1 };
    return new_view(ctx, LLM_OP_VIEW, a, ne, nb, offs);
}

struct llm_tensor *llm_view_3d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1,
                               int64_t ne2, size_t nb1, size_t nb2, size_t offs)
{
    const int64_t ne[4] = { ne0, ne1, ne2, 1 };
    const size_t nb[4] = { a->nb[0], nb1, nb2, nb2 * (size_t)ne2 };
    return new_view(ctx, LLM_OP_VIEW, a, ne, nb, offs);
}

static struct llm_tensor *reshape(struct llm_ctx *ctx, struct llm_tensor *a, int n_dims,
                                  const int64_t *ne_in)
{
    int64_t ne[4] = { 1, 1, 1, 1 };
    memcpy(ne, ne_in, (size_t)n_dims * sizeof *ne);
    struct llm_tensor tmp = { .type = a->type };
    memcpy(tmp.ne, ne, sizeof ne);
    set_contiguous_strides(&tmp);
    return new_view(ctx, LLM_OP_RESHAPE, a, tmp.ne, tmp.nb, 0);
}

struct llm_tensor *llm_reshape_2d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1)
{
    const int64_t ne[2] = { ne0, ne1 };
    return reshape(ctx, a, 2, ne);
}

struct llm_tensor *llm_reshape_3d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1,
                                  int64_t ne2)
{
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return reshape(ctx, a, 3, ne);
}

struct llm_tensor *llm_permute(struct llm_ctx *ctx, struct llm_tensor *a, int p0, int p1, int p2, int p3)
{
    const int perm[4] = { p0, p1, p2, p3 };
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[perm[i]] = a->ne[i];
        nb[perm[i]] = a->nb[i];
    }
    struct llm_tensor *t = new_view(ctx, LLM_OP_PERMUTE, a, ne, nb, 0);
    memcpy(t->op_params, perm, sizeof perm);
    return t;
}

struct llm_tensor *llm_transpose(struct llm_ctx *ctx, struct llm_tensor *a)
{
    const int64_t ne[4] = { a->ne[1], a->ne[0], a->ne[2], a->ne[3] };
    const size_t nb[4] = { a->nb[1], a->nb[0], a->nb[2], a->nb[3] };
    return new_view(ctx, LLM_OP_TRANSPOSE, a, ne, nb, 0);
}

struct llm_tensor *llm_get_rows(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *ids)
{
    const int64_t ne[4] = { a->ne[0], ids->ne[0], 1, 1 };
    return checked(ctx, new_op(ctx, LLM_OP_GET_ROWS, LLM_TYPE_F32, ne, a, ids, NULL, NULL));
}

struct llm_tensor *llm_set_rows(struct llm_ctx *ctx, struct llm_tensor *dst, struct llm_tensor *rows,
                                struct llm_tensor *ids)
{
    struct llm_tensor *t = new_view(ctx, LLM_OP_SET_ROWS, dst, dst->ne, dst->nb, 0);
    t->src[1] = rows;
    t->src[2] = ids;
    return checked(ctx, t);
}

static struct llm_tensor *binary(struct llm_ctx *ctx, enum llm_op op, struct llm_tensor *a,
                                 struct llm_tensor *b)
{
    return new_op(ctx, op, LLM_TYPE_F32, a->ne, a, b, NULL, NULL);
}

struct llm_tensor *llm_add(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *b)
{
    return checked(ctx, binary(ctx, LLM_OP_ADD, a, b));
}

struct llm_tensor *llm_mul(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *b)
{
    return checked(ctx, binary(ctx, LLM_OP_MUL, a, b));
}

struct llm_tensor *llm_scale(struct llm_ctx *ctx, struct llm_tensor *a, float s)
{
    struct llm_tensor *t = new_op(ctx, LLM_OP_SCALE, LLM_TYPE_F32, a->ne, a, NULL, NULL, NULL);
    llm_set_op_f32(t, 0, s);
    return checked(ctx, t);
}

struct llm_tensor *llm_rms_norm(struct llm_ctx *ctx, struct llm_tensor *a, float eps)
{
    struct llm_tensor *t = new_op(ctx, LLM_OP_RMS_NORM, LLM_TYPE_F32, a->ne, a, NULL, NULL, NULL);
    llm_set_op_f32(t, 0, eps);
    return checked(ctx, t);
}

struct llm_tensor *llm_mul_mat(struct llm_ctx *ctx, struct llm_tensor *w, struct llm_tensor *x)
{
    const int64_t ne[4] = { w->ne[1], x->ne[1], x->ne[2], x->ne[3] };
    return checked(ctx, new_op(ctx, LLM_OP_MUL_MAT, LLM_TYPE_F32, ne, w, x, NULL, NULL));
}

struct llm_tensor *llm_mul_mat_swiglu(struct llm_ctx *ctx, struct llm_tensor *w_gate, struct llm_tensor *w_up,
                                      struct llm_tensor *x)
{
    const int64_t ne[4] = { w_gate->ne[1], x->ne[1], x->ne[2], x->ne[3] };
    return checked(ctx, new_op(ctx, LLM_OP_MUL_MAT_SWIGLU, LLM_TYPE_F32, ne, w_gate, x, w_up, NULL));
}

struct llm_tensor *llm_rope(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *pos,
                            struct llm_tensor *freq_factors, int n_dims, int mode, int n_ctx_orig,
                            float freq_base, float freq_scale)
{
    struct llm_tensor *t = new_op(ctx, LLM_OP_ROPE, LLM_TYPE_F32, a->ne, a, pos, freq_factors, NULL);
    t->op_params[1] = n_dims;
    t->op_params[2] = mode;
    t->op_params[3] = 0;
    t->op_params[4] = n_ctx_orig;
    llm_set_op_f32(t, 5, freq_base);
    llm_set_op_f32(t, 6, freq_scale);
    llm_set_op_f32(t, 7, 0.0f);  /* ext_factor: no YaRN */
    llm_set_op_f32(t, 8, 1.0f);  /* attn_factor */
    llm_set_op_f32(t, 9, 32.0f); /* beta_fast */
    llm_set_op_f32(t, 10, 1.0f); /* beta_slow */
    return checked(ctx, t);
}

struct llm_tensor *llm_soft_max(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *mask,
                                float scale)
{
    struct llm_tensor *t = new_op(ctx, LLM_OP_SOFT_MAX, LLM_TYPE_F32, a->ne, a, mask, NULL, NULL);
    llm_set_op_f32(t, 0, scale);
    return checked(ctx, t);
}

struct llm_tensor *llm_flash_attn(struct llm_ctx *ctx, struct llm_tensor *q, struct llm_tensor *k,
                                  struct llm_tensor *v, struct llm_tensor *mask, float scale)
{
    const int64_t ne[4] = { v->ne[0], q->ne[2], q->ne[1], 1 };
    struct llm_tensor *t = new_op(ctx, LLM_OP_FLASH_ATTN, LLM_TYPE_F32, ne, q, k, v, mask);
    llm_set_op_f32(t, 0, scale);
    return checked(ctx, t);
}

struct llm_tensor *llm_swiglu(struct llm_ctx *ctx, struct llm_tensor *gate, struct llm_tensor *up)
{
    return checked(ctx, binary(ctx, LLM_OP_SWIGLU, gate, up));
}

struct llm_tensor *llm_silu(struct llm_ctx *ctx, struct llm_tensor *a)
{
    return checked(ctx, new_op(ctx, LLM_OP_SILU, LLM_TYPE_F32, a->ne, a, NULL, NULL, NULL));
}

struct llm_tensor *llm_cpy(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *dst)
{
    struct llm_tensor *t = new_view(ctx, LLM_OP_CPY, dst, dst->ne, dst->nb, 0);
    t->src[0] = a;
    t->src[1] = dst;
    return checked(ctx, t);
}

struct llm_tensor *llm_cont(struct llm_ctx *ctx, struct llm_tensor *a)
{
    return checked(ctx, new_op(ctx, LLM_OP_CONT, a->type, a->ne, a, NULL, NULL, NULL));
}

bool llm_pad_rows(struct llm_tensor *t, int64_t multiple)
{
    const int64_t padded = (t->ne[0] + multiple - 1) / multiple * multiple;
    if (padded == t->ne[0] || llm_type_info(t->type)->blck_size != 1)
        return false;
    t->nb[1] = llm_row_size(t->type, padded);
    for (int d = 2; d < LLM_MAX_DIMS; d++)
        t->nb[d] = t->nb[d - 1] * (size_t)t->ne[d - 1];
    return true;
}

struct llm_tensor *llm_channel_norm(struct llm_ctx *ctx, struct llm_tensor *a, int64_t pad_to)
{
    struct llm_tensor *t = new_op(ctx, LLM_OP_CHANNEL_NORM, a->type, a->ne, a, NULL, NULL, NULL);
    if (pad_to > 0)
        llm_pad_rows(t, pad_to);
    t->op_params[0] = pad_to > 0;
    return checked(ctx, t);
}

struct llm_tensor *llm_view_root(struct llm_tensor *t)
{
    return t->view_src ? t->view_src : t;
}

/* ---- graph ordering ------------------------------------------------------------------------ */

/* Open-addressing set of visited tensors. */
struct visit_set {
    const struct llm_tensor **slots;
    size_t cap; /* power of two */
};

static bool set_insert(struct visit_set *s, const struct llm_tensor *t)
{
    size_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull;
    for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == t)
            return false;
        if (!s->slots[i]) {
            s->slots[i] = t;
            return true;
        }
    }
}

/* Iterative post-order visit (graphs can be deep: thousands of nodes). */
static bool visit(struct llm_graph *g, struct visit_set *seen, struct llm_tensor *root,
                  struct llm_tensor **stack, int *child_idx)
{
    int sp = 0;
    if (!set_insert(seen, root))
        return true;
    stack[sp] = root;
    child_idx[sp] = 0;
    sp++;
    while (sp > 0) {
        struct llm_tensor *t = stack[sp - 1];
        int *ci = &child_idx[sp - 1];
        struct llm_tensor *next = NULL;
        while (*ci < LLM_MAX_SRC + 1 && !next) {
            /* view_src is visited too so the memory owner precedes its views */
            struct llm_tensor *c = *ci < LLM_MAX_SRC ? t->src[*ci] : t->view_src;
            (*ci)++;
            if (c && set_insert(seen, c))
                next = c;
        }
        if (next) {
            if (g->n_nodes + g->n_leafs + sp >= g->cap)
                return false;
            stack[sp] = next;
            child_idx[sp] = 0;
            sp++;
            continue;
        }
        sp--;
        if (t->op == LLM_OP_NONE)
            g->leafs[g->n_leafs++] = t;
        else
            g->nodes[g->n_nodes++] = t;
    }
    return true;
}

struct llm_graph *llm_graph_build(struct llm_tensor **outputs, int n_outputs)
{
    /* An upper bound on reachable tensors is not known up front: grow and retry. */
    for (int cap = 4096;; cap *= 2) {
        struct llm_graph *g = calloc(1, sizeof *g);
        struct visit_set seen = { .cap = (size_t)cap * 2 };
        seen.slots = calloc(seen.cap, sizeof *seen.slots);
        struct llm_tensor **stack = malloc((size_t)cap * sizeof *stack);
        int *child_idx = malloc((size_t)cap * sizeof *child_idx);
        if (g) {
            g->cap = cap;
            g->nodes = malloc((size_t)cap * sizeof *g->nodes);
            g->leafs = malloc((size_t)cap * sizeof *g->leafs);
        }
        bool ok = g && seen.slots && stack && child_idx && g->nodes && g->leafs;
        bool fits = ok;
        for (int i = 0; fits && i < n_outputs; i++) {
            outputs[i]->flags |= LLM_TENSOR_OUTPUT;
            fits = visit(g, &seen, outputs[i], stack, child_idx);
        }
        free(seen.slots);
        free(stack);
        free(child_idx);
        if (ok && fits)
            return g;
        llm_graph_free(g);
        if (!ok || cap > (1 << 24))
            return NULL;
    }
}

void llm_graph_free(struct llm_graph *g)
{
    if (!g)
        return;
    free(g->nodes);
    free(g->leafs);
    llm_ctx_free(g->pass_ctx);
    free(g);
}
