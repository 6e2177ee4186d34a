/* Core IR: type geometry, graph ordering, the liveness allocator (no overlap of live buffers, same addresses for
 * the same graph), the thread pool barrier, and the sampler: greedy ties, the repetition penalty's
 * sign rule, window and once-per-token rule, and for each stage of the chain (penalty, top-k, top-p,
 * min-p, temperature) alone and all together, the exact set of tokens 20000 seeded draws can give
 * and their frequencies against the expected probabilities. */
#include <stdatomic.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "alloc.h"
#include "graph.h"
#include "harness.h"
#include "model/sampler.h"
#include "ops/cpu/op_table.h"
#include "threadpool.h"

/* A transformer-like chain: x -> (norm, matmuls, residual adds) x layers. */
static struct llm_tensor *build_chain(struct llm_ctx *ctx, struct llm_tensor *w, struct llm_tensor *x, int layers)
{
    for (int l = 0; l < layers; l++) {
        struct llm_tensor *h = llm_rms_norm(ctx, x, 1e-5f);
        struct llm_tensor *a = llm_mul_mat(ctx, w, h);
        struct llm_tensor *b = llm_mul_mat(ctx, w, llm_reshape_2d(ctx, h, 64, 3));
        x = llm_add(ctx, llm_add(ctx, a, llm_reshape_2d(ctx, b, 64, 3)), x);
    }
    return x;
}

/* Every op has a row: a name, and a cpu kernel with its reference kernel unless it computes nothing. */
static void test_op_table(void)
{
    for (int op = 0; op < LLM_OP_COUNT; op++) {
        const struct llm_op_traits *t = llm_op_traits((enum llm_op)op);
        CHECK(t->name != NULL, "op %d has no row", op);
        if (!t->name || t->is_noop)
            continue;
        CHECK(t->supports && t->compute && t->ref, "%s lacks a kernel, its oracle or its supports", t->name);
        CHECK(t->n_src >= 1, "%s takes no source", t->name);
    }
    CHECK_STR(llm_op_name(LLM_OP_COUNT), "?");
}

/* Constructors run the op's shape rules: a builder's mistake is named where it is made. */
static void test_constructor_shape_checks(void)
{
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *a = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, 4), *b = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 3, 4);
    struct llm_tensor *w = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, 5), *row = llm_new_tensor_1d(ctx, LLM_TYPE_F32, 8);
    llm_add(ctx, a, row);
    llm_mul_mat(ctx, w, a);
    CHECK(llm_ctx_error(ctx) == NULL, "good shapes refused: %s", llm_ctx_error(ctx));
    llm_add(ctx, a, b);
    CHECK(llm_ctx_error(ctx) && strstr(llm_ctx_error(ctx), "ADD: src1 does not broadcast"), "%s",
          llm_ctx_error(ctx) ? llm_ctx_error(ctx) : "(none)");
    llm_ctx_reset(ctx);
    CHECK(llm_ctx_error(ctx) == NULL, "a reset forgets the error");
    a = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, 4);
    b = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 7, 4);
    llm_mul_mat(ctx, b, a);
    CHECK(llm_ctx_error(ctx) && strstr(llm_ctx_error(ctx), "MUL_MAT: src0 and src1 rows differ"), "%s",
          llm_ctx_error(ctx) ? llm_ctx_error(ctx) : "(none)");
    llm_ctx_reset(ctx);
    struct llm_tensor *pos = llm_new_tensor_1d(ctx, LLM_TYPE_I32, 3);
    llm_rope(ctx, llm_new_tensor(ctx, LLM_TYPE_F32, 3, (const int64_t[]){ 8, 2, 4 }), pos, NULL, 8, 0, 512, 1e4f, 1.0f);
    CHECK(llm_ctx_error(ctx) && strstr(llm_ctx_error(ctx), "ROPE: one position per row"), "%s",
          llm_ctx_error(ctx) ? llm_ctx_error(ctx) : "(none)");
    struct llm_tensor add = { .op = LLM_OP_ADD, .src = { pos } }, scale = { .op = LLM_OP_SCALE, .src = { pos, pos } };
    CHECK(llm_op_check(&add) && !strcmp(llm_op_check(&add), "a source is missing"), "ADD without src1");
    CHECK(llm_op_check(&scale) && !strcmp(llm_op_check(&scale), "more sources than the op takes"), "SCALE with src1");
    llm_ctx_free(ctx);
}

