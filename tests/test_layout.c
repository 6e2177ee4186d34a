/* LayoutAlignToNPU (src/npu/layout.h): seed 002's cases as crafted graphs, each with the number and
 * the place of the CHANNEL_NORM nodes the pass inserts and what a naive pass (BOTH taken as NALIGN)
 * would need: a chain through BOTH nodes, a diamond whose parents disagree (both orders), a
 * broadcast op, an output of odd rank, a graph output; a 10^5-node chain in linear time; and
 * CHANNEL_NORM's kernel: pad then unpad gives the rows back bit for bit, the padded rows 16-aligned;
 * and the device's executor refusing what an ALIGN kernel cannot read. */

#include "alloc.h"
#include "backend.h"
#include "clock.h"
#include "graph.h"
#include "harness.h"
#include "npu/acl.h"
#include "npu/aclnn.h"
#include "npu/layout.h"
#include "ops/ref/cpu_ref.h"

static struct llm_tensor *input(struct llm_ctx *ctx, int n_dims, const int64_t *ne)
{
    struct llm_tensor *t = llm_new_tensor(ctx, LLM_TYPE_F32, n_dims, ne);
    t->flags = LLM_TENSOR_INPUT;
    return t;
}

static struct llm_tensor *weight(struct llm_ctx *ctx)
{
    struct llm_tensor *t = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 24, 24);
    t->flags = LLM_TENSOR_WEIGHT;
    llm_pad_rows(t, NPU_ALIGN_ELEMS); /* uploaded padded, as the npu's weights are */
    return t;
}

/* Rows of 24 floats: ALIGN pads them to 32, so the two layouts differ and conflicts need a
 * CHANNEL_NORM (rows of a multiple of 16 would not: test_coinciding_layouts). */
static const int64_t X2[] = { 24, 2 }, X3[] = { 24, 2, 3 }, X4[] = { 24, 2, 1, 2 };
#define PADDED_ROW (32 * sizeof(float))
#define DENSE_ROW (24 * sizeof(float))

/* The outputs' graph, rewritten by the pass; modes of the nodes before it. */
struct aligned {
    struct llm_graph *g;
    enum npu_layout *modes;
    struct npu_layout_report r;
    int n_before;
};

static struct aligned align(struct llm_ctx *ctx, struct llm_tensor **outs, int n_outs)
{
    struct aligned a = { .g = llm_graph_build(outs, n_outs) };
    a.n_before = a.g->n_nodes;
    a.modes = calloc((size_t)a.g->n_nodes + 1, sizeof *a.modes);
    const int added = npu_layout_align(a.g, 0, a.g->n_nodes, true, a.modes, &a.r);
    CHECK(added == a.r.inserted && a.g->n_nodes == a.n_before + added, "%d nodes added, %d counted", added,
          a.r.inserted);
    CHECK(!llm_ctx_error(ctx), "%s", llm_ctx_error(ctx));
    struct npu_layout_report again; /* a rewritten graph has no conflict left */
    enum npu_layout *modes = calloc((size_t)a.g->n_nodes + 1, sizeof *modes);
    CHECK(npu_layout_align(a.g, 0, a.g->n_nodes, true, modes, &again) == 0 && again.inserted == 0,
          "the second pass added %d", again.inserted);
    free(modes);
    return a;
}

static void release(struct aligned *a, struct llm_ctx *ctx)
{
    llm_graph_free(a->g);
    free(a->modes);
    llm_ctx_free(ctx);
}

static int channel_norms(const struct llm_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i]->op == LLM_OP_CHANNEL_NORM;
    return n;
}

static int position(const struct llm_graph *g, const struct llm_tensor *t)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == t)
            return i;
    return -1;
}

/* Does n read source j through a CHANNEL_NORM of that direction (pad: into ALIGN)? */
static bool converted(const struct llm_tensor *n, int j, bool pad)
{
    const struct llm_tensor *c = n->src[j];
    return c && c->op == LLM_OP_CHANNEL_NORM && (c->op_params[0] != 0) == pad;
}

