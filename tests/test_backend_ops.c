/* test_backend_ops: every computing op of enum llm_op, over element types, odd shapes, broadcasts
 * and views, as one-node graphs run through struct llm_backend on the cpu backend (1 and 2 threads)
 * and the emulated npu (graph mode off and on, 1 and 2 device workers). Each case runs N_RUNS times
 * with new input contents and every result must equal the cpu backend's bit for bit: on the npu in
 * graph mode the later runs are replays of the captured graph, so this proves replays read the
 * current inputs. The npu's statistics must show one capture then hits (decode graphs) or eager
 * computes (graph mode off, or attention with more than one query row: a prefill). The npu alone
 * refuses exactly what CANN lacks (cann_runs); the npu and the cpu together under the scheduler,
 * the case's inputs spread over both, run every case, the ops CANN lacks falling back to the cpu.
 * All data lives in buffers of the backends and moves only through llm_tensor_set/get/memset/copy and the
 * split executor's copies, never through ->data. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "graph.h"
#include "harness.h"
#include "npu/layout.h"
#include "npu/npu_backend.h"
#include "ops/cpu/cpu.h"
#include "ops/kernels/blas.h"
#include "ops/types/blocks.h"
#include "ops/types/types.h"
#include "split_exec.h"

#define N_RUNS 3
#define MAX_LEAVES 8

/* The backends under test, each compared with the cpu configuration confs[ref]: the npu with the
 * cpu of as many threads (its kernels split work the same way: bit-exact), cpu/2t with cpu/1t. */
struct conf {
    const char *name;
    enum llm_device dev;
    int threads, graph, ref;
    bool split; /* the npu and the cpu under the scheduler, the leaves spread over both */
};

/* The split configuration comes last: scheduling rewires the graph's nodes to the split inputs. */
static const struct conf confs[] = {
    { "cpu/1t", LLM_DEVICE_CPU, 1, 0, 0, false },       { "cpu/2t", LLM_DEVICE_CPU, 2, 0, 0, false },
    { "npu-eager/1w", LLM_DEVICE_NPU, 1, 0, 0, false }, { "npu-eager/2w", LLM_DEVICE_NPU, 2, 0, 1, false },
    { "npu-graph/1w", LLM_DEVICE_NPU, 1, 1, 0, false }, { "npu-graph/2w", LLM_DEVICE_NPU, 2, 1, 1, false },
    { "npu+cpu/graph", LLM_DEVICE_NPU, 2, 1, 1, true },
};
#define N_CONFS ((int)(sizeof confs / sizeof confs[0]))

/* Relative rounding allowed between thread counts on MUL_MAT's BLAS path only (MUL_MAT_SWIGLU's too): each thread runs
 * sgemm on its own slice of weight rows, and OpenBLAS's blocking (so its summation order) depends
 * on the slice height. Every other result must not depend on the thread count. */
#define BLAS_SPLIT_TOL 1e-5

/* How a leaf's host contents are made, anew for every run. */
enum fill {
    FILL_RAND,   /* uniform in [-amp, amp); quantized types: those floats quantized          */
    FILL_IDS,    /* I32 uniform in [0, lim): with more ids than lim, repeats are certain      */
    FILL_PERM,   /* I32 distinct values in [0, lim) (SET_ROWS: one writer per row)             */
    FILL_POS,    /* I32 start + i with start in [1, 500]: positions not starting at 0          */
    FILL_MASK,   /* F32: column 0 open (0), the others -inf one time in four, else in (-1, 0] */
    FILL_CAUSAL, /* F32: row i of R sees cells [0, used - R + i], used in (lim - 4, lim]       */
    FILL_FACTORS, /* F32 in [0.5, 1.5): RoPE frequency factors (divisors, so kept away from 0)  */
};

struct leaf {
    struct llm_tensor *t;
    enum fill fill;
    float amp;
    int32_t lim;
};

/* The case being built: its tensors (one context, reset per case) and how to fill its leaves. */
struct tcase {
    char name[128];
    struct llm_ctx *ctx;
    struct leaf leaves[MAX_LEAVES];
    int n_leaves;
    bool too_many; /* input() found leaves[] full */
    int rope_tables; /* RoPE table fills the npu must launch per graph: distinct ROPE parameter sets */
};

static struct tcase tc;
static int split_fallbacks; /* cases the npu+cpu configuration ran on the cpu */
static int op_cases[LLM_OP_COUNT];

static float frand(void)
{
    return (float)(test_rand() >> 8) / 8388608.0f - 1.0f; /* [-1, 1) */
}

static struct llm_ctx *begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static struct llm_ctx *begin(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tc.name, sizeof tc.name, fmt, ap);
    va_end(ap);
    llm_ctx_reset(tc.ctx);
    tc.n_leaves = 0;
    tc.too_many = false;
    tc.rope_tables = 0;
    return tc.ctx;
}

static struct llm_tensor *input(enum llm_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                                enum fill fill, float amp, int32_t lim)
{
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    struct llm_tensor *t = llm_new_tensor(tc.ctx, type, 4, ne);
    llm_set_name(t, "in%d", tc.n_leaves);
    if (tc.n_leaves < MAX_LEAVES)
        tc.leaves[tc.n_leaves++] = (struct leaf){ t, fill, amp, lim };
    else
        tc.too_many = true;
    return t;
}

/* Random values of any float or quantized type. */
static struct llm_tensor *in_rand(enum llm_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
    return input(type, ne0, ne1, ne2, ne3, FILL_RAND, 1.0f, 0);
}

static struct llm_tensor *in_i32(enum fill fill, int32_t lim, int64_t n)
{
    return input(LLM_TYPE_I32, n, 1, 1, 1, fill, 0.0f, lim);
}

static struct llm_tensor *in_mask(enum fill fill, int32_t lim, int64_t ne0, int64_t ne1, int64_t ne2)
{
    return input(LLM_TYPE_F32, ne0, ne1, ne2, 1, fill, 0.0f, lim);
}

/* ---- host contents ----------------------------------------------------------------------------- */

static void put_half(uint8_t *p, float v)
{
    uint16_t h = llm_fp32_to_fp16(v);
    memcpy(p, &h, sizeof h);
}

/* Quantized types without a quantizer: random quants with small positive fp16 scales (random scale
 * bytes could be NaN or huge). Returns false for a type it does not know. */
static bool random_blocks(enum llm_type type, int64_t n, uint8_t *p)
{
    const struct llm_type_info *ti = llm_type_info(type);
    size_t d, dmin = SIZE_MAX;
    switch (type) {
    case LLM_TYPE_Q2_K: d = offsetof(struct block_q2_K, d); dmin = offsetof(struct block_q2_K, dmin); break;
    case LLM_TYPE_Q3_K: d = offsetof(struct block_q3_K, d); break;
    case LLM_TYPE_Q5_K: d = offsetof(struct block_q5_K, d); dmin = offsetof(struct block_q5_K, dmin); break;
    default: return false;
    }
    const int64_t nblk = n / ti->blck_size;
    for (size_t i = 0; i < (size_t)nblk * ti->type_size; i++)
        p[i] = (uint8_t)test_rand();
    for (int64_t b = 0; b < nblk; b++) {
        uint8_t *blk = p + b * (int64_t)ti->type_size;
        put_half(blk + d, 0.01f + 0.005f * frand());
        if (dmin != SIZE_MAX)
            put_half(blk + dmin, 0.005f + 0.0025f * frand());
    }
    return true;
}

static void fill_rand(enum llm_type type, int64_t n, float amp, void *buf)
{
    const struct llm_type_traits *tt = llm_type_traits(type);
    if (!tt->from_float) {
        CHECK(random_blocks(type, n, buf), "%s: no way to make valid %s data", tc.name,
              llm_type_name(type));
        return;
    }
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        f[i] = amp * frand();
    tt->from_float(f, buf, n);
    free(f);
}

