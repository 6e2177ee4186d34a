/* The backend scheduler (src/scheduler.h) on crafted graphs: the assignment after each of its passes,
 * the splits and their inputs, copies on exactly the edges that cross backends, views with their
 * source, preallocated memory deciding where its readers and writers run, op offload of batches
 * over host weights, and a 10^5-node chain
 * whose scheduling work (questions asked of the backends, splits) grows linearly. */
#include "graph.h"
#include "harness.h"
#include "scheduler.h"

enum { NPU, CPU, N_BACKENDS };

/* The npu of these tests runs every op but SOFT_MAX; each leaf's backend is in leaf_home. */
struct world {
    const struct llm_tensor *leaves[16];
    int homes[16];
    int n;
    long questions;
};

static int leaf_backend(void *user, const struct llm_tensor *leaf)
{
    struct world *w = user;
    for (int i = 0; i < w->n; i++)
        if (w->leaves[i] == leaf)
            return w->homes[i];
    return -1;
}

static bool supports(void *user, int b, const struct llm_tensor *node)
{
    struct world *w = user;
    w->questions++;
    return b == NPU && node->op != LLM_OP_SOFT_MAX;
}

static struct llm_tensor *leaf(struct world *w, struct llm_ctx *ctx, int home, uint32_t flags, int64_t ne0,
                               int64_t ne1, const char *name)
{
    struct llm_tensor *t = llm_new_tensor_2d(ctx, LLM_TYPE_F32, ne0, ne1);
    t->flags = flags;
    llm_set_name(t, "%s", name);
    w->leaves[w->n] = t;
    w->homes[w->n++] = home;
    return t;
}

static struct llm_sched_query query(struct world *w)
{
    return (struct llm_sched_query){ .n_backends = N_BACKENDS, .leaf_backend = leaf_backend,
                                     .supports = supports, .user = w };
}

/* Is every edge into a computing node that crosses backends an input of the consumer's split, and
 * is every input such an edge? */
static bool copies_on_boundaries(const struct llm_graph *g, const struct llm_sched *s)
{
    for (int k = 0; k < s->n_splits; k++) {
        const struct llm_sched_split *sp = &s->splits[k];
        int crossing = 0;
        for (int i = sp->first; i < sp->end; i++) {
            const struct llm_tensor *node = g->nodes[i];
            if (llm_op_is_noop(node->op))
                continue;
            if (node->backend != sp->backend)
                return false;
            for (int j = 0; j < LLM_MAX_SRC; j++) {
                const struct llm_tensor *src = node->src[j];
                if (!src || llm_sched_memory_backend(src) == sp->backend)
                    continue;
                bool listed = false;
                for (int m = 0; m < sp->n_inputs; m++)
                    listed = listed || s->inputs[sp->first_input + m] == src;
                if (!listed)
                    return false;
                crossing++;
            }
        }
        for (int m = 0; m < sp->n_inputs; m++) {
            if (llm_sched_memory_backend(s->inputs[sp->first_input + m]) == sp->backend)
                return false;
            for (int m2 = 0; m2 < m; m2++) /* one copy of each */
                if (s->inputs[sp->first_input + m2] == s->inputs[sp->first_input + m])
                    return false;
        }
        if (sp->n_inputs > crossing)
            return false;
    }
    return true;
}

/*   x = GET_ROWS(tok_embd@cpu, ids)   xs = SCALE(x)   h = MUL_MAT(w1@npu, xs) + MUL_MAT(w1, x)
 *   r = ROPE(h, pos)   a = SILU(r)   y = MUL_MAT(w2@npu, a)   z = SOFT_MAX(y)   o = SCALE(RESHAPE(z))
 * with the KV cache on the npu written by SET_ROWS(cache, y, idx), and CPY(w2, host buffer@cpu). */
