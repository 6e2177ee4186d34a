/* The npu backend end to end on stories260K: a 700-token greedy generation crossing three 256-cell
 * KV windows is byte-identical to cpu with graph cache capacity 12 and 1, and the graph statistics
 * are exactly what the design predicts (one capture per window, replays for every other decode
 * step, the prompt eager, evictions only when the cache is full); a prefill graph is captured only
 * with GGML_CANN_PREFILL_USE_GRAPH; graph mode off never touches the cache. Replays and eager
 * launches count the same kernels, and each graph fills one RoPE table, on every architecture; op
 * offload sends prompts of 32+ rows over host weights to the npu unless -nopo, logits unchanged;
 * weights the model holds repacked go to the npu repacked. */
#include "harness.h"
#include "model/context.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/weights.h"
#include "npu_harness.h"
#include "ops/types/repack.h"

#define N_GEN 700
#define N_CTX 1024

struct run {
    int32_t ids[N_GEN];
    int n;
    struct llm_npu_stats st;
    int64_t schedules; /* graph shapes scheduled */
};

/* Greedy generation of N_GEN tokens after prompt, one token per decode. */
static bool generate(struct llm_model *m, enum llm_device dev, int graph, const int32_t *prompt, int n_prompt,
                     struct run *out)
{
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = N_CTX;
    p.device = dev;
    struct llm_backend_option npu_opts[2];
    test_npu_options(&p, npu_opts, graph, 0);
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
    test_npu_stats(c, &out->st);
    double us;
    llm_context_schedule_time(c, &us, &out->schedules);
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
        CHECK_EQ_INT(npu.schedules, windows + 1); /* once per shape: the prompt, then per window */
        CHECK_EQ_INT(npu.st.misses, windows);
        CHECK_EQ_INT(npu.st.hits, steps - windows);
        CHECK_EQ_INT(npu.st.replays, steps);
        CHECK_EQ_INT(npu.st.evictions, caps[i].evictions);
        CHECK_EQ_INT(npu.st.eager_graphs, 1); /* the prompt */
        CHECK(npu.st.ops_replayed > 0 && npu.st.ops_replayed % (uint64_t)steps == 0,
              "ops replayed %llu for %d replays of equal graphs", (unsigned long long)npu.st.ops_replayed, steps);
    }
    unsetenv("GGML_CANN_GRAPH_CACHE_CAPACITY");
    static struct run eager;
    CHECK(generate(m, LLM_DEVICE_NPU, 0, prompt, n_prompt, &eager));
    CHECK(memcmp(eager.ids, cpu.ids, sizeof cpu.ids) == 0, "graph off: the npu story differs from cpu");
    CHECK(eager.st.captures == 0 && eager.st.hits == 0 && eager.st.misses == 0 && eager.st.replays == 0);
    CHECK_EQ_INT(eager.st.eager_graphs, steps + 1);
    /* replays count the kernels eager launches count (the RoPE table fill included): the graph-off
     * run launched steps - windows more decode graphs than the captures did */
    CHECK(npu.st.ops_replayed * (uint64_t)(steps - windows) ==
              (eager.st.eager_launches - npu.st.eager_launches) * (uint64_t)steps,
          "ops replayed %llu over %d replays, eager launches %llu (graph off) and %llu (graph on)",
          (unsigned long long)npu.st.ops_replayed, steps, (unsigned long long)eager.st.eager_launches,
          (unsigned long long)npu.st.eager_launches);
    CHECK_EQ_INT(npu.st.rope_tables, npu.st.eager_graphs + npu.st.captures);
    CHECK_EQ_INT(eager.st.rope_tables, eager.st.eager_graphs);
}

/* Prefill captured (GGML_CANN_PREFILL_USE_GRAPH) at every prompt length up to the micro-batch:
 * no launch may grow a device buffer inside a capture, although the matmul path, so its scratch,
 * changes with the batch (AVX2's integer GEMM at 16-63 rows needed more than the 64-row batch
 * reserved for: issue 24), with flash attention on and off, on the quantized and float files. */
