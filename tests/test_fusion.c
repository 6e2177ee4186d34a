/* Operator fusion (src/npu/fusion.h, GGML_CANN_OPERATOR_FUSION): the pass's rules on crafted graphs
 * (what fuses, what must not: a broadcasting add, a norm read twice, a graph output), and each fused
 * kernel against the unfused ops as its oracle. The oracle is the same graph run unfused on the cpu
 * backend: every fused result must be bit-identical to it (the fused kernels run the unfused ops'
 * row kernels), with 1 and 2 threads, odd and AVX2-sized rows, F32 and Q8_0 weights; and each fused
 * node's fast kernel against its reference kernel by NMSE <= 1e-10 (the reference sums in double). */
#include <math.h>

#include "alloc.h"
#include "backend.h"
#include "graph.h"
#include "harness.h"
#include "npu/fusion.h"
#include "ops/ref/cpu_ref.h"
#include "ops/types/types.h"

struct net {
    struct llm_ctx *ctx;
    struct llm_tensor *leaf[12];
    int n_leaf;
    struct llm_tensor *out[4], *bcast_norm, *twice_norm;
    struct llm_graph *g;
};

static uint64_t seed_state; /* both builds of a case draw the same leaves */

static float frand(void)
{
    seed_state ^= seed_state << 13;
    seed_state ^= seed_state >> 7;
    seed_state ^= seed_state << 17;
    return (float)(uint32_t)(seed_state >> 16) / 2147483648.0f - 1.0f;
}

static struct llm_tensor *leaf(struct net *n, enum llm_type type, int64_t ne0, int64_t ne1, uint32_t flags)
{
    struct llm_tensor *t = llm_new_tensor_2d(n->ctx, type, ne0, ne1);
    t->flags = flags;
    t->data = malloc(llm_nbytes(t));
    float *f = malloc((size_t)(ne0 * ne1) * sizeof *f);
    for (int64_t i = 0; i < ne0 * ne1; i++)
        f[i] = frand();
    if (type == LLM_TYPE_F32)
        memcpy(t->data, f, llm_nbytes(t));
    else
        llm_type_traits(type)->from_float(f, t->data, ne0 * ne1);
    free(f);
    n->leaf[n->n_leaf++] = t;
    return t;
}

/* The decoder's pattern around a norm, with the cases the rules must refuse beside it:
 *   s = a + b; h = rms_norm(s) * w; y = W h + bias; r = y + s; out0 = rms_norm(r)
 *   out1 = rms_norm(out0 + c) * w, c one value (a broadcasting add stays; its norm and weight fuse)
 *   out2 = rms_norm(a) * w and out3 = rms_norm(a) + b (one norm read twice: nothing fuses) */
static void build(struct net *n, enum llm_type wtype, int64_t ne0, int64_t rows, uint64_t seed)
{
    seed_state = seed * 0x9e3779b97f4a7c15ull + 1;
    n->n_leaf = 0;
    n->ctx = llm_ctx_new(128);
    struct llm_tensor *a = leaf(n, LLM_TYPE_F32, ne0, rows, LLM_TENSOR_INPUT);
    struct llm_tensor *b = leaf(n, LLM_TYPE_F32, ne0, rows, LLM_TENSOR_INPUT);
    struct llm_tensor *w = leaf(n, LLM_TYPE_F32, ne0, 1, LLM_TENSOR_WEIGHT);
    struct llm_tensor *W = leaf(n, wtype, ne0, ne0, LLM_TENSOR_WEIGHT);
    struct llm_tensor *bias = leaf(n, LLM_TYPE_F32, ne0, 1, LLM_TENSOR_WEIGHT);
    struct llm_tensor *row = leaf(n, LLM_TYPE_F32, 1, 1, LLM_TENSOR_WEIGHT);
    struct llm_tensor *s = llm_add(n->ctx, a, b);
    struct llm_tensor *h = llm_mul(n->ctx, llm_rms_norm(n->ctx, s, 1e-5f), w);
    struct llm_tensor *y = llm_add(n->ctx, llm_mul_mat(n->ctx, W, h), bias);
    n->out[0] = llm_rms_norm(n->ctx, llm_add(n->ctx, y, s), 1e-6f);
    n->out[1] = llm_mul(n->ctx, llm_rms_norm(n->ctx, llm_add(n->ctx, n->out[0], row), 1e-5f), w);
    struct llm_tensor *twice = llm_rms_norm(n->ctx, a, 1e-5f);
    n->out[2] = llm_mul(n->ctx, twice, w);
    n->out[3] = llm_add(n->ctx, twice, b);
    n->twice_norm = twice;
    n->bcast_norm = n->out[1]->src[0];
    n->g = llm_graph_build(n->out, 4);
}

