/* Model loading: every fixture in ../shared/models loads with the hyper-parameters MODELS.md lists
 * and llama-bench's description/size/params (ref/llama-bench/stories260K.p16.n8.r2.t1.json);
 * broken files fail with a message naming the file and the key or tensor; synthetic models load
 * with the shapes and type mixes of their presets (sizes as in ref/perf.md). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "graph.h"
#include "harness.h"
#include "model/model.h"
#include "model/synth.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"

/* ---- fixtures --------------------------------------------------------------------------------- */

struct expect {
    const char *file;
    const char *desc;
    enum llm_arch arch;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, eps;
    bool tied, bias;
    enum llm_type output_type; /* type of the output projection */
};

#define STORIES LLM_ARCH_LLAMA, 64, 5, 8, 4, 172, 512, 2048, 10000.0f, 1e-5f, false, false
#define K256 LLM_ARCH_LLAMA, 256, 2, 8, 4, 512, 512, 2048, 10000.0f, 1e-5f, false, false
#define QWEN LLM_ARCH_QWEN2, 64, 2, 4, 2, 192, 151936, 4096, 1e6f, 1e-6f, true, true

static const struct expect fixtures[] = {
    { "stories260K.gguf", "llama ?B (guessed) all F32", STORIES, LLM_TYPE_F32 },
    { "stories260K-q8_0.gguf", "llama ?B Q8_0", STORIES, LLM_TYPE_Q8_0 },
    { "stories260K-q4_0.gguf", "llama ?B Q4_0", STORIES, LLM_TYPE_Q8_0 },
    { "llama-2-tiny-random.gguf", "llama ?B F16", LLM_ARCH_LLAMA, 8, 1, 2, 2, 32, 32000, 4096,
      10000.0f, 1e-5f, false, false, LLM_TYPE_F16 },
    { "qwen2-tiny-f16.gguf", "qwen2 ?B F16", QWEN, LLM_TYPE_F16 },
    { "qwen2-tiny-q8_0.gguf", "qwen2 ?B Q8_0", QWEN, LLM_TYPE_Q8_0 },
    { "llama-k256-f32.gguf", "llama ?B all F32", K256, LLM_TYPE_F32 },
    { "llama-k256-f16.gguf", "llama ?B F16", K256, LLM_TYPE_F16 },
    { "llama-k256-bf16.gguf", "llama ?B BF16", K256, LLM_TYPE_BF16 },
    { "llama-k256-q8_0.gguf", "llama ?B Q8_0", K256, LLM_TYPE_Q8_0 },
    { "llama-k256-q4_0.gguf", "llama ?B Q4_0", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q4_1.gguf", "llama ?B Q4_1", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q5_0.gguf", "llama ?B Q5_0", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q5_1.gguf", "llama ?B Q5_1", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q2_k.gguf", "llama ?B Q2_K - Medium", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q3_k_m.gguf", "llama ?B Q3_K - Medium", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q4_k_m.gguf", "llama ?B Q4_K - Medium", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q5_k_m.gguf", "llama ?B Q5_K - Medium", K256, LLM_TYPE_Q6_K },
    { "llama-k256-q6_k.gguf", "llama ?B Q6_K", K256, LLM_TYPE_Q6_K },
};

static bool shape_is(const struct llm_tensor *t, int64_t ne0, int64_t ne1)
{
    return t && t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1;
}

/* Shapes of every bound weight against the hyper-parameters (spec §3.5). */
static void check_shapes(const struct llm_model *m, const char *what)
{
    const struct llm_hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, hd = hp->n_embd_head_k, q = hd * hp->n_head;
    const int64_t kv = hd * hp->n_head_kv;
    CHECK(shape_is(m->tok_embd, d, hp->n_vocab), "%s token_embd", what);
    CHECK(shape_is(m->output, d, hp->n_vocab), "%s output", what);
    CHECK(shape_is(m->output_norm, d, 1), "%s output_norm", what);
    int bad = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct llm_layer *L = &m->layers[il];
        bad += !shape_is(L->attn_norm, d, 1) + !shape_is(L->wq, d, q) + !shape_is(L->wk, d, kv) +
               !shape_is(L->wv, d, kv) + !shape_is(L->wo, q, d) + !shape_is(L->ffn_norm, d, 1) +
               !shape_is(L->ffn_gate, d, hp->n_ff) + !shape_is(L->ffn_up, d, hp->n_ff) +
               !shape_is(L->ffn_down, hp->n_ff, d);
        if (L->bq)
            bad += !shape_is(L->bq, q, 1) + !shape_is(L->bk, kv, 1) + !shape_is(L->bv, kv, 1);
    }
    CHECK(bad == 0, "%s: %d layer tensors with a wrong shape", what, bad);
    /* strides and data: contiguous rows inside the mapping, or (issue 26) matrices repacked into
     * the model's own memory whose rows unpack to the file's, and then every other tensor copied
     * there too */
    int bad_nb = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct llm_tensor *t = &m->tensors[i];
        const struct gguf_tensor_info *ti = &m->file->tensors[i];
        const char *in_file = (const char *)(m->file->base + m->file->data_offset + ti->offset);
        bad_nb += t->nb[0] != llm_type_info(t->type)->type_size ||
                  t->nb[1] != llm_row_size(t->type, t->ne[0]) || t->nb[2] != t->nb[1] * (size_t)t->ne[1];
        if (t->flags == (LLM_TENSOR_WEIGHT | LLM_TENSOR_REPACKED)) {
            const char *mem = m->repacked;
            char *rows = malloc(llm_nbytes(t));
            llm_repack_unpack(t->type, t->ne[0], t->data, 0, t->ne[1], rows, t->nb[1]);
            bad_nb += !llm_repack_kernel(t->type) || (const char *)t->data < mem ||
                      (const char *)t->data + llm_repack_size(t->type, t->ne[0], t->ne[1]) > mem + m->repacked_bytes ||
                      memcmp(rows, in_file, llm_nbytes(t)) != 0;
            free(rows);
        } else {
            /* with any matrix repacked, the others are copied beside them (repack_load.c) */
            const char *mem = m->repacked;
            const bool copied = mem && (const char *)t->data >= mem &&
                                (const char *)t->data + llm_nbytes(t) <= mem + m->repacked_bytes;
            bad_nb += (mem ? !copied || memcmp(t->data, in_file, llm_nbytes(t)) != 0 : t->data != (const void *)in_file) ||
                      t->flags != LLM_TENSOR_WEIGHT ||
                      (t->ne[2] == 1 && llm_repack_type_ok(t->type) && llm_repack_kernel(t->type));
        }
    }
    CHECK(bad_nb == 0, "%s: %d tensors with bad nb/data/flags", what, bad_nb);
}