static void fill_mask(const struct leaf *l, float *m)
{
    const int64_t ne0 = l->t->ne[0], ne1 = l->t->ne[1], rows = llm_nrows(l->t);
    const int32_t used = l->lim - (int32_t)(test_rand() % 4);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < ne0; j++) {
            float v;
            if (l->fill == FILL_CAUSAL)
                v = j <= used - ne1 + r % ne1 ? 0.0f : -INFINITY;
            else if (j == 0)
                v = 0.0f;
            else
                v = test_rand() % 4 == 0 ? -INFINITY : -fabsf(frand());
            m[r * ne0 + j] = v;
        }
}

static void fill_leaf(const struct leaf *l, void *buf)
{
    const int64_t n = llm_nelements(l->t);
    int32_t *ids = buf;
    switch (l->fill) {
    case FILL_RAND:
        fill_rand(l->t->type, n, l->amp, buf);
        break;
    case FILL_IDS:
        for (int64_t i = 0; i < n; i++)
            ids[i] = (int32_t)(test_rand() % (uint32_t)l->lim);
        break;
    case FILL_PERM: {
        int32_t *all = malloc((size_t)l->lim * sizeof *all);
        for (int32_t i = 0; i < l->lim; i++)
            all[i] = i;
        for (int32_t i = l->lim - 1; i > 0; i--) {
            int32_t j = (int32_t)(test_rand() % (uint32_t)(i + 1)), tmp = all[i];
            all[i] = all[j];
            all[j] = tmp;
        }
        memcpy(ids, all, (size_t)n * sizeof *ids);
        free(all);
        break;
    }
    case FILL_POS: {
        int32_t start = 1 + (int32_t)(test_rand() % 500);
        for (int64_t i = 0; i < n; i++)
            ids[i] = start + (int32_t)i;
        break;
    }
    case FILL_MASK:
    case FILL_CAUSAL:
        fill_mask(l, buf);
        break;
    case FILL_FACTORS:
        for (int64_t i = 0; i < n; i++)
            ((float *)buf)[i] = 1.0f + 0.5f * frand();
        break;
    }
}

/* ---- running a case on one backend ------------------------------------------------------------ */

static bool owns_memory(const struct llm_tensor *t)
{
    return !t->view_src;
}

/* Attention (the first FLASH_ATTN, else SOFT_MAX node) with more than one query row: the npu runs
 * such a graph eagerly even in graph mode. */
static bool is_prefill(const struct llm_graph *g)
{
    static const enum llm_op attn[] = { LLM_OP_FLASH_ATTN, LLM_OP_SOFT_MAX };
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i]->op == attn[a])
                return g->nodes[i]->src[0]->ne[1] > 1;
    return false;
}

static int count_computing(const struct llm_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !llm_op_is_noop(g->nodes[i]->op);
    return n;
}

/* The CHANNEL_NORM nodes the npu's layout pass put in g (LLM_NPU_LAYOUT_ALIGN, on here). */
static int count_pads(const struct llm_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i]->op == LLM_OP_CHANNEL_NORM;
    return n;
}

/* The npu counts each kernel it launches or replays: one per computing node (the layout pass's
 * CHANNEL_NORMs among them) plus each RoPE table fill, and one table fill per distinct set of ROPE
 * parameters in a graph (tc.rope_tables). */
static void check_stats(const struct conf *cf, const struct llm_backend *b, const struct llm_graph *g)
{
    struct llm_npu_stats s = { 0 };
    const uint64_t tables = (uint64_t)tc.rope_tables, pads = (uint64_t)count_pads(g);
    const uint64_t launches = (uint64_t)count_computing(g) + tables;
    if (cf->dev == LLM_DEVICE_CPU) {
        CHECK(b->iface->get_stats((struct llm_backend *)b, NULL, 0) == 0, "%s on %s: the cpu keeps figures", tc.name,
              cf->name);
        return;
    }
    llm_npu_get_stats((struct llm_backend *)b, &s);
    if (!cf->graph || is_prefill(g)) {
        CHECK(s.eager_graphs == N_RUNS && s.captures == 0 && s.hits == 0 && s.misses == 0 && s.replays == 0 &&
                  s.eager_launches == N_RUNS * launches && s.rope_tables == N_RUNS * tables &&
                  s.layout_pads == N_RUNS * pads,
              "%s on %s: eager %llu captures %llu hits %llu misses %llu replays %llu launches %llu tables %llu",
              tc.name, cf->name, (unsigned long long)s.eager_graphs, (unsigned long long)s.captures,
              (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.replays,
              (unsigned long long)s.eager_launches, (unsigned long long)s.rope_tables);
    } else {
        /* the first compute is a miss and its capture; the others are hits replaying it */
        CHECK(s.captures == 1 && s.misses == 1 && s.hits == N_RUNS - 1 && s.replays == N_RUNS &&
                  s.eager_graphs == 0 && s.eager_launches == launches && s.ops_replayed == N_RUNS * launches &&
                  s.rope_tables == tables && s.layout_pads == pads,
              "%s on %s: captures %llu misses %llu hits %llu replays %llu eager %llu launches %llu ops %llu "
              "tables %llu",
              tc.name, cf->name, (unsigned long long)s.captures, (unsigned long long)s.misses,
              (unsigned long long)s.hits, (unsigned long long)s.replays, (unsigned long long)s.eager_graphs,
              (unsigned long long)s.eager_launches, (unsigned long long)s.ops_replayed,
              (unsigned long long)s.rope_tables);
    }
}

/* t in a buffer of its own in b's memory (b NULL: plain host memory); false when out of memory. */
static bool place_new(struct llm_backend *b, struct llm_tensor *t)
{
    struct llm_buffer *buf = llm_buffer_new(b, llm_nbytes(t));
    if (buf)
        llm_buffer_place(buf, t, 0);
    return buf != NULL;
}

static void unplace(struct llm_tensor *t)
{
    llm_buffer_free(t->buffer);
    t->buffer = NULL;
    t->data = NULL;
}

/* Gives every leaf and computing node a buffer of b's memory; views get their root's + offset (the
 * nodes are ordered so a view's root comes first). */
static bool bind(struct llm_backend *b, struct llm_graph *g)
{
    bool ok = true;
    for (int i = 0; i < g->n_leafs; i++)
        ok &= place_new(b, g->leafs[i]);
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *t = g->nodes[i];
        if (owns_memory(t))
            ok &= place_new(b, t);
        else {
            t->data = t->view_src->data ? (char *)t->view_src->data + t->view_offs : NULL;
            t->buffer = t->view_src->buffer;
        }
    }
    return ok;
}

static void unbind(struct llm_graph *g)
{
    for (int i = 0; i < g->n_leafs; i++)
        unplace(g->leafs[i]);
    for (int i = 0; i < g->n_nodes; i++)
        if (owns_memory(g->nodes[i]))
            unplace(g->nodes[i]);
}

/* One run: upload this run's inputs, poison the outputs (0xff bytes are NaN in F32 and F16, so an
 * element no kernel wrote shows up), compute, download the output's whole root. */
static int run_once(struct llm_backend *b, struct llm_graph *g, void *const *host, struct llm_tensor *out,
                    void *result, struct llm_error *err)
{
    int rc = LLM_OK;
    for (int i = 0; i < tc.n_leaves && !rc; i++)
        rc = llm_tensor_set(tc.leaves[i].t, host[i], 0, llm_nbytes(tc.leaves[i].t), err);
    for (int i = 0; i < g->n_nodes && !rc; i++)
        if (owns_memory(g->nodes[i]))
            rc = llm_tensor_memset(g->nodes[i], 0xff, 0, llm_nbytes(g->nodes[i]), err);
    if (!rc)
        rc = llm_backend_compute(b, g, err);
    struct llm_tensor *root = llm_view_root(out);
    if (!rc)
        rc = llm_tensor_get(root, result, 0, llm_nbytes(root), err);
    return rc;
}

/* What CANN runs (ggml-cann's supports_op, 3f545be), restated as the npu's oracle: matmul weights
 * F32/F16/BF16, or Q8_0/Q4_0 with both operands contiguous; GET_ROWS from float or Q8_0 rows;
 * SET_ROWS into float rows; RoPE rows of at most 896 elements. */
