#include "layout.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum npu_layout npu_layout_rule(const struct llm_tensor *node)
{
    switch (node->op) {
    case LLM_OP_MUL_MAT: case LLM_OP_MUL_MAT_ADD: case LLM_OP_MUL_MAT_SWIGLU: case LLM_OP_RMS_NORM:
    case LLM_OP_RMS_NORM_MUL: case LLM_OP_ADD_RMS_NORM: case LLM_OP_SOFT_MAX: case LLM_OP_CONT: case LLM_OP_SET_ROWS:
        return NPU_LAYOUT_ALIGN;
    case LLM_OP_RESHAPE: case LLM_OP_FLASH_ATTN: /* its K and V are ALIGN operands (operand_mode) */
        return NPU_LAYOUT_NALIGN;
    case LLM_OP_NONE: case LLM_OP_GET_ROWS: case LLM_OP_ADD: case LLM_OP_MUL: case LLM_OP_SCALE: case LLM_OP_ROPE:
    case LLM_OP_ROPE_QK:
    case LLM_OP_SWIGLU: case LLM_OP_SILU: case LLM_OP_CPY: case LLM_OP_VIEW: case LLM_OP_PERMUTE: case LLM_OP_TRANSPOSE:
    case LLM_OP_FUSED: case LLM_OP_COUNT:
        return NPU_LAYOUT_BOTH;
    case LLM_OP_CHANNEL_NORM: /* a pad makes ALIGN rows, an unpad dense ones */
        return node->op_params[0] ? NPU_LAYOUT_ALIGN : NPU_LAYOUT_NALIGN;
    }
    return NPU_LAYOUT_BOTH;
}

