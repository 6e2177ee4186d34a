#include "layout.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum npu_layout npu_layout_rule(const struct llm_tensor *node)
{
    switch (node->op) {
    case LLM_OP_MUL_MAT: case LLM_OP_MUL_MAT_ADD: case LLM_OP_RMS_NORM: case LLM_OP_RMS_NORM_MUL:
    case LLM_OP_ADD_RMS_NORM: case LLM_OP_SOFT_MAX: case LLM_OP_FLASH_ATTN: case LLM_OP_CONT: case LLM_OP_SET_ROWS:
        return NPU_LAYOUT_ALIGN;
    case LLM_OP_RESHAPE:
        return NPU_LAYOUT_NALIGN;
    case LLM_OP_NONE: case LLM_OP_GET_ROWS: case LLM_OP_ADD: case LLM_OP_MUL: case LLM_OP_SCALE: case LLM_OP_ROPE:
    case LLM_OP_ROPE_QK:
    case LLM_OP_SWIGLU: case LLM_OP_SILU: case LLM_OP_CPY: case LLM_OP_VIEW: case LLM_OP_PERMUTE: case LLM_OP_TRANSPOSE:
    case LLM_OP_CHANNEL_NORM: case LLM_OP_FUSED: case LLM_OP_COUNT:
        return NPU_LAYOUT_BOTH;
    }
    return NPU_LAYOUT_BOTH;
}

bool npu_layout_reads_aligned(const struct llm_tensor *node, int j)
{
    switch (node->op) {
    case LLM_OP_MUL_MAT: case LLM_OP_MUL_MAT_ADD: case LLM_OP_ADD_RMS_NORM:
        return j <= 1;
    case LLM_OP_RMS_NORM: case LLM_OP_RMS_NORM_MUL: case LLM_OP_SOFT_MAX:
        return j == 0;
    case LLM_OP_NONE: case LLM_OP_GET_ROWS: case LLM_OP_SET_ROWS: case LLM_OP_ADD: case LLM_OP_MUL: case LLM_OP_SCALE:
    case LLM_OP_ROPE: case LLM_OP_FLASH_ATTN: case LLM_OP_SWIGLU: case LLM_OP_SILU: case LLM_OP_CPY: case LLM_OP_CONT:
    case LLM_OP_VIEW: case LLM_OP_RESHAPE: case LLM_OP_PERMUTE: case LLM_OP_TRANSPOSE: case LLM_OP_CHANNEL_NORM:
    case LLM_OP_FUSED: case LLM_OP_ROPE_QK: case LLM_OP_COUNT:
        return false;
    }
    return false;
}

bool npu_layout_rows_aligned(const struct llm_tensor *t)
{
    return llm_type_info(t->type)->blck_size > 1 || llm_nrows(t) <= 1 || t->nb[0] != llm_row_size(t->type, 1) ||
           t->nb[1] % llm_row_size(t->type, NPU_ALIGN_ELEMS) == 0;
}

static int rank_of(const struct llm_tensor *t)
{
    int r = 1;
    for (int d = 1; d < LLM_MAX_DIMS; d++)
        if (t->ne[d] > 1)
            r = d + 1;
    return r;
}

/* Every tensor of g by address: its position (leaves: -1) and which CHANNEL_NORMs it already
 * feeds (bit m: into mode m; its node, when inserting). Open addressing. */
struct index {
    const struct llm_tensor **key;
    int *pos;
    unsigned *done;
    struct llm_tensor **conv; /* 2 per slot: the CHANNEL_NORM into ALIGN, into NALIGN */
    size_t cap;
    size_t *probes;           /* the report's count of slots looked at */
};

static size_t slot(const struct index *ix, const struct llm_tensor *t)
{
    size_t i = (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull) & (ix->cap - 1);
    ++*ix->probes;
    while (ix->key[i] && ix->key[i] != t) {
        i = (i + 1) & (ix->cap - 1);
        ++*ix->probes;
    }
    return i;
}

static int pos_of(const struct index *ix, const struct llm_tensor *t)
{
    size_t i = slot(ix, t);
    return ix->key[i] ? ix->pos[i] : -1;
}

static void index_add(struct index *ix, const struct llm_tensor *t, int pos)
{
    size_t s = slot(ix, t);
    ix->key[s] = t;
    ix->pos[s] = pos;
}

