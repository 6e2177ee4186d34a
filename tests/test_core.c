/* Core IR: type geometry, graph ordering, the liveness allocator (no overlap of live buffers, same addresses for
 * the same graph), the thread pool barrier, and the sampler. */
#include <stdatomic.h>
#include <stdint.h>

#include "alloc.h"
#include "graph.h"
#include "harness.h"
#include "model/sampler.h"
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

static void test_graph_and_alloc(void)
{
    static float wdata[64 * 64], xdata[64 * 3];
    struct llm_ctx *ctx = llm_ctx_new(256);
    struct llm_tensor *w = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 64, 64);
    struct llm_tensor *x = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 64, 3);
    w->data = wdata;
    x->data = xdata;
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

    struct llm_allocator *a = llm_allocator_new(test_host_alloc, test_host_free, NULL);
    struct llm_error err;
    CHECK_EQ_INT(llm_allocator_alloc_graph(a, g, &err), 0);
    /* A node never shares memory with a source that is still needed when it runs. */
    bool disjoint = true;
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *n = g->nodes[i];
        if (n->view_src)
            continue;
        for (int j = 0; j < LLM_MAX_SRC; j++)
            if (n->src[j] && n->src[j]->op != LLM_OP_NONE && ranges_overlap(n, llm_view_root(n->src[j])))
                disjoint = false;
    }
    CHECK(disjoint, "a node overlaps one of its sources");
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
    w = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 64, 64);
    x = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 64, 3);
    w->data = wdata;
    x->data = xdata;
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
    w = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 64, 64);
    x = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 64, 3);
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

int main(void)
{
    test_type_info();
    test_graph_and_alloc();
    test_threadpool();
    test_sampler();
    return test_done("test_core");
}