static void test_capture_every_batch(void)
{
    static const char *const files[] = { "models/stories260K-q8_0.gguf", "models/stories260K-q4_0.gguf",
                                         "models/stories260K.gguf" };
    setenv("GGML_CANN_PREFILL_USE_GRAPH", "1", 1);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct llm_model *m = NULL;
        struct llm_error err;
        CHECK(llm_model_load(test_path(files[i]), &m, &err) == 0, "%s", err.msg);
        for (int fa = 0; m && fa < 2; fa++) {
            struct llm_context_params p = llm_context_default_params();
            p.n_ctx = 256;
            p.n_ubatch = 64;
            p.device = LLM_DEVICE_NPU;
            struct llm_backend_option npu_opts[2];
            test_npu_options(&p, npu_opts, 1, -1);
            p.flash_attn = fa;
            struct llm_context *c = NULL;
            CHECK(llm_context_new(m, &p, &c, &err) == 0, "%s", err.msg);
            int failed_at = 0;
            for (int32_t n = 1; c && n <= p.n_ubatch && !failed_at; n++) {
                int32_t prompt[64];
                for (int32_t t = 0; t < n; t++)
                    prompt[t] = 1 + (t * 37) % 500;
                llm_kv_clear(c);
                if (llm_decode(c, prompt, n, false, &err) != 0)
                    failed_at = n;
            }
            CHECK(failed_at == 0, "%s fa %d: a %d-token prefill capture failed: %s", files[i], fa, failed_at,
                  err.msg);
            llm_context_free(c);
        }
        llm_model_free(m);
    }
    unsetenv("GGML_CANN_PREFILL_USE_GRAPH");
}

/* Greedy ids of N_OFFLOAD tokens after a fixed prompt, with -ngl, graph mode and -nkvo as given
 * (ngl < -1: the cpu alone); the npu's statistics and the last graph's split count in *st, *splits. */
#define N_OFFLOAD 12
static const char *offload_overrides; /* -ot of the next offload_run */

static bool offload_run(struct llm_model *m, int ngl, int graph, bool nkvo, int32_t *ids, struct llm_npu_stats *st,
                        int *splits)
{
    struct llm_context_params p = llm_context_default_params();
    p.tensor_overrides = offload_overrides;
    p.n_ctx = 64;
    p.device = ngl < -1 ? LLM_DEVICE_CPU : LLM_DEVICE_NPU;
    p.n_gpu_layers = ngl;
    struct llm_backend_option npu_opts[2];
    test_npu_options(&p, npu_opts, graph, -1);
    p.no_kv_offload = nkvo;
    struct llm_context *c = NULL;
    struct llm_error err;
    bool ok = llm_context_new(m, &p, &c, &err) == 0;
    const int32_t prompt[] = { 1, 20, 30, 40, 50, 60 };
    ok = ok && llm_decode(c, prompt, 6, false, &err) == 0;
    for (int i = 0; ok && i < N_OFFLOAD; i++) {
        ids[i] = llm_argmax(llm_get_logits(c, 0), (int32_t)m->hp.n_vocab);
        ok = llm_decode(c, &ids[i], 1, false, &err) == 0;
    }
    CHECK(ok, "ngl %d graph %d nkvo %d: %s", ngl, graph, nkvo, err.msg);
    if (c) {
        test_npu_stats(c, st);
        *splits = llm_context_n_splits(c);
    }
    llm_context_free(c);
    return ok;
}

/* -ngl from the last layer, graph mode on and off, -nkvo, on every shared architecture and weight
 * type: greedy ids equal the cpu's. -ngl 0 leaves the npu idle; a file whose every type CANN takes
 * runs, fully offloaded, as two splits (the cpu's token embedding, then the npu, a tied output
 * matrix copied there too); the K-quant, Q4_1 and Q5_x files fall back to the cpu for their
 * matmuls (more splits, the npu still working). */