static bool ranges_overlap(const struct llm_tensor *a, const struct llm_tensor *b)
{
    const char *a0 = a->data, *b0 = b->data;
    return a0 < b0 + llm_nbytes(b) && b0 < a0 + llm_nbytes(a);
}

/* Known ids have geometry and a name that maps back; retired and out-of-range ids do not. */
static void test_type_info(void)
{
    static const int unknown[] = { -1, 4, 5, 31, 32, 33, 36, 37, 38, LLM_TYPE_COUNT, 1000 };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        CHECK(!llm_type_info(unknown[i]), "type id %d has geometry", unknown[i]);
    CHECK_STR(llm_type_name((enum llm_type)4), "?");
    CHECK_EQ_INT(llm_type_from_name("Q4_2"), -1);
    int known = 0;
    for (int t = 0; t < LLM_TYPE_COUNT; t++) {
        const struct llm_type_info *ti = llm_type_info(t);
        if (!ti)
            continue;
        known++;
        CHECK(ti->blck_size >= 1 && ti->type_size >= 1 && ti->is_quantized == (ti->blck_size > 1),
              "%s: block %lld, %zu bytes", ti->name, (long long)ti->blck_size, ti->type_size);
        CHECK_STR(llm_type_name((enum llm_type)t), ti->name);
        CHECK_EQ_INT(llm_type_from_name(ti->name), t);
    }
    CHECK_EQ_INT(known, 32);
    CHECK_EQ_INT(llm_type_from_name("q4_k"), LLM_TYPE_Q4_K);
    CHECK_EQ_INT(llm_row_size(LLM_TYPE_Q4_K, 512), 2 * 144);
    CHECK_EQ_INT(llm_row_size(LLM_TYPE_F16, 7), 14);
}

/* A 2-D F32 leaf on data (a graph is planned only when its leaves have data). */
static struct llm_tensor *leaf_2d(struct llm_ctx *ctx, int64_t ne0, int64_t ne1, void *data)
{
    struct llm_tensor *t = llm_new_tensor_2d(ctx, LLM_TYPE_F32, ne0, ne1);
    t->data = data;
    return t;
}

/* Places the graph of outputs outs[0..n) in an arena (the nodes keep their addresses, for
 * comparing); returns the arena's size, 0 when allocation failed. */
static size_t allocate(struct llm_tensor **outs, int n)
{
    struct llm_graph *g = llm_graph_build(outs, n);
    struct llm_allocator *a = llm_allocator_new(NULL);
    struct llm_error err;
    const bool ok = g && a && llm_allocator_alloc_graph(a, g, &err) == 0;
    CHECK(ok, "allocation failed");
    const size_t size = ok ? llm_allocator_size(a) : 0;
    llm_allocator_free(a);
    llm_graph_free(g);
    return size;
}

/* Whether node t got src's block in the graph of outs[0..n). */
static bool took_over(struct llm_tensor **outs, int n, const struct llm_tensor *t, const struct llm_tensor *src)
{
    return allocate(outs, n) && t->data == src->data;
}