static void test_fixture(const struct expect *e)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", e->file);
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    int rc = llm_model_load(test_path(rel), &m, &err);
    CHECK(rc == 0 && m, "%s: %s", e->file, err.msg);
    if (!m)
        return;
    const struct llm_hparams *hp = &m->hp;
    CHECK(hp->arch == e->arch, "%s arch", e->file);
    CHECK(hp->n_embd == e->n_embd && hp->n_layer == e->n_layer && hp->n_head == e->n_head &&
          hp->n_head_kv == e->n_head_kv && hp->n_ff == e->n_ff && hp->n_vocab == e->n_vocab &&
          hp->n_ctx_train == e->n_ctx, "%s: d%u L%u h%u/%u ff%u V%u ctx%u", e->file, hp->n_embd,
          hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff, hp->n_vocab, hp->n_ctx_train);
    CHECK(hp->n_embd_head_k == e->n_embd / e->n_head && hp->n_rot == hp->n_embd_head_k, "%s hd", e->file);
    CHECK(hp->rope_freq_base == e->rope_base, "%s rope base %g", e->file, (double)hp->rope_freq_base);
    CHECK(fabsf(hp->f_norm_rms_eps - e->eps) < e->eps * 1e-3f, "%s eps %g", e->file,
          (double)hp->f_norm_rms_eps);
    CHECK(hp->rope_freq_scale == 1.0f, "%s rope scale", e->file);
    CHECK(hp->rope_type == (e->arch == LLM_ARCH_QWEN2 ? LLM_ROPE_NEOX : LLM_ROPE_NORMAL), "%s rope", e->file);
    CHECK((m->output == m->tok_embd) == e->tied, "%s tied output", e->file);
    CHECK((m->layers[0].bq != NULL) == e->bias && (m->layers[0].bk != NULL) == e->bias &&
          (m->layers[hp->n_layer - 1].bv != NULL) == e->bias, "%s biases", e->file);
    CHECK(m->layers[0].bo == NULL && m->output_b == NULL && m->rope_freqs == NULL, "%s optional", e->file);
    CHECK(m->output->type == e->output_type, "%s output type %s", e->file, llm_type_name(m->output->type));
    CHECK_STR(m->desc, e->desc);
    CHECK(vocab_n_tokens(m->vocab) == (int32_t)e->n_vocab, "%s vocab", e->file);
    check_shapes(m, e->file);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < m->file->n_tensors; i++)
        bytes += m->file->tensors[i].nbytes;
    CHECK(m->n_bytes == bytes && m->n_bytes < m->file->size, "%s n_bytes", e->file);
    llm_model_free(m);
}