static void free_net(struct net *n)
{
    for (int i = 0; i < n->n_leaf; i++)
        free(n->leaf[i]->data);
    llm_graph_free(n->g);
    llm_ctx_free(n->ctx);
}

static int count_op(const struct llm_graph *g, enum llm_op op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        c += g->nodes[i]->op == op;
    return c;
}

/* Allocate (every node kept, so each fused node's inputs can be read afterwards) and compute. */
static bool compute(struct net *n, int threads, struct llm_allocator *al)
{
    const struct llm_backend_params bp = { .device = LLM_DEVICE_CPU, .n_threads = threads };
    struct llm_backend *be = llm_backend_cpu_new(&bp, NULL);
    struct llm_error err = { 0 };
    bool ok = be && !llm_allocator_alloc_graph(al, n->g, &err) && !llm_backend_compute(be, n->g, &err);
    CHECK(ok, "compute: %s", err.msg);
    llm_backend_free(be);
    return ok;
}

/* Each fused node's fast result against its reference kernel run into a buffer of its own: 1e-10,
 * but for a Q8_0 matmul the error of rounding its activations to Q8_0 (test_ops' 1e-3). */
static void check_refs(const struct net *n, const char *what, double mm_tol)
{
    for (int i = 0; i < n->g->n_nodes; i++) {
        struct llm_tensor *f = n->g->nodes[i];
        if (f->op != LLM_OP_ADD_RMS_NORM && f->op != LLM_OP_RMS_NORM_MUL && f->op != LLM_OP_MUL_MAT_ADD)
            continue;
        struct llm_tensor r = *f;
        r.data = malloc(llm_nbytes(f));
        llm_ref_compute(&r);
        const double e = test_nmse(f->data, r.data, llm_nelements(f));
        CHECK(e <= (f->op == LLM_OP_MUL_MAT_ADD ? mm_tol : 1e-10), "%s: %s fast vs reference NMSE %.3g", what, llm_op_name(f->op), e);
        free(r.data);
    }
}

static void check_case(enum llm_type wtype, int64_t ne0, int64_t rows, int threads)
{
    char what[96];
    snprintf(what, sizeof what, "%s W, rows of %lld x %lld, %d threads", llm_type_name(wtype), (long long)ne0,
             (long long)rows, threads);
    struct net plain, fused;
    build(&plain, wtype, ne0, rows, 7);
    build(&fused, wtype, ne0, rows, 7);
    struct npu_fusion_counts c = { 0 };
    const int absorbed = npu_fuse(fused.g, 0, fused.g->n_nodes, &c);
    CHECK(c.mul_mat_add == 1 && c.rms_norm_mul == 2 && c.add_rms_norm == 2 && absorbed == 5,
          "%s: fused MUL_MAT+ADD %d, RMS_NORM+MUL %d, ADD+RMS_NORM %d, absorbed %d", what, c.mul_mat_add,
          c.rms_norm_mul, c.add_rms_norm, absorbed);
    CHECK_EQ_INT(count_op(fused.g, LLM_OP_FUSED), 5);
    CHECK(fused.bcast_norm->op == LLM_OP_FUSED && fused.out[1]->op == LLM_OP_RMS_NORM_MUL &&
          fused.out[1]->src[0]->op == LLM_OP_ADD, "%s: a broadcasting add is not fused into its norm", what);
    CHECK(fused.twice_norm->op == LLM_OP_RMS_NORM && fused.out[2]->op == LLM_OP_MUL,
          "%s: a norm with two readers stays", what);
    CHECK(fused.out[0]->op == LLM_OP_ADD_RMS_NORM && fused.out[0]->src[3] == NULL, "%s: residual add + plain norm", what);

    for (int i = 0; i < fused.g->n_nodes; i++) /* keep every node's memory to the end, for check_refs */
        fused.g->nodes[i]->flags |= LLM_TENSOR_OUTPUT;
    struct llm_allocator *a1 = llm_allocator_new(NULL);
    struct llm_allocator *a2 = llm_allocator_new(NULL);
    if (compute(&plain, threads, a1) && compute(&fused, threads, a2)) {
        for (int o = 0; o < 4; o++)
            CHECK(memcmp(plain.out[o]->data, fused.out[o]->data, llm_nbytes(plain.out[o])) == 0,
                  "%s: output %d differs from the unfused ops", what, o);
        check_refs(&fused, what, wtype == LLM_TYPE_F32 ? 1e-10 : 1e-3);
    }
    llm_allocator_free(a1);
    llm_allocator_free(a2);
    free_net(&plain);
    free_net(&fused);
}