static void test_offload(void)
{
    static const struct { const char *file; bool cann_types; } files[] = {
        { "models/stories260K.gguf", true },       { "models/qwen2-tiny-f16.gguf", true },
        { "models/qwen2-tiny-q8_0.gguf", true },   { "models/llama-k256-q4_0.gguf", false }, /* Q6_K output */
        { "models/llama-k256-q4_k_m.gguf", false }, { "models/llama-k256-q2_k.gguf", false },
        { "models/llama-k256-q3_k_m.gguf", false }, { "models/llama-k256-q5_k_m.gguf", false },
        { "models/llama-k256-q6_k.gguf", false },  { "models/llama-k256-q4_1.gguf", false },
        { "models/llama-k256-q5_0.gguf", false },
    };
    int runs = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        struct llm_model *m = NULL;
        struct llm_error err;
        CHECK(llm_model_load(test_path(files[f].file), &m, &err) == 0, "%s", err.msg);
        if (!m)
            continue;
        const int nl = (int)m->hp.n_layer;
        int32_t want[N_OFFLOAD], got[N_OFFLOAD];
        struct llm_npu_stats st;
        int splits = 0;
        CHECK(offload_run(m, -2, 0, false, want, &st, &splits));
        const int ngls[] = { 0, 1, nl / 2, nl, nl + 1, 99 };
        for (size_t k = 0; k < sizeof ngls / sizeof ngls[0]; k++)
            for (int graph = 0; graph < 2; graph++)
                for (int nkvo = 0; nkvo < 2; nkvo++) {
                    if (!offload_run(m, ngls[k], graph, nkvo, got, &st, &splits))
                        continue;
                    runs++;
                    CHECK(memcmp(got, want, sizeof want) == 0, "%s -ngl %d graph %d nkvo %d: greedy ids differ from the cpu's",
                          files[f].file, ngls[k], graph, nkvo);
                    const uint64_t npu_graphs = st.eager_graphs + st.replays;
                    if (ngls[k] == 0)
                        CHECK(npu_graphs == 0 && splits == 1, "%s -ngl 0: %llu npu graphs, %d splits", files[f].file,
                              (unsigned long long)npu_graphs, splits);
                    else
                        CHECK(npu_graphs > 0, "%s -ngl %d: the npu ran nothing", files[f].file, ngls[k]);
                    if (ngls[k] > nl && !nkvo)
                        CHECK(files[f].cann_types ? splits == 2 : splits > 2, "%s -ngl %d: %d splits", files[f].file,
                              ngls[k], splits);
                }
        llm_model_free(m);
    }
    CHECK_EQ_INT(runs, 11 * 6 * 2 * 2);
}

/* -ot places the weights it matches before -ngl does: the FFN matrices kept on the cpu split each
 * layer (greedy ids unchanged), the output layer sent to the npu with -ngl 0 runs there alone;
 * bad items fail context creation with one message. */
static void test_overrides(void)
{
    struct llm_model *m = NULL;
    struct llm_error err;
    CHECK(llm_model_load(test_path("models/stories260K.gguf"), &m, &err) == 0, "%s", err.msg);
    if (!m)
        return;
    int32_t want[N_OFFLOAD], got[N_OFFLOAD];
    struct llm_npu_stats st;
    int splits = 0, all_splits = 0;
    CHECK(offload_run(m, -2, 0, false, want, &st, &splits));
    CHECK(offload_run(m, 99, 1, false, got, &st, &all_splits));
    offload_overrides = "ffn_(gate|up|down)=CPU";
    CHECK(offload_run(m, 99, 1, false, got, &st, &splits));
    CHECK(memcmp(got, want, sizeof want) == 0 && splits == all_splits + 2 * (int)m->hp.n_layer,
          "-ot ffn=CPU: %d splits (%d without)", splits, all_splits);
    offload_overrides = "^output=npu";
    CHECK(offload_run(m, 0, 1, false, got, &st, &splits));
    CHECK(memcmp(got, want, sizeof want) == 0 && splits == 2 && st.replays > 0, "-ngl 0 -ot output=npu: %d splits",
          splits);
    static const char *const bad[] = { "ffn=GPU", "=cpu", "ffn", "(=cpu" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct llm_context_params p = llm_context_default_params();
        p.device = LLM_DEVICE_NPU;
        p.tensor_overrides = bad[i];
        struct llm_context *c = NULL;
        CHECK(llm_context_new(m, &p, &c, &err) == LLM_ERR_ARG && c == NULL && strstr(err.msg, "-ot: "),
              "-ot %s accepted", bad[i]);
    }
    offload_overrides = NULL;
    llm_model_free(m);
}