/* llama-bench's own model/size/params for stories260K, read from its JSON output. */
static void test_llama_bench_reference(void)
{
    FILE *fp = fopen(test_path("ref/llama-bench/stories260K.p16.n8.r2.t1.json"), "rb");
    CHECK(fp != NULL, "reference json");
    if (!fp)
        return;
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[n] = '\0';
    /* a reference that does not parse, or lacks a field, fails every check below */
    cJSON *root = cJSON_Parse(text);
    CHECK(root != NULL && n < sizeof text - 1, "reference json does not parse (%zu bytes read)", n);
    cJSON *first = cJSON_GetArrayItem(root, 0);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(first, "model_type"));
    double size = cJSON_GetNumberValue(cJSON_GetObjectItem(first, "model_size"));
    double params = cJSON_GetNumberValue(cJSON_GetObjectItem(first, "model_n_params"));
    CHECK(type != NULL && !isnan(size) && !isnan(params),
          "reference json: model_type, model_size or model_n_params missing");
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    CHECK(llm_model_load(test_path("models/stories260K.gguf"), &m, &err) == 0, "%s", err.msg);
    if (m && type) {
        CHECK_STR(m->desc, type);
        CHECK(m->n_bytes == (uint64_t)size, "size %llu vs %.0f", (unsigned long long)m->n_bytes, size);
        CHECK(m->n_params == (uint64_t)params, "params %llu vs %.0f", (unsigned long long)m->n_params, params);
        char s[32], p[32];
        llm_format_size(m->n_bytes, s, sizeof s);
        llm_format_params(m->n_params, p, sizeof p);
        CHECK_STR(s, "1.12 MiB"); /* the .md table's cells */
        CHECK_STR(p, "0.29 M");
        CHECK(m->ftype_guessed && m->ftype == 0 && m->hp.file_type == -1, "guessed ftype");
    }
    llm_model_free(m);
    cJSON_Delete(root);
}

static void test_not_models(void)
{
    static const char *const files[] = { "models/vocab/ggml-vocab-llama-spm.gguf",
                                         "models/vocab/ggml-vocab-gpt-2.gguf", "models/quant/Q4_K.gguf" };
    static const char *const msgs[] = { "no tensors", "unknown architecture 'gpt2'",
                                        "unknown architecture 'quant_test'" };
    for (int i = 0; i < 3; i++) {
        struct llm_model *m = (struct llm_model *)1;
        struct llm_error err = { 0 };
        CHECK(llm_model_load(test_path(files[i]), &m, &err) != 0 && m == NULL, "%s loaded", files[i]);
        CHECK(strstr(err.msg, msgs[i]) != NULL, "%s: '%s'", files[i], err.msg);
    }
}

/* ---- broken files ------------------------------------------------------------------------------ */

/* A tiny valid llama (d32 L1 h4/kv2 ff64, SPM vocab of 512) with one thing changed. */
struct recipe {
    const char *arch;         /* NULL: llama */
    const char *skip_key;     /* <arch>.<suffix> not written */
    const char *array_key;    /* <arch>.<suffix> written as a per-layer u32 array */
    const char *skip_tensor;
    const char *wide_tensor;  /* written with ne0 doubled */
    const char *i32_tensor;   /* written as I32 (no kernels) */
    const char *extra_tensor; /* a 1-D [32] F32 tensor added */
    bool no_tensors, no_vocab;
    uint32_t n_head_kv, n_rot, n_layer;
    const char *rope_scaling;
};

static char tmpdir[256];

static void add_t(struct gguf_writer *w, const struct recipe *r, const char *name, int64_t ne0,
                  int64_t ne1, const void *zeros)
{
    if (r->skip_tensor && !strcmp(name, r->skip_tensor))
        return;
    int64_t ne[2] = { ne0, ne1 };
    if (r->wide_tensor && !strcmp(name, r->wide_tensor))
        ne[0] *= 2;
    enum llm_type t = r->i32_tensor && !strcmp(name, r->i32_tensor) ? LLM_TYPE_I32 : LLM_TYPE_F32;
    gguf_writer_add_tensor(w, name, t, ne1 > 1 ? 2 : 1, ne, zeros);
}

