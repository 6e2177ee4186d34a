#include "fusion.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu.h"

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

/* An empty table with room for n tensors. */
static bool readers_init(struct readers *r, size_t n)
{
    r->cap = 16;
    while (r->cap < 2 * n)
        r->cap *= 2;
    r->key = calloc(r->cap, sizeof *r->key);
    r->n = calloc(r->cap, sizeof *r->n);
    return r->key && r->n;
}

static bool readers_count(struct readers *r, const struct llm_graph *g)
{
    if (!readers_init(r, (size_t)g->n_nodes + (size_t)g->n_leafs))
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

/* ---- ROPE(q) and ROPE(k) -> ROPE_QK ------------------------------------------------------------
 * The two ROPEs of a layer are not neighbours: between them run the other one's matmul, or the K
 * store into the cache. The fused node must run after both inputs exist and before anything reads
 * the first ROPE's result, so the nodes between are put in that order: those that do not depend on
 * the first ROPE (untainted) first, then the first ROPE (absorbed, its memory kept), the fused node,
 * and the ones that do (tainted). A node is tainted when it reads a tainted node (as a source or as
 * the memory it views) or memory a tainted node wrote into (a SET_ROWS into the cache). Moving an
 * untainted node that writes into another tensor's memory could reorder that write, so such a node
 * between the two refuses the fusion, as does a second ROPE that is itself tainted. */

static bool writes_elsewhere(const struct llm_tensor *t)
{
    return !llm_op_is_noop(t->op) && t->view_src;
}

/* Does t read a tensor of the set (tainted nodes, and the memory tainted nodes wrote into)? */
static bool reads_tainted(const struct readers *set, const struct llm_tensor *t)
{
    for (int j = 0; j < LLM_MAX_SRC; j++)
        if (t->src[j] && (readers_of(set, t->src[j]) || readers_of(set, llm_view_root(t->src[j]))))
            return true;
    return t->view_src && readers_of(set, t->view_src);
}

/* Same positions and parameters, no freq factors (no source slot left for them). */
static bool rope_pairs(const struct llm_tensor *a, const struct llm_tensor *b)
{
    return a->op == LLM_OP_ROPE && b->op == LLM_OP_ROPE && !a->src[2] && !b->src[2] && a->src[1] == b->src[1] &&
           memcmp(a->op_params, b->op_params, sizeof a->op_params) == 0;
}

/* Fuse the ROPEs at e and l (e < l) as above; false (g unchanged) when the rules refuse or out of
 * memory. order: room for l - e + 1 nodes. */
static bool fuse_rope_qk(struct llm_graph *g, int e, int l, struct llm_tensor **order)
{
    struct llm_tensor *first = g->nodes[e], *last = g->nodes[l];
    struct readers set = { 0 };
    bool ok = readers_init(&set, 2 * (size_t)(l - e) + 2);
    int n_u = 0, n_t = 0;
    if (ok)
        count_reader(&set, first);
    for (int i = e + 1; ok && i < l; i++) {
        struct llm_tensor *n = g->nodes[i];
        if (!reads_tainted(&set, n)) {
            ok = !writes_elsewhere(n);
            order[n_u++] = n;
            continue;
        }
        count_reader(&set, n);
        if (writes_elsewhere(n))
            count_reader(&set, llm_view_root(n));
        order[(l - e) - ++n_t] = n; /* from the back, reversed below */
    }
    const struct llm_tensor f = fused_node(last, LLM_OP_ROPE_QK, last, last->src[0], last->src[1], first->src[0], first);
    ok = ok && !reads_tainted(&set, last) && fuse(last, &f, first);
    if (ok) { /* untainted, the absorbed first ROPE, the fused node, tainted in their order */
        int at = e;
        for (int i = 0; i < n_u; i++)
            g->nodes[at++] = order[i];
        g->nodes[at++] = first;
        g->nodes[at++] = last;
        for (int i = 0; i < n_t; i++)
            g->nodes[at++] = order[(l - e) - 1 - i];
    }
    free(set.key);
    free(set.n);
    return ok;
}

/* Pair each ROPE with the latest unpaired ROPE of the same positions and parameters before it in
 * the split; each pair's span is walked once, so the rule is linear in the split. */
static int fuse_ropes(struct llm_graph *g, int first, int end, struct npu_fusion_counts *counts)
{
    struct llm_tensor **order = malloc(((size_t)(end - first) + 1) * sizeof *order);
    int pending = -1, absorbed = 0;
    if (!order)
        return 0;
    for (int i = first; i < end; i++) {
        if (g->nodes[i]->op != LLM_OP_ROPE)
            continue;
        if (pending >= 0 && rope_pairs(g->nodes[pending], g->nodes[i]) && fuse_rope_qk(g, pending, i, order)) {
            absorbed++;
            counts->rope_qk++;
            pending = -1;
        } else {
            pending = i;
        }
    }
    free(order);
    return absorbed;
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
        absorbed += fuse_ropes(g, first, end, counts); /* last: it moves nodes */
    }
    free(r.key);
    free(r.n);
    return absorbed;
}