static bool packed(const struct llm_tensor *t)
{
    size_t next = llm_row_size(t->type, t->ne[0]);
    bool ok = t->nb[0] == llm_type_info(t->type)->type_size;
    for (int d = 1; d < 4; next *= (size_t)t->ne[d], d++)
        ok = ok && (t->ne[d] == 1 || t->nb[d] == next);
    return ok;
}

static bool cann_runs(const struct llm_tensor *node)
{
    const enum llm_type t = node->src[0] ? node->src[0]->type : node->type;
    const bool flt = t == LLM_TYPE_F32 || t == LLM_TYPE_F16 || t == LLM_TYPE_BF16;
    switch (node->op) {
    case LLM_OP_MUL_MAT:
    case LLM_OP_MUL_MAT_ADD: /* the same matmul */
    case LLM_OP_MUL_MAT_SWIGLU: /* two of them: both weights of the one type */
        return flt || ((t == LLM_TYPE_Q8_0 || t == LLM_TYPE_Q4_0) && packed(node->src[0]) && packed(node->src[1]));
    case LLM_OP_GET_ROWS: return flt || t == LLM_TYPE_Q8_0;
    case LLM_OP_SET_ROWS: return flt;
    case LLM_OP_ROPE: return node->src[0]->ne[0] <= 896;
    case LLM_OP_ROPE_QK: return node->src[0]->ne[0] <= 896 && node->src[2]->ne[0] <= 896;
    case LLM_OP_NONE: case LLM_OP_ADD: case LLM_OP_MUL: case LLM_OP_SCALE: case LLM_OP_RMS_NORM:
    case LLM_OP_SOFT_MAX: case LLM_OP_FLASH_ATTN: case LLM_OP_SWIGLU: case LLM_OP_SILU: case LLM_OP_CPY:
    case LLM_OP_CONT: case LLM_OP_VIEW: case LLM_OP_RESHAPE: case LLM_OP_PERMUTE: case LLM_OP_TRANSPOSE:
    case LLM_OP_CHANNEL_NORM: case LLM_OP_FUSED: case LLM_OP_ADD_RMS_NORM:
    case LLM_OP_RMS_NORM_MUL: case LLM_OP_COUNT: return true;
    }
    return true;
}

/* An npu for the case: with LLM_NPU_LAYOUT_ALIGN on (the default), except for a case writing rows
 * into a leaf that does not have the npu's padded rows (a SET_ROWS into a dense "cache"), which the
 * device refuses (tests/test_layout.c): there the op's arithmetic is checked with the layout off. */
static struct llm_backend *npu_for(const struct llm_graph *g, const struct llm_backend_params *p, struct llm_error *err)
{
    bool dense_store = false;
    for (int i = 0; i < g->n_nodes; i++)
        dense_store = dense_store || (g->nodes[i]->op == LLM_OP_SET_ROWS && !npu_layout_rows_aligned(g->nodes[i]->src[0]));
    if (dense_store)
        setenv("LLM_NPU_LAYOUT_ALIGN", "off", 1);
    struct llm_backend *b = llm_backend_new(p, err);
    unsetenv("LLM_NPU_LAYOUT_ALIGN");
    return b;
}

/* The backend whose buffer holds the leaf, as a context's scheduler asks (leaf i was placed on the
 * npu, backend 0, when even, on the cpu when odd). */
static int leaf_home(void *user, const struct llm_tensor *leaf)
{
    struct llm_backend **backends = user;
    return llm_tensor_backend(leaf) == backends[0] ? 0 : 1;
}

static bool home_runs(void *user, int b, const struct llm_tensor *node)
{
    struct llm_backend **backends = user;
    return backends[b]->iface->supports_op(backends[b], node);
}

/* The case on the npu and the cpu as the scheduler splits it, each leaf in its home's memory: the
 * ops the npu lacks fall back to the cpu, reading copies of the npu's leaves. */
static bool run_split(const struct conf *cf, struct llm_graph *g, struct llm_tensor *out,
                      void *host[N_RUNS][MAX_LEAVES], void *results[N_RUNS])
{
    struct llm_error err = { 0 };
    const struct llm_backend_option opts[] = { { LLM_DEVICE_NPU, "acl_graph", cf->graph } };
    const struct llm_backend_params p = { .device = LLM_DEVICE_NPU, .n_threads = cf->threads, .options = opts, .n_options = 1 };
    const struct llm_backend_params pc = { .device = LLM_DEVICE_CPU, .n_threads = cf->threads };
    struct llm_backend *bk[2] = { npu_for(g, &p, &err), llm_backend_new(&pc, &err) };
    struct llm_split_exec x = { 0 };
    const struct llm_sched_query q = { .n_backends = 2, .leaf_backend = leaf_home, .supports = home_runs, .user = bk };
    int rc = bk[0] && bk[1] ? llm_split_exec_init(&x, bk, 2, &err) : LLM_ERR_NOMEM;
    for (int i = 0; i < tc.n_leaves && !rc; i++) {
        if (!place_new(bk[i % 2], tc.leaves[i].t))
            rc = LLM_ERR_NOMEM;
    }
    if (!rc)
        rc = llm_split_exec_prepare(&x, g, &q, true, &err);
    if (!rc)
        rc = llm_split_exec_prepare(&x, g, &q, false, &err);
    for (int i = 0; i < g->n_nodes && !rc; i++) /* what CANN lacks falls back to the cpu */
        if (!llm_op_is_noop(g->nodes[i]->op) && !cann_runs(g->nodes[i])) {
            CHECK(g->nodes[i]->backend == 1, "%s: %s left on backend %d", tc.name, cf->name, g->nodes[i]->backend);
            split_fallbacks++;
        }
    struct llm_tensor *root = llm_view_root(out);
    for (int r = 0; r < N_RUNS && !rc; r++) {
        for (int i = 0; i < tc.n_leaves && !rc; i++)
            rc = llm_tensor_set(tc.leaves[i].t, host[r][i], 0, llm_nbytes(tc.leaves[i].t), &err);
        if (!rc && root->op != LLM_OP_NONE) /* poison a computed output, not a leaf it writes into */
            rc = llm_tensor_memset(root, 0xff, 0, llm_nbytes(root), &err);
        if (!rc)
            rc = llm_split_exec_run(&x, &err);
        if (!rc)
            rc = llm_tensor_get(root, results[r], 0, llm_nbytes(root), &err);
    }
    CHECK(rc == LLM_OK, "%s on %s: %s", tc.name, cf->name, err.msg);
    for (int i = 0; i < tc.n_leaves; i++)
        unplace(tc.leaves[i].t);
    llm_split_exec_release(&x);
    llm_backend_free(bk[0]);
    llm_backend_free(bk[1]);
    return rc == LLM_OK;
}

/* Runs the case N_RUNS times on one backend configuration; results[r] gets run r's output. False
 * when the configuration does not run it: an op CANN lacks, on the npu alone. */
static bool run_conf(const struct conf *cf, struct llm_graph *g, struct llm_tensor *out,
                     void *host[N_RUNS][MAX_LEAVES], void *results[N_RUNS])
{
    if (cf->split)
        return run_split(cf, g, out, host, results);
    struct llm_error err = { 0 };
    const struct llm_backend_option opts[] = { { LLM_DEVICE_NPU, "acl_graph", cf->graph }, { LLM_DEVICE_NPU, "launch_us", 0 } };
    const struct llm_backend_params p = { .device = cf->dev, .n_threads = cf->threads, .options = opts, .n_options = 2 };
    struct llm_backend *b = cf->dev == LLM_DEVICE_NPU ? npu_for(g, &p, &err) : llm_backend_new(&p, &err);
    CHECK(b != NULL, "%s: cannot create %s: %s", tc.name, cf->name, err.msg);
    if (!b)
        return false;
    bool runs = true;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct llm_tensor *node = g->nodes[i];
        if (llm_op_is_noop(node->op))
            continue;
        const bool want = cf->dev == LLM_DEVICE_CPU || cann_runs(node);
        CHECK(b->iface->supports_op(b, node) == want, "%s: %s %s it", tc.name, cf->name,
              want ? "does not support" : "claims to support");
        runs = runs && want;
    }
    if (!runs) {
        llm_backend_free(b);
        return false;
    }
    /* the backend's own passes first, as the split executor runs them (the npu's layout pass puts
     * its CHANNEL_NORMs in g; running it again on the rewritten g adds nothing) */
    int rc = b->iface->graph_optimize && b->iface->graph_optimize(b, g, 0, g->n_nodes) < 0 ? LLM_ERR_NOMEM : LLM_OK;
    rc = !rc && bind(b, g) ? LLM_OK : LLM_ERR_NOMEM;
    CHECK(rc == LLM_OK, "%s on %s: out of backend memory", tc.name, cf->name);
    if (!rc) {
        rc = b->iface->graph_reserve(b, g, &err);
        CHECK(rc == LLM_OK, "%s on %s: reserve: %s", tc.name, cf->name, err.msg);
    }
    for (int r = 0; r < N_RUNS && !rc; r++) {
        rc = run_once(b, g, host[r], out, results[r], &err);
        CHECK(rc == LLM_OK, "%s on %s, run %d: %s", tc.name, cf->name, r, err.msg);
    }
    if (!rc)
        check_stats(cf, b, g);
    unbind(g);
    llm_backend_free(b);
    return rc == LLM_OK;
}

