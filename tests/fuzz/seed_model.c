/* Writes seeds for fuzz_vocab and fuzz_model (tests/fuzz.sh):
 * - VOCAB_DIR: vocabulary-only files: the tokenizer keys of the shared models cut to their first
 *   tokens and merges (SentencePiece from stories260K and ggml-vocab-llama-spm; byte-level BPE from
 *   ggml-vocab-gpt-2 with its own and the llama-bpe and default pre-tokenizers, and from qwen2),
 *   and the generated SPM and qwen2 vocabularies of `llm synth`;
 * - MODEL_DIR: tiny complete llama and qwen2 models (d32 L1 or L2, 64-token vocabularies cut from
 *   the shared ones) over every weight type family: F32, F16, BF16, Q8_0, Q4_0/Q4_1/Q5_0/Q5_1,
 *   Q4_K/Q6_K, biases, a tied output, linear rope scaling with a rope_freqs tensor.
 * usage: seed_model VOCAB_DIR MODEL_DIR SHARED_MODELS_DIR */
#include <stdio.h>
#include <string.h>

#include "model/gguf.h"
#include "model/synth.h"

static const char *models_dir;
static int failures;

static void fail(const char *what, const char *msg)
{
    fprintf(stderr, "seed_model: %s: %s\n", what, msg);
    failures++;
}

/* Copy the tokenizer.* keys of models_dir/src, token-indexed arrays and merges cut to n entries;
 * pre replaces tokenizer.ggml.pre when not NULL. Returns the token count written, 0 on error. */
static uint64_t add_tokenizer(struct gguf_writer *w, const char *src, uint64_t n, const char *pre)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", models_dir, src);
    struct gguf_file *f = NULL;
    struct llm_error err;
    if (gguf_open(path, &f, &err) != 0) {
        fail(path, err.msg);
        return 0;
    }
    uint64_t n_tok = 0;
    bool pre_written = false;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const struct gguf_kv *kv = &f->kv[i];
        char key[256];
        size_t kl = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.ptr, kl);
        key[kl] = '\0';
        if (strncmp(key, "tokenizer.", 10) != 0 || !strcmp(key, "tokenizer.chat_template"))
            continue;
        if (pre && !strcmp(key, "tokenizer.ggml.pre")) {
            gguf_writer_add_str(w, key, pre);
            pre_written = true;
        } else if (kv->type == GGUF_ARRAY) {
            uint64_t m = kv->arr_n < n ? kv->arr_n : n;
            if (!strcmp(key, "tokenizer.ggml.tokens"))
                n_tok = m;
            if (kv->arr_type == GGUF_STRING)
                gguf_writer_add_arr_str(w, key, kv->strs, m);
            else
                gguf_writer_add_arr(w, key, kv->arr_type, kv->value, m);
        } else {
            gguf_writer_copy_kv(w, kv);
        }
    }
    if (pre && !pre_written)
        gguf_writer_add_str(w, "tokenizer.ggml.pre", pre);
    gguf_close(f);
    if (n_tok == 0)
        fail(path, "no tokenizer.ggml.tokens");
    return n_tok;
}

static void write_file(struct gguf_writer *w, const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct llm_error err;
    if (gguf_writer_write(w, path, &err) != 0)
        fail(path, err.msg);
    gguf_writer_free(w);
}

static void vocab_seed(const char *dir, const char *name, const char *src, uint64_t n, const char *pre)
{
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_add_str(w, "general.architecture", "llama");
    add_tokenizer(w, src, n, pre);
    write_file(w, dir, name);
}

static void synth_vocab_seed(const char *dir, const char *name, bool qwen2)
{
    struct gguf_writer *w = gguf_writer_new();
    struct llm_error err;
    gguf_writer_add_str(w, "general.architecture", qwen2 ? "qwen2" : "llama");
    if (llm_synth_vocab(w, qwen2, 512, &err) != 0)
        fail(name, err.msg);
    write_file(w, dir, name);
}