static const char *write_recipe(const struct recipe *r, const char *fname)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, fname);
    static float zeros[64 * 512];
    const char *arch = r->arch ? r->arch : "llama";
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_add_str(w, "general.architecture", arch);
    static const char *const keys[] = { "context_length", "embedding_length", "block_count",
                                        "feed_forward_length", "attention.head_count",
                                        "attention.head_count_kv", "rope.dimension_count" };
    const uint32_t vals[] = { 256, 32, r->n_layer ? r->n_layer : 1, 64, 4, r->n_head_kv ? r->n_head_kv : 2,
                              r->n_rot ? r->n_rot : 8 };
    char key[96];
    for (int i = 0; i < 7; i++) {
        if (r->skip_key && !strcmp(keys[i], r->skip_key))
            continue;
        snprintf(key, sizeof key, "%s.%s", arch, keys[i]);
        if (r->array_key && !strcmp(keys[i], r->array_key)) {
            uint32_t arr[1] = { vals[i] };
            gguf_writer_add_arr(w, key, GGUF_U32, arr, 1);
        } else {
            gguf_writer_add_u32(w, key, vals[i]);
        }
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    if (!r->skip_key || strcmp(r->skip_key, "attention.layer_norm_rms_epsilon") != 0)
        gguf_writer_add_f32(w, key, 1e-5f);
    if (r->rope_scaling) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        gguf_writer_add_str(w, key, r->rope_scaling);
    }
    struct llm_error err = { 0 };
    if (!r->no_vocab)
        CHECK(llm_synth_vocab(w, false, 512, &err) == 0, "%s", err.msg);
    if (!r->no_tensors) {
        add_t(w, r, "token_embd.weight", 32, 512, zeros);
        add_t(w, r, "output_norm.weight", 32, 1, zeros);
        add_t(w, r, "output.weight", 32, 512, zeros);
        add_t(w, r, "blk.0.attn_norm.weight", 32, 1, zeros);
        add_t(w, r, "blk.0.attn_q.weight", 32, 32, zeros);
        add_t(w, r, "blk.0.attn_k.weight", 32, 16, zeros);
        add_t(w, r, "blk.0.attn_v.weight", 32, 16, zeros);
        add_t(w, r, "blk.0.attn_output.weight", 32, 32, zeros);
        add_t(w, r, "blk.0.ffn_norm.weight", 32, 1, zeros);
        add_t(w, r, "blk.0.ffn_gate.weight", 32, 64, zeros);
        add_t(w, r, "blk.0.ffn_up.weight", 32, 64, zeros);
        add_t(w, r, "blk.0.ffn_down.weight", 64, 32, zeros);
        if (r->extra_tensor)
            add_t(w, r, r->extra_tensor, 32, 1, zeros);
    }
    CHECK(gguf_writer_write(w, path, &err) == 0, "writing %s: %s", fname, err.msg);
    gguf_writer_free(w);
    return path;
}

static void expect_fail(const struct recipe *r, const char *fname, const char *msg)
{
    const char *path = write_recipe(r, fname);
    struct llm_model *m = (struct llm_model *)1;
    struct llm_error err = { 0 };
    int rc = llm_model_load(path, &m, &err);
    CHECK(rc != 0 && m == NULL, "%s: loaded", fname);
    CHECK(strstr(err.msg, fname) != NULL, "%s: message does not name the file: '%s'", fname, err.msg);
    CHECK(strstr(err.msg, msg) != NULL, "%s: '%s' lacks '%s'", fname, err.msg, msg);
    unlink(path);
}