/* An in-place op (op_table.h) takes its first source's block only where that is safe. */
static void test_in_place(void)
{
    static float wdata[64 * 64], xdata[64 * 3];
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *w = leaf_2d(ctx, 64, 64, wdata), *x = leaf_2d(ctx, 64, 3, xdata);
    /* the source dies at the node: taken, also through a reshape of the whole block */
    struct llm_tensor *a = llm_mul_mat(ctx, w, x), *s = llm_silu(ctx, a);
    CHECK(took_over(&s, 1, s, a), "SILU of a dying product: not in place");
    a = llm_mul_mat(ctx, w, x);
    s = llm_silu(ctx, llm_reshape_2d(ctx, a, 32, 6));
    CHECK(took_over(&s, 1, s, a), "SILU of a reshaped dying product: not in place");
    /* the source is read after the node: kept */
    a = llm_mul_mat(ctx, w, x);
    s = llm_silu(ctx, a);
    struct llm_tensor *sum = llm_add(ctx, s, a);
    CHECK(!took_over(&sum, 1, s, a), "SILU over a source that the ADD after it reads");
    CHECK(took_over(&sum, 1, sum, s), "ADD of a dying SILU: not in place");
    /* the source is an output: kept */
    a = llm_mul_mat(ctx, w, x);
    s = llm_silu(ctx, a);
    struct llm_tensor *both[2] = { a, s };
    CHECK(!took_over(both, 2, s, a), "SILU over an output");
    /* a window of the block (row 1), not the whole: kept */
    a = llm_mul_mat(ctx, w, x);
    s = llm_silu(ctx, llm_view_1d(ctx, a, 64, 64 * sizeof(float)));
    CHECK(!took_over(&s, 1, s, a), "SILU over a part of a block");
    /* the node reads the block through a second view too (row 1 broadcast): overwritten rows would
     * be read, so kept */
    a = llm_mul_mat(ctx, w, x);
    sum = llm_add(ctx, a, llm_view_2d(ctx, a, 64, 1, a->nb[1], 64 * sizeof(float)));
    CHECK(!took_over(&sum, 1, sum, a), "ADD over a block it also reads through another view");
    /* an op that does not compute in place: kept */
    a = llm_mul_mat(ctx, w, x);
    s = llm_cont(ctx, a);
    CHECK(!took_over(&s, 1, s, a), "CONT in place");
    llm_ctx_free(ctx);
}

/* The arena for a graph where, in node order, the product d (3 units) finds only a 1-unit hole:
 *   n0 b = SCALE(x)   n1 a = SCALE(x)   n2 c = ADD(b, a)   n3 d = MUL_MAT(w, c)   n4 out = ADD(d, b)
 * a, b, c are one unit [e, e], d and out three [e, 3e] (out in d's block; c not in b's, which out
 * reads). In node order b, a, c take units 0-2, a's is freed, and d goes above them: 6 units.
 * Largest first, d takes 0-2 and b and c fit above it: 5, all that is live at n3. Every block is
 * checked apart from those live beside it. */
static size_t packed_units(int64_t e, size_t *unit)
{
    static char dummy[64]; /* nothing is computed */
    struct llm_ctx *ctx = llm_ctx_new(32);
    struct llm_tensor *x = leaf_2d(ctx, e, e, dummy), *w = leaf_2d(ctx, e, 3 * e, dummy);
    struct llm_tensor *b = llm_scale(ctx, x, 3.0f), *a = llm_scale(ctx, x, 2.0f), *c = llm_add(ctx, b, a);
    struct llm_tensor *d = llm_mul_mat(ctx, w, c), *out = llm_add(ctx, d, b);
    const size_t size = allocate(&out, 1);
    /* live together: (a, b), (a, c), (b, c), (b, d), (c, d), (b, out) */
    const struct llm_tensor *pairs[][2] = { { a, b }, { a, c }, { b, c }, { b, d }, { c, d }, { b, out } };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        CHECK(!ranges_overlap(pairs[i][0], pairs[i][1]), "e %lld: blocks %zu overlap while both live", (long long)e, i);
    CHECK(out->data == d->data, "ADD not in place");
    *unit = llm_nbytes(a);
    llm_ctx_free(ctx);
    return size;
}

/* A graph whose peak reaches 8 MiB is packed largest block first when that needs less; a smaller
 * one keeps node order (tokens are decoded with such graphs, and the second packing costs time). */
static void test_pack_by_size(void)
{
    size_t unit, size = packed_units(1024, &unit); /* 4 MiB units */
    CHECK(size == 5 * unit, "arena %zu bytes, %zu units of %zu expected", size, (size_t)5, unit);
    size = packed_units(512, &unit); /* 1 MiB units: 6 in node order, below 8 MiB */
    CHECK(size == 6 * unit, "arena %zu bytes, %zu units of %zu expected", size, (size_t)6, unit);
}