/* Is t the unpad of a padded twin computing op (the rewrite of an ALIGN node read dense)? */
static bool unpadded_twin(const struct llm_tensor *t, enum llm_op op)
{
    const struct llm_tensor *twin = t->src[0];
    return t->op == LLM_OP_CHANNEL_NORM && t->op_params[0] == 0 && t->nb[1] == DENSE_ROW && twin &&
           twin->op == op && twin->nb[1] == PADDED_ROW && !(twin->flags & LLM_TENSOR_OUTPUT);
}

/* input -> SCALE -> SILU -> MUL_MAT -> SCALE -> MUL_MAT -> SILU (output). The BOTH nodes follow their
 * parents: the input side stays dense, the SCALE between the matmuls takes ALIGN, so there are two
 * conversions: a pad before the first matmul, and the second matmul, read dense by the output,
 * becomes the unpad of its padded twin. The first matmul and the SCALE keep padded rows in place.
 * Naive: four, one on each edge between a matmul and a BOTH node. */
static void test_chain(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *w = weight(ctx);
    struct llm_tensor *m1 = llm_mul_mat(ctx, w, llm_silu(ctx, llm_scale(ctx, input(ctx, 2, X2), 0.5f)));
    struct llm_tensor *s = llm_scale(ctx, m1, 2.0f), *m2 = llm_mul_mat(ctx, w, s), *out = llm_silu(ctx, m2);
    struct aligned a = align(ctx, &out, 1);
    CHECK(a.r.inserted == 2 && a.r.naive == 4, "chain: %d inserted (2), naive %d (4)", a.r.inserted, a.r.naive);
    CHECK(converted(m1, 1, true) && position(a.g, m1->src[1]) == position(a.g, m1) - 1,
          "chain: a pad right before the first matmul");
    CHECK(s->src[0] == m1 && m1->nb[1] == PADDED_ROW && s->nb[1] == PADDED_ROW, "chain: padded in place");
    CHECK(unpadded_twin(m2, LLM_OP_MUL_MAT) && m2->src[0]->src[1] == s && out->src[0] == m2,
          "chain: the second matmul computes padded, the output reads its unpad");
    CHECK(position(a.g, m2->src[0]) == position(a.g, m2) - 1, "chain: the twin right before its unpad");
    CHECK_EQ_INT(channel_norms(a.g), 2);
    CHECK(a.r.padding_bytes == 2 * PADDED_ROW + 2 * (PADDED_ROW - DENSE_ROW) * 2 + 2 * PADDED_ROW +
                                   24 * (PADDED_ROW - DENSE_ROW),
          "chain: %zu bytes of padding", a.r.padding_bytes);
    release(&a, ctx);
}

/* x feeds a matmul (ALIGN) and a SCALE (NALIGN, from the input), and their ADD takes the mode of the
 * parent first in topological order; the other parent is converted. Then RMS_NORM (ALIGN) and an
 * output SCALE. ADD(a, b): ALIGN, pads for x and b, the norm's unpad for the output: 3. ADD(b, a):
 * NALIGN, pad for x, the matmul's unpad, pad before the norm, the norm's unpad: 4. */
static void test_diamond(void)
{
    for (int order = 0; order < 2; order++) {
        struct llm_ctx *ctx = llm_ctx_new(64);
        struct llm_tensor *x = input(ctx, 2, X2), *w = weight(ctx);
        struct llm_tensor *ma = llm_mul_mat(ctx, w, x), *sb = llm_scale(ctx, x, 3.0f);
        struct llm_tensor *add = order ? llm_add(ctx, sb, ma) : llm_add(ctx, ma, sb);
        struct llm_tensor *norm = llm_rms_norm(ctx, add, 1e-5f), *out = llm_scale(ctx, norm, 1.0f);
        struct aligned a = align(ctx, &out, 1);
        CHECK(a.r.inserted == 3 + order, "diamond %d: %d inserted", order, a.r.inserted);
        CHECK(converted(add, 1, !order), "diamond %d: the later parent is converted", order);
        CHECK(add->src[0] == (order ? sb : ma), "diamond %d: the first parent is not", order);
        CHECK(add->nb[1] == (order ? DENSE_ROW : PADDED_ROW), "diamond %d: the ADD's rows", order);
        CHECK(order ? converted(norm->src[0], 0, true) : norm->src[0]->src[0] == add, /* norm->src[0]: the twin */
              "diamond %d: the norm reads the sum padded", order);
        CHECK(unpadded_twin(norm, LLM_OP_RMS_NORM), "diamond %d: the norm's unpad", order);
        release(&a, ctx);
    }
}