/* ---- comparing -------------------------------------------------------------------------------- */

static float elem_f32(enum llm_type t, const void *buf, size_t i)
{
    uint16_t h;
    float f;
    switch (t) {
    case LLM_TYPE_F16: memcpy(&h, (const uint16_t *)buf + i, sizeof h); return llm_fp16_to_fp32(h);
    case LLM_TYPE_BF16: memcpy(&h, (const uint16_t *)buf + i, sizeof h); return llm_bf16_to_fp32(h);
    default: memcpy(&f, (const float *)buf + i, sizeof f); return f;
    }
}

static bool is_float_type(enum llm_type t)
{
    return t == LLM_TYPE_F32 || t == LLM_TYPE_F16 || t == LLM_TYPE_BF16;
}

/* Bit-exact equality (or every |diff| within tol × the largest |want|, at least tol, when tol > 0);
 * on a difference, the largest |diff| and where (as floats). */
static void compare(const struct conf *cf, int run, const struct llm_tensor *root, const void *got,
                    const void *want, double tol)
{
    const size_t bytes = llm_nbytes(root);
    bool same = memcmp(got, want, bytes) == 0;
    double max_diff = 0;
    size_t at = 0;
    if (!same && is_float_type(root->type)) {
        const size_t n = bytes / llm_type_info(root->type)->type_size;
        double scale = 1.0;
        for (size_t i = 0; i < n; i++) {
            double w = elem_f32(root->type, want, i), d = fabs((double)elem_f32(root->type, got, i) - w);
            scale = fmax(scale, fabs(w));
            if (!(d <= max_diff)) { /* NaN counts as the largest */
                max_diff = d;
                at = i;
            }
        }
        same = tol > 0 && max_diff <= tol * scale;
    }
    CHECK(same, "%s on %s, run %d: differs from %s: max |diff| %g at element %zu (%.9g vs %.9g)", tc.name,
          cf->name, run, confs[cf->ref].name, max_diff, at, (double)elem_f32(root->type, got, at),
          (double)elem_f32(root->type, want, at));
}

/* A MUL_MAT, or the products of a MUL_MAT_SWIGLU, on the BLAS path. */
static bool uses_blas(const struct llm_tensor *out)
{
    struct llm_tensor mm = *out;
    mm.op = LLM_OP_MUL_MAT;
    mm.src[2] = NULL;
    return (out->op == LLM_OP_MUL_MAT || out->op == LLM_OP_MUL_MAT_SWIGLU) && llm_cpu_mul_mat_uses_blas(&mm);
}

/* The reference output must be fully written (no poison left) and change with the inputs (else
 * matching it would not prove that replays read the new inputs). */
static void check_reference(const struct llm_tensor *root, void *results[N_RUNS])
{
    const size_t bytes = llm_nbytes(root);
    if (is_float_type(root->type)) {
        const size_t n = bytes / llm_type_info(root->type)->type_size;
        for (int r = 0; r < N_RUNS; r++) {
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += !isfinite(elem_f32(root->type, results[r], i));
            CHECK(bad == 0, "%s: %zu of %zu reference outputs not finite (run %d)", tc.name, bad, n, r);
        }
    }
    for (int r = 1; r < N_RUNS; r++)
        CHECK(memcmp(results[r], results[r - 1], bytes) != 0, "%s: runs %d and %d gave the same output", tc.name,
              r - 1, r);
}

/* Runs the graph of out on every configuration and compares (see the top of the file); a case is
 * one computing node unless it says how many it builds (n_computing). */