static void test_graph_and_alloc(void)
{
    static float wdata[64 * 64], xdata[64 * 3];
    struct llm_ctx *ctx = llm_ctx_new(256);
    struct llm_tensor *w = leaf_2d(ctx, 64, 64, wdata), *x = leaf_2d(ctx, 64, 3, xdata);
    struct llm_tensor *out = build_chain(ctx, w, x, 4);
    struct llm_graph *g = llm_graph_build(&out, 1);
    CHECK(g != NULL);
    if (!g) {
        llm_ctx_free(ctx);
        return;
    }
    CHECK_EQ_INT(g->n_leafs, 2);
    CHECK(g->nodes[g->n_nodes - 1] == out, "output must come last");
    /* every source precedes its user */
    bool ordered = true;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < LLM_MAX_SRC; j++) {
            const struct llm_tensor *s = g->nodes[i]->src[j];
            if (!s || s->op == LLM_OP_NONE)
                continue;
            bool found = false;
            for (int k = 0; k < i; k++)
                found |= g->nodes[k] == s;
            ordered &= found;
        }
    CHECK(ordered, "sources must precede their users");

    struct llm_allocator *a = llm_allocator_new(NULL);
    struct llm_error err;
    CHECK_EQ_INT(llm_allocator_alloc_graph(a, g, &err), 0);
    /* A node never shares memory with a source that is still needed when it runs: only an ADD may
     * take over its first source's block, the same bytes, where that source dies (the inner ADD of
     * each layer over the first MUL_MAT, the outer one over the inner ADD). */
    bool disjoint = true;
    int in_place = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *n = g->nodes[i];
        if (n->view_src)
            continue;
        for (int j = 0; j < LLM_MAX_SRC; j++) {
            const struct llm_tensor *r = n->src[j] ? llm_view_root(n->src[j]) : NULL;
            if (!r || r->op == LLM_OP_NONE || !ranges_overlap(n, r))
                continue;
            const bool taken = j == 0 && n->op == LLM_OP_ADD && r->data == n->data && llm_nbytes(r) == llm_nbytes(n);
            in_place += taken;
            disjoint = disjoint && taken;
        }
    }
    CHECK(disjoint, "a node overlaps one of its sources");
    CHECK_EQ_INT(in_place, 2 * 4);
    /* the arena is smaller than the sum of all nodes: memory is reused */
    size_t total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->view_src)
            total += llm_nbytes(g->nodes[i]);
    CHECK(llm_allocator_size(a) < total, "arena %zu, sum of nodes %zu", llm_allocator_size(a), total);

    /* Rebuilding the same graph gives the same addresses. */
    void *addr[512];
    int n_nodes = g->n_nodes;
    for (int i = 0; i < n_nodes; i++)
        addr[i] = g->nodes[i]->data;
    unsigned gen = llm_allocator_generation(a);
    llm_graph_free(g);
    llm_ctx_reset(ctx);
    w = leaf_2d(ctx, 64, 64, wdata);
    x = leaf_2d(ctx, 64, 3, xdata);
    out = build_chain(ctx, w, x, 4);
    g = llm_graph_build(&out, 1);
    CHECK_EQ_INT(llm_allocator_alloc_graph(a, g, &err), 0);
    bool same = g->n_nodes == n_nodes;
    for (int i = 0; same && i < n_nodes; i++)
        same = g->nodes[i]->data == addr[i];
    CHECK(same, "same graph, different addresses");
    CHECK_EQ_INT(llm_allocator_generation(a), gen);

    /* A leaf without data is an error, not a crash. */
    llm_graph_free(g);
    llm_ctx_reset(ctx);
    w = leaf_2d(ctx, 64, 64, NULL);
    x = leaf_2d(ctx, 64, 3, NULL);
    out = llm_mul_mat(ctx, w, x);
    g = llm_graph_build(&out, 1);
    CHECK(llm_allocator_alloc_graph(a, g, &err) != 0);
    llm_graph_free(g);
    llm_allocator_free(a);

    /* Running out of tensors is reported, not a crash. */
    struct llm_ctx *small = llm_ctx_new(3);
    struct llm_tensor *t = llm_new_tensor_1d(small, LLM_TYPE_F32, 4);
    for (int i = 0; i < 5; i++)
        t = llm_add(small, t, t);
    CHECK(llm_ctx_overflowed(small));
    llm_ctx_free(small);
    llm_ctx_free(ctx);
}