/* A broadcasting ADD follows its full-size input, not its first parent: the smaller input is
 * visited first (by another output), yet the ADD takes the matmul's ALIGN and the smaller one is
 * padded. */
static void test_broadcast(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *small = llm_scale(ctx, llm_scale(ctx, input(ctx, 2, X2), 2.0f), 1.0f);
    struct llm_tensor *row2 = llm_reshape_2d(ctx, small, 24, 2); /* so small's own node is not the output */
    struct llm_tensor *full = llm_mul_mat(ctx, weight(ctx), input(ctx, 4, X4));
    struct llm_tensor *bc = llm_add(ctx, full, small);
    struct llm_tensor *outs[] = { llm_silu(ctx, row2), llm_rms_norm(ctx, bc, 1e-5f) };
    struct aligned a = align(ctx, outs, 2);
    CHECK(converted(bc, 1, true) && bc->src[0] == full, "broadcast: the ADD is ALIGN, its smaller input padded");
    CHECK(bc->nb[1] == PADDED_ROW && full->nb[1] == PADDED_ROW, "broadcast: padded in place");
    release(&a, ctx);
}

/* The same chain on [24, 2, 3] (rank 3) and [24, 2] (rank 2): input -> MUL_MAT -> SCALE -> SILU (output).
 * The matmul stays ALIGN at rank 3 (its kernel needs it: ALIGN only wins over odd rank); the SCALE
 * then is NALIGN at rank 3 (the matmul becomes an unpad) and follows the matmul at rank 2 (the
 * SCALE becomes one). */
static void test_odd_rank(void)
{
    for (int rank = 2; rank <= 3; rank++) {
        struct llm_ctx *ctx = llm_ctx_new(64);
        struct llm_tensor *m = llm_mul_mat(ctx, weight(ctx), input(ctx, rank, rank == 3 ? X3 : X2));
        struct llm_tensor *s = llm_scale(ctx, m, 2.0f), *out = llm_silu(ctx, s);
        struct aligned a = align(ctx, &out, 1);
        CHECK_EQ_INT(a.r.inserted, 2);
        CHECK(rank == 3 ? converted(m->src[0], 1, true) : converted(m, 1, true), "rank %d: the matmul's input padded",
              rank);
        CHECK(rank == 3 ? unpadded_twin(m, LLM_OP_MUL_MAT) && s->src[0] == m && s->nb[1] == DENSE_ROW
                        : unpadded_twin(s, LLM_OP_SCALE) && s->src[0]->src[0] == m && m->nb[1] == PADDED_ROW,
              "rank %d: the unpad's place", rank);
        release(&a, ctx);
    }
}

/* An ALIGN node the host reads: it stays the output, dense, the unpad of its padded twin. */
static void test_graph_output(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *out = llm_mul_mat(ctx, weight(ctx), input(ctx, 2, X2));
    struct aligned a = align(ctx, &out, 1);
    CHECK(a.r.inserted == 2 && a.r.naive == 2, "output: %d inserted, naive %d", a.r.inserted, a.r.naive);
    CHECK(a.g->nodes[a.g->n_nodes - 1] == out && unpadded_twin(out, LLM_OP_MUL_MAT) &&
          (out->flags & LLM_TENSOR_OUTPUT), "output: read through an unpad");
    release(&a, ctx);
}

/* Where the two layouts coincide (rows of a multiple of 16, a single row) no conflict needs a
 * CHANNEL_NORM and nothing is padded; a view of an ALIGN node reads its unpad (its strides were
 * built dense), a view of a weight takes the weight's layout. */