bool npu_layout_reads_aligned(const struct llm_tensor *node, int j)
{
    switch (node->op) {
    case LLM_OP_MUL_MAT: case LLM_OP_MUL_MAT_ADD: case LLM_OP_ADD_RMS_NORM:
        return j <= 1;
    case LLM_OP_MUL_MAT_SWIGLU: /* both weights and the activations */
        return j <= 2;
    case LLM_OP_RMS_NORM: case LLM_OP_RMS_NORM_MUL: case LLM_OP_SOFT_MAX:
        return j == 0;
    case LLM_OP_SET_ROWS: /* the cache rows it writes */
        return j == 0;
    case LLM_OP_FLASH_ATTN: /* the cache rows it reads */
        return j == 1 || j == 2;
    case LLM_OP_NONE: case LLM_OP_GET_ROWS: case LLM_OP_ADD: case LLM_OP_MUL: case LLM_OP_SCALE:
    case LLM_OP_ROPE: case LLM_OP_SWIGLU: case LLM_OP_SILU: case LLM_OP_CPY: case LLM_OP_CONT:
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

/* The layout node n, of mode m, reads its source j in: ALIGN for an ALIGN node and for the operands
 * a NALIGN node's kernel reads ALIGN (FLASH_ATTN's K and V, npu_layout_reads_aligned), else m. */
static enum npu_layout operand_mode(const struct llm_tensor *n, int j, enum npu_layout m)
{
    return m == NPU_LAYOUT_ALIGN || npu_layout_reads_aligned(n, j) ? NPU_LAYOUT_ALIGN : m;
}

/* Do t's ALIGN and NALIGN layouts differ? Not when its rows already are a multiple of
 * NPU_ALIGN_ELEMS elements, it has a single row, or its rows are whole quantized blocks (a
 * CHANNEL_NORM there would copy the bytes as they are), nor for a transposed view, which has no
 * rows to pad (npu_layout_rows_aligned): no conflict needs a CHANNEL_NORM there. */
static bool layouts_differ(const struct llm_tensor *t)
{
    return llm_type_info(t->type)->blck_size == 1 && llm_nrows(t) > 1 && t->ne[0] % NPU_ALIGN_ELEMS != 0 &&
           t->nb[0] == llm_row_size(t->type, 1);
}

/* Source j of n is where n writes, not what it reads (the KV store's cache, a fused node's second
 * result): its layout is that memory's, and no CHANNEL_NORM may stand in for it. */
static bool written_source(const struct llm_tensor *n, int j)
{
    return (n->op == LLM_OP_CPY && j == 1) || (n->op == LLM_OP_SET_ROWS && j == 0) ||
           (n->op == LLM_OP_ADD_RMS_NORM && j == 2) || (n->op == LLM_OP_ROPE_QK && j == 3);
}

/* Does n copy its source into its own strides (a CHANNEL_NORM; SET_ROWS and CPY into their
 * destination's), so that its read is the conversion, not a conflict? */
static bool converts(const struct llm_tensor *n)
{
    return n->op == LLM_OP_CHANNEL_NORM || n->op == LLM_OP_SET_ROWS || n->op == LLM_OP_CPY;
}

/* Marks per tensor in the index. */
enum {
    DENSE_READER = 1u << 0,   /* an ALIGN node read dense (a NALIGN node or view, the host, another split) */
    PAD_COUNTED = 1u << 1,    /* its pad into ALIGN counted                                    */
    WEIGHT_COUNTED = 1u << 2, /* its padding counted among the weights' */
};

/* Every tensor of g by address: its position in the split (leaves: -1, nodes of other splits: -2),
 * marks, and the tensor that holds its data in ALIGN rows once rewritten. Open addressing. */
struct index {
    const struct llm_tensor **key;
    int *pos;
    unsigned *marks;
    struct llm_tensor **aligned;
    size_t cap;
    int backend;    /* the split's: leaves in another backend's memory are copied in dense */
    size_t *probes; /* the report's count of slots looked at */
};

#define LEAF (-1)
#define OTHER_SPLIT (-2)

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
    return ix->key[i] ? ix->pos[i] : LEAF;
}

static void index_add(struct index *ix, const struct llm_tensor *t, int pos)
{
    size_t s = slot(ix, t);
    ix->key[s] = t;
    ix->pos[s] = pos;
}

static bool index_build(struct index *ix, const struct llm_graph *g, int first, int end)
{
    ix->cap = 16;
    while (ix->cap < 2 * ((size_t)g->n_nodes + (size_t)g->n_leafs))
        ix->cap *= 2;
    ix->key = calloc(ix->cap, sizeof *ix->key);
    ix->pos = malloc(ix->cap * sizeof *ix->pos);
    ix->marks = calloc(ix->cap, sizeof *ix->marks);
    ix->aligned = calloc(ix->cap, sizeof *ix->aligned);
    if (!ix->key || !ix->pos || !ix->marks || !ix->aligned)
        return false;
    for (int i = 0; i < g->n_leafs; i++)
        index_add(ix, g->leafs[i], LEAF);
    for (int i = 0; i < g->n_nodes; i++)
        index_add(ix, g->nodes[i], i >= first && i < end ? i - first : OTHER_SPLIT);
    ix->backend = end > first ? g->nodes[first]->backend : 0;
    return true;
}

static void index_free(struct index *ix)
{
    free(ix->key);
    free(ix->pos);
    free(ix->marks);
    free(ix->aligned);
}

/* The mode a source gives its reader: a node's resolved mode; NALIGN for an input, another
 * split's node, a leaf in another backend's memory (dense, copied in as they are) or one whose
 * rows are not padded; none (BOTH) for the split's own leaves with padded rows (weights uploaded
 * padded), which serve either. */
static enum npu_layout source_mode(const struct index *ix, const enum npu_layout *modes, const struct llm_tensor *s)
{
    const int p = pos_of(ix, s);
    if (p >= 0)
        return modes[p];
    if (p == OTHER_SPLIT)
        return NPU_LAYOUT_NALIGN;
    return s->flags & LLM_TENSOR_INPUT || s->backend != ix->backend || !npu_layout_rows_aligned(s) ? NPU_LAYOUT_NALIGN
                                                                                                  : NPU_LAYOUT_BOTH;
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
        if (!s || written_source(n, j) || source_mode(ix, modes, s) == NPU_LAYOUT_BOTH)
            continue;
        const int p = pos_of(ix, s);
        if (p < first) {
            first = p;
            m = source_mode(ix, modes, s);
        }
    }
    return m;
}