static bool index_build(struct index *ix, const struct llm_graph *g)
{
    ix->cap = 16;
    while (ix->cap < 2 * ((size_t)g->n_nodes + (size_t)g->n_leafs))
        ix->cap *= 2;
    ix->key = calloc(ix->cap, sizeof *ix->key);
    ix->pos = malloc(ix->cap * sizeof *ix->pos);
    ix->done = calloc(ix->cap, sizeof *ix->done);
    ix->conv = calloc(2 * ix->cap, sizeof *ix->conv);
    if (!ix->key || !ix->pos || !ix->done || !ix->conv)
        return false;
    for (int i = 0; i < g->n_leafs; i++)
        index_add(ix, g->leafs[i], -1);
    for (int i = 0; i < g->n_nodes; i++)
        index_add(ix, g->nodes[i], i);
    return true;
}

static void index_free(struct index *ix)
{
    free(ix->key);
    free(ix->pos);
    free(ix->done);
    free(ix->conv);
}
/* The mode a source gives its reader: a node's resolved mode, an input's NALIGN, or none (BOTH:
 * weights and caches take the layout their reader wants). */
static enum npu_layout source_mode(const struct index *ix, const enum npu_layout *modes, const struct llm_tensor *s)
{
    const int p = pos_of(ix, s);
    if (p >= 0)
        return modes[p];
    return s->flags & LLM_TENSOR_INPUT ? NPU_LAYOUT_NALIGN : NPU_LAYOUT_BOTH;
}

/* A BOTH node's mode: its full-size input's for a broadcasting ADD/MUL, else its first parent's in
 * topological order (leaves first), NALIGN when no parent fixes one. */
static enum npu_layout follow(const struct index *ix, const enum npu_layout *modes, const struct llm_tensor *n)
{
    const bool bcast = (n->op == LLM_OP_ADD || n->op == LLM_OP_MUL) && n->src[1] &&
                       memcmp(n->src[0]->ne, n->src[1]->ne, sizeof n->ne) != 0;
    if (bcast && source_mode(ix, modes, n->src[0]) != NPU_LAYOUT_BOTH)
        return source_mode(ix, modes, n->src[0]);
    enum npu_layout m = NPU_LAYOUT_NALIGN;
    int first = INT32_MAX;
    for (int j = 0; j < LLM_MAX_SRC; j++) {
        const struct llm_tensor *s = n->src[j];
        if (!s || source_mode(ix, modes, s) == NPU_LAYOUT_BOTH)
            continue;
        const int p = pos_of(ix, s);
        if (p < first) {
            first = p;
            m = source_mode(ix, modes, s);
        }
    }
    return m;
}

/* Bytes t would gain with rows padded to NPU_ALIGN_ELEMS elements (quantized rows, whole blocks of
 * 32 or 256, never need it). */
static size_t padding(const struct llm_tensor *t)
{
    const int64_t padded = (t->ne[0] + NPU_ALIGN_ELEMS - 1) / NPU_ALIGN_ELEMS * NPU_ALIGN_ELEMS;
    if (padded == t->ne[0] || llm_type_info(t->type)->blck_size > 1)
        return 0;
    return (llm_row_size(t->type, padded) - llm_row_size(t->type, t->ne[0])) * (size_t)llm_nrows(t);
}

/* The mode node i gets from its op, its flags, its rank and (BOTH) its parents; views keep their
 * source's (a layout cannot change under a view of the same memory). naive: BOTH is NALIGN. */
static enum npu_layout resolve(const struct index *ix, const enum npu_layout *modes, const struct llm_tensor *n,
                               bool naive)
{
    const enum npu_layout m = npu_layout_rule(n);
    if (m != NPU_LAYOUT_BOTH)
        return m;
    if (n->flags & LLM_TENSOR_OUTPUT || naive)
        return NPU_LAYOUT_NALIGN;
    if (llm_op_is_noop(n->op) && n->src[0] && source_mode(ix, modes, n->src[0]) != NPU_LAYOUT_BOTH)
        return source_mode(ix, modes, n->src[0]);
    return rank_of(n) % 2 ? NPU_LAYOUT_NALIGN : follow(ix, modes, n);
}

/* The CHANNEL_NORM that gives s's data in mode m (one per source and mode), made on first use. */
static struct llm_tensor *conversion(struct index *ix, struct llm_ctx *ctx, struct llm_tensor *s, enum npu_layout m)
{
    const size_t k = slot(ix, s);
    struct llm_tensor **c = &ix->conv[2 * k + (m == NPU_LAYOUT_ALIGN ? 0 : 1)];
    if (!*c)
        *c = llm_channel_norm(ctx, s, m == NPU_LAYOUT_ALIGN ? NPU_ALIGN_ELEMS : 0);
    return *c;
}