struct pool_job {
    atomic_int counter;
    int rounds;
    bool ok;
    struct llm_threadpool *pool;
};

/* Each round every thread adds 1, then checks after the barrier that all did. */
static void pool_fn(int ith, int nth, void *arg)
{
    struct pool_job *j = arg;
    (void)ith;
    for (int r = 1; r <= j->rounds; r++) {
        atomic_fetch_add(&j->counter, 1);
        llm_threadpool_barrier(j->pool);
        if (atomic_load(&j->counter) != r * nth)
            j->ok = false;
        llm_threadpool_barrier(j->pool);
    }
}

static void test_threadpool(void)
{
    for (int nth = 1; nth <= 3; nth++) {
        struct pool_job j = { .rounds = 200, .ok = true };
        j.pool = llm_threadpool_new(nth);
        CHECK(j.pool != NULL);
        for (int run = 0; run < 5; run++) {
            atomic_store(&j.counter, 0);
            llm_threadpool_run(j.pool, pool_fn, &j);
        }
        CHECK(j.ok, "barrier let a thread through early with %d threads", nth);
        llm_threadpool_free(j.pool);
    }
    /* set_idle_spin: workers busy-wait 200 us after a run, then sleep (n_awake drops to 0 within a
     * second), and a run wakes them all again */
    struct pool_job j = { .rounds = 50, .ok = true };
    j.pool = llm_threadpool_new(3);
    CHECK(j.pool != NULL);
    if (!j.pool)
        return;
    llm_threadpool_set_idle_spin(j.pool, 200);
    for (int run = 0; run < 3; run++) {
        atomic_store(&j.counter, 0);
        llm_threadpool_run(j.pool, pool_fn, &j);
        int awake = 2;
        for (int ms = 0; ms < 1000 && (awake = llm_threadpool_n_awake(j.pool)) > 0; ms++)
            nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
        CHECK_EQ_INT(awake, 0);
    }
    CHECK(j.ok, "barrier let a thread through early after the workers slept");
    llm_threadpool_free(j.pool);
}

/* Barrier waits are timed only while counting is on: thread 0 arrives 20 ms late, so the other two
 * wait about 40 ms between them. */
static void late_fn(int ith, int nth, void *arg)
{
    (void)nth;
    if (ith == 0)
        nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
    llm_threadpool_barrier(arg);
}

static void test_pool_waits(void)
{
    struct llm_threadpool *p = llm_threadpool_new(3);
    CHECK(p != NULL);
    if (!p)
        return;
    llm_threadpool_run(p, late_fn, p);
    CHECK(llm_threadpool_wait_ns(p) == 0, "waits timed while counting is off: %llu ns",
          (unsigned long long)llm_threadpool_wait_ns(p));
    llm_threadpool_count_waits(p, true);
    llm_threadpool_run(p, late_fn, p);
    const uint64_t ns = llm_threadpool_wait_ns(p);
    CHECK(ns >= 30000000, "two threads waited for a 20 ms late one: %llu ns", (unsigned long long)ns);
    llm_threadpool_free(p);
}