static void test_coinciding_layouts(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    const int64_t wide[] = { 32, 2 }, row[] = { 24, 1 };
    struct llm_tensor *w32 = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 32, 32);
    w32->flags = LLM_TENSOR_WEIGHT;
    struct llm_tensor *m = llm_mul_mat(ctx, w32, input(ctx, 2, wide)), *r = llm_mul_mat(ctx, weight(ctx), input(ctx, 2, row));
    struct llm_tensor *outs[] = { llm_silu(ctx, m), llm_silu(ctx, r) };
    struct aligned a = align(ctx, outs, 2);
    CHECK(a.r.inserted == 0 && a.r.naive == 0 && channel_norms(a.g) == 0, "coinciding: %d inserted", a.r.inserted);
    release(&a, ctx);

    ctx = llm_ctx_new(64);
    struct llm_tensor *mm = llm_mul_mat(ctx, weight(ctx), input(ctx, 2, X2));
    struct llm_tensor *v = llm_view_2d(ctx, mm, 12, 2, mm->nb[1], 0), *out = llm_silu(ctx, v);
    struct llm_tensor *wv = llm_view_2d(ctx, weight(ctx), 24, 2, PADDED_ROW, 0);
    struct llm_tensor *outs2[] = { out, llm_rms_norm(ctx, wv, 1e-5f) };
    a = align(ctx, outs2, 2);
    CHECK(unpadded_twin(mm, LLM_OP_MUL_MAT) && v->src[0] == mm && v->view_src == mm && v->nb[1] == DENSE_ROW,
          "a view reads the unpad");
    CHECK(outs2[1]->src[0]->src[0] == wv, "the norm reads the weight's view as it is");
    release(&a, ctx);
}

/* A leaf is what its rows are: a weight left dense (not uploaded padded) is padded before the gemm
 * reads it, one uploaded padded is read as it is. */
static void test_dense_leaf(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *dense = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 24, 24), *x = llm_scale(ctx, input(ctx, 2, X2), 1.0f);
    dense->flags = LLM_TENSOR_WEIGHT;
    struct llm_tensor *m = llm_mul_mat(ctx, dense, x), *mp = llm_mul_mat(ctx, weight(ctx), x);
    struct llm_tensor *outs[] = { llm_scale(ctx, m, 1.0f), llm_scale(ctx, mp, 1.0f) };
    struct aligned a = align(ctx, outs, 2);
    CHECK(converted(m->src[0], 0, true) && m->src[0]->src[0]->src[0] == dense, "the dense weight is padded");
    CHECK(mp->src[0]->src[0]->flags & LLM_TENSOR_WEIGHT, "the padded weight is read as it is");
    release(&a, ctx);
}

/* The KV store: SET_ROWS copies dense rows into the padded cache's strides (no pad before it), and
 * FLASH_ATTN reads views of the padded cache as they are. Only its K and V are ALIGN operands: its
 * dense Q is read as it is and its result, which a reshape reads, is written dense (no pad, no
 * unpad). K and V from dense rows (not the cache) are padded, once for both, though the node itself
 * is NALIGN. */
static void test_kv_store(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *cache = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, 32);
    llm_pad_rows(cache, NPU_ALIGN_ELEMS);
    const int64_t qne[] = { 8, 2, 1 };
    struct llm_tensor *k = llm_scale(ctx, input(ctx, 2, (const int64_t[]){ 8, 2 }), 1.0f);
    struct llm_tensor *ids = llm_new_tensor_1d(ctx, LLM_TYPE_I32, 2);
    ids->flags = LLM_TENSOR_INPUT;
    struct llm_tensor *store = llm_set_rows(ctx, cache, k, ids);
    struct llm_tensor *kv = llm_view_3d(ctx, store, 8, 32, 1, cache->nb[1], cache->nb[2], 0);
    struct llm_tensor *q = llm_scale(ctx, input(ctx, 3, qne), 1.0f);
    struct llm_tensor *fa = llm_flash_attn(ctx, q, kv, kv, NULL, 1.0f);
    struct llm_tensor *dense_kv = llm_scale(ctx, input(ctx, 3, (const int64_t[]){ 8, 32, 1 }), 1.0f);
    struct llm_tensor *fa2 = llm_flash_attn(ctx, q, dense_kv, dense_kv, NULL, 1.0f);
    struct llm_tensor *outs[] = { llm_scale(ctx, llm_reshape_2d(ctx, fa, 16, 1), 1.0f),
                                  llm_scale(ctx, llm_reshape_2d(ctx, fa2, 16, 1), 1.0f) };
    struct aligned a = align(ctx, outs, 2);
    CHECK(fa->op == LLM_OP_FLASH_ATTN && fa->nb[1] == 8 * sizeof(float) && fa->src[0] == q, "Q and the result dense");
    CHECK(store->src[1] == k && fa->src[1] == kv && fa->src[2] == kv, "the cache read as it is");
    CHECK(fa2->src[0] == q && converted(fa2, 1, true) && fa2->src[2] == fa2->src[1], "dense K and V padded, once");
    CHECK_EQ_INT(a.r.inserted, 1);
    release(&a, ctx);
}

