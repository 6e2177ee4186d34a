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
    struct llm_tensor *t = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 32, 32);
    t->flags = LLM_TENSOR_WEIGHT;
    return t;
}

static const int64_t X2[] = { 32, 2 }, X3[] = { 32, 2, 3 }, ROW[] = { 32, 1 };

/* The outputs' graph, aligned (CHANNEL_NORMs inserted from ctx); modes of the nodes before it. */
struct aligned {
    struct llm_graph *g;
    enum npu_layout *modes;
    struct npu_layout_report r;
};

static struct aligned align(struct llm_ctx *ctx, struct llm_tensor **outs, int n_outs)
{
    struct aligned a = { .g = llm_graph_build(outs, n_outs) };
    a.modes = calloc((size_t)a.g->n_nodes + 1, sizeof *a.modes);
    CHECK_EQ_INT(npu_layout_align(a.g, ctx, a.modes, &a.r), 0);
    CHECK(!llm_ctx_error(ctx), "%s", llm_ctx_error(ctx));
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

/* Does n read source j through a CHANNEL_NORM of that direction (pad: into ALIGN)? */
static bool converted(const struct llm_tensor *n, int j, bool pad)
{
    const struct llm_tensor *c = n->src[j];
    return c && c->op == LLM_OP_CHANNEL_NORM && (c->op_params[0] != 0) == pad;
}

/* input -> SCALE -> SILU -> MUL_MAT -> SCALE -> MUL_MAT -> SILU (output). The BOTH nodes follow their
 * parents: the input side stays dense, the SCALE between the matmuls takes ALIGN, so there are two
 * conversions, a pad before the first matmul and an unpad before the output. Naive: four, one on each
 * edge between a matmul and a BOTH node. */
static void test_chain(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *w = weight(ctx);
    struct llm_tensor *m1 = llm_mul_mat(ctx, w, llm_silu(ctx, llm_scale(ctx, input(ctx, 2, X2), 0.5f)));
    struct llm_tensor *s = llm_scale(ctx, m1, 2.0f), *m2 = llm_mul_mat(ctx, w, s), *out = llm_silu(ctx, m2);
    struct aligned a = align(ctx, &out, 1);
    CHECK(a.r.inserted == 2 && a.r.naive == 4, "chain: %d inserted (2), naive %d (4)", a.r.inserted, a.r.naive);
    CHECK(converted(m1, 1, true), "chain: a pad before the first matmul");
    CHECK(s->src[0] == m1 && m2->src[1] == s, "chain: the SCALE between the matmuls follows its parent");
    CHECK(converted(out, 0, false), "chain: an unpad before the output");
    CHECK_EQ_INT(channel_norms(a.g), 2);
    release(&a, ctx);
}

/* x feeds a matmul (ALIGN) and a SCALE (NALIGN, from the input), and their ADD takes the mode of the
 * parent first in topological order; the other parent is converted. Then RMS_NORM (ALIGN) and an
 * output SCALE. ADD(a, b): ALIGN, pads for x and b, unpad before the output: 3. ADD(b, a): NALIGN,
 * pad for x, unpad of a, pad before the norm, unpad before the output: 4. */
static void test_diamond(void)
{
    for (int order = 0; order < 2; order++) {
        struct llm_ctx *ctx = llm_ctx_new(64);
        struct llm_tensor *x = input(ctx, 2, X2), *w = weight(ctx);
        struct llm_tensor *ma = llm_mul_mat(ctx, w, x), *sb = llm_scale(ctx, x, 3.0f);
        struct llm_tensor *add = order ? llm_add(ctx, sb, ma) : llm_add(ctx, ma, sb);
        struct llm_tensor *out = llm_scale(ctx, llm_rms_norm(ctx, add, 1e-5f), 1.0f);
        struct aligned a = align(ctx, &out, 1);
        CHECK(a.r.inserted == 3 + order, "diamond %d: %d inserted", order, a.r.inserted);
        CHECK(converted(add, 1, !order), "diamond %d: the later parent is converted", order);
        CHECK(add->src[0] == (order ? sb : ma), "diamond %d: the first parent is not", order);
        release(&a, ctx);
    }
}

/* A broadcasting ADD follows its full-size input, not its first parent: the one-row input is
 * visited first (by another output), yet the ADD takes the matmul's ALIGN and the row is padded. */
static void test_broadcast(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *small = llm_scale(ctx, llm_scale(ctx, input(ctx, 2, ROW), 2.0f), 1.0f);
    struct llm_tensor *row2 = llm_reshape_2d(ctx, small, 32, 1); /* so small's own node is not the output */
    struct llm_tensor *full = llm_mul_mat(ctx, weight(ctx), input(ctx, 2, X2));
    struct llm_tensor *bc = llm_add(ctx, full, small);
    struct llm_tensor *outs[] = { llm_silu(ctx, row2), llm_rms_norm(ctx, bc, 1e-5f) };
    struct aligned a = align(ctx, outs, 2);
    CHECK(converted(bc, 1, true) && bc->src[0] == full, "broadcast: the ADD is ALIGN, its one-row input padded");
    release(&a, ctx);
}

/* The same chain on [32, 2, 3] (rank 3) and [32, 2] (rank 2): input -> MUL_MAT -> SCALE -> SILU (output).
 * The matmul stays ALIGN at rank 3 (its kernel needs it: ALIGN only wins over odd rank); the SCALE
 * then is NALIGN at rank 3 (unpad before it) and follows the matmul at rank 2 (unpad after it). */
static void test_odd_rank(void)
{
    for (int rank = 2; rank <= 3; rank++) {
        struct llm_ctx *ctx = llm_ctx_new(64);
        struct llm_tensor *m = llm_mul_mat(ctx, weight(ctx), input(ctx, rank, rank == 3 ? X3 : X2));
        struct llm_tensor *s = llm_scale(ctx, m, 2.0f), *out = llm_silu(ctx, s);
        struct aligned a = align(ctx, &out, 1);
        CHECK_EQ_INT(a.r.inserted, 2);
        CHECK(converted(m, 1, true), "rank %d: the matmul's input padded", rank);
        CHECK(rank == 3 ? converted(s, 0, false) && out->src[0] == s : s->src[0] == m && converted(out, 0, false),
              "rank %d: the unpad's place", rank);
        release(&a, ctx);
    }
}

/* An ALIGN node the host reads: one unpad after it, which becomes the output. */
static void test_graph_output(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *out = llm_mul_mat(ctx, weight(ctx), input(ctx, 2, X2));
    struct aligned a = align(ctx, &out, 1);
    const struct llm_tensor *last = a.g->nodes[a.g->n_nodes - 1];
    CHECK(a.r.inserted == 2 && a.r.naive == 2, "output: %d inserted, naive %d", a.r.inserted, a.r.naive);
    CHECK(last->op == LLM_OP_CHANNEL_NORM && last->op_params[0] == 0 && last->src[0] == out &&
          (last->flags & LLM_TENSOR_OUTPUT) && !(out->flags & LLM_TENSOR_OUTPUT), "output: read through an unpad");
    release(&a, ctx);
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
    int rc = npu_layout_align(g, NULL, modes, &r);
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

int main(void)
{
    test_chain();
    test_diamond();
    test_broadcast();
    test_odd_rank();
    test_graph_output();
    test_linear_time();
    test_channel_norm_kernel();
    test_executor_enforces();
    return test_done("test_layout");
}