/* Count (and with ctx make) the conversions node n's sources need; naive counts edges apart. */
static void convert_sources(struct index *ix, struct llm_ctx *ctx, const enum npu_layout *modes, struct llm_tensor *n,
                            enum npu_layout m, struct npu_layout_report *r)
{
    for (int j = 0; j < LLM_MAX_SRC; j++) {
        struct llm_tensor *s = n->src[j];
        const enum npu_layout ms = s ? source_mode(ix, modes, s) : NPU_LAYOUT_BOTH;
        if (ms == NPU_LAYOUT_BOTH || ms == m)
            continue;
        const size_t k = slot(ix, s);
        const unsigned bit = 1u << m;
        if (!(ix->done[k] & bit)) {
            ix->done[k] |= bit;
            r->inserted++;
        }
        if (ctx)
            n->src[j] = conversion(ix, ctx, s, m);
    }
}

/* The node list with each CHANNEL_NORM right after its producer (the inputs' first). */
static struct llm_tensor **with_conversions(const struct index *ix, const struct llm_graph *g, int n_extra)
{
    struct llm_tensor **nodes = malloc(((size_t)g->n_nodes + (size_t)n_extra) * sizeof *nodes);
    int n = 0;
    if (!nodes)
        return NULL;
    for (int i = -1; i < g->n_nodes; i++) {
        if (i >= 0)
            nodes[n++] = g->nodes[i];
        for (int l = 0; l < (i < 0 ? g->n_leafs : 1); l++) {
            const struct llm_tensor *t = i < 0 ? g->leafs[l] : g->nodes[i];
            const size_t k = slot(ix, t);
            for (int c = 0; c < 2; c++)
                if (ix->conv[2 * k + (size_t)c])
                    nodes[n++] = ix->conv[2 * k + (size_t)c];
        }
    }
    return nodes;
}

/* What the weights an ALIGN node reads gain, each counted once (they are uploaded padded). */
static size_t padded_weights(struct index *ix, const struct llm_tensor *n)
{
    size_t bytes = 0;
    for (int j = 0; j < LLM_MAX_SRC; j++) {
        const struct llm_tensor *w = n->src[j];
        if (!w || !(w->flags & LLM_TENSOR_WEIGHT) || ix->done[slot(ix, w)] & 4u)
            continue;
        ix->done[slot(ix, w)] |= 4u;
        bytes += padding(w);
    }
    return bytes;
}

int npu_layout_align(struct llm_graph *g, struct llm_ctx *ctx, enum npu_layout *modes, struct npu_layout_report *r)
{
    *r = (struct npu_layout_report){ 0 };
    struct index ix = { .probes = &r->probes };
    enum npu_layout *naive = malloc(((size_t)g->n_nodes + 1) * sizeof *naive);
    if (!naive || !index_build(&ix, g)) {
        free(naive);
        index_free(&ix);
        return -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *n = g->nodes[i];
        modes[i] = resolve(&ix, modes, n, false);
        naive[i] = resolve(&ix, naive, n, true);
        for (int j = 0; j < LLM_MAX_SRC; j++) /* naive: one CHANNEL_NORM per conflicting edge */
            r->naive += n->src[j] && source_mode(&ix, naive, n->src[j]) != NPU_LAYOUT_BOTH &&
                        source_mode(&ix, naive, n->src[j]) != naive[i];
        convert_sources(&ix, ctx, modes, n, modes[i], r);
        if (n->flags & LLM_TENSOR_OUTPUT && modes[i] == NPU_LAYOUT_ALIGN) { /* the host reads rows dense */
            r->inserted++;
            r->naive++;
            if (ctx) {
                n->flags &= ~(uint32_t)LLM_TENSOR_OUTPUT;
                conversion(&ix, ctx, n, NPU_LAYOUT_NALIGN)->flags |= LLM_TENSOR_OUTPUT;
            }
        }
        if (modes[i] == NPU_LAYOUT_ALIGN && !llm_op_is_noop(n->op))
            r->padding_bytes += padding(n) + padded_weights(&ix, n);
    }
    int rc = 0;
    if (ctx && r->inserted) {
        struct llm_tensor **nodes = with_conversions(&ix, g, r->inserted);
        if (nodes) {
            free(g->nodes);
            g->nodes = nodes;
            g->n_nodes += r->inserted;
        }
        rc = nodes ? 0 : -1;
    }
    free(naive);
    index_free(&ix);
    return rc;
}