/* A split: nodes [first, end) of a longer graph. A source computed by an earlier split is dense
 * (padded before an ALIGN reader), a result a later split reads stays dense (an unpad of its twin),
 * and the nodes outside the split are left alone. */
static void test_split(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *before = llm_scale(ctx, input(ctx, 2, X2), 2.0f);
    struct llm_tensor *m = llm_mul_mat(ctx, weight(ctx), before), *after = llm_silu(ctx, llm_scale(ctx, m, 1.0f));
    struct llm_graph *g = llm_graph_build(&after, 1);
    CHECK(g->n_nodes == 4 && g->nodes[1] == m, "the graph: %d nodes", g->n_nodes);
    enum npu_layout modes[2];
    struct npu_layout_report r;
    CHECK_EQ_INT(npu_layout_align(g, 1, 2, true, modes, &r), 2);
    CHECK(g->n_nodes == 6 && g->nodes[0] == before && g->nodes[5] == after, "the split's neighbours stay");
    CHECK(converted(m->src[0], 1, true) && unpadded_twin(m, LLM_OP_MUL_MAT) && g->nodes[4]->src[0] == m,
          "split: a pad for the earlier split's result, an unpad for the later one");
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

/* input -> MUL_MAT -> n SCALEs -> output: 2 conversions whatever n, in linear time: the hash slots
 * the pass looks at stay under a small constant per node (a timing would not hold on this shared
 * machine: 10^5 nodes' tensors are past the caches, 10^4 nodes' are not). */
static void test_linear_time(void)
{
    const int n = 100000;
    struct llm_ctx *ctx = llm_ctx_new(n + 16);
    struct llm_tensor *t = llm_mul_mat(ctx, weight(ctx), input(ctx, 2, X2));
    for (int i = 0; i < n; i++)
        t = llm_scale(ctx, t, 1.0f);
    struct llm_graph *g = llm_graph_build(&t, 1);
    enum npu_layout *modes = malloc((size_t)g->n_nodes * sizeof *modes);
    struct npu_layout_report r;
    const double t0 = llm_now_us();
    int rc = npu_layout_align(g, 0, g->n_nodes, false, modes, &r);
    const double ms = (llm_now_us() - t0) / 1e3;
    CHECK(rc == 0 && r.inserted == 2 && r.naive == 2, "chain of %d: %d inserted, naive %d", n, r.inserted, r.naive);
    CHECK(r.probes <= 16 * (size_t)g->n_nodes, "chain of %d nodes: %zu hash probes", g->n_nodes, r.probes);
    printf("layout pass: %d nodes in %.1f ms, %zu probes\n", g->n_nodes,
           ms, r.probes);
    free(modes);
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

/* CHANNEL_NORM: [37, 3] padded to rows of 48 floats, then unpadded: the same bits (fast and reference). */
static void test_channel_norm_kernel(void)
{
    struct llm_ctx *ctx = llm_ctx_new(16);
    const int64_t ne[] = { 37, 3 };
    struct llm_tensor *x = input(ctx, 2, ne);
    float xd[37 * 3];
    for (int i = 0; i < 37 * 3; i++)
        xd[i] = (float)i * 0.25f - 7.0f;
    x->data = xd;
    struct llm_tensor *p = llm_channel_norm(ctx, x, NPU_ALIGN_ELEMS), *u = llm_channel_norm(ctx, p, 0);
    CHECK(p->nb[1] == 48 * sizeof(float) && u->nb[1] == 37 * sizeof(float), "padded rows of %zu bytes", p->nb[1]);
    struct llm_graph *g = llm_graph_build(&u, 1);
    struct llm_allocator *al = llm_allocator_new(NULL);
    const struct llm_backend_params bp = { .device = LLM_DEVICE_CPU, .n_threads = 2 };
    struct llm_backend *be = llm_backend_cpu_new(&bp, NULL);
    struct llm_error err = { 0 };
    p->flags |= LLM_TENSOR_OUTPUT;
    CHECK(!llm_allocator_alloc_graph(al, g, &err) && !llm_backend_compute(be, g, &err), "%s", err.msg);
    CHECK(memcmp(u->data, xd, sizeof xd) == 0, "pad then unpad changed the rows");
    struct llm_tensor r = *u;
    float rd[37 * 3];
    r.data = rd;
    llm_ref_compute(&r);
    CHECK(memcmp(rd, xd, sizeof xd) == 0, "the reference kernel's unpad");
    llm_backend_free(be);
    llm_allocator_free(al);
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

/* ---- the device enforces the layout (LLM_NPU_LAYOUT_ALIGN) ------------------------------------ */

/* t in device memory of its own (freed by the caller). */
static void on_device(struct llm_tensor *t)
{
    CHECK(aclrtMalloc(&t->data, llm_nbytes(t), ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc %s", t->name);
}

/* aligned_rows: does the executor take node (0) or refuse it naming the node and the input (1)? */
static int refused(const struct llm_tensor *node, const char *input)
{
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    const aclError rc = aclnnComputeGetWorkspaceSize(node, 1, true, &ws, &ex);
    if (rc == ACL_SUCCESS) {
        aclnnDestroyExecutor(ex);
        return 0;
    }
    const char *msg = aclGetRecentErrMsg();
    CHECK(msg && strstr(msg, node->name) && strstr(msg, input) && strstr(msg, "padded to 16"), "refusal: %s", msg);
    return 1;
}

/* An ALIGN kernel's executor refuses a source whose rows are not padded to 16 elements (the gemm's
 * weight and activation, the norm's and softmax's rows) and takes it padded, a single row, or any
 * row with the check off; element-wise kernels (BOTH) take dense rows. */
static void test_executor_enforces(void)
{
    aclInit(NULL);
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS, "aclrtSetDevice");
    struct llm_ctx *ctx = llm_ctx_new(32);
    struct llm_tensor *w = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 172, 8), *x = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 172, 3);
    struct llm_tensor *row = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 172, 1), *wp = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 172, 8);
    struct llm_tensor *xp = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 172, 3);
    llm_set_name(w, "w dense");
    llm_set_name(x, "x dense");
    llm_set_name(wp, "w padded");
    llm_pad_rows(wp, 16);
    llm_pad_rows(xp, 16);
    struct llm_tensor *mm = llm_mul_mat(ctx, w, x), *mm_w = llm_mul_mat(ctx, wp, x), *mm_ok = llm_mul_mat(ctx, wp, xp);
    struct llm_tensor *mm_row = llm_mul_mat(ctx, wp, row), *norm = llm_rms_norm(ctx, x, 1e-5f);
    struct llm_tensor *sm = llm_soft_max(ctx, x, NULL, 1.0f), *add = llm_add(ctx, x, x);
    struct llm_tensor *norm_ok = llm_rms_norm(ctx, xp, 1e-5f);
    llm_set_name(mm, "mm");
    llm_set_name(mm_w, "mm padded weight");
    llm_set_name(norm, "norm");
    llm_set_name(sm, "softmax");
    struct llm_tensor *all[] = { w, x, row, wp, xp, mm, mm_w, mm_ok, mm_row, norm, sm, add, norm_ok };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        on_device(all[i]);
    CHECK_EQ_INT(refused(mm, "w dense"), 1);
    CHECK_EQ_INT(refused(mm_w, "x dense"), 1);
    CHECK_EQ_INT(refused(norm, "x dense"), 1);
    CHECK_EQ_INT(refused(sm, "x dense"), 1);
    CHECK_EQ_INT(refused(mm_ok, ""), 0);
    CHECK_EQ_INT(refused(mm_row, ""), 0);
    CHECK_EQ_INT(refused(norm_ok, ""), 0);
    CHECK_EQ_INT(refused(add, ""), 0);
    uint64_t ws;
    aclOpExecutor *ex = NULL;
    CHECK(aclnnComputeGetWorkspaceSize(mm, 1, false, &ws, &ex) == ACL_SUCCESS, "dense rows with the check off");
    aclnnDestroyExecutor(ex);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        aclrtFree(all[i]->data);
    llm_ctx_free(ctx);
    aclFinalize();
}