/* The mode node n gets from its memory, its op, its flags, its rank and (BOTH) its parents.
 * naive: BOTH is NALIGN. */
static enum npu_layout resolve(const struct index *ix, const enum npu_layout *modes, const struct llm_tensor *n,
                               bool naive)
{
    if (n->op == LLM_OP_FUSED) /* the fusing node writes it with the strides it has: dense */
        return NPU_LAYOUT_NALIGN;
    if (n->view_src && !llm_op_is_noop(n->op)) /* SET_ROWS, CPY: their destination's rows (a cache's) */
        return npu_layout_rows_aligned(n) && layouts_differ(n) ? NPU_LAYOUT_ALIGN : NPU_LAYOUT_NALIGN;
    const enum npu_layout m = npu_layout_rule(n);
    if (m != NPU_LAYOUT_BOTH)
        return m;
    if (n->flags & LLM_TENSOR_OUTPUT || naive)
        return NPU_LAYOUT_NALIGN;
    if (llm_op_is_noop(n->op)) { /* a view of a weight or cache is theirs; of a node, built on dense strides */
        const struct llm_tensor *root = n->view_src ? n->view_src : n->src[0];
        return root && root->op == LLM_OP_NONE && source_mode(ix, modes, root) == NPU_LAYOUT_BOTH ? NPU_LAYOUT_BOTH
                                                                                                 : NPU_LAYOUT_NALIGN;
    }
    return rank_of(n) % 2 ? NPU_LAYOUT_NALIGN : follow(ix, modes, n);
}

/* Bytes t takes with rows padded to NPU_ALIGN_ELEMS elements, and what that adds to its dense size. */
static size_t padded_bytes(const struct llm_tensor *t)
{
    const int64_t padded = (t->ne[0] + NPU_ALIGN_ELEMS - 1) / NPU_ALIGN_ELEMS * NPU_ALIGN_ELEMS;
    return llm_row_size(t->type, padded) * (size_t)llm_nrows(t);
}

static size_t padding(const struct llm_tensor *t)
{
    return llm_type_info(t->type)->blck_size > 1 ? 0 : padded_bytes(t) - llm_row_size(t->type, t->ne[0]) * (size_t)llm_nrows(t);
}

/* What the weights an ALIGN node reads gain, each counted once (they are uploaded padded). */
static size_t padded_weights(struct index *ix, const struct llm_tensor *n)
{
    size_t bytes = 0;
    for (int j = 0; j < LLM_MAX_SRC; j++) {
        const struct llm_tensor *w = n->src[j];
        if (!w || !(w->flags & LLM_TENSOR_WEIGHT) || ix->marks[slot(ix, w)] & WEIGHT_COUNTED)
            continue;
        ix->marks[slot(ix, w)] |= WEIGHT_COUNTED;
        bytes += padding(w);
    }
    return bytes;
}

/* Pass 1: every node's mode (and the naive one), and which ALIGN nodes someone reads dense: a
 * NALIGN reader, the host, or a node of another split. */