/* A node the host reads (a graph output) is never absorbed. */
static void test_outputs_stay(void)
{
    struct net n;
    build(&n, LLM_TYPE_F32, 64, 2, 3);
    struct llm_tensor *norm = n.out[2]->src[0];
    llm_graph_free(n.g);
    struct llm_tensor *outs[] = { n.out[0], n.out[1], n.out[2], n.out[3], n.out[0]->src[0] };
    n.g = llm_graph_build(outs, 5); /* the residual add r = y + s is now an output too */
    struct npu_fusion_counts c = { 0 };
    npu_fuse(n.g, 0, n.g->n_nodes, &c);
    CHECK(c.add_rms_norm == 2 && n.out[0]->op == LLM_OP_ADD_RMS_NORM, "an output sum stays in memory: it fuses");
    CHECK(norm->op == LLM_OP_RMS_NORM, "the norm read twice stays");
    free_net(&n);
    build(&n, LLM_TYPE_F32, 64, 2, 3);
    struct llm_tensor *mm = n.out[0]->src[0]->src[0]->src[0]; /* W h, read by the bias add */
    llm_graph_free(n.g);
    struct llm_tensor *outs2[] = { n.out[0], n.out[1], n.out[2], n.out[3], mm };
    n.g = llm_graph_build(outs2, 5);
    c = (struct npu_fusion_counts){ 0 };
    npu_fuse(n.g, 0, n.g->n_nodes, &c);
    CHECK(c.mul_mat_add == 0 && mm->op == LLM_OP_MUL_MAT, "a matmul the host reads is not absorbed");
    free_net(&n);
}

/* Nodes outside the split's range are left alone. */
static void test_range(void)
{
    struct net n;
    build(&n, LLM_TYPE_F32, 64, 2, 5);
    struct npu_fusion_counts c = { 0 };
    CHECK_EQ_INT(npu_fuse(n.g, 0, 0, &c), 0);
    CHECK_EQ_INT(count_op(n.g, LLM_OP_FUSED), 0);
    free_net(&n);
}

/* ---- ROPE + ROPE -> ROPE_QK ------------------------------------------------------------------ */

enum rope_case { ROPE_FUSES, ROPE_FACTORS, ROPE_OTHER_POS, ROPE_DEPENDS, ROPE_WRITER_BETWEEN };

static struct llm_tensor *ids_leaf(struct net *n, int64_t count, int32_t first)
{
    struct llm_tensor *t = llm_new_tensor_1d(n->ctx, LLM_TYPE_I32, count);
    t->flags = LLM_TENSOR_INPUT;
    t->data = malloc(llm_nbytes(t));
    for (int64_t i = 0; i < count; i++)
        ((int32_t *)t->data)[i] = first + (int32_t)(3 * i);
    n->leaf[n->n_leaf++] = t;
    return t;
}

/* A layer's q and k as the decoder orders them without flash attention: k is roped and stored in
 * the cache first, then q is computed and roped, so the two ROPEs have the K store (which reads the
 * first), a read of the cache it wrote (out2) and q's matmul (which reads neither) between them:
 *   kr = rope(Wk x), out0 = set_rows(cache, kr, ids), out2 = 2 cache, out1 = rope(Wq x)
 * The refusals: frequency factors; q roped at other positions; q computed from kr (q depends on the
 * first ROPE); a copy into another leaf between the two, which could not be moved. */