/* The KV cache's kernels: FLASH_ATTN reading K and V rows of 8 elements (llama-2-tiny's width) and
 * SET_ROWS writing them are refused on dense cache rows and taken on padded ones (the npu's cache,
 * src/model/kv_cache.c); Q may come dense. */
static void test_executor_enforces_cache(void)
{
    aclInit(NULL);
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS, "aclrtSetDevice");
    struct llm_ctx *ctx = llm_ctx_new(32);
    struct llm_tensor *q = llm_new_tensor(ctx, LLM_TYPE_F32, 3, (const int64_t[]){ 8, 2, 1 });
    struct llm_tensor *cache[2], *fa[2], *store[2];
    struct llm_tensor *rows = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, 2), *ids = llm_new_tensor_1d(ctx, LLM_TYPE_I32, 2);
    for (int padded = 0; padded < 2; padded++) {
        cache[padded] = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, 32);
        llm_set_name(cache[padded], "%s cache", padded ? "padded" : "dense");
        if (padded)
            llm_pad_rows(cache[padded], NPU_ALIGN_ELEMS);
        fa[padded] = llm_flash_attn(ctx, q, cache[padded], cache[padded], NULL, 1.0f);
        store[padded] = llm_set_rows(ctx, cache[padded], rows, ids);
    }
    struct llm_tensor *all[] = { q, rows, ids, cache[0], cache[1], fa[0], fa[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        on_device(all[i]);
    for (int padded = 0; padded < 2; padded++)
        store[padded]->data = cache[padded]->data;
    CHECK(!llm_ctx_error(ctx), "%s", llm_ctx_error(ctx));
    CHECK_EQ_INT(refused(fa[0], "dense cache"), 1);
    CHECK_EQ_INT(refused(store[0], "dense cache"), 1);
    CHECK_EQ_INT(refused(fa[1], ""), 0);
    CHECK_EQ_INT(refused(store[1], ""), 0);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        aclrtFree(all[i]->data);
    llm_ctx_free(ctx);
    aclFinalize();
}

/* The pass's output is what the device runs: every kernel of a rewritten chain (dense input, 24-wide
 * rows, a padded weight) is taken by its executor, and with one pad removed the matmul that read it
 * is refused, naming the dense input. */
static void test_device_takes_rewrite(void)
{
    aclInit(NULL);
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS, "aclrtSetDevice");
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *w = weight(ctx), *x = llm_silu(ctx, input(ctx, 2, X2));
    llm_set_name(x, "x dense");
    struct llm_tensor *m1 = llm_mul_mat(ctx, w, x), *m2 = llm_mul_mat(ctx, w, llm_scale(ctx, m1, 2.0f));
    struct llm_tensor *out = llm_rms_norm(ctx, m2, 1e-5f);
    llm_set_name(m1, "first matmul");
    struct aligned a = align(ctx, &out, 1);
    for (int i = 0; i < a.g->n_leafs; i++)
        on_device(a.g->leafs[i]);
    for (int i = 0; i < a.g->n_nodes; i++)
        on_device(a.g->nodes[i]);
    int refusals = 0;
    for (int i = 0; i < a.g->n_nodes; i++)
        refusals += refused(a.g->nodes[i], "");
    CHECK(refusals == 0 && a.r.inserted == 2, "the rewritten graph: %d refusals, %d inserted", refusals, a.r.inserted);
    CHECK(converted(m1, 1, true), "the pad to remove");
    m1->src[1] = x;
    CHECK_EQ_INT(refused(m1, "x dense"), 1);
    for (int i = 0; i < a.g->n_leafs; i++)
        aclrtFree(a.g->leafs[i]->data);
    for (int i = 0; i < a.g->n_nodes; i++)
        aclrtFree(a.g->nodes[i]->data);
    release(&a, ctx);
    aclFinalize();
}

int main(void)
{
    test_chain();
    test_diamond();
    test_broadcast();
    test_odd_rank();
    test_graph_output();
    test_coinciding_layouts();
    test_dense_leaf();
    test_kv_store();
    test_split();
    test_linear_time();
    test_channel_norm_kernel();
    test_executor_enforces();
    test_executor_enforces_cache();
    test_device_takes_rewrite();
    return test_done("test_layout");
}