/* Every shared architecture fills one RoPE table per graph (Q and K share it), eager or captured;
 * the device runs the kernels the host counts, and a replay splits over the two workers exactly the
 * kernels the same tokens split eagerly (llama-k256's larger matmuls split). */
static void test_rope_tables(void)
{
    uint64_t splits_any = 0;
    static const char *const files[] = { "models/qwen2-tiny-f16.gguf", "models/llama-2-tiny-random.gguf",
                                         "models/llama-k256-q8_0.gguf" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct llm_model *m = NULL;
        struct llm_error err;
        CHECK(llm_model_load(test_path(files[i]), &m, &err) == 0, "%s", err.msg);
        if (!m)
            continue;
        uint64_t eager_splits = 0;
        for (int graph = 0; graph < 2; graph++) {
            struct llm_context_params p = llm_context_default_params();
            p.n_ctx = 64;
            p.n_threads = 2;
            p.device = LLM_DEVICE_NPU;
            struct llm_backend_option npu_opts[2];
            test_npu_options(&p, npu_opts, graph, -1);
            struct llm_context *c = NULL;
            CHECK(llm_context_new(m, &p, &c, &err) == 0, "%s", err.msg);
            if (!c)
                continue;
            const int32_t prompt[] = { 1, 2, 3, 4, 5, 6 };
            bool ok = llm_decode(c, prompt, 6, false, &err) == 0;
            for (int32_t t = 7; ok && t < 12; t++)
                ok = llm_decode(c, &t, 1, false, &err) == 0;
            CHECK(ok, "%s: %s", files[i], err.msg);
            struct llm_npu_stats st;
            test_npu_stats(c, &st);
            CHECK(st.rope_tables == st.eager_graphs + st.captures && st.eager_graphs == (graph ? 1u : 6u),
                  "%s graph %d: %llu tables for %llu eager graphs and %llu captures", files[i], graph,
                  (unsigned long long)st.rope_tables, (unsigned long long)st.eager_graphs,
                  (unsigned long long)st.captures);
            CHECK(st.device_kernels == st.kernels_run, "%s graph %d: the device ran %llu kernels, the host counted %llu",
                  files[i], graph, (unsigned long long)st.device_kernels, (unsigned long long)st.kernels_run);
            if (!graph)
                eager_splits = st.split_kernels;
            else
                CHECK(st.split_kernels == eager_splits, "%s: %llu kernels split replayed, %llu eagerly", files[i],
                      (unsigned long long)st.split_kernels, (unsigned long long)eager_splits);
            splits_any += st.split_kernels;
            llm_context_free(c);
        }
        llm_model_free(m);
    }
    CHECK(splits_any > 0, "no kernel split over the npu's two workers");
}

/* LLM_NPU_LAYOUT_ALIGN made real on stories260K (ff 172, head_dim 8): the layout pass keeps the
 * prompt's 172-wide activations padded from the gate and up gemms through SWIGLU (which follows them)
 * into ffn_down's gemm (no CHANNEL_NORM; ffn_down's weight is uploaded padded). FLASH_ATTN reads
 * its K and V from the padded cache and its Q and result dense: no CHANNEL_NORM at all (each
 * layer's pad of Q and unpad of the result made 10 per graph while the whole node was ALIGN). With
 * -fa off the attention gemms read the 8-wide Q and KQV rows: 20 per graph, prompt or decode step
 * (eager here). Off: nothing padded. The device refusing what the pass did not pad is
 * tests/test_layout.c's. */