static void build_rope(struct net *n, enum rope_case rc, int mode, int64_t hd, int64_t hq, int64_t hk, int64_t ntok)
{
    seed_state = 0x5eedull * (uint64_t)(hd + 7 * hq + 13 * ntok);
    n->n_leaf = 0;
    n->ctx = llm_ctx_new(96);
    const int64_t d = 24;
    struct llm_tensor *x = leaf(n, LLM_TYPE_F32, d, ntok, LLM_TENSOR_INPUT);
    struct llm_tensor *wq = leaf(n, LLM_TYPE_F32, d, hd * hq, LLM_TENSOR_WEIGHT);
    struct llm_tensor *wk = leaf(n, LLM_TYPE_F32, d, hd * hk, LLM_TENSOR_WEIGHT);
    struct llm_tensor *cache = leaf(n, LLM_TYPE_F32, hd * hk, 3 * ntok + 2, LLM_TENSOR_WEIGHT);
    struct llm_tensor *other = leaf(n, LLM_TYPE_F32, d, ntok, LLM_TENSOR_WEIGHT);
    struct llm_tensor *ff = rc == ROPE_FACTORS ? leaf(n, LLM_TYPE_F32, hd / 2, 1, LLM_TENSOR_WEIGHT) : NULL;
    for (int64_t i = 0; ff && i < hd / 2; i++)
        ((float *)ff->data)[i] = 1.0f + (float)i; /* factors must be positive */
    struct llm_tensor *pos = ids_leaf(n, ntok, 5), *ids = ids_leaf(n, ntok, 0);
    struct llm_tensor *qpos = rc == ROPE_OTHER_POS ? ids_leaf(n, ntok, 9) : pos;
    struct llm_tensor *k = llm_reshape_3d(n->ctx, llm_mul_mat(n->ctx, wk, x), hd, hk, ntok);
    struct llm_tensor *kr = llm_rope(n->ctx, k, pos, ff, (int)hd, mode, 4096, 10000.0f, 1.0f);
    n->out[0] = llm_set_rows(n->ctx, cache, llm_reshape_2d(n->ctx, kr, hd * hk, ntok), ids);
    struct llm_tensor *q = llm_reshape_3d(n->ctx, llm_mul_mat(n->ctx, wq, x), hd, hq, ntok);
    if (rc == ROPE_DEPENDS)
        q = llm_scale(n->ctx, kr, 0.5f);
    /* between the two ROPEs: a copy into another leaf, or a read of the cache the store wrote */
    n->out[2] = rc == ROPE_WRITER_BETWEEN ? llm_cpy(n->ctx, x, other) : llm_scale(n->ctx, cache, 2.0f);
    n->out[1] = llm_rope(n->ctx, q, qpos, ff, (int)hd, mode, 4096, 10000.0f, 1.0f);
    struct llm_tensor *outs[] = { n->out[0], n->out[2], n->out[1] };
    n->g = llm_graph_build(outs, 3);
}

static int index_of(const struct llm_graph *g, enum llm_op op)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == op)
            return i;
    return -1;
}

/* The fused node's reference kernel into buffers of its own (both halves) against its fast result:
 * NMSE <= 1e-10 (the reference takes its angles in double, the fast kernel rounds cos and sin to
 * float: relative errors near 1e-7). */
static void check_rope_qk_ref(const char *what, const struct llm_tensor *f)
{
    struct llm_tensor r = *f, k = *f->src[3];
    r.data = malloc(llm_nbytes(f));
    k.data = malloc(llm_nbytes(&k));
    r.src[3] = &k;
    llm_ref_compute(&r);
    const double eq = test_nmse(f->data, r.data, llm_nelements(f));
    const double ek = test_nmse(f->src[3]->data, k.data, llm_nelements(&k));
    CHECK(eq <= 1e-10 && ek <= 1e-10, "%s: ROPE_QK fast vs reference NMSE %.3g (first) %.3g (second)", what, eq, ek);
    free(r.data);
    free(k.data);
}