static void test_bad_files(void)
{
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    const char *ok = write_recipe(&(struct recipe){ 0 }, "ok.gguf");
    CHECK(llm_model_load(ok, &m, &err) == 0, "the base recipe must load: %s", err.msg);
    if (m) {
        CHECK_STR(m->desc, "llama ?B (guessed) all F32");
        CHECK(m->hp.n_embd == 32 && m->hp.n_head_kv == 2 && m->hp.n_rot == 8, "base hparams");
    }
    llm_model_free(m);
    unlink(ok);

    expect_fail(&(struct recipe){ .arch = "gpt2" }, "arch.gguf", "unknown architecture 'gpt2'");
    expect_fail(&(struct recipe){ .skip_key = "block_count" }, "nokey.gguf",
                "missing required key 'llama.block_count'");
    expect_fail(&(struct recipe){ .skip_key = "attention.layer_norm_rms_epsilon" }, "noeps.gguf",
                "missing required key 'llama.attention.layer_norm_rms_epsilon'");
    expect_fail(&(struct recipe){ .array_key = "feed_forward_length" }, "ffarr.gguf",
                "'llama.feed_forward_length' is an array: per-layer arrays are not supported");
    expect_fail(&(struct recipe){ .array_key = "attention.head_count" }, "headarr.gguf",
                "'llama.attention.head_count' is an array: per-layer arrays are not supported");
    expect_fail(&(struct recipe){ .skip_tensor = "blk.0.ffn_up.weight" }, "notensor.gguf",
                "missing tensor 'blk.0.ffn_up.weight'");
    expect_fail(&(struct recipe){ .skip_tensor = "token_embd.weight" }, "noembd.gguf",
                "missing tensor 'token_embd.weight'");
    expect_fail(&(struct recipe){ .wide_tensor = "blk.0.attn_k.weight" }, "shape.gguf",
                "tensor 'blk.0.attn_k.weight' has shape [64, 16]; expected [32, 16]");
    expect_fail(&(struct recipe){ .wide_tensor = "output_norm.weight" }, "shape1d.gguf",
                "tensor 'output_norm.weight' has shape [64]; expected [32]");
    expect_fail(&(struct recipe){ .i32_tensor = "blk.0.attn_q.weight" }, "type.gguf",
                "tensor 'blk.0.attn_q.weight' has type I32 which is not supported");
    expect_fail(&(struct recipe){ .no_tensors = true }, "vocabonly.gguf", "no tensors");
    expect_fail(&(struct recipe){ .extra_tensor = "blk.1.attn_norm.weight" }, "extra.gguf",
                "unexpected tensor 'blk.1.attn_norm.weight'");
    expect_fail(&(struct recipe){ .extra_tensor = "blk.0.attn_qkv.weight" }, "fused.gguf",
                "fused QKV weights are not supported");
    expect_fail(&(struct recipe){ .n_head_kv = 3 }, "gqa.gguf", "head_count_kv");
    expect_fail(&(struct recipe){ .n_rot = 4 }, "rot.gguf", "rope.dimension_count");
    expect_fail(&(struct recipe){ .n_layer = 2 }, "layers.gguf", "missing tensor 'blk.1.attn_norm.weight'");
    expect_fail(&(struct recipe){ .rope_scaling = "yarn" }, "yarn.gguf", "rope scaling 'yarn' is not supported");
    expect_fail(&(struct recipe){ .no_vocab = true }, "novocab.gguf", "novocab.gguf");

    struct llm_model *none = (struct llm_model *)1;
    CHECK(llm_model_load("/nonexistent/x.gguf", &none, &err) != 0 && none == NULL, "missing file");
    CHECK(strstr(err.msg, "/nonexistent/x.gguf") != NULL, "'%s'", err.msg);
}

/* ---- synthetic models ---------------------------------------------------------------------------- */

static struct llm_model *synth_load(const struct llm_synth_opts *o, const char *fname,
                                    struct llm_synth_plan *plan)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, fname);
    struct llm_error err = { 0 };
    CHECK(llm_synth_plan(o, plan, &err) == 0, "%s plan: %s", fname, err.msg);
    CHECK(llm_synth_write(o, path, &err) == 0, "%s: %s", fname, err.msg);
    struct llm_model *m = NULL;
    CHECK(llm_model_load(path, &m, &err) == 0, "%s: %s", fname, err.msg);
    return m;
}

static float row_std(const struct llm_tensor *t, int64_t row, float *maxabs)
{
    float x[512];
    if (t->flags & LLM_TENSOR_REPACKED)
        llm_repack_row_to_float(t->type, t->ne[0], t->data, row, x);
    else
        llm_type_traits(t->type)->to_float((const uint8_t *)t->data + row * t->nb[1], x, t->ne[0]);
    double s = 0;
    *maxabs = 0;
    for (int64_t i = 0; i < t->ne[0]; i++) {
        s += (double)x[i] * x[i];
        if (!(fabsf(x[i]) <= *maxabs))
            *maxabs = isfinite(x[i]) ? fabsf(x[i]) : INFINITY;
    }
    return (float)sqrt(s / (double)t->ne[0]);
}