static void test_layout_pads(struct llm_model *m)
{
    for (int run = 0; run < 4; run++) {
        const bool on = run & 1, fa = !(run & 2);
        setenv("LLM_NPU_LAYOUT_ALIGN", on ? "on" : "off", 1);
        struct llm_context_params p = llm_context_default_params();
        p.n_ctx = 64;
        p.device = LLM_DEVICE_NPU;
        p.flash_attn = fa;
        struct llm_backend_option npu_opts[2];
        test_npu_options(&p, npu_opts, 0, -1);
        struct llm_context *c = NULL;
        struct llm_error err;
        CHECK(llm_context_new(m, &p, &c, &err) == 0, "%s", err.msg);
        if (!c)
            continue;
        const int32_t prompt[] = { 1, 2, 3, 4, 5, 6 };
        bool ok = llm_decode(c, prompt, 6, true, &err) == 0;
        struct llm_npu_stats st;
        test_npu_stats(c, &st);
        const uint64_t prompt_pads = st.layout_pads;
        for (int32_t t = 7; ok && t < 12; t++)
            ok = llm_decode(c, &t, 1, false, &err) == 0;
        CHECK(ok, "layout %d, fa %d: %s", on, fa, err.msg);
        test_npu_stats(c, &st);
        CHECK(prompt_pads == (on && !fa ? 20u : 0u) && st.layout_pads == 6 * prompt_pads,
              "layout %d, fa %d: %llu pads for the prompt, %llu in all", on, fa, (unsigned long long)prompt_pads,
              (unsigned long long)st.layout_pads);
        llm_context_free(c);
    }
    unsetenv("LLM_NPU_LAYOUT_ALIGN");
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
        struct llm_backend_option npu_opts[2];
        test_npu_options(&p, npu_opts, 1, -1);
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
        struct llm_npu_stats st;
        test_npu_stats(c, &st);
        CHECK_EQ_INT(st.captures, use ? 1 : 0);
        CHECK_EQ_INT(st.hits, use ? 2 : 0);
        CHECK_EQ_INT(st.eager_graphs, use ? 0 : 3);
        llm_context_free(c);
    }
    unsetenv("GGML_CANN_PREFILL_USE_GRAPH");
}

/* Op offload (-nopo 0, the default): under -ngl 0 or a partial -ngl, a prompt of 32 or more rows
 * runs its matmuls over host weights on the npu, each weight copied in; -nopo 1 keeps them on the
 * cpu, and so does a prompt of 31 rows; every logits row equals the cpu's alone (stories260K, a
 * Q8_0 file, and a K-quant file whose matrices of types the npu lacks stay on the cpu). */
static bool offload_prompt(struct llm_model *m, int ngl, bool nopo, int32_t n, float *logits, uint64_t *npu_graphs,
                           int *splits)
{
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = 64;
    p.device = ngl < -1 ? LLM_DEVICE_CPU : LLM_DEVICE_NPU;
    p.n_gpu_layers = ngl;
    p.no_op_offload = nopo;
    struct llm_backend_option npu_opts[2];
    test_npu_options(&p, npu_opts, 1, -1);
    struct llm_context *c = NULL;
    struct llm_error err;
    int32_t prompt[40];
    for (int i = 0; i < 40; i++)
        prompt[i] = 1 + (i * 37) % ((int32_t)m->hp.n_vocab - 1);
    bool ok = llm_context_new(m, &p, &c, &err) == 0 && llm_decode(c, prompt, n, true, &err) == 0;
    CHECK(ok, "ngl %d nopo %d: %s", ngl, nopo, err.msg);
    if (ok) {
        memcpy(logits, llm_get_logits(c, 0), (size_t)n * m->hp.n_vocab * sizeof *logits);
        struct llm_npu_stats st;
        test_npu_stats(c, &st);
        *npu_graphs = st.eager_graphs + st.replays;
        *splits = llm_context_n_splits(c);
    }
    llm_context_free(c);
    return ok;
}