static void check_rope_case(enum rope_case rc, int mode, int64_t hd, int64_t hq, int64_t hk, int64_t ntok, int threads)
{
    char what[96];
    snprintf(what, sizeof what, "rope case %d, mode %d, hd %lld, heads %lld/%lld, %lld tokens, %d threads", (int)rc,
             mode, (long long)hd, (long long)hq, (long long)hk, (long long)ntok, threads);
    struct net plain, fused;
    build_rope(&plain, rc, mode, hd, hq, hk, ntok);
    build_rope(&fused, rc, mode, hd, hq, hk, ntok);
    struct npu_fusion_counts c = { 0 };
    const int absorbed = npu_fuse(fused.g, 0, fused.g->n_nodes, &c);
    const int want = rc == ROPE_FUSES;
    CHECK(c.rope_qk == want && absorbed == want, "%s: %d ROPE_QK made (%d absorbed), %d expected", what, c.rope_qk,
          absorbed, want);
    if (want) { /* q's matmul now runs before the fused node, and the K store after it */
        const int mm = index_of(fused.g, LLM_OP_MUL_MAT), qk = index_of(fused.g, LLM_OP_ROPE_QK);
        const int store = index_of(fused.g, LLM_OP_SET_ROWS), absorbed_at = index_of(fused.g, LLM_OP_FUSED);
        int last_mm = mm;
        for (int i = 0; i < fused.g->n_nodes; i++)
            last_mm = fused.g->nodes[i]->op == LLM_OP_MUL_MAT ? i : last_mm;
        CHECK(last_mm < absorbed_at && absorbed_at + 1 == qk && qk < store,
              "%s: order matmuls ..%d, absorbed %d, ROPE_QK %d, store %d", what, last_mm, absorbed_at, qk, store);
        CHECK(fused.out[1]->op == LLM_OP_ROPE_QK && fused.out[1]->src[3]->op == LLM_OP_FUSED, "%s: q rewritten", what);
    }
    for (int i = 0; i < fused.g->n_nodes; i++)
        fused.g->nodes[i]->flags |= LLM_TENSOR_OUTPUT;
    struct llm_allocator *a1 = llm_allocator_new(NULL);
    struct llm_allocator *a2 = llm_allocator_new(NULL);
    if (compute(&plain, threads, a1) && compute(&fused, threads, a2)) {
        for (int o = 0; o < 3; o++)
            CHECK(memcmp(plain.out[o]->data, fused.out[o]->data, llm_nbytes(plain.out[o])) == 0,
                  "%s: output %d differs from the unfused ops", what, o);
        if (want)
            check_rope_qk_ref(what, fused.out[1]);
    }
    llm_allocator_free(a1);
    llm_allocator_free(a2);
    free_net(&plain);
    free_net(&fused);
}

static void test_rope_qk(void)
{
    for (int t = 1; t <= 2; t++)
        for (int mode = 0; mode <= 2; mode += 2) {
            check_rope_case(ROPE_FUSES, mode, 8, 8, 4, 1, t);  /* stories260K's heads, a decode step */
            check_rope_case(ROPE_FUSES, mode, 16, 4, 2, 5, t); /* qwen2-tiny's, a prompt */
        }
    check_rope_case(ROPE_FUSES, 0, 64, 14, 2, 3, 2);
    check_rope_case(ROPE_FACTORS, 0, 8, 4, 4, 2, 1);
    check_rope_case(ROPE_OTHER_POS, 2, 8, 4, 4, 2, 1);
    check_rope_case(ROPE_DEPENDS, 0, 8, 4, 4, 2, 2);
    check_rope_case(ROPE_WRITER_BETWEEN, 0, 8, 4, 4, 2, 1);
}

int main(void)
{
    const int64_t widths[] = { 64, 37 };
    for (int w = 0; w < 2; w++)
        for (int rows = 1; rows <= 7; rows += 3)
            for (int t = 1; t <= 2; t++)
                check_case(LLM_TYPE_F32, widths[w], rows, t);
    check_case(LLM_TYPE_Q8_0, 64, 3, 2);
    check_case(LLM_TYPE_Q8_0, 64, 1, 1);
    test_outputs_stay();
    test_range();
    test_rope_qk();
    return test_done("test_fusion");
}