static void run_graph(struct llm_tensor *out, int n_computing)
{
    CHECK(!llm_ctx_overflowed(tc.ctx) && !tc.too_many, "%s: too many tensors", tc.name);
    struct llm_graph *g = llm_graph_build(&out, 1);
    CHECK(g != NULL, "%s: graph build failed", tc.name);
    if (!g || llm_ctx_overflowed(tc.ctx) || tc.too_many) {
        llm_graph_free(g);
        return;
    }
    /* every leaf must come from input(), which knows how to fill it */
    CHECK(g->n_leafs == tc.n_leaves, "%s: %d leaves in the graph, %d made by input()", tc.name, g->n_leafs,
          tc.n_leaves);
    CHECK(count_computing(g) == n_computing, "%s: %d computing nodes, want %d", tc.name, count_computing(g),
          n_computing);
    if (g->n_leafs != tc.n_leaves) {
        llm_graph_free(g);
        return;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (!llm_op_is_noop(g->nodes[i]->op))
            op_cases[g->nodes[i]->op]++;

    void *host[N_RUNS][MAX_LEAVES] = { { 0 } };
    void *results[N_CONFS][N_RUNS];
    const struct llm_tensor *root = llm_view_root(out);
    for (int r = 0; r < N_RUNS; r++)
        for (int i = 0; i < tc.n_leaves; i++) {
            host[r][i] = calloc(1, llm_nbytes(tc.leaves[i].t));
            fill_leaf(&tc.leaves[i], host[r][i]);
        }
    for (int c = 0; c < N_CONFS; c++)
        for (int r = 0; r < N_RUNS; r++)
            results[c][r] = calloc(1, llm_nbytes(root));

    const double tol = uses_blas(out) ? BLAS_SPLIT_TOL : 0;
    bool ran[N_CONFS];
    for (int c = 0; c < N_CONFS; c++)
        ran[c] = run_conf(&confs[c], g, out, host, results[c]);
    for (int c = 0; c < N_CONFS; c++) {
        const struct conf *cf = &confs[c];
        if (cf->ref == c)
            check_reference(root, results[c]);
        for (int r = 0; cf->ref != c && ran[c] && r < N_RUNS; r++)
            compare(cf, r, root, results[c][r], results[cf->ref][r],
                    cf->threads == confs[cf->ref].threads ? 0 : tol);
    }

    for (int r = 0; r < N_RUNS; r++)
        for (int i = 0; i < tc.n_leaves; i++)
            free(host[r][i]);
    for (int c = 0; c < N_CONFS; c++)
        for (int r = 0; r < N_RUNS; r++)
            free(results[c][r]);
    llm_graph_free(g);
}

static void run_case(struct llm_tensor *out)
{
    run_graph(out, 1);
}

/* ---- the cases -------------------------------------------------------------------------------- */

static const enum llm_type weight_types[] = {
    LLM_TYPE_F32,  LLM_TYPE_F16,  LLM_TYPE_BF16, LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0,
    LLM_TYPE_Q5_1, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES ((int)(sizeof weight_types / sizeof weight_types[0]))

static const char *tname(enum llm_type t)
{
    return llm_type_name(t);
}

/* A row length valid for type t: odd for plain types, several blocks otherwise. */
static int64_t row_len(enum llm_type t, int64_t plain)
{
    const int64_t blck = llm_type_info(t)->blck_size;
    return blck == 1 ? plain : blck == 256 ? 256 : 3 * blck;
}

static void test_get_rows(void)
{
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
        enum llm_type t = weight_types[i];
        const int64_t ne0 = row_len(t, 19);
        for (int64_t n = 1; n <= 11; n += 10) { /* one token, and 11 ids over 7 rows: repeats */
            struct llm_ctx *ctx = begin("GET_ROWS %s [%lld, 7] ids %lld", tname(t), (long long)ne0, (long long)n);
            struct llm_tensor *a = in_rand(t, ne0, 7, 1, 1);
            run_case(llm_get_rows(ctx, a, in_i32(FILL_IDS, 7, n)));
        }
    }
    /* rows of a padded view, and of a transposed matrix (elements nb[0] apart) */
    struct llm_ctx *ctx = begin("GET_ROWS F32 view [19, 7] of [24, 7]");
    struct llm_tensor *a = in_rand(LLM_TYPE_F32, 24, 7, 1, 1);
    run_case(llm_get_rows(ctx, llm_view_2d(ctx, a, 19, 7, a->nb[1], 2 * sizeof(float)),
                          in_i32(FILL_IDS, 7, 9)));
    ctx = begin("GET_ROWS F16 transposed [19, 7]");
    a = in_rand(LLM_TYPE_F16, 7, 19, 1, 1);
    run_case(llm_get_rows(ctx, llm_transpose(ctx, a), in_i32(FILL_IDS, 7, 9)));
}

static void test_set_rows(void)
{
    static const enum llm_type types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (int64_t n = 1; n <= 4; n += 3) {
            struct llm_ctx *ctx = begin("SET_ROWS %s [19, 9] <- %lld rows", tname(types[i]), (long long)n);
            struct llm_tensor *dst = in_rand(types[i], 19, 9, 1, 1);
            struct llm_tensor *rows = in_rand(LLM_TYPE_F32, 19, n, 1, 1);
            run_case(llm_set_rows(ctx, dst, rows, in_i32(FILL_PERM, 9, n)));
        }
    /* rows from a non-contiguous source (a transposed matrix) */
    struct llm_ctx *ctx = begin("SET_ROWS F16 [19, 9] <- transposed rows");
    struct llm_tensor *dst = in_rand(LLM_TYPE_F16, 19, 9, 1, 1);
    struct llm_tensor *rows = in_rand(LLM_TYPE_F32, 3, 19, 1, 1);
    run_case(llm_set_rows(ctx, dst, llm_transpose(ctx, rows), in_i32(FILL_PERM, 9, 3)));
}

static struct llm_tensor *binary_op(struct llm_ctx *ctx, enum llm_op op, struct llm_tensor *a, struct llm_tensor *b)
{
    return op == LLM_OP_ADD ? llm_add(ctx, a, b) : llm_mul(ctx, a, b);
}

/* src0 [19, 5, 3] contiguous or a permutation; src1 of shape b_ne (broadcast) or a permutation. */
static void test_binary(enum llm_op op)
{
    static const int64_t b_shapes[][3] = { { 19, 5, 3 }, { 19, 1, 3 }, { 1, 5, 1 }, { 19, 1, 1 }, { 1, 1, 1 } };
    for (size_t s = 0; s < sizeof b_shapes / sizeof b_shapes[0]; s++)
        for (int perm = 0; perm < 2; perm++) {
            const int64_t *bs = b_shapes[s];
            struct llm_ctx *ctx = begin("%s [19, 5, 3]%s, [%lld, %lld, %lld]", llm_op_name(op),
                                        perm ? " permuted" : "", (long long)bs[0], (long long)bs[1], (long long)bs[2]);
            struct llm_tensor *a = perm ? llm_permute(ctx, in_rand(LLM_TYPE_F32, 19, 3, 5, 1), 0, 2, 1, 3)
                                        : in_rand(LLM_TYPE_F32, 19, 5, 3, 1);
            run_case(binary_op(ctx, op, a, in_rand(LLM_TYPE_F32, bs[0], bs[1], bs[2], 1)));
        }
    /* both sources non-contiguous: src0 transposed, src1 a column of a wider matrix */
    struct llm_ctx *ctx = begin("%s transposed [19, 5], view [19, 1]", llm_op_name(op));
    struct llm_tensor *a = llm_transpose(ctx, in_rand(LLM_TYPE_F32, 5, 19, 1, 1));
    struct llm_tensor *b = in_rand(LLM_TYPE_F32, 23, 2, 1, 1);
    run_case(binary_op(ctx, op, a, llm_view_2d(ctx, b, 19, 1, b->nb[1], b->nb[1] + 4 * sizeof(float))));
}

/* One-source float ops on a contiguous tensor, a permutation and a transposed matrix. */
static void test_unary(enum llm_op op)
{
    for (int layout = 0; layout < 3; layout++) {
        static const char *const names[] = { "", " permuted", " transposed" };
        struct llm_ctx *ctx = begin("%s [33, 4, 3]%s", llm_op_name(op), names[layout]);
        struct llm_tensor *a = layout == 0   ? in_rand(LLM_TYPE_F32, 33, 4, 3, 1)
                               : layout == 1 ? llm_permute(ctx, in_rand(LLM_TYPE_F32, 33, 3, 4, 1), 0, 2, 1, 3)
                                             : llm_transpose(ctx, in_rand(LLM_TYPE_F32, 4, 33, 3, 1));
        struct llm_tensor *out = op == LLM_OP_SCALE      ? llm_scale(ctx, a, layout ? -0.37f : 1.0f / 8)
                                 : op == LLM_OP_RMS_NORM ? llm_rms_norm(ctx, a, layout ? 1e-5f : 1e-6f)
                                                         : llm_silu(ctx, a);
        run_case(out);
    }
}

/* SWIGLU needs equal shapes: contiguous, a permuted gate, and both halves of one fused matrix. */
static void test_swiglu(void)
{
    struct llm_ctx *ctx = begin("SWIGLU [19, 5, 3]");
    struct llm_tensor *g = in_rand(LLM_TYPE_F32, 19, 5, 3, 1);
    run_case(llm_swiglu(ctx, g, in_rand(LLM_TYPE_F32, 19, 5, 3, 1)));
    ctx = begin("SWIGLU permuted gate [19, 5, 3]");
    g = llm_permute(ctx, in_rand(LLM_TYPE_F32, 19, 3, 5, 1), 0, 2, 1, 3);
    run_case(llm_swiglu(ctx, g, in_rand(LLM_TYPE_F32, 19, 5, 3, 1)));
    for (int64_t n = 1; n <= 4; n += 3) {
        ctx = begin("SWIGLU halves of fused [38, %lld]", (long long)n);
        struct llm_tensor *gu = in_rand(LLM_TYPE_F32, 38, n, 1, 1);
        run_case(llm_swiglu(ctx, llm_view_2d(ctx, gu, 19, n, gu->nb[1], 0),
                            llm_view_2d(ctx, gu, 19, n, gu->nb[1], 19 * sizeof(float))));
    }
}

static struct llm_tensor *mul_mat_case(enum llm_type t, int64_t k, int64_t m, int64_t n, bool permuted_x)
{
    struct llm_ctx *ctx = begin("MUL_MAT %s K %lld M %lld N %lld%s", tname(t), (long long)k, (long long)m,
                                (long long)n, permuted_x ? ", src1 permuted [K, N, 2]" : "");
    struct llm_tensor *w = in_rand(t, k, m, 1, 1);
    struct llm_tensor *x = permuted_x ? llm_permute(ctx, in_rand(LLM_TYPE_F32, k, 2, n, 1), 0, 2, 1, 3)
                                      : in_rand(LLM_TYPE_F32, k, n, 1, 1);
    return llm_mul_mat(ctx, w, x);
}

static void test_mul_mat(void)
{
    const bool blas = llm_blas_available();
    if (!blas)
        fprintf(stderr, "test_backend_ops: OpenBLAS not available, MUL_MAT N >= 32 runs the dot path\n");
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
        enum llm_type t = weight_types[i];
        static const int64_t ns[] = { 1, 3, 32 }; /* decode, small batch, BLAS or GEMM batch */
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
            struct llm_tensor *out = mul_mat_case(t, 256, ns[j] >= 32 ? 33 : 7, ns[j], false);
            if (ns[j] >= 32 && blas)
                CHECK(llm_cpu_mul_mat_uses_blas(out) || llm_cpu_mul_mat_uses_gemm(out),
                      "%s: does not take the BLAS or GEMM path", tc.name);
            run_case(out);
        }
        if (llm_type_info(t)->blck_size < 256) /* K not a multiple of 256 */
            run_case(mul_mat_case(t, row_len(t, 37), 5, 3, false));
    }
    /* F32 weights against a permuted src1, on the dot and the BLAS path */
    run_case(mul_mat_case(LLM_TYPE_F32, 64, 7, 3, true));
    struct llm_tensor *out = mul_mat_case(LLM_TYPE_F32, 64, 9, 16, true);
    if (blas)
        CHECK(llm_cpu_mul_mat_uses_blas(out), "%s: does not take the BLAS path", tc.name);
    run_case(out);
    /* weights broadcast over src1's dims 2 and 3 (GQA-style batched product) */
    static const enum llm_type bt[] = { LLM_TYPE_F16, LLM_TYPE_F32, LLM_TYPE_Q8_0 };
    for (size_t i = 0; i < sizeof bt / sizeof bt[0]; i++)
        for (int64_t n = 1; n <= 9; n += 8) {
            struct llm_ctx *ctx = begin("MUL_MAT %s [64, 5, 2, 1] x [64, %lld, 4, 2]", tname(bt[i]), (long long)n);
            struct llm_tensor *w = in_rand(bt[i], 64, 5, 2, 1);
            run_case(llm_mul_mat(ctx, w, in_rand(LLM_TYPE_F32, 64, n, 4, 2)));
        }
}