/* The generated vocabulary works with the real tokenizers: text survives tokenize + detokenize. */
static void check_round_trip(const struct llm_model *m, const char *what)
{
    static const char text[] = "Once upon a time, the cat sat on a mat {\"x\": 42}\n\xC3\xA9t\xC3\xA9!";
    int32_t ids[256];
    int64_t n = vocab_tokenize(m->vocab, text, strlen(text), false, false, ids, 256);
    CHECK(n > 0 && n < (int64_t)strlen(text), "%s: %lld tokens", what, (long long)n);
    char out[512];
    size_t len = vocab_detokenize(m->vocab, ids, n < 0 ? 0 : n, false, out, sizeof out);
    CHECK(len < sizeof out, "%s: detokenized length %zu", what, len);
    if (len < sizeof out) {
        out[len] = '\0';
        CHECK_STR(out, text);
    }
    int32_t with_bos[256];
    int64_t nb = vocab_tokenize(m->vocab, "hi", 2, true, false, with_bos, 256);
    CHECK(nb >= 1 && (vocab_add_bos(m->vocab) ? with_bos[0] == vocab_bos(m->vocab) : with_bos[0] != vocab_bos(m->vocab)),
          "%s: bos", what);
}

static void test_synth_tiny(void)
{
    static const char *const types[] = { "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_1", "Q2_K",
                                         "Q4_K_M", "Q5_K_M", "Q6_K" };
    for (int qwen = 0; qwen < 2; qwen++) {
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            struct llm_synth_opts o = { .preset = "tiny", .arch = qwen ? "qwen2" : "llama",
                                        .type = types[ti], .seed = 42, .n_threads = 2 };
            char fname[64];
            snprintf(fname, sizeof fname, "tiny-%s-%s.gguf", o.arch, types[ti]);
            struct llm_synth_plan plan;
            struct llm_model *m = synth_load(&o, fname, &plan);
            if (!m)
                continue;
            const struct llm_hparams *hp = &m->hp;
            CHECK(hp->n_embd == 256 && hp->n_layer == 2 && hp->n_head == 8 && hp->n_head_kv == 4 &&
                  hp->n_ff == 512 && hp->n_vocab == 512, "%s hparams", fname);
            CHECK(hp->rope_type == (qwen ? LLM_ROPE_NEOX : LLM_ROPE_NORMAL), "%s rope", fname);
            CHECK((m->output == m->tok_embd) == (qwen == 1) && (m->layers[1].bv != NULL) == (qwen == 1),
                  "%s tied/bias", fname);
            CHECK(vocab_kind(m->vocab) == (qwen ? VOCAB_BPE : VOCAB_SPM), "%s vocab", fname);
            check_shapes(m, fname);
            CHECK(m->n_bytes == plan.n_bytes && m->n_params == plan.n_params &&
                  m->n_tensors == plan.n_tensors, "%s plan", fname);
            CHECK(m->hp.file_type == plan.ftype && !m->ftype_guessed, "%s ftype", fname);
            char desc[64];
            snprintf(desc, sizeof desc, "%s ?B %s", o.arch, llm_ftype_name(plan.ftype));
            CHECK_STR(m->desc, desc);
            CHECK(m->output_norm->type == LLM_TYPE_F32 && m->layers[0].attn_norm->type == LLM_TYPE_F32,
                  "%s norms F32", fname);
            /* weights: norms 1, matrices small and finite */
            float mx, sd = row_std(m->layers[0].ffn_norm, 0, &mx);
            CHECK(sd == 1.0f && mx == 1.0f, "%s norm weights", fname);
            sd = row_std(m->layers[1].wq, 7, &mx);
            CHECK(sd > 0.002f && sd < 0.2f && mx < 1.0f, "%s wq row std %g max %g", fname, (double)sd,
                  (double)mx);
            if (ti == 0)
                check_round_trip(m, fname);
            llm_model_free(m);
        }
    }
}

/* A pipeline stage's model, loaded without the repack, repacks its own layers when the stage opens
 * (llm_model_repack_layers): those matrices unpack to the file's rows, the other layers' stay in the
 * file, a second call changes nothing, and a model repacked at load is left as it is. */