static void resolve_all(struct index *ix, const struct llm_graph *g, int first, int end, enum npu_layout *modes,
                        enum npu_layout *naive, struct npu_layout_report *r)
{
    for (int i = first; i < end; i++) {
        const struct llm_tensor *n = g->nodes[i];
        enum npu_layout *m = &modes[i - first], *nm = &naive[i - first];
        *m = resolve(ix, modes, n, false);
        *nm = resolve(ix, naive, n, true);
        for (int j = 0; j < LLM_MAX_SRC; j++) {
            const struct llm_tensor *s = n->src[j];
            if (!s || written_source(n, j) || !layouts_differ(s) || converts(n))
                continue;
            const enum npu_layout ns = source_mode(ix, naive, s); /* naive: one CHANNEL_NORM per conflicting edge */
            r->naive += ns != NPU_LAYOUT_BOTH && ns != operand_mode(n, j, *nm);
            if (source_mode(ix, modes, s) == NPU_LAYOUT_ALIGN && operand_mode(n, j, *m) == NPU_LAYOUT_NALIGN &&
                pos_of(ix, s) >= 0)
                ix->marks[slot(ix, s)] |= DENSE_READER;
        }
        if (n->flags & LLM_TENSOR_OUTPUT && *m == NPU_LAYOUT_ALIGN && layouts_differ(n)) {
            r->naive++;
            ix->marks[slot(ix, n)] |= DENSE_READER;
        }
    }
    for (int i = end; i < g->n_nodes; i++) /* later splits read this one's results as they are */
        for (int j = 0; j < LLM_MAX_SRC; j++) {
            const struct llm_tensor *s = g->nodes[i]->src[j];
            const int p = s ? pos_of(ix, s) : LEAF;
            if (p >= 0 && modes[p] == NPU_LAYOUT_ALIGN && layouts_differ(s))
                ix->marks[slot(ix, s)] |= DENSE_READER;
        }
}

/* The tensors the pass adds live with g (g->pass_ctx), made on first use: at most one pad per
 * source and a padded twin per node, for every split. */
static struct llm_ctx *pass_ctx(struct llm_graph *g)
{
    if (!g->pass_ctx)
        g->pass_ctx = llm_ctx_new((LLM_MAX_SRC + 1) * g->n_nodes + 64);
    return g->pass_ctx;
}

/* The rewrite's state: the split's new node list and where the pass's tensors come from. */
struct rewrite {
    struct llm_graph *g; /* NULL: count only */
    struct llm_tensor **out;
    int n_out;
    bool failed;
};

static void emit(struct rewrite *w, struct llm_tensor *t)
{
    if (w->g)
        w->out[w->n_out++] = t;
}

/* A new tensor of the pass, on reader's backend; NULL (w->failed) when the pool is full. */
static struct llm_tensor *added(struct rewrite *w, struct llm_tensor *t, const struct llm_tensor *reader)
{
    if (llm_ctx_overflowed(w->g->pass_ctx)) {
        w->failed = true;
        return NULL;
    }
    t->backend = reader->backend;
    return t;
}

/* Source j of n, of mode ms, as n (of mode m) reads it: a pad (one per source, placed before its
 * first reader) from a NALIGN source into an ALIGN operand, the padded twin of an ALIGN node. */
static void convert_source(struct index *ix, struct rewrite *w, struct llm_tensor *n, int j, enum npu_layout m,
                           enum npu_layout ms, struct npu_layout_report *r)
{
    struct llm_tensor *s = n->src[j];
    if (operand_mode(n, j, m) != NPU_LAYOUT_ALIGN || !layouts_differ(s))
        return;
    const size_t k = slot(ix, s);
    if (ms == NPU_LAYOUT_NALIGN && !(ix->marks[k] & PAD_COUNTED)) {
        ix->marks[k] |= PAD_COUNTED;
        r->inserted++;
        r->padding_bytes += padded_bytes(s);
        if (w->g && (ix->aligned[k] = added(w, llm_channel_norm(pass_ctx(w->g), s, NPU_ALIGN_ELEMS), n)))
            emit(w, ix->aligned[k]);
    }
    if (w->g && ix->aligned[k])
        n->src[j] = ix->aligned[k];
}

/* n, an ALIGN node computing into memory of its own, keeps its result padded. Read dense by
 * someone, it becomes the unpad of a padded twin that computes (so the host, views, which were
 * built on dense strides, and other splits keep reading n itself); else it is padded in place. */
