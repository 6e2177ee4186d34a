/* The npu backend end to end on stories260K: a 700-token greedy generation crossing three 256-cell
 * KV windows is byte-identical to cpu with graph cache capacity 12 and 1, and the graph statistics
 * are exactly what the design predicts (one capture per window, replays for every other decode
 * step, the prompt eager, evictions only when the cache is full); a prefill graph is captured only
 * with GGML_CANN_PREFILL_USE_GRAPH; graph mode off never touches the cache. */
#include "harness.h"
#include "model/context.h"
#include "model/model.h"
#include "model/sampler.h"

#define N_GEN 700
#define N_CTX 1024

struct run {
    int32_t ids[N_GEN];
    int n;
    struct llm_graph_stats st;
};

/* Greedy generation of N_GEN tokens after prompt, one token per decode. */
static bool generate(struct llm_model *m, enum llm_device dev, int graph, const int32_t *prompt, int n_prompt,
                     struct run *out)
{
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = N_CTX;
    p.device = dev;
    p.acl_graph = graph;
    p.npu_launch_us = 0;
    struct llm_context *c = NULL;
    struct llm_error err;
    if (llm_context_new(m, &p, &c, &err)) {
        fprintf(stderr, "context: %s\n", err.msg);
        return false;
    }
    bool ok = llm_decode(c, prompt, n_prompt, false, &err) == 0;
    out->n = 0;
    while (ok && out->n < N_GEN) {
        int32_t t = llm_argmax(llm_get_logits(c, 0), (int32_t)m->hp.n_vocab);
        out->ids[out->n++] = t;
        if (out->n < N_GEN)
            ok = llm_decode(c, &t, 1, false, &err) == 0;
    }
    if (!ok)
        fprintf(stderr, "decode: %s\n", err.msg);
    llm_context_stats(c, &out->st);
    llm_context_free(c);
    return ok;
}

static void test_windows(struct llm_model *m)
{
    const int32_t prompt[] = { 1, 403, 407, 261, 378 }; /* BOS "Once upon a time" */
    const int n_prompt = (int)(sizeof prompt / sizeof prompt[0]);
    static struct run cpu, npu;
    CHECK(generate(m, LLM_DEVICE_CPU, 0, prompt, n_prompt, &cpu));
    CHECK_EQ_INT(cpu.n, N_GEN);
    /* decode steps: N_GEN - 1 one-token graphs at positions n_prompt .. n_prompt + N_GEN - 2 */
    const int steps = N_GEN - 1, last_pos = n_prompt + N_GEN - 2;
    const int windows = last_pos / 256 + 1;
    CHECK_EQ_INT(windows, 3);
    static const struct { const char *capacity; int evictions; } caps[] = { { "12", 0 }, { "1", 2 } };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        setenv("GGML_CANN_GRAPH_CACHE_CAPACITY", caps[i].capacity, 1);
        CHECK(generate(m, LLM_DEVICE_NPU, 1, prompt, n_prompt, &npu));
        CHECK(npu.n == cpu.n && memcmp(npu.ids, cpu.ids, sizeof cpu.ids) == 0,
              "capacity %s: the npu story differs from cpu", caps[i].capacity);
        CHECK_EQ_INT(npu.st.captures, windows);
        CHECK_EQ_INT(npu.st.misses, windows);
        CHECK_EQ_INT(npu.st.hits, steps - windows);
        CHECK_EQ_INT(npu.st.replays, steps);
        CHECK_EQ_INT(npu.st.evictions, caps[i].evictions);
        CHECK_EQ_INT(npu.st.eager_graphs, 1); /* the prompt */
        CHECK(npu.st.ops_replayed > 0 && npu.st.ops_replayed % (uint64_t)steps == 0,
              "ops replayed %llu for %d replays of equal graphs", (unsigned long long)npu.st.ops_replayed, steps);
    }
    unsetenv("GGML_CANN_GRAPH_CACHE_CAPACITY");
    CHECK(generate(m, LLM_DEVICE_NPU, 0, prompt, n_prompt, &npu));
    CHECK(memcmp(npu.ids, cpu.ids, sizeof cpu.ids) == 0, "graph off: the npu story differs from cpu");
    CHECK(npu.st.captures == 0 && npu.st.hits == 0 && npu.st.misses == 0 && npu.st.replays == 0);
    CHECK_EQ_INT(npu.st.eager_graphs, steps + 1);
}

/* A prefill graph: eager unless GGML_CANN_PREFILL_USE_GRAPH; then captured once and replayed. */
static void test_prefill(struct llm_model *m)
{
    int32_t prompt[64];
    for (int i = 0; i < 64; i++)
        prompt[i] = 1 + (i * 37) % 500;
    for (int use = 0; use < 2; use++) {
        if (use)
            setenv("GGML_CANN_PREFILL_USE_GRAPH", "true", 1);
        struct llm_context_params p = llm_context_default_params();
        p.n_ctx = 256;
        p.device = LLM_DEVICE_NPU;
        p.acl_graph = 1;
        struct llm_context *c = NULL;
        struct llm_error err;
        CHECK(llm_context_new(m, &p, &c, &err) == 0, "%s", err.msg);
        if (!c)
            continue;
        float first[512];
        for (int r = 0; r < 3; r++) {
            llm_kv_clear(c);
            CHECK(llm_decode(c, prompt, 64, false, &err) == 0, "%s", err.msg);
            if (r == 0)
                memcpy(first, llm_get_logits(c, 0), sizeof first);
            else
                CHECK(memcmp(first, llm_get_logits(c, 0), sizeof first) == 0, "prefill %d differs", r);
        }
        struct llm_graph_stats st;
        llm_context_stats(c, &st);
        CHECK_EQ_INT(st.captures, use ? 1 : 0);
        CHECK_EQ_INT(st.hits, use ? 2 : 0);
        CHECK_EQ_INT(st.eager_graphs, use ? 0 : 3);
        llm_context_free(c);
    }
    unsetenv("GGML_CANN_PREFILL_USE_GRAPH");
}

int main(void)
{
    unsetenv("GGML_CANN_PREFILL_USE_GRAPH");
    unsetenv("GGML_CANN_GRAPH_CACHE_CAPACITY");
    struct llm_model *m = NULL;
    struct llm_error err;
    CHECK(llm_model_load(test_path("models/stories260K.gguf"), &m, &err) == 0, "%s", err.msg);
    if (m) {
        test_windows(m);
        test_prefill(m);
    }
    llm_model_free(m);
    return test_done("test_npu");
}