static void test_repack_layers(void)
{
    struct llm_synth_opts o = { .preset = "tiny", .arch = "qwen2", .type = "Q4_K_M", .seed = 42, .n_threads = 2 };
    struct llm_synth_plan plan;
    struct llm_model *full = synth_load(&o, "stage.gguf", &plan);
    if (!full)
        return;
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    char path[512];
    snprintf(path, sizeof path, "%s/stage.gguf", tmpdir);
    CHECK(llm_model_load_mode(path, GGUF_LOAD_MMAP, LLM_LOAD_NO_REPACK, &m, &err) == 0, "stage.gguf: %s", err.msg);
    if (!m) {
        llm_model_free(full);
        return;
    }
    const char *file = (const char *)m->file->base;
    int own = 0, bad = 0;
    for (int round = 0; round < 2; round++) {
        CHECK(llm_model_repack_layers(m, 1, 2, &err) == 0, "repack layer 1: %s", err.msg);
        const void *first_place = m->layers[1].wq->data;
        own = bad = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const struct llm_tensor *t = &m->tensors[i], *f = &full->tensors[i];
            const bool in_file = (const char *)t->data >= file && (const char *)t->data < file + m->file->size;
            const struct gguf_str *name = &m->file->tensors[i].name;
            const bool layer1 = name->len > 6 && strncmp(name->ptr, "blk.1.", 6) == 0;
            /* the tensors the full repack repacks, of layer 1 only */
            const bool want = layer1 && (f->flags & LLM_TENSOR_REPACKED);
            own += want;
            bad += ((t->flags & LLM_TENSOR_REPACKED) != 0) != want || in_file == want;
            if (want) {
                char *rows = malloc(llm_nbytes(t)), *back = malloc(llm_nbytes(t));
                llm_repack_unpack(t->type, t->ne[0], t->data, 0, t->ne[1], rows, t->nb[1]);
                llm_repack_unpack(f->type, f->ne[0], f->data, 0, f->ne[1], back, f->nb[1]);
                bad += memcmp(rows, back, llm_nbytes(t)) != 0;
                free(rows), free(back);
            }
        }
        CHECK(m->layers[1].wq->data == first_place, "round %d: layer 1 moved again", round);
    }
    CHECK(own >= 4 && bad == 0, "layer 1 repacked: %d matrices, %d wrong", own, bad);
    /* repacked at load: nothing to do, nothing moves */
    const void *before = full->layers[0].wq->data;
    CHECK(llm_model_repack_layers(full, 0, 2, &err) == 0 && full->layers[0].wq->data == before,
          "a repacked model repacked again");
    llm_model_free(m);
    llm_model_free(full);
}

/* The default mixes (perf.md: llama Q4_0 → output Q6_K; qwen2 tied → token_embd Q6_K, or Q8_0 when
 * the row does not fit a 256-block) and --pure. */
static void test_synth_mix(void)
{
    struct llm_synth_plan plan;
    struct llm_synth_opts o = { .preset = "tiny", .arch = "llama", .type = "Q4_0", .seed = 1, .n_threads = 1 };
    struct llm_model *m = synth_load(&o, "mix-llama.gguf", &plan);
    if (m) {
        CHECK(m->output->type == LLM_TYPE_Q6_K && m->tok_embd->type == LLM_TYPE_Q4_0 &&
              m->layers[0].wv->type == LLM_TYPE_Q4_0, "llama Q4_0 mix");
        llm_model_free(m);
    }
    o.pure = true;
    m = synth_load(&o, "pure-llama.gguf", &plan);
    if (m) {
        CHECK(m->output->type == LLM_TYPE_Q4_0, "llama Q4_0 pure");
        llm_model_free(m);
    }
    o = (struct llm_synth_opts){ .preset = "tiny", .arch = "qwen2", .type = "Q4_K_M", .seed = 1, .n_threads = 2 };
    m = synth_load(&o, "mix-qwen2.gguf", &plan);
    if (m) {
        CHECK(m->tok_embd->type == LLM_TYPE_Q6_K, "qwen2 tied output Q6_K");
        /* use_more_bits: of 2 layers only the last gets Q6_K attn_v/ffn_down */
        CHECK(m->layers[0].wv->type == LLM_TYPE_Q4_K && m->layers[1].wv->type == LLM_TYPE_Q6_K &&
              m->layers[1].ffn_down->type == LLM_TYPE_Q6_K && m->layers[1].wq->type == LLM_TYPE_Q4_K,
              "qwen2 Q4_K_M mix");
        CHECK(m->layers[0].bq->type == LLM_TYPE_F32, "biases F32");
        llm_model_free(m);
    }
}

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* Same seed → same bytes whatever the thread count; another seed → other weights. */
static void test_synth_deterministic(void)
{
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s/det-a.gguf", tmpdir);
    snprintf(b, sizeof b, "%s/det-b.gguf", tmpdir);
    snprintf(c, sizeof c, "%s/det-c.gguf", tmpdir);
    struct llm_synth_opts o = { .preset = "tiny", .arch = "qwen2", .type = "Q8_0", .seed = 5, .n_threads = 1 };
    struct llm_error err = { 0 };
    CHECK(llm_synth_write(&o, a, &err) == 0, "%s", err.msg);
    o.n_threads = 3;
    CHECK(llm_synth_write(&o, b, &err) == 0, "%s", err.msg);
    o.seed = 6;
    CHECK(llm_synth_write(&o, c, &err) == 0, "%s", err.msg);
    CHECK(same_file(a, b), "thread count changed the weights");
    CHECK(!same_file(a, c), "seed did not change the weights");
}