static void keep_padded(struct index *ix, struct rewrite *w, struct llm_tensor *n, struct npu_layout_report *r)
{
    const size_t k = slot(ix, n);
    if (!(ix->marks[k] & DENSE_READER)) {
        r->padding_bytes += padding(n);
        if (w->g)
            llm_pad_rows(n, NPU_ALIGN_ELEMS);
        emit(w, n);
        return;
    }
    r->inserted++;
    r->padding_bytes += padded_bytes(n);
    struct llm_tensor *twin = w->g ? added(w, llm_new_tensor_1d(pass_ctx(w->g), n->type, 1), n) : NULL;
    if (!twin) {
        emit(w, n);
        return;
    }
    *twin = *n;
    twin->flags &= ~(uint32_t)LLM_TENSOR_OUTPUT;
    twin->data = NULL;
    llm_pad_rows(twin, NPU_ALIGN_ELEMS);
    snprintf(twin->name, sizeof twin->name, "%.50s (ALIGN)", n->name);
    n->op = LLM_OP_CHANNEL_NORM;
    memset(n->src, 0, sizeof n->src);
    memset(n->op_params, 0, sizeof n->op_params);
    n->src[0] = twin;
    ix->aligned[k] = twin;
    emit(w, twin);
    emit(w, n);
}

/* Pass 2: the CHANNEL_NORMs, counted, and with w->g made and placed. */
static void convert_all(struct index *ix, struct rewrite *w, struct llm_graph *g, int first, int end,
                        const enum npu_layout *modes, struct npu_layout_report *r)
{
    for (int i = first; i < end; i++) {
        struct llm_tensor *n = g->nodes[i];
        const enum npu_layout m = modes[i - first];
        for (int j = 0; j < LLM_MAX_SRC; j++)
            if (n->src[j] && !written_source(n, j) && !converts(n))
                convert_source(ix, w, n, j, m, source_mode(ix, modes, n->src[j]), r);
        if (m == NPU_LAYOUT_ALIGN && !llm_op_is_noop(n->op))
            r->padding_bytes += padded_weights(ix, n);
        if (m == NPU_LAYOUT_ALIGN && n->op != LLM_OP_CHANNEL_NORM && !llm_op_is_noop(n->op) && !n->view_src &&
            n->op != LLM_OP_FUSED && layouts_differ(n))
            keep_padded(ix, w, n, r);
        else
            emit(w, n);
    }
}

/* g's node list with [first, end) replaced by the n_out nodes of out. */
static bool splice(struct llm_graph *g, int first, int end, struct llm_tensor **out, int n_out)
{
    const int n = g->n_nodes - (end - first) + n_out;
    struct llm_tensor **nodes = malloc(((size_t)n + 1) * sizeof *nodes);
    if (!nodes)
        return false;
    memcpy(nodes, g->nodes, (size_t)first * sizeof *nodes);
    memcpy(nodes + first, out, (size_t)n_out * sizeof *nodes);
    memcpy(nodes + first + n_out, g->nodes + end, (size_t)(g->n_nodes - end) * sizeof *nodes);
    free(g->nodes);
    g->nodes = nodes;
    g->n_nodes = n;
    g->cap = n;
    return true;
}

int npu_layout_align(struct llm_graph *g, int first, int end, bool rewrite, enum npu_layout *modes,
                     struct npu_layout_report *r)
{
    *r = (struct npu_layout_report){ 0 };
    const size_t n = (size_t)(end - first);
    struct index ix = { .probes = &r->probes };
    enum npu_layout *naive = malloc((n + 1) * sizeof *naive);
    struct rewrite w = { .g = rewrite ? g : NULL };
    w.out = rewrite ? malloc((n * (LLM_MAX_SRC + 2) + 1) * sizeof *w.out) : NULL;
    int rc = -1;
    if (naive && (!rewrite || (w.out && pass_ctx(g))) && index_build(&ix, g, first, end)) {
        resolve_all(&ix, g, first, end, modes, naive, r);
        convert_all(&ix, &w, g, first, end, modes, r);
        if (!w.failed && (!rewrite || splice(g, first, end, w.out, w.n_out)))
            rc = rewrite ? w.n_out - (int)n : 0;
    }
    free(naive);
    free(w.out);
    index_free(&ix);
    return rc;
}
