#include "fusion.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/cpu.h"

/* How many nodes (as a source or as a view's memory) read each tensor: open addressing on the
 * tensor's address, sized for every node and leaf of the graph. */
struct readers {
    const struct llm_tensor **key;
    int *n;
    size_t cap; /* power of two */
};

static size_t slot_of(const struct readers *r, const struct llm_tensor *t)
{
    size_t i = (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull) & (r->cap - 1);
    while (r->key[i] && r->key[i] != t)
        i = (i + 1) & (r->cap - 1);
    return i;
}

static void count_reader(struct readers *r, const struct llm_tensor *t)
{
    size_t i = slot_of(r, t);
    r->key[i] = t;
    r->n[i]++;
}

static int readers_of(const struct readers *r, const struct llm_tensor *t)
{
    size_t i = slot_of(r, t);
    return r->key[i] ? r->n[i] : 0;
}

static bool readers_count(struct readers *r, const struct llm_graph *g)
{
    r->cap = 16;
    while (r->cap < 2 * ((size_t)g->n_nodes + (size_t)g->n_leafs))
        r->cap *= 2;
    r->key = calloc(r->cap, sizeof *r->key);
    r->n = calloc(r->cap, sizeof *r->n);
    if (!r->key || !r->n)
        return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct llm_tensor *t = g->nodes[i];
        for (int j = 0; j < LLM_MAX_SRC; j++)
            if (t->src[j])
                count_reader(r, t->src[j]);
        if (t->view_src && t->view_src != t->src[0])
            count_reader(r, t->view_src);
    }
    return true;
}

/* p, the computing node before n, feeds n alone and is not kept for the host: n may absorb it. */
static bool sole_reader(const struct readers *r, const struct llm_tensor *p, enum llm_op op)
{
    return p && p->op == op && readers_of(r, p) == 1 && !(p->flags & LLM_TENSOR_OUTPUT);
}

/* Make n the fused node f when the cpu kernels run it, absorbing p (which keeps its memory). */
static bool fuse(struct llm_tensor *n, const struct llm_tensor *f, struct llm_tensor *p)
{
    if (!llm_cpu_supports(f))
        return false;
    *n = *f;
    p->op = LLM_OP_FUSED;
    memset(p->src, 0, sizeof p->src);
    return true;
}

/* n as op with sources s0..s3 and p's op params (the absorbed node's eps, say). */
static struct llm_tensor fused_node(const struct llm_tensor *n, enum llm_op op, const struct llm_tensor *params,
                                    struct llm_tensor *s0, struct llm_tensor *s1, struct llm_tensor *s2,
                                    struct llm_tensor *s3)
{
    struct llm_tensor f = *n;
    f.op = op;
    memcpy(f.op_params, params->op_params, sizeof f.op_params);
    f.src[0] = s0;
    f.src[1] = s1;
    f.src[2] = s2;
    f.src[3] = s3;
    return f;
}

/* ADD(MUL_MAT(w, x), bias weight) -> MUL_MAT_ADD(w, x, bias). */
static bool fuse_mul_mat_add(const struct readers *r, struct llm_tensor *n, struct llm_tensor *p)
{
    struct llm_tensor *b = n->src[1];
    if (n->op != LLM_OP_ADD || n->src[0] != p || !sole_reader(r, p, LLM_OP_MUL_MAT) || b->op != LLM_OP_NONE ||
        !(b->flags & LLM_TENSOR_WEIGHT))
        return false;
    const struct llm_tensor f = fused_node(n, LLM_OP_MUL_MAT_ADD, n, p->src[0], p->src[1], b, NULL);
    return fuse(n, &f, p);
}

/* MUL(RMS_NORM(x), w) -> RMS_NORM_MUL(x, w). */
static bool fuse_rms_norm_mul(const struct readers *r, struct llm_tensor *n, struct llm_tensor *p)
{
    if (n->op != LLM_OP_MUL || n->src[0] != p || n->src[1] == p || !sole_reader(r, p, LLM_OP_RMS_NORM))
        return false;
    const struct llm_tensor f = fused_node(n, LLM_OP_RMS_NORM_MUL, p, p->src[0], n->src[1], NULL, NULL);
    return fuse(n, &f, p);
}

/* RMS_NORM(ADD(a, b)) or RMS_NORM_MUL(ADD(a, b), w) -> ADD_RMS_NORM(a, b, sum, w): the sum may have
 * other readers (the residual stream), so it stays in memory, written by the fused node. Not where
 * the add broadcasts (upstream's rule): the fused kernel's supports refuses a and b of two shapes. */
static bool fuse_add_rms_norm(struct llm_tensor *n, struct llm_tensor *p)
{
    if ((n->op != LLM_OP_RMS_NORM && n->op != LLM_OP_RMS_NORM_MUL) || !p || p->op != LLM_OP_ADD || n->src[0] != p ||
        (n->op == LLM_OP_RMS_NORM_MUL && n->src[1] == p))
        return false;
    struct llm_tensor *w = n->op == LLM_OP_RMS_NORM_MUL ? n->src[1] : NULL;
    const struct llm_tensor f = fused_node(n, LLM_OP_ADD_RMS_NORM, n, p->src[0], p->src[1], p, w);
    return fuse(n, &f, p);
}

enum rule { RULE_MUL_MAT_ADD, RULE_RMS_NORM_MUL, RULE_ADD_RMS_NORM, RULE_COUNT };

static bool apply(enum rule rule, const struct readers *r, struct llm_tensor *n, struct llm_tensor *p,
                  struct npu_fusion_counts *counts)
{
    switch (rule) {
    case RULE_MUL_MAT_ADD: return fuse_mul_mat_add(r, n, p) && ++counts->mul_mat_add;
    case RULE_RMS_NORM_MUL: return fuse_rms_norm_mul(r, n, p) && ++counts->rms_norm_mul;
    case RULE_ADD_RMS_NORM: return fuse_add_rms_norm(n, p) && ++counts->add_rms_norm;
    case RULE_COUNT: break;
    }
    return false;
}

int npu_fuse(struct llm_graph *g, int first, int end, struct npu_fusion_counts *counts)
{
    struct readers r = { 0 };
    int absorbed = -1;
    if (readers_count(&r, g)) {
        absorbed = 0;
        /* one pass per rule, in this order, so a norm's weight is fused before its residual add; p
         * is the computing node before i (absorbed nodes compute nothing: the next rule skips them) */
        for (int rule = 0; rule < RULE_COUNT; rule++) {
            struct llm_tensor *p = NULL;
            for (int i = first; i < end; i++) {
                struct llm_tensor *n = g->nodes[i];
                if (llm_op_is_noop(n->op))
                    continue;
                absorbed += p && apply((enum rule)rule, &r, n, p, counts);
                p = n;
            }
        }
    }
    free(r.key);
    free(r.n);
    return absorbed;
}