static void test_sampler(void)
{
    float logits[100];
    for (int i = 0; i < 100; i++)
        logits[i] = (float)((i * 37) % 100) / 10.0f;
    logits[42] = 50.0f;
    logits[43] = 50.0f; /* tie: greedy takes the lower id */
    struct llm_sampler_params p = llm_sampler_default_params();
    p.temp = 0;
    struct llm_sampler *s = llm_sampler_new(&p, 100);
    CHECK_EQ_INT(llm_sampler_sample(s, logits), 42);
    CHECK_EQ_INT(llm_argmax(logits, 100), 42);
    /* Banned tokens are never drawn; ids past the vocabulary are ignored. */
    CHECK(llm_sampler_ban(s, (const int32_t[]){ 42, 500, -1 }), "ban");
    CHECK_EQ_INT(llm_sampler_sample(s, logits), 43);
    CHECK(llm_sampler_ban(s, NULL), "ban nothing");
    CHECK_EQ_INT(llm_sampler_sample(s, logits), 42);
    llm_sampler_free(s);

    /* Repeat penalty pushes a seen token below the other. */
    p.repeat_penalty = 2.0f;
    s = llm_sampler_new(&p, 100);
    llm_sampler_accept(s, 42);
    CHECK_EQ_INT(llm_sampler_sample(s, logits), 43);
    llm_sampler_free(s);

    /* Same seed, same draws; top-k 1 is greedy. */
    p = llm_sampler_default_params();
    p.seed = 1234;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0;
    p.temp = 5.0f;
    for (int i = 0; i < 100; i++)
        logits[i] = (float)(i % 7);
    struct llm_sampler *s1 = llm_sampler_new(&p, 100), *s2 = llm_sampler_new(&p, 100);
    bool same = true, varied = false;
    int first = llm_sampler_sample(s1, logits);
    (void)llm_sampler_sample(s2, logits);
    for (int i = 0; i < 50; i++) {
        int a = llm_sampler_sample(s1, logits), b = llm_sampler_sample(s2, logits);
        same &= a == b;
        varied |= a != first;
    }
    CHECK(same, "same seed gave different tokens");
    CHECK(varied, "high temperature never changed the token");
    llm_sampler_free(s1);
    llm_sampler_free(s2);
    p.top_k = 1;
    s = llm_sampler_new(&p, 100);
    int t = llm_sampler_sample(s, logits);
    CHECK(t % 7 == 6 && t == 6, "top-k 1 picked %d", t);
    llm_sampler_free(s);
}

/* ---- sampler: candidate sets and distributions ------------------------------------------------ */

#define SV 10        /* vocabulary of the sampler cases */
#define DRAWS 20000

/* Probabilities of ids 0..9 (sum 1), scrambled so that id order is not probability order. The
 * logits are ln w + 3: ids 1, 4, 8, 3, 6, 0 are positive and 9, 5, 2, 7 negative, so the penalty's
 * two rules both apply. Sorted: 1 .30, 4 .20, 8 .15, 3 .12, 6 .08, 0 .06, 9 .04, 5 .03, 2 .015, 7 .005. */
static const double sampler_w[SV] = { 0.06, 0.30, 0.015, 0.12, 0.20, 0.03, 0.08, 0.005, 0.15, 0.04 };

struct sampler_case {
    const char *name;
    float temp, top_p, min_p, penalty;
    int32_t top_k, last_n;
    int32_t history[8];   /* accepted tokens, oldest first */
    int n_history;
    int32_t penalized[4]; /* the distinct tokens of the last last_n accepted ones */
    int n_penalized;
    int32_t support[SV];  /* the candidates left by the chain, worked out by hand */
    int n_support;
};

/* The cases; each comment derives the support by llama.cpp's rules: top-k keeps the k best; top-p
 * the shortest prefix of the sorted candidates (renormalised) whose sum reaches p, at least one;
 * min-p the candidates with p ≥ min_p · p_max; temperature (last) divides the logits. */