/* The FFN's gate and up products with their SWIGLU: decode, and a batch the builder fuses. */
static void test_mul_mat_swiglu(void)
{
    for (int i = 0; i < N_WEIGHT_TYPES; i++)
        for (int64_t n = 1; n <= 32; n += 31) {
            const enum llm_type t = weight_types[i];
            struct llm_ctx *ctx = begin("MUL_MAT_SWIGLU %s K 256 M 33 N %lld", tname(t), (long long)n);
            struct llm_tensor *g = in_rand(t, 256, 33, 1, 1), *u = in_rand(t, 256, 33, 1, 1);
            run_case(llm_mul_mat_swiglu(ctx, g, u, in_rand(LLM_TYPE_F32, 256, n, 1, 1)));
        }
}

static void test_rope(void)
{
    for (int mode = 0; mode <= 2; mode += 2)
        for (int ff = 0; ff < 2; ff++)
            for (int n_dims = 10; n_dims <= 16; n_dims += 6) /* partial and full rotation */
                for (int64_t n = 1; n <= 5; n += 4) {
                    struct llm_ctx *ctx = begin("ROPE mode %d n_dims %d [16, 3, %lld]%s", mode, n_dims, (long long)n,
                                                ff ? " freq factors" : "");
                    struct llm_tensor *a = in_rand(LLM_TYPE_F32, 16, 3, n, 1);
                    struct llm_tensor *pos = in_i32(FILL_POS, 0, n);
                    struct llm_tensor *f = ff ? input(LLM_TYPE_F32, n_dims / 2, 1, 1, 1, FILL_FACTORS, 0.0f, 0) : NULL;
                    tc.rope_tables = 1;
                    run_case(llm_rope(ctx, a, pos, f, n_dims, mode, 4096, ff ? 500000.0f : 10000.0f,
                                      ff ? 1.0f : 0.25f));
                }
    /* the K heads of a fused QKV row: a strided view */
    for (int64_t n = 1; n <= 4; n += 3) {
        struct llm_ctx *ctx = begin("ROPE mode 2 view of fused qkv [16, 2, %lld]", (long long)n);
        struct llm_tensor *qkv = in_rand(LLM_TYPE_F32, 16 * 7, n, 1, 1);
        struct llm_tensor *k = llm_view_3d(ctx, qkv, 16, 2, n, 16 * sizeof(float), qkv->nb[1], 16 * 3 * sizeof(float));
        tc.rope_tables = 1;
        run_case(llm_rope(ctx, k, in_i32(FILL_POS, 0, n), NULL, 16, 2, 2048, 1000000.0f, 1.0f));
    }
    /* one graph, four ROPE nodes over three parameter sets (Q and K share one; another freq_base;
     * fewer rotated dims): the npu fills one table per set, in node order, and matches the cpu */
    for (int64_t n = 1; n <= 5; n += 4) {
        struct llm_ctx *ctx = begin("ROPE x4, three parameter sets [16, 3, %lld]", (long long)n);
        struct llm_tensor *pos = in_i32(FILL_POS, 0, n), *x[4];
        for (int i = 0; i < 4; i++)
            x[i] = in_rand(LLM_TYPE_F32, 16, 3, n, 1);
        struct llm_tensor *q = llm_rope(ctx, x[0], pos, NULL, 16, 0, 4096, 10000.0f, 1.0f);
        struct llm_tensor *k = llm_rope(ctx, x[1], pos, NULL, 16, 0, 4096, 10000.0f, 1.0f);
        struct llm_tensor *base = llm_rope(ctx, x[2], pos, NULL, 16, 0, 4096, 500000.0f, 1.0f);
        struct llm_tensor *dims = llm_rope(ctx, x[3], pos, NULL, 10, 0, 4096, 10000.0f, 1.0f);
        tc.rope_tables = 3;
        run_graph(llm_add(ctx, llm_add(ctx, q, k), llm_add(ctx, base, dims)), 7);
    }
}

static void test_soft_max(void)
{
    /* mask: none, shared [37, n_q], padded rows [37, n_q + 3], per head [37, n_q, 3] */
    for (int64_t n_q = 1; n_q <= 4; n_q += 3)
        for (int mk = 0; mk < 4; mk++) {
            static const char *const names[] = { "no mask", "mask", "padded mask", "per-head mask" };
            struct llm_ctx *ctx = begin("SOFT_MAX [37, %lld, 3] %s", (long long)n_q, names[mk]);
            struct llm_tensor *a = input(LLM_TYPE_F32, 37, n_q, 3, 1, FILL_RAND, 4.0f, 0);
            struct llm_tensor *m = mk == 0   ? NULL
                                   : mk == 1 ? in_mask(FILL_MASK, 0, 37, n_q, 1)
                                   : mk == 2 ? in_mask(FILL_CAUSAL, 37, 37, n_q + 3, 1)
                                             : in_mask(FILL_MASK, 0, 37, n_q, 3);
            run_case(llm_soft_max(ctx, a, m, mk ? 0.125f : 1.0f));
        }
    /* scores in a padded view (rows 40 apart) */
    struct llm_ctx *ctx = begin("SOFT_MAX view [37, 2, 2] of [40, 2, 2]");
    struct llm_tensor *a = input(LLM_TYPE_F32, 40, 2, 2, 1, FILL_RAND, 4.0f, 0);
    run_case(llm_soft_max(ctx, llm_view_3d(ctx, a, 37, 2, 2, a->nb[1], a->nb[2], 0),
                          in_mask(FILL_CAUSAL, 30, 37, 2, 1), 0.3f));
}

/* q [hd, n_q, heads] as the permutation of [hd, heads, n_q]; K and V as views of the first 37 of
 * 40 cells of caches holding heads_kv heads per cell. */