static void test_passes(void)
{
    struct world w = { .n = 0 };
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *tok = leaf(&w, ctx, CPU, LLM_TENSOR_WEIGHT, 8, 10, "tok_embd");
    struct llm_tensor *ids = llm_new_tensor_1d(ctx, LLM_TYPE_I32, 3);
    ids->flags = LLM_TENSOR_INPUT;
    struct llm_tensor *pos = llm_new_tensor_1d(ctx, LLM_TYPE_I32, 3);
    pos->flags = LLM_TENSOR_INPUT;
    struct llm_tensor *idx = llm_new_tensor_1d(ctx, LLM_TYPE_I32, 3);
    idx->flags = LLM_TENSOR_INPUT;
    struct llm_tensor *w1 = leaf(&w, ctx, NPU, LLM_TENSOR_WEIGHT, 8, 8, "w1");
    struct llm_tensor *w2 = leaf(&w, ctx, NPU, LLM_TENSOR_WEIGHT, 8, 8, "w2");
    struct llm_tensor *cache = leaf(&w, ctx, NPU, 0, 8, 16, "cache");
    struct llm_tensor *x = llm_get_rows(ctx, tok, ids);
    struct llm_tensor *xs = llm_scale(ctx, x, 0.5f);
    struct llm_tensor *h = llm_add(ctx, llm_mul_mat(ctx, w1, xs), llm_mul_mat(ctx, w1, x));
    struct llm_tensor *r = llm_rope(ctx, llm_reshape_3d(ctx, h, 8, 1, 3), pos, NULL, 8, 0, 64, 10000.0f, 1.0f);
    struct llm_tensor *a = llm_silu(ctx, llm_reshape_2d(ctx, r, 8, 3));
    struct llm_tensor *y = llm_mul_mat(ctx, w2, a);
    struct llm_tensor *z = llm_soft_max(ctx, y, NULL, 1.0f);
    struct llm_tensor *o = llm_scale(ctx, llm_reshape_2d(ctx, z, 24, 1), 2.0f);
    struct llm_tensor *kv = llm_set_rows(ctx, cache, y, idx);
    struct llm_tensor *host = leaf(&w, ctx, CPU, 0, 8, 8, "host_buf");
    struct llm_tensor *cp = llm_cpy(ctx, w2, host); /* reads npu memory, writes the cpu's */
    struct llm_tensor *outs[] = { o, kv, cp };
    CHECK(!llm_ctx_overflowed(ctx));
    struct llm_graph *g = llm_graph_build(outs, 3);
    CHECK(g != NULL);
    if (!g) {
        llm_ctx_free(ctx);
        return;
    }
    const struct llm_sched_query q = query(&w);
    struct { const struct llm_tensor *t; int after[4]; } want[] = {
        /*           pass 1  pass 2  pass 3  pass 4 */
        { x, { CPU, CPU, CPU, CPU } },   /* reads a cpu weight */
        { xs, { -1, NPU, NPU, NPU } },   /* spread up from h (down, x's cpu stopped it) */
        { h->src[0], { NPU, NPU, NPU, NPU } }, /* reads an npu weight */
        { h->src[1], { NPU, NPU, NPU, NPU } }, /* reads x too: one copy of x for both */
        { h, { -1, NPU, NPU, NPU } },
        { cp, { CPU, CPU, CPU, CPU } },  /* writes cpu memory, whatever it reads */
        { r, { -1, NPU, NPU, NPU } },    /* spread down from h */
        { a, { -1, NPU, NPU, NPU } },
        { y, { NPU, NPU, NPU, NPU } },
        { z, { -1, -1, CPU, CPU } },     /* the npu lacks it: the cpu, holding none of its sources */
        { o, { -1, NPU, NPU, NPU } },    /* the spread passes over z */
        { kv, { NPU, NPU, NPU, NPU } },  /* writes the npu's cache */
        { o->src[0], { -1, -1, -1, CPU } }, /* a view of z's memory */
        { r->src[0], { -1, -1, -1, NPU } }, /* a view of h's */
    };
    for (int pass = 1; pass <= 4; pass++) {
        llm_sched_assign(g, &q, pass);
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECK(want[i].t->backend == want[i].after[pass - 1], "after pass %d, %s (node %zu) on %d, want %d", pass,
                  llm_op_name(want[i].t->op), i, want[i].t->backend, want[i].after[pass - 1]);
    }
    CHECK(ids->backend == CPU && pos->backend == CPU && tok->backend == CPU && w1->backend == NPU);

    struct llm_sched s = { 0 };
    struct llm_error err;
    CHECK(llm_sched_plan(&s, g, &q, &err) == 0, "%s", err.msg);
    /* splits: GET_ROWS | the npu's matmuls, RoPE, SiLU, SET_ROWS... | SOFT_MAX | SCALE */
    int backends[8], n = 0;
    for (int k = 0; k < s.n_splits && n < 8; k++)
        backends[n++] = s.splits[k].backend;
    CHECK(n >= 4 && backends[0] == CPU, "%d splits", n);
    for (int k = 1; k < n; k++)
        CHECK(backends[k] != backends[k - 1], "splits %d and %d on one backend", k - 1, k);
    CHECK(copies_on_boundaries(g, &s), "split inputs are not exactly the crossing edges");
    CHECK(s.splits[0].first == 0 && s.splits[s.n_splits - 1].end == g->n_nodes, "splits do not cover the graph");
    for (int k = 1; k < s.n_splits; k++)
        CHECK(s.splits[k].first == s.splits[k - 1].end);
    /* the npu split that runs h reads x (made on the cpu) and pos (a host input) once each */
    for (int k = 0; k < s.n_splits; k++) {
        const struct llm_sched_split *sp = &s.splits[k];
        bool has_h = false, has_x = false, has_pos = false;
        for (int i = sp->first; i < sp->end; i++)
            has_h = has_h || g->nodes[i] == h;
        for (int m = 0; m < sp->n_inputs; m++) {
            has_x = has_x || s.inputs[sp->first_input + m] == x;
            has_pos = has_pos || s.inputs[sp->first_input + m] == pos;
        }
        if (has_h)
            CHECK(sp->backend == NPU && has_x && has_pos, "h's split: backend %d, x %d, pos %d", sp->backend, has_x,
                  has_pos);
    }
    llm_sched_release(&s);
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

/* One backend: one split and no copies, whatever the graph. */
static void test_single_backend(void)
{
    struct world w = { .n = 0 };
    struct llm_ctx *ctx = llm_ctx_new(16);
    struct llm_tensor *wt = leaf(&w, ctx, 0, LLM_TENSOR_WEIGHT, 4, 4, "w");
    struct llm_tensor *in = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 4, 2);
    in->flags = LLM_TENSOR_INPUT;
    struct llm_tensor *out = llm_soft_max(ctx, llm_mul_mat(ctx, wt, in), NULL, 1.0f);
    struct llm_graph *g = llm_graph_build(&out, 1);
    struct llm_sched_query q = query(&w);
    q.n_backends = 1;
    struct llm_sched s = { 0 };
    struct llm_error err;
    CHECK(g && llm_sched_plan(&s, g, &q, &err) == 0);
    CHECK(s.n_splits == 1 && s.n_inputs == 0 && s.splits[0].backend == 0, "%d splits, %d inputs", s.n_splits,
          s.n_inputs);
    q.n_backends = LLM_SCHED_MAX_BACKENDS + 1;
    CHECK(g && llm_sched_plan(&s, g, &q, &err) == LLM_ERR_ARG);
    llm_sched_release(&s);
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

/* A node no npu assignment reaches goes where its sources are: with no npu node in the graph, a
 * SCALE of a cpu GET_ROWS, which the npu could run, stays on the cpu, and so does one of a host
 * input. */
static void test_out_of_reach(void)
{
    struct world w = { .n = 0 };
    struct llm_ctx *ctx = llm_ctx_new(16);
    struct llm_tensor *tok = leaf(&w, ctx, CPU, LLM_TENSOR_WEIGHT, 4, 4, "tok_embd");
    struct llm_tensor *ids = llm_new_tensor_1d(ctx, LLM_TYPE_I32, 2), *in = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 4, 2);
    ids->flags = in->flags = LLM_TENSOR_INPUT;
    struct llm_tensor *outs[] = { llm_scale(ctx, llm_get_rows(ctx, tok, ids), 2.0f), llm_scale(ctx, in, 2.0f) };
    struct llm_graph *g = llm_graph_build(outs, 2);
    const struct llm_sched_query q = query(&w);
    CHECK(g != NULL);
    if (g) {
        llm_sched_assign(g, &q, 4);
        CHECK(outs[0]->backend == CPU && outs[1]->backend == CPU, "on %d and %d", outs[0]->backend,
              outs[1]->backend);
    }
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

/* A chain of n nodes alternating SILU (npu) and SOFT_MAX (cpu only): n splits, each with one
 * input; the backends are asked a bounded number of questions per node. */
static long chain(int n, int *n_splits, bool *boundaries)
{
    struct world w = { .n = 0 };
    struct llm_ctx *ctx = llm_ctx_new(n + 8);
    struct llm_tensor *t = leaf(&w, ctx, NPU, LLM_TENSOR_WEIGHT, 4, 1, "w");
    t = llm_scale(ctx, t, 1.0f); /* reads the npu weight: the spread starts here */
    for (int i = 1; i < n; i++)
        t = i % 2 ? llm_soft_max(ctx, t, NULL, 1.0f) : llm_silu(ctx, t);
    struct llm_graph *g = llm_ctx_overflowed(ctx) ? NULL : llm_graph_build(&t, 1);
    struct llm_sched_query q = query(&w);
    struct llm_sched s = { 0 };
    struct llm_error err;
    *n_splits = -1;
    if (g && llm_sched_plan(&s, g, &q, &err) == 0) {
        *n_splits = s.n_splits;
        *boundaries = copies_on_boundaries(g, &s);
    }
    llm_sched_release(&s);
    llm_graph_free(g);
    llm_ctx_free(ctx);
    return w.questions;
}

static void test_chain(void)
{
    int splits_small, splits_big;
    bool ok_small = false, ok_big = false;
    const long q_small = chain(1000, &splits_small, &ok_small), q_big = chain(100000, &splits_big, &ok_big);
    CHECK_EQ_INT(splits_small, 1000);
    CHECK_EQ_INT(splits_big, 100000);
    CHECK(ok_small && ok_big, "copies off the boundaries");
    CHECK(q_big <= 110 * q_small, "questions: %ld for 1000 nodes, %ld for 100000", q_small, q_big);
    CHECK(q_big <= 8L * 100000, "%ld questions for 100000 nodes", q_big);
}

/* Op offload: a batch of rows rows over a host weight goes to the npu when rows >= min_batch > 0,
 * reading a copy of the weight (an input of its split); GET_ROWS of a host weight, a node the npu
 * cannot run, and a batch over host memory that is no weight (a KV cache) stay on the cpu. */
static void offload_case(int rows, int min_batch, int want_mm)
{
    struct world w = { .n = 0 };
    struct llm_ctx *ctx = llm_ctx_new(32);
    struct llm_tensor *wt = leaf(&w, ctx, CPU, LLM_TENSOR_WEIGHT, 8, 8, "w");
    struct llm_tensor *tok = leaf(&w, ctx, CPU, LLM_TENSOR_WEIGHT, 8, 10, "tok_embd");
    struct llm_tensor *wide = leaf(&w, ctx, CPU, LLM_TENSOR_WEIGHT, 8, rows, "wide");
    struct llm_tensor *cache = leaf(&w, ctx, CPU, 0, 8, 16, "cache");
    struct llm_tensor *x = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, rows);
    struct llm_tensor *ids = llm_new_tensor_1d(ctx, LLM_TYPE_I32, rows);
    x->flags = ids->flags = LLM_TENSOR_INPUT;
    struct llm_tensor *mm = llm_mul_mat(ctx, wt, x), *gr = llm_get_rows(ctx, tok, ids);
    struct llm_tensor *sm = llm_soft_max(ctx, wide, NULL, 1.0f), *kv = llm_mul_mat(ctx, cache, x);
    struct llm_tensor *outs[] = { mm, gr, sm, kv };
    struct llm_graph *g = llm_graph_build(outs, 4);
    CHECK(g != NULL && !llm_ctx_overflowed(ctx));
    struct llm_sched_query q = query(&w);
    q.op_offload_min_batch = min_batch;
    struct llm_sched s = { 0 };
    struct llm_error err;
    if (g && llm_sched_plan(&s, g, &q, &err) == 0) {
        CHECK(mm->backend == want_mm && gr->backend == CPU && sm->backend == CPU && kv->backend == CPU,
              "%d rows, min %d: matmul on %d (want %d), get_rows %d, soft_max %d, cache matmul %d", rows, min_batch,
              mm->backend, want_mm, gr->backend, sm->backend, kv->backend);
        bool copied = false;
        for (int k = 0; k < s.n_splits; k++)
            for (int m = 0; m < s.splits[k].n_inputs; m++)
                copied = copied || (s.inputs[s.splits[k].first_input + m] == wt && s.splits[k].backend == NPU);
        CHECK(copied == (want_mm == NPU), "%d rows, min %d: the weight copied to the npu: %d", rows, min_batch, copied);
        CHECK(copies_on_boundaries(g, &s), "split inputs are not exactly the crossing edges");
    } else {
        CHECK(false, "plan: %s", g ? err.msg : "no graph");
    }
    llm_sched_release(&s);
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

static void test_op_offload(void)
{
    offload_case(32, 32, NPU);
    offload_case(40, 32, NPU);
    offload_case(31, 32, CPU);
    offload_case(32, 0, CPU);
}

int main(void)
{
    test_passes();
    test_op_offload();
    test_single_backend();
    test_out_of_reach();
    test_chain();
    return test_done("test_sched");
}