/* ---- tiny models ------------------------------------------------------------------------------ */

struct tiny {
    const char *name, *arch, *vocab_src;
    enum llm_type embd, attn, ffn, down, output; /* output: LLM_TYPE_COUNT = tied (no output.weight) */
    uint32_t n_layer, n_ff;
    bool bias, rope_linear;
    int32_t file_type;                           /* -1: no general.file_type */
};

/* Bytes for any tensor: small finite floats as F32, and plausible blocks for the other types. */
static float pool[64 * 1024];

static void tensor(struct gguf_writer *w, const char *name, enum llm_type t, int64_t ne0, int64_t ne1)
{
    int64_t ne[2] = { ne0, ne1 };
    gguf_writer_add_tensor(w, name, t, ne1 > 1 ? 2 : 1, ne, pool);
}

static void model_seed(const char *dir, const struct tiny *s)
{
    const uint32_t d = 32, n_head = 4, n_head_kv = 2, hd = d / n_head;
    struct gguf_writer *w = gguf_writer_new();
    char key[128];
    gguf_writer_add_str(w, "general.architecture", s->arch);
    gguf_writer_add_str(w, "general.name", s->name);
    if (s->file_type >= 0)
        gguf_writer_add_u32(w, "general.file_type", (uint32_t)s->file_type);
#define ARCH_U32(suffix, v)                                                                        \
    do {                                                                                           \
        snprintf(key, sizeof key, "%s." suffix, s->arch);                                          \
        gguf_writer_add_u32(w, key, v);                                                            \
    } while (0)
    ARCH_U32("context_length", 128);
    ARCH_U32("embedding_length", d);
    ARCH_U32("block_count", s->n_layer);
    ARCH_U32("feed_forward_length", s->n_ff);
    ARCH_U32("attention.head_count", n_head);
    ARCH_U32("attention.head_count_kv", n_head_kv);
    ARCH_U32("rope.dimension_count", hd);
#undef ARCH_U32
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", s->arch);
    gguf_writer_add_f32(w, key, 1e-6f);
    snprintf(key, sizeof key, "%s.rope.freq_base", s->arch);
    gguf_writer_add_f32(w, key, 10000.0f);
    if (s->rope_linear) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", s->arch);
        gguf_writer_add_str(w, key, "linear");
        snprintf(key, sizeof key, "%s.rope.scaling.factor", s->arch);
        gguf_writer_add_f32(w, key, 2.0f);
    }
    const uint64_t nv = add_tokenizer(w, s->vocab_src, 64, NULL);
    const int64_t q = (int64_t)hd * n_head, kv = (int64_t)hd * n_head_kv;
    tensor(w, "token_embd.weight", s->embd, d, (int64_t)nv);
    tensor(w, "output_norm.weight", LLM_TYPE_F32, d, 1);
    if (s->output != LLM_TYPE_COUNT)
        tensor(w, "output.weight", s->output, d, (int64_t)nv);
    if (s->rope_linear)
        tensor(w, "rope_freqs.weight", LLM_TYPE_F32, hd / 2, 1);
    for (uint32_t il = 0; il < s->n_layer; il++) {
        char name[64];
#define LAYER(suffix, t, ne0, ne1)                                                                 \
    do {                                                                                           \
        snprintf(name, sizeof name, "blk.%u." suffix, il);                                        \
        tensor(w, name, t, ne0, ne1);                                                              \
    } while (0)
        LAYER("attn_norm.weight", LLM_TYPE_F32, d, 1);
        LAYER("attn_q.weight", s->attn, d, q);
        LAYER("attn_k.weight", s->attn, d, kv);
        LAYER("attn_v.weight", s->attn, d, kv);
        LAYER("attn_output.weight", s->attn, q, d);
        if (s->bias) {
            LAYER("attn_q.bias", LLM_TYPE_F32, q, 1);
            LAYER("attn_k.bias", LLM_TYPE_F32, kv, 1);
            LAYER("attn_v.bias", LLM_TYPE_F32, kv, 1);
        }
        LAYER("ffn_norm.weight", LLM_TYPE_F32, d, 1);
        LAYER("ffn_gate.weight", s->ffn, d, s->n_ff);
        LAYER("ffn_up.weight", s->ffn, d, s->n_ff);
        LAYER("ffn_down.weight", s->down, s->n_ff, d);
#undef LAYER
    }
    write_file(w, dir, s->name);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: seed_model VOCAB_DIR MODEL_DIR SHARED_MODELS_DIR\n");
        return 2;
    }
    const char *vdir = argv[1], *mdir = argv[2];
    models_dir = argv[3];
    for (size_t i = 0; i < sizeof pool / sizeof pool[0]; i++)
        pool[i] = (float)((int)(i * 2654435761u % 2001u) - 1000) / 4096.0f;

    vocab_seed(vdir, "stories260K-spm.gguf", "stories260K.gguf", 512, NULL);
    vocab_seed(vdir, "llama-spm-400.gguf", "vocab/ggml-vocab-llama-spm.gguf", 400, NULL);
    vocab_seed(vdir, "gpt-2-400.gguf", "vocab/ggml-vocab-gpt-2.gguf", 400, NULL);
    vocab_seed(vdir, "gpt-2-llama-bpe-400.gguf", "vocab/ggml-vocab-gpt-2.gguf", 400, "llama-bpe");
    vocab_seed(vdir, "gpt-2-default-400.gguf", "vocab/ggml-vocab-gpt-2.gguf", 400, "default");
    vocab_seed(vdir, "qwen2-400.gguf", "qwen2-tiny-q8_0.gguf", 400, NULL);
    synth_vocab_seed(vdir, "synth-spm.gguf", false);
    synth_vocab_seed(vdir, "synth-qwen2.gguf", true);

    static const struct tiny tinies[] = {
        { "llama-f32.gguf", "llama", "stories260K.gguf", LLM_TYPE_F32, LLM_TYPE_F32, LLM_TYPE_F32,
          LLM_TYPE_F32, LLM_TYPE_F32, 1, 64, false, false, 0 },
        { "llama-f16-rope.gguf", "llama", "stories260K.gguf", LLM_TYPE_F16, LLM_TYPE_F16, LLM_TYPE_F16,
          LLM_TYPE_F16, LLM_TYPE_F16, 2, 64, false, true, 1 },
        { "llama-q8_0.gguf", "llama", "vocab/ggml-vocab-llama-spm.gguf", LLM_TYPE_Q8_0, LLM_TYPE_Q8_0,
          LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, 1, 64, false, false, 7 },
        { "llama-legacy.gguf", "llama", "stories260K.gguf", LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0,
          LLM_TYPE_Q5_1, LLM_TYPE_Q8_0, 1, 64, false, false, -1 },
        { "llama-kquant.gguf", "llama", "stories260K.gguf", LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q5_0,
          LLM_TYPE_Q4_K, LLM_TYPE_Q8_0, 1, 256, false, false, 15 },
        { "llama-q6_k.gguf", "llama", "stories260K.gguf", LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16,
          LLM_TYPE_Q6_K, LLM_TYPE_F32, 1, 256, false, false, -1 },
        { "qwen2-bf16-tied.gguf", "qwen2", "qwen2-tiny-q8_0.gguf", LLM_TYPE_BF16, LLM_TYPE_BF16,
          LLM_TYPE_BF16, LLM_TYPE_BF16, LLM_TYPE_COUNT, 1, 64, true, false, 32 },
        { "qwen2-q8_0.gguf", "qwen2", "vocab/ggml-vocab-gpt-2.gguf", LLM_TYPE_Q8_0, LLM_TYPE_Q8_0,
          LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, 2, 64, true, false, 7 },
    };
    for (size_t i = 0; i < sizeof tinies / sizeof tinies[0]; i++)
        model_seed(mdir, &tinies[i]);
    return failures ? 1 : 0;
}