static void flash_case(enum llm_type kv, int64_t hd, int64_t hd_v, int64_t heads, int64_t heads_kv, int64_t n_q,
                       int mask)
{
    const int64_t n_kv = 37;
    struct llm_ctx *ctx = begin("FLASH_ATTN K/V %s hd %lld/%lld heads %lld/%lld n_q %lld n_kv %lld %s", tname(kv),
                                (long long)hd, (long long)hd_v, (long long)heads, (long long)heads_kv, (long long)n_q,
                                (long long)n_kv, mask == 0 ? "no mask" : mask == 1 ? "causal mask" : "random mask");
    struct llm_tensor *q = llm_permute(ctx, input(LLM_TYPE_F32, hd, heads, n_q, 1, FILL_RAND, 1.0f, 0), 0, 2, 1, 3);
    struct llm_tensor *kc = in_rand(kv, hd * heads_kv, 40, 1, 1);
    struct llm_tensor *vc = in_rand(kv, hd_v * heads_kv, 40, 1, 1);
    const size_t ek = llm_type_info(kv)->type_size;
    struct llm_tensor *k = llm_view_3d(ctx, kc, hd, n_kv, heads_kv, kc->nb[1], (size_t)hd * ek, 0);
    struct llm_tensor *v = llm_view_3d(ctx, vc, hd_v, n_kv, heads_kv, vc->nb[1], (size_t)hd_v * ek, 0);
    struct llm_tensor *m = mask == 0   ? NULL
                           : mask == 1 ? in_mask(FILL_CAUSAL, (int32_t)n_kv, n_kv, n_q, 1)
                                       : in_mask(FILL_MASK, 0, n_kv, n_q + 2, 1);
    run_case(llm_flash_attn(ctx, q, k, v, m, 1.0f / sqrtf((float)hd)));
}

static void test_flash_attn(void)
{
    static const enum llm_type kv[] = { LLM_TYPE_F16, LLM_TYPE_F32 };
    for (int t = 0; t < 2; t++)
        for (int64_t heads_kv = 1; heads_kv <= 4; heads_kv *= 2) /* GQA 4:1, 2:1 and plain MHA */
            for (int64_t n_q = 1; n_q <= 5; n_q += 4) {
                flash_case(kv[t], 16, 16, 4, heads_kv, n_q, 1);
                if (heads_kv == 2) {
                    flash_case(kv[t], 16, 16, 4, heads_kv, n_q, 0);
                    flash_case(kv[t], 20, 12, 4, heads_kv, n_q, 2); /* hd not a multiple of 8, hd_v != hd */
                    flash_case(kv[t], 8, 8, 8, 4, n_q, 1);          /* hd 8 (stories260K): a path of its own */
                }
            }
}

static void test_cpy(void)
{
    static const enum llm_type pairs[][2] = {
        { LLM_TYPE_F32, LLM_TYPE_F16 },  { LLM_TYPE_F16, LLM_TYPE_F32 }, { LLM_TYPE_F32, LLM_TYPE_F32 },
        { LLM_TYPE_F32, LLM_TYPE_BF16 }, { LLM_TYPE_BF16, LLM_TYPE_F32 }, { LLM_TYPE_F16, LLM_TYPE_F16 },
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        enum llm_type from = pairs[i][0], to = pairs[i][1];
        struct llm_ctx *ctx = begin("CPY %s [13, 5] -> %s [13, 5]", tname(from), tname(to));
        struct llm_tensor *a = in_rand(from, 13, 5, 1, 1);
        run_case(llm_cpy(ctx, a, in_rand(to, 13, 5, 1, 1)));
        /* into a strided window of a wider buffer (a KV cache store), from a permuted source */
        ctx = begin("CPY %s permuted [13, 5] -> %s view [13, 5] of [20, 6]", tname(from), tname(to));
        a = llm_permute(ctx, in_rand(from, 13, 1, 5, 1), 0, 2, 1, 3);
        struct llm_tensor *dst = in_rand(to, 20, 6, 1, 1);
        const size_t es = llm_type_info(to)->type_size;
        run_case(llm_cpy(ctx, a, llm_view_2d(ctx, dst, 13, 5, dst->nb[1], dst->nb[1] + 3 * es)));
    }
    /* shapes differ, elements pair up in row-major order: [13, 5] into a 1-d window of 65 */
    struct llm_ctx *ctx = begin("CPY F32 [13, 5] -> F16 view [65] of [80]");
    struct llm_tensor *a = in_rand(LLM_TYPE_F32, 13, 5, 1, 1);
    run_case(llm_cpy(ctx, a, llm_view_1d(ctx, in_rand(LLM_TYPE_F16, 80, 1, 1, 1), 65, 7 * sizeof(uint16_t))));
    /* a transposed destination (V cache stored transposed) */
    ctx = begin("CPY F32 [6, 4] -> F16 transposed view of [4, 6]");
    a = in_rand(LLM_TYPE_F32, 6, 4, 1, 1);
    run_case(llm_cpy(ctx, a, llm_transpose(ctx, in_rand(LLM_TYPE_F16, 4, 6, 1, 1))));
}

static void test_cont(void)
{
    static const enum llm_type types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        struct llm_ctx *ctx = begin("CONT %s permute(0, 2, 1, 3) of [7, 5, 3]", tname(types[i]));
        run_case(llm_cont(ctx, llm_permute(ctx, in_rand(types[i], 7, 5, 3, 1), 0, 2, 1, 3)));
        ctx = begin("CONT %s transpose of [7, 5]", tname(types[i]));
        run_case(llm_cont(ctx, llm_transpose(ctx, in_rand(types[i], 7, 5, 1, 1))));
        ctx = begin("CONT %s permute(1, 2, 0, 3) of [7, 5, 3]", tname(types[i]));
        run_case(llm_cont(ctx, llm_permute(ctx, in_rand(types[i], 7, 5, 3, 1), 1, 2, 0, 3)));
    }
    /* a quantized type copies row for row */
    struct llm_ctx *ctx = begin("CONT Q8_0 [64, 3]");
    run_case(llm_cont(ctx, in_rand(LLM_TYPE_Q8_0, 64, 3, 1, 1)));
}

/* llm_tensor_set (whole and at an offset), llm_tensor_get, llm_tensor_memset and a copy within one
 * backend, each through the tensor's buffer. */
static void test_data_movement(const struct conf *cf)
{
    struct llm_error err = { 0 };
    const struct llm_backend_option opts[] = { { LLM_DEVICE_NPU, "acl_graph", cf->graph }, { LLM_DEVICE_NPU, "launch_us", 0 } };
    const struct llm_backend_params p = { .device = cf->dev, .n_threads = cf->threads, .options = opts, .n_options = 2 };
    struct llm_backend *b = llm_backend_new(&p, &err);
    CHECK(b != NULL, "data movement: cannot create %s: %s", cf->name, err.msg);
    if (!b)
        return;
    struct llm_ctx *ctx = begin("data movement on %s", cf->name);
    struct llm_tensor *src = llm_new_tensor_1d(ctx, LLM_TYPE_F32, 37);
    struct llm_tensor *dst = llm_new_tensor_1d(ctx, LLM_TYPE_F32, 37);
    struct llm_tensor *small = llm_new_tensor_1d(ctx, LLM_TYPE_F32, 36);
    const bool placed = place_new(b, src) & place_new(b, dst) & place_new(b, small);
    CHECK(placed, "data movement on %s: out of backend memory", cf->name);
    if (placed) {
        CHECK(llm_tensor_backend(src) == b && llm_tensor_in_host_memory(src) == b->iface->host_memory,
              "%s: a tensor does not know its buffer's backend", cf->name);
        float in[37], out[37], patch[3] = { 1.5f, -2.25f, 3.0f };
        for (int i = 0; i < 37; i++)
            in[i] = frand();
        struct llm_backend *pending = NULL;
        int rc = llm_tensor_set(src, in, 0, sizeof in, &err);
        rc = rc ? rc : llm_tensor_copy_async(src, dst, &pending, &err);
        rc = rc ? rc : llm_tensor_get(dst, out, 0, sizeof out, &err);
        CHECK(rc == LLM_OK && pending == NULL && memcmp(in, out, sizeof in) == 0, "%s: set + copy + get: %s",
              cf->name, err.msg);

        rc = llm_tensor_memset(dst, 0x5a, 8, 20, &err);
        rc = rc ? rc : llm_tensor_set(dst, patch, 30 * sizeof(float), sizeof patch, &err);
        rc = rc ? rc : llm_tensor_get(dst, out, 0, sizeof out, &err);
        uint8_t want[sizeof in];
        memcpy(want, in, sizeof in);
        memset(want + 8, 0x5a, 20);
        memcpy(want + 30 * sizeof(float), patch, sizeof patch);
        CHECK(rc == LLM_OK && memcmp(want, out, sizeof out) == 0, "%s: memset + set at offset: %s", cf->name,
              err.msg);
        float mid[2];
        rc = llm_tensor_get(dst, mid, 30 * sizeof(float), sizeof mid, &err);
        CHECK(rc == LLM_OK && memcmp(mid, patch, sizeof mid) == 0, "%s: get at offset: %s", cf->name, err.msg);

        CHECK(llm_tensor_copy_async(src, small, &pending, &err) != LLM_OK,
              "%s: copy of 148 bytes into 144 accepted", cf->name);
    }
    unplace(src);
    unplace(dst);
    unplace(small);
    llm_backend_free(b);
}