static const struct sampler_case sampler_cases[] = {
    /* top-k 4: the four best */
    { "top-k 4", 1.0f, 1.0f, 0.0f, 1.0f, 4, 64, { 0 }, 0, { 0 }, 0, { 1, 4, 8, 3 }, 4 },
    /* top-p 0.8: sums .30 .50 .65 .77 .85, the fifth reaches 0.8 */
    { "top-p 0.8", 1.0f, 0.8f, 0.0f, 1.0f, 0, 64, { 0 }, 0, { 0 }, 0, { 1, 4, 8, 3, 6 }, 5 },
    /* top-p 0.01: the first alone reaches it (and at least one is kept) */
    { "top-p 0.01", 1.0f, 0.01f, 0.0f, 1.0f, 0, 64, { 0 }, 0, { 0 }, 0, { 1 }, 1 },
    /* min-p 0.45: p ≥ 0.135 keeps .30 .20 .15, not .12 */
    { "min-p 0.45", 1.0f, 1.0f, 0.45f, 1.0f, 0, 64, { 0 }, 0, { 0 }, 0, { 1, 4, 8 }, 3 },
    /* temperature 2 alone: every token, p ∝ w^(1/2) */
    { "temp 2", 2.0f, 1.0f, 0.0f, 1.0f, 0, 64, { 0 }, 0, { 0 }, 0, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, 10 },
    /* penalty 1.5 over the last 3 of 8, 1, 7, 7: 1 (logit 1.80 → 1.20) and 7 (−2.30 → −3.45) once
     * each, 8 has left the window; nothing is cut */
    { "penalty 1.5 last 3", 1.0f, 1.0f, 0.0f, 1.5f, 0, 3, { 8, 1, 7, 7 }, 4, { 1, 7 }, 2,
      { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, 10 },
    /* temperature comes last: top-p 0.8 on untempered p keeps five (as above); tempered by 0.5
     * first (p ∝ w²: .50 .22 .13 ...) it would keep three */
    { "top-p 0.8, temp 0.5", 0.5f, 0.8f, 0.0f, 1.0f, 0, 64, { 0 }, 0, { 0 }, 0, { 1, 4, 8, 3, 6 }, 5 },
    /* min-p 0.45 on untempered p keeps three (as above); tempered by 2 first (p ∝ w^(1/2)) the
     * floor would be w ≥ 0.45² · 0.30 = 0.061 and keep five */
    { "min-p 0.45, temp 2", 2.0f, 1.0f, 0.45f, 1.0f, 0, 64, { 0 }, 0, { 0 }, 0, { 1, 4, 8 }, 3 },
    /* the whole chain. Penalty as above: 4 (1.39) now leads 1 (1.20); top-k 6: 4 1 8 3 6 0;
     * top-p 0.9 on those: p .258 .213 .194 .155 .103 .077, sums .258 .471 .664 .819 .923 keep five;
     * min-p 0.45: p ≥ 0.116 keeps 4 1 8 3; temperature 2 then only reshapes. Tempering first would
     * keep all six (sums .211 .403 .587 .750 .884 1; floor 0.095 under the last, 0.116). */
    { "chain", 2.0f, 0.9f, 0.45f, 1.5f, 6, 3, { 8, 1, 7, 7 }, 4, { 1, 7 }, 2, { 4, 1, 8, 3 }, 4 },
};

static bool in_list(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* Draw DRAWS tokens with the case's parameters and history; the drawn ids must be exactly the
 * support, each with frequency within 5 standard deviations (sqrt(p(1 − p)/DRAWS)) of
 * p = softmax over the support of (penalised logit) / temp, computed here in double. */
static void check_sampler_case(const struct sampler_case *sc)
{
    float logits[SV];
    double lp[SV], z = 0.0, p[SV];
    for (int i = 0; i < SV; i++) {
        logits[i] = (float)(log(sampler_w[i]) + 3.0);
        lp[i] = logits[i];
        if (in_list(sc->penalized, sc->n_penalized, i))
            lp[i] = lp[i] > 0 ? lp[i] / sc->penalty : lp[i] * sc->penalty;
    }
    for (int i = 0; i < SV; i++)
        z += in_list(sc->support, sc->n_support, i) ? exp(lp[i] / sc->temp) : 0.0;
    for (int i = 0; i < SV; i++)
        p[i] = in_list(sc->support, sc->n_support, i) ? exp(lp[i] / sc->temp) / z : 0.0;

    struct llm_sampler_params sp = { .temp = sc->temp, .top_k = sc->top_k, .top_p = sc->top_p,
                                     .min_p = sc->min_p, .repeat_penalty = sc->penalty,
                                     .repeat_last_n = sc->last_n, .seed = 20240 };
    struct llm_sampler *s = llm_sampler_new(&sp, SV);
    CHECK(s != NULL);
    if (!s)
        return;
    for (int i = 0; i < sc->n_history; i++)
        llm_sampler_accept(s, sc->history[i]);
    int count[SV] = { 0 }, outside = 0;
    for (int d = 0; d < DRAWS; d++) {
        int32_t t = llm_sampler_sample(s, logits);
        if (t >= 0 && t < SV)
            count[t]++;
        else
            outside++;
    }
    llm_sampler_free(s);
    CHECK(outside == 0, "%s: %d draws out of the vocabulary", sc->name, outside);
    char got[64] = "", want[64] = "";
    for (int i = 0; i < SV; i++) {
        if (count[i])
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", i);
        if (p[i] > 0)
            snprintf(want + strlen(want), sizeof want - strlen(want), " %d", i);
    }
    CHECK(strcmp(got, want) == 0, "%s: drawn tokens {%s } != candidates {%s }", sc->name, got, want);
    double worst = 0.0; /* in standard deviations */
    for (int i = 0; i < SV; i++) {
        if (p[i] == 0.0)
            continue;
        double sd = sqrt(p[i] * (1.0 - p[i]) / DRAWS), diff = fabs((double)count[i] / DRAWS - p[i]);
        double dev = diff <= 1e-12 ? 0.0 : diff / sd; /* a sole candidate (sd 0) must be drawn always */
        worst = dev > worst ? dev : worst;
        CHECK(dev <= 5.0, "%s: token %d drawn %.4f of the time, expected %.4f (%.1f sd)", sc->name, i,
              (double)count[i] / DRAWS, p[i], dev);
    }
    printf("sampler %s: support {%s }, worst frequency %.2f sd from expected\n", sc->name, got, worst);
}

/* Greedy draws that pin the repetition penalty's rules: a positive logit is divided, a negative
 * one multiplied, a token repeated in the window is penalised once, and a token that has left the
 * last repeat_last_n accepted ones is not penalised. */
static void test_repeat_penalty_rules(void)
{
    struct llm_sampler_params p = llm_sampler_default_params();
    p.temp = 0;
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    const float pos[3] = { 2.0f, 1.0f, 0.0f }; /* 2 / 1.5 = 1.33 > 1 > 2 / 1.5² = 0.89 */
    const float neg[3] = { -1.0f, -1.4f, -9.0f }; /* −1 · 1.5 = −1.5 < −1.4 < −1 / 1.5 */
    struct llm_sampler *s = llm_sampler_new(&p, 3);
    llm_sampler_accept(s, 0);
    CHECK_EQ_INT(llm_sampler_sample(s, neg), 1); /* negative logit multiplied */
    llm_sampler_accept(s, 0);
    CHECK_EQ_INT(llm_sampler_sample(s, pos), 0); /* twice in the window, divided once */
    llm_sampler_free(s);
    p.repeat_penalty = 3.0f;
    s = llm_sampler_new(&p, 3);
    llm_sampler_accept(s, 0);
    CHECK_EQ_INT(llm_sampler_sample(s, pos), 1); /* 2 / 3 < 1 */
    llm_sampler_accept(s, 2);
    llm_sampler_accept(s, 2);
    CHECK_EQ_INT(llm_sampler_sample(s, pos), 0); /* 0 left the last 2: not penalised */
    llm_sampler_free(s);
}

static void test_sampler_chain(void)
{
    test_repeat_penalty_rules();
    for (size_t i = 0; i < sizeof sampler_cases / sizeof sampler_cases[0]; i++)
        check_sampler_case(&sampler_cases[i]);
}

int main(void)
{
    test_type_info();
    test_op_table();
    test_constructor_shape_checks();
    test_graph_and_alloc();
    test_in_place();
    test_pack_by_size();
    test_threadpool();
    test_pool_waits();
    test_sampler();
    test_sampler_chain();
    return test_done("test_core");
}