static void test_synth_vocab_from(void)
{
    struct llm_synth_plan plan;
    struct llm_synth_opts o = { .preset = "tiny", .arch = "llama", .type = "F16", .seed = 3,
                                .n_threads = 2, .vocab_from = test_path("models/stories260K.gguf") };
    struct llm_model *m = synth_load(&o, "vocab-from.gguf", &plan);
    if (m) {
        size_t len = 0;
        const char *t = vocab_token_text(m->vocab, 3, &len);
        CHECK(m->hp.n_vocab == 512 && len == 6 && !memcmp(t, "<0x00>", 6), "copied vocab");
        CHECK(vocab_bos(m->vocab) == 1 && vocab_eos(m->vocab) == 2, "bos/eos");
        llm_model_free(m);
    }
    struct llm_error err = { 0 };
    o.vocab_from = test_path("models/quant/Q4_0.gguf");
    CHECK(llm_synth_plan(&o, &plan, &err) != 0 && strstr(err.msg, "tokenizer.ggml.tokens"), "'%s'", err.msg);
    o = (struct llm_synth_opts){ .preset = "qwen2-0.5b", .arch = "llama", .type = "Q8_0" };
    CHECK(llm_synth_plan(&o, &plan, &err) != 0 && strstr(err.msg, "is a qwen2 model"), "'%s'", err.msg);
    o = (struct llm_synth_opts){ .preset = "tiny", .type = "IQ2_XXS" };
    CHECK(llm_synth_plan(&o, &plan, &err) != 0 && strstr(err.msg, "unsupported type 'IQ2_XXS'"), "'%s'", err.msg);
    o = (struct llm_synth_opts){ .preset = "huge", .type = "F16" };
    CHECK(llm_synth_plan(&o, &plan, &err) != 0 && strstr(err.msg, "unknown preset 'huge'"), "'%s'", err.msg);
}

/* Full-size presets against llama-bench's size/params columns in ref/perf.md and spec/llama-bench.md. */
static void test_synth_presets(void)
{
    static const struct { const char *preset, *type; bool pure; const char *size, *params; } rows[] = {
        { "qwen2-0.5b", "F16", false, "942.43 MiB", "494.03 M" },
        { "qwen2-0.5b", "Q8_0", false, "500.79 MiB", "494.03 M" },
        { "qwen2-0.5b", "Q4_0", false, "330.17 MiB", "494.03 M" },
        { "qwen2-0.5b", "Q4_0", true, "265.25 MiB", "494.03 M" },
        { "tinyllama-1.1b", "Q8_0", false, "1.09 GiB", "1.10 B" },
        { "tinyllama-1.1b", "Q4_0", false, "606.53 MiB", "1.10 B" },
        { "tinyllama-1.1b", "Q4_0", true, "590.41 MiB", "1.10 B" },
        /* the larger shapes (issue 26): the parameter counts published for Qwen2.5-1.5B / 3B and
         * Llama-2-7B, and llama.cpp's published size of a 7B Q4_0 */
        { "qwen2-1.5b", "Q4_0", false, NULL, "1.54 B" },
        { "qwen2-3b", "Q4_0", false, NULL, "3.09 B" },
        { "llama2-7b", "Q4_0", false, "3.56 GiB", "6.74 B" },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct llm_synth_opts o = { .preset = rows[i].preset, .type = rows[i].type, .pure = rows[i].pure };
        struct llm_synth_plan plan = { 0 };
        struct llm_error err = { 0 };
        CHECK(llm_synth_plan(&o, &plan, &err) == 0, "%s", err.msg);
        char s[32], p[32];
        llm_format_size(plan.n_bytes, s, sizeof s);
        llm_format_params(plan.n_params, p, sizeof p);
        CHECK((!rows[i].size || !strcmp(s, rows[i].size)) && !strcmp(p, rows[i].params), "%s %s%s: %s %s, want %s %s",
              rows[i].preset, rows[i].type, rows[i].pure ? " pure" : "", s, p, rows[i].size ? rows[i].size : s,
              rows[i].params);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_model.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        test_fixture(&fixtures[i]);
    test_llama_bench_reference();
    test_not_models();
    test_bad_files();
    test_synth_tiny();
    test_synth_mix();
    test_synth_deterministic();
    test_synth_vocab_from();
    test_synth_presets();
    test_repack_layers();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_done("test_model");
}