/* Copies between the npu, the cpu and plain host memory, each way: host to device and device to
 * host are queued on the npu's stream (pending names it) behind a kernel still running there, and
 * arrive once it is synchronized; the rest are done on return. */
static void test_cross_backend_copies(void)
{
    struct llm_error err = { 0 };
    const struct llm_backend_params pn = { .device = LLM_DEVICE_NPU, .n_threads = 1 };
    const struct llm_backend_params pc = { .device = LLM_DEVICE_CPU, .n_threads = 1 };
    struct llm_backend *npu = llm_backend_new(&pn, &err), *cpu = llm_backend_new(&pc, &err);
    CHECK(npu && cpu, "cross copies: %s", err.msg);
    struct llm_ctx *ctx = begin("copies between backends");
    enum { N = 4096 };
    struct llm_tensor *a = llm_new_tensor_1d(ctx, LLM_TYPE_F32, N), *x = llm_new_tensor_1d(ctx, LLM_TYPE_F32, N);
    struct llm_tensor *sum = llm_add(ctx, a, x);
    struct llm_tensor *on_cpu = llm_new_tensor_1d(ctx, LLM_TYPE_F32, N), *host = llm_new_tensor_1d(ctx, LLM_TYPE_F32, N);
    struct llm_tensor *back = llm_new_tensor_1d(ctx, LLM_TYPE_F32, N);
    struct llm_graph *g = llm_graph_build(&sum, 1);
    const bool placed = npu && cpu && g && place_new(npu, a) & place_new(npu, x) & place_new(npu, sum) &
                        place_new(cpu, on_cpu) & place_new(NULL, host) & place_new(npu, back);
    CHECK(placed, "cross copies: out of memory");
    if (placed) {
        static float in[N], out[N];
        for (int i = 0; i < N; i++)
            in[i] = (float)i;
        struct llm_backend *pending = NULL, *p2 = NULL, *p3 = NULL;
        int rc = llm_tensor_set(a, in, 0, sizeof in, &err);
        rc = rc ? rc : llm_tensor_set(x, in, 0, sizeof in, &err);
        rc = rc ? rc : npu->iface->graph_reserve(npu, g, &err);
        rc = rc ? rc : npu->iface->graph_compute(npu, g, &err); /* not waited for */
        rc = rc ? rc : llm_tensor_copy_async(sum, on_cpu, &pending, &err); /* device to host */
        CHECK(rc == LLM_OK && pending == npu, "cross copies: device to host is not queued on the npu: %s", err.msg);
        npu->iface->synchronize(npu);
        rc = rc ? rc : llm_tensor_copy_async(on_cpu, host, &p2, &err); /* host to host */
        rc = rc ? rc : llm_tensor_copy_async(host, back, &p3, &err);   /* host to device */
        CHECK(rc == LLM_OK && p2 == NULL && p3 == npu, "cross copies: host copies queued wrongly: %s", err.msg);
        npu->iface->synchronize(npu);
        rc = rc ? rc : llm_tensor_get(back, out, 0, sizeof out, &err);
        bool same = rc == LLM_OK;
        for (int i = 0; i < N && same; i++)
            same = out[i] == 2.0f * in[i];
        CHECK(same, "cross copies: the sum did not come back through cpu and host memory: %s", err.msg);
    }
    unplace(a);
    unplace(x);
    unplace(sum);
    unplace(on_cpu);
    unplace(host);
    unplace(back);
    llm_graph_free(g);
    llm_backend_free(npu);
    llm_backend_free(cpu);
}

/* The npu's contract: a kernel's tensors must be device memory. A leaf in host memory must make the
 * compute fail (eager launch or capture alike), which is why every case places its tensors in buffers. */
static void test_host_pointer_rejected(int graph)
{
    struct llm_error err = { 0 };
    const struct llm_backend_option opts[] = { { LLM_DEVICE_NPU, "acl_graph", graph } };
    const struct llm_backend_params p = { .device = LLM_DEVICE_NPU, .n_threads = 1, .options = opts, .n_options = 1 };
    struct llm_backend *b = llm_backend_new(&p, &err);
    CHECK(b != NULL, "npu: %s", err.msg);
    if (!b)
        return;
    struct llm_ctx *ctx = begin("host pointer on npu graph %d", graph);
    struct llm_tensor *a = llm_new_tensor_1d(ctx, LLM_TYPE_F32, 8), *x = llm_new_tensor_1d(ctx, LLM_TYPE_F32, 8);
    struct llm_tensor *out = llm_add(ctx, a, x);
    float host[8] = { 0 };
    const bool placed = place_new(b, a) & place_new(b, out);
    x->data = host;
    struct llm_graph *g = llm_graph_build(&out, 1);
    if (g && placed) {
        int rc = b->iface->graph_reserve(b, g, &err);
        rc = rc ? rc : llm_backend_compute(b, g, &err);
        CHECK(rc != LLM_OK && strstr(err.msg, "device memory"), "npu graph %d: host input accepted (%s)", graph,
              err.msg);
    }
    llm_graph_free(g);
    unplace(a);
    unplace(out);
    llm_backend_free(b);
}

/* Ops that compute something and that a builder makes: each needs at least one case above (the
 * fused ops and CHANNEL_NORM are made by the npu's passes alone: tests/test_fusion.c, test_layout.c). */
static bool computing_op(enum llm_op op)
{
    return !llm_op_is_noop(op) && op != LLM_OP_CHANNEL_NORM && op != LLM_OP_ADD_RMS_NORM &&
           op != LLM_OP_RMS_NORM_MUL && op != LLM_OP_MUL_MAT_ADD && op != LLM_OP_ROPE_QK;
}

int main(void)
{
    /* prefill graphs must run eagerly in graph mode (check_stats); the default cache capacity */
    unsetenv("GGML_CANN_PREFILL_USE_GRAPH");
    unsetenv("GGML_CANN_GRAPH_CACHE_CAPACITY");
    tc.ctx = llm_ctx_new(64);
    if (!tc.ctx)
        return 1;

    for (int c = 0; c < N_CONFS; c++)
        test_data_movement(&confs[c]);
    test_host_pointer_rejected(0);
    test_host_pointer_rejected(1);
    test_cross_backend_copies();
    test_get_rows();
    test_set_rows();
    test_binary(LLM_OP_ADD);
    test_binary(LLM_OP_MUL);
    test_unary(LLM_OP_SCALE);
    test_unary(LLM_OP_RMS_NORM);
    test_mul_mat();
    test_mul_mat_swiglu();
    test_rope();
    test_soft_max();
    test_flash_attn();
    test_swiglu();
    test_unary(LLM_OP_SILU);
    test_cpy();
    test_cont();

    for (int op = 0; op < LLM_OP_COUNT; op++) {
        if (!computing_op((enum llm_op)op))
            continue;
        printf("  %-12s %3d cases\n", llm_op_name((enum llm_op)op), op_cases[op]);
        CHECK(op_cases[op] > 0, "op %s has no case", llm_op_name((enum llm_op)op));
    }
    printf("  npu+cpu: %d nodes CANN lacks ran on the cpu\n", split_fallbacks);
    CHECK(split_fallbacks >= 40, "only %d fallbacks", split_fallbacks); /* K-quants, Q4_1, Q5_x, ROPE > 896 */
    llm_ctx_free(tc.ctx);
    return test_done("test_backend_ops");
}