static void test_op_offload(void)
{
    static const char *const files[] = { "models/stories260K.gguf", "models/qwen2-tiny-q8_0.gguf",
                                         "models/llama-k256-q4_k_m.gguf" };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        struct llm_model *m = NULL;
        struct llm_error err;
        CHECK(llm_model_load(test_path(files[f]), &m, &err) == 0, "%s", err.msg);
        if (!m)
            continue;
        const size_t row = m->hp.n_vocab;
        float *want = malloc(40 * row * sizeof *want), *got = malloc(40 * row * sizeof *got);
        uint64_t graphs = 0;
        int splits = 0;
        for (int32_t n = 31; want && got && n <= 40; n += 9) {
            if (!offload_prompt(m, -2, false, n, want, &graphs, &splits))
                continue;
            const int ngls[] = { 0, (int)m->hp.n_layer / 2 + 1 };
            for (size_t k = 0; k < 2; k++)
                for (int nopo = 0; nopo < 2; nopo++) {
                    if (!offload_prompt(m, ngls[k], nopo, n, got, &graphs, &splits))
                        continue;
                    CHECK(memcmp(got, want, (size_t)n * row * sizeof *got) == 0,
                          "%s -ngl %d -nopo %d, %d rows: logits differ from the cpu's", files[f], ngls[k], nopo, n);
                    const bool offloads = n >= 32 && !nopo;
                    if (ngls[k] == 0)
                        CHECK(offloads ? graphs > 0 && splits > 1 : graphs == 0 && splits == 1,
                              "%s -ngl 0 -nopo %d, %d rows: %llu npu graphs, %d splits", files[f], nopo, n,
                              (unsigned long long)graphs, splits);
                }
        }
        free(want);
        free(got);
        llm_model_free(m);
    }
}

static bool offload_every(void *user, const struct llm_tensor *t, int64_t il)
{
    (void)user, (void)t, (void)il;
    return true;
}

/* The npu takes the weights in the layout the model holds them: a matrix repacked at load (Q4_K and
 * Q6_K on every AVX2 cpu, whatever its wider kernels) goes to the device byte for byte, so the
 * device's matmuls run the cpu's repacked kernel rather than the file layout's slower one; the
 * others as the file has them. */
static void test_weight_layout(void)
{
    struct llm_model *m = NULL;
    struct llm_error err;
    CHECK(llm_model_load(test_path("models/llama-k256-q4_k_m.gguf"), &m, &err) == 0, "%s", err.msg);
    const struct llm_backend_params bp = { .device = LLM_DEVICE_NPU, .n_threads = 1 };
    struct llm_backend *b = m ? llm_backend_npu_new(&bp, &err) : NULL;
    CHECK(!m || b, "%s", err.msg);
    struct llm_weights w = { 0 };
    if (!b || llm_weights_place(&w, m, b, offload_every, NULL, &err)) {
        CHECK(!b, "%s", err.msg);
        llm_backend_free(b);
        llm_model_free(m);
        return;
    }
    int repacked = 0, same = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct llm_tensor *f = &m->tensors[i], *t = &w.tensors[i];
        if (!w.uploaded[i] || !(f->flags & LLM_TENSOR_REPACKED)) {
            CHECK(!(t->flags & LLM_TENSOR_REPACKED), "%s: repacked on the npu only", f->name);
            continue;
        }
        repacked++;
        CHECK(t->flags & LLM_TENSOR_REPACKED, "%s: unpacked on the npu", f->name);
        const size_t n = llm_repack_size(f->type, f->ne[0], f->ne[1]);
        void *got = malloc(n);
        same += got && llm_tensor_get(t, got, 0, n, &err) == 0 && memcmp(got, f->data, n) == 0;
        free(got);
    }
    CHECK(repacked > 0 || !llm_repack_kernel(LLM_TYPE_Q4_K), "no matrix repacked on a cpu with the repacked kernel");
    CHECK_EQ_INT(same, repacked);
    llm_weights_release(&w);
    llm_backend_free(b);
    llm_model_free(m);
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
        test_layout_pads(m);
    }
    llm_model_free(m);
    test_weight_layout();
    test_rope_tables();
    test_capture_every_batch();
    test_offload();
    test_overrides();
    test_op_offload();
    return test_done("test_npu");
}
