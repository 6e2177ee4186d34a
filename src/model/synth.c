/* Synthetic llama/qwen2 models: the tensor list and type mix of a preset, deterministic random
 * weights generated row by row (in parallel; every row has its own PRNG stream, so the values do
 * not depend on the thread count), written with the GGUF writer. */
#include "synth.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model.h"
#include "ops/types/types.h"

struct preset {
    const char *name;
    const char *arch;     /* NULL: any */
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
};

static const struct preset presets[] = {
    { "qwen2-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768 },
    { "tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, 2048 },
    /* the larger shapes decode cost per byte is checked on, past the L3 cache (make bench BENCH_LONG=1) */
    { "qwen2-1.5b", "qwen2", 1536, 28, 12, 2, 8960, 151936, 32768 },
    { "qwen2-3b", "qwen2", 2048, 36, 16, 2, 11008, 151936, 32768 },
    { "llama2-7b", "llama", 4096, 32, 32, 32, 11008, 32000, 4096 },
    { "tiny", NULL, 256, 2, 8, 4, 512, 512, 2048 }, /* rows of 256/512: every type applies */
};

/* --type values: the matrices' base type and the general.file_type written. */
static const struct { const char *name; enum llm_type type; int32_t ftype; } type_specs[] = {
    { "F32", LLM_TYPE_F32, 0 },     { "F16", LLM_TYPE_F16, 1 },     { "BF16", LLM_TYPE_BF16, 32 },
    { "Q4_0", LLM_TYPE_Q4_0, 2 },   { "Q4_1", LLM_TYPE_Q4_1, 3 },   { "Q5_0", LLM_TYPE_Q5_0, 8 },
    { "Q5_1", LLM_TYPE_Q5_1, 9 },   { "Q8_0", LLM_TYPE_Q8_0, 7 },   { "Q2_K", LLM_TYPE_Q2_K, 10 },
    { "Q3_K", LLM_TYPE_Q3_K, 12 },  { "Q3_K_M", LLM_TYPE_Q3_K, 12 }, { "Q4_K", LLM_TYPE_Q4_K, 15 },
    { "Q4_K_M", LLM_TYPE_Q4_K, 15 }, { "Q5_K", LLM_TYPE_Q5_K, 17 }, { "Q5_K_M", LLM_TYPE_Q5_K, 17 },
    { "Q6_K", LLM_TYPE_Q6_K, 18 },
};
#define N_TYPE_SPECS (sizeof type_specs / sizeof type_specs[0])

enum kind { K_NORM, K_BIAS, K_MATRIX };

struct tensor {
    char name[LLM_MAX_NAME];
    enum kind kind;
    int64_t ne[2];       /* ne[1] == 1 for vectors */
    enum llm_type type;
    size_t row_size;
    void *data;
};

struct synth {
    const struct llm_synth_opts *o;
    const struct preset *p;
    const struct llm_arch_info *arch;
    enum llm_type base;
    int32_t ftype;
    uint32_t n_vocab;
    struct gguf_file *vocab_src; /* --vocab-from, open until the file is written */
    struct tensor *t;
    int64_t n;
};

/* ---- the type mix ---------------------------------------------------------------------------- */

/* The layers llama-quantize gives more bits in its _M mixes: first and last eighth, every third. */
static bool use_more_bits(uint32_t il, uint32_t n)
{
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

/* Like llama-quantize: a type whose block does not divide the row falls back to a 32-block type,
 * then to F16 (it uses IQ4_NL for Q2_K/Q3_K; we take Q4_0, same size). */
static enum llm_type fit_row(enum llm_type t, int64_t ne0)
{
    while (ne0 % llm_type_info(t)->blck_size != 0) {
        switch (t) {
        case LLM_TYPE_Q2_K: case LLM_TYPE_Q3_K: t = LLM_TYPE_Q4_0; break;
        case LLM_TYPE_Q4_K: t = LLM_TYPE_Q5_0; break;
        case LLM_TYPE_Q5_K: t = LLM_TYPE_Q5_1; break;
        case LLM_TYPE_Q6_K: t = LLM_TYPE_Q8_0; break;
        default: t = LLM_TYPE_F16; break;
        }
    }
    return t;
}

static enum llm_type matrix_type(const struct synth *s, const char *name, uint32_t il, int64_t ne0)
{
    enum llm_type b = s->base, t = b;
    bool is_float = b == LLM_TYPE_F32 || b == LLM_TYPE_F16 || b == LLM_TYPE_BF16;
    bool is_output = !strcmp(name, "output.weight") || (s->arch->tied_output && !strcmp(name, "token_embd.weight"));
    uint32_t nl = s->p->n_layer;
    if (s->o->pure || is_float) {
        t = b;
    } else if (is_output) {
        t = b == LLM_TYPE_Q8_0 ? LLM_TYPE_Q8_0 : LLM_TYPE_Q6_K;
    } else if (strstr(name, "attn_v.weight")) {
        if (b == LLM_TYPE_Q2_K)
            t = LLM_TYPE_Q3_K;
        else if (b == LLM_TYPE_Q3_K)
            t = il < 2 ? LLM_TYPE_Q5_K : LLM_TYPE_Q4_K;
        else if ((b == LLM_TYPE_Q4_K || b == LLM_TYPE_Q5_K) && use_more_bits(il, nl))
            t = LLM_TYPE_Q6_K;
    } else if (strstr(name, "ffn_down.weight")) {
        if (b == LLM_TYPE_Q2_K)
            t = LLM_TYPE_Q3_K;
        else if (b == LLM_TYPE_Q3_K)
            t = LLM_TYPE_Q4_K;
        else if ((b == LLM_TYPE_Q4_K || b == LLM_TYPE_Q5_K) && use_more_bits(il, nl))
            t = LLM_TYPE_Q6_K;
    } else if (strstr(name, "attn_output.weight")) {
        if (b == LLM_TYPE_Q2_K)
            t = LLM_TYPE_Q3_K;
        else if (b == LLM_TYPE_Q3_K)
            t = LLM_TYPE_Q4_K;
    }
    return fit_row(t, ne0);
}

/* ---- the tensor list -------------------------------------------------------------------------- */

static void push(struct synth *s, enum kind k, uint32_t il, int64_t ne0, int64_t ne1,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void push(struct synth *s, enum kind k, uint32_t il, int64_t ne0, int64_t ne1,
                 const char *fmt, ...)
{
    struct tensor *t = &s->t[s->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->kind = k;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->type = k == K_MATRIX ? matrix_type(s, t->name, il, ne0) : LLM_TYPE_F32;
    t->row_size = llm_row_size(t->type, ne0);
}

/* Tensors in convert_hf_to_gguf's order: embeddings, layers, output. */
static int build_tensors(struct synth *s, struct llm_error *err)
{
    const struct preset *p = s->p;
    const int64_t D = p->n_embd, hd = p->n_embd / p->n_head;
    const int64_t Q = hd * p->n_head, KV = hd * p->n_head_kv, FF = p->n_ff, V = s->n_vocab;
    s->t = llm_calloc(3 + (size_t)p->n_layer * 16, sizeof *s->t);
    if (!s->t)
        return llm_fail(err, LLM_ERR_NOMEM, "synth: out of memory");
    push(s, K_MATRIX, 0, D, V, "token_embd.weight");
    for (uint32_t il = 0; il < p->n_layer; il++) {
#define PUSH(field, suffix, ne0, ne1, role, presence)                                                      \
        if (WRITES_##presence)                                                                           \
            push(s, K_##role, il, ne0, (ne1) ? (ne1) : 1, "blk.%u." suffix, il);
#define WRITES_REQUIRED true
#define WRITES_QKV_BIAS s->arch->qkv_bias
#define WRITES_OPTIONAL false
        LLM_LAYER_TENSORS(PUSH)
#undef PUSH
#undef WRITES_REQUIRED
#undef WRITES_QKV_BIAS
#undef WRITES_OPTIONAL
    }
    push(s, K_NORM, 0, D, 1, "output_norm.weight");
    if (!s->arch->tied_output)
        push(s, K_MATRIX, 0, D, V, "output.weight");
    return 0;
}

static int setup(struct synth *s, const struct llm_synth_opts *o, struct llm_error *err)
{
    memset(s, 0, sizeof *s);
    s->o = o;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (o->preset && !strcmp(o->preset, presets[i].name))
            s->p = &presets[i];
    if (!s->p)
        return llm_fail(err, LLM_ERR_ARG,
                        "synth: unknown preset '%s' (qwen2-0.5b, qwen2-1.5b, qwen2-3b, tinyllama-1.1b, llama2-7b, tiny)",
                        o->preset ? o->preset : "");
    const char *arch = o->arch ? o->arch : s->p->arch ? s->p->arch : "llama";
    const int a = llm_arch_find(arch, strlen(arch));
    if (a < 0)
        return llm_fail(err, LLM_ERR_ARG, "synth: unknown architecture '%s' (llama, qwen2)", arch);
    if (s->p->arch && strcmp(arch, s->p->arch) != 0)
        return llm_fail(err, LLM_ERR_ARG, "synth: preset '%s' is a %s model, not %s", s->p->name,
                        s->p->arch, arch);
    s->arch = llm_arch_info((enum llm_arch)a);
    size_t ti = 0;
    while (ti < N_TYPE_SPECS && (!o->type || strcasecmp(o->type, type_specs[ti].name) != 0))
        ti++;
    if (ti == N_TYPE_SPECS)
        return llm_fail(err, LLM_ERR_ARG,
                        "synth: unsupported type '%s' (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K "
                        "Q3_K_M Q4_K_M Q5_K_M Q6_K)", o->type ? o->type : "");
    s->base = type_specs[ti].type;
    s->ftype = type_specs[ti].ftype;
    s->n_vocab = s->p->n_vocab;
    if (o->vocab_from) {
        int r = gguf_open(o->vocab_from, &s->vocab_src, err);
        if (r != 0)
            return r;
        const struct gguf_kv *kv;
        r = gguf_get_arr(s->vocab_src, "tokenizer.ggml.tokens", GGUF_STRING, &kv, err);
        if (r < 0)
            return -r;
        if (r == 0)
            return llm_fail(err, LLM_ERR_FORMAT, "%s: no tokenizer.ggml.tokens to copy",
                            o->vocab_from);
        if (kv->arr_n == 0 || kv->arr_n > INT32_MAX)
            return llm_fail(err, LLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries",
                            o->vocab_from, (unsigned long long)kv->arr_n);
        s->n_vocab = (uint32_t)kv->arr_n; /* the embedding follows the copied vocabulary */
    }
    return build_tensors(s, err);
}

static void teardown(struct synth *s)
{
    for (int64_t i = 0; i < s->n; i++)
        free(s->t[i].data);
    free(s->t);
    gguf_close(s->vocab_src);
}

int llm_synth_plan(const struct llm_synth_opts *o, struct llm_synth_plan *plan,
                   struct llm_error *err)
{
    struct synth s;
    int r = setup(&s, o, err);
    if (r == 0) {
        memset(plan, 0, sizeof *plan);
        plan->n_tensors = s.n;
        plan->ftype = s.ftype;
        plan->n_vocab = s.n_vocab;
        for (int64_t i = 0; i < s.n; i++) {
            plan->n_bytes += s.t[i].row_size * (uint64_t)s.t[i].ne[1];
            plan->n_params += (uint64_t)(s.t[i].ne[0] * s.t[i].ne[1]);
        }
    }
    teardown(&s);
    return r;
}

/* ---- weights ---------------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* splitmix64 stream */
static uint64_t next64(uint64_t *state)
{
    *state += 0x9E3779B97F4A7C15ull;
    return mix64(*state);
}

#define WEIGHT_STD 0.02f

/* n values ~ N(0, std²), approximated by a centred sum of four 16-bit uniforms (bounded by
 * ±3.5 std, so no outliers can blow up a forward pass). */
static void fill_normal(float *x, int64_t n, float std, uint64_t *rng)
{
    const float k = std * 1.7320508f / 65536.0f; /* sum of 4 U(0,1) has variance 1/3 */
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next64(rng);
        uint32_t sum = (uint32_t)(r & 0xFFFF) + (uint32_t)((r >> 16) & 0xFFFF) +
                       (uint32_t)((r >> 32) & 0xFFFF) + (uint32_t)(r >> 48);
        x[i] = ((float)sum - 131070.0f) * k;
    }
}

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = llm_fp32_to_fp16(v);
    memcpy(p, &h, 2);
}

/* Random but valid blocks for a type without a quantizer: random quants, finite fp16 scales chosen
 * so values are roughly N(0, 0.02²). */
static void random_blocks(enum llm_type type, uint8_t *dst, int64_t n_blocks, uint64_t *rng)
{
    const size_t bs = llm_type_info(type)->type_size;
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = dst + (size_t)b * bs;
        for (size_t i = 0; i < bs; i += 8) {
            uint64_t r = next64(rng);
            memcpy(blk + i, &r, bs - i < 8 ? bs - i : 8);
        }
        switch (type) {
        case LLM_TYPE_Q4_0: put_f16(blk, 0.0043f); break;
        case LLM_TYPE_Q4_1: put_f16(blk, 0.0043f); put_f16(blk + 2, -7.5f * 0.0043f); break;
        case LLM_TYPE_Q5_0: put_f16(blk, 0.0022f); break;
        case LLM_TYPE_Q5_1: put_f16(blk, 0.0022f); put_f16(blk + 2, -15.5f * 0.0022f); break;
        case LLM_TYPE_Q8_0: put_f16(blk, 0.00027f); break;
        case LLM_TYPE_Q2_K: put_f16(blk + 80, 0.0025f); put_f16(blk + 82, 0.0035f); break;
        case LLM_TYPE_Q3_K: put_f16(blk + 108, 0.0005f); break;
        case LLM_TYPE_Q4_K: put_f16(blk, 1e-4f); put_f16(blk + 2, 7.5e-4f); break;
        case LLM_TYPE_Q5_K: put_f16(blk, 5e-5f); put_f16(blk + 2, 7.75e-4f); break;
        case LLM_TYPE_Q6_K: put_f16(blk + 208, 1.5e-5f); break;
        default: break;
        }
    }
}

/* Generate row r of tensor t into its buffer; x is scratch of ne[0] floats. */
static void gen_row(const struct synth *s, int64_t ti, int64_t r, float *x)
{
    const struct tensor *t = &s->t[ti];
    uint8_t *dst = (uint8_t *)t->data + (size_t)r * t->row_size;
    uint64_t rng = mix64(s->o->seed ^ mix64(((uint64_t)ti << 40) ^ (uint64_t)r));
    const int64_t n = t->ne[0];
    const struct llm_type_info *info = llm_type_info(t->type);
    const struct llm_type_traits *tt = llm_type_traits(t->type);
    if (t->kind == K_NORM) {
        for (int64_t i = 0; i < n; i++)
            x[i] = 1.0f;
    } else if (info->is_quantized && !tt->from_float) {
        random_blocks(t->type, dst, n / info->blck_size, &rng);
        return;
    } else {
        fill_normal(x, n, WEIGHT_STD, &rng);
    }
    switch (t->type) {
    case LLM_TYPE_F32:
        memcpy(dst, x, (size_t)n * sizeof(float));
        break;
    case LLM_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = llm_fp32_to_fp16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    case LLM_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = llm_fp32_to_bf16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    default:
        tt->from_float(x, dst, n);
        break;
    }
}

#define CHUNK_ROWS 64

struct work {
    const struct synth *s;
    int64_t *chunk_start;  /* first chunk index of each tensor, n + 1 entries */
    atomic_llong next;
    int64_t max_ne0;
};

static void *worker(void *arg)
{
    struct work *w = arg;
    const struct synth *s = w->s;
    float *x = malloc((size_t)w->max_ne0 * sizeof(float));
    if (!x)
        return (void *)1;
    int64_t ti = 0;
    for (;;) {
        int64_t c = atomic_fetch_add(&w->next, 1);
        if (c >= w->chunk_start[s->n])
            break;
        while (w->chunk_start[ti + 1] <= c)
            ti++;
        int64_t r0 = (c - w->chunk_start[ti]) * CHUNK_ROWS;
        int64_t r1 = r0 + CHUNK_ROWS < s->t[ti].ne[1] ? r0 + CHUNK_ROWS : s->t[ti].ne[1];
        for (int64_t r = r0; r < r1; r++)
            gen_row(s, ti, r, x);
    }
    free(x);
    return NULL;
}

static int generate(struct synth *s, struct llm_error *err)
{
    struct work w = { .s = s, .max_ne0 = 1 };
    w.chunk_start = llm_calloc((size_t)s->n + 1, sizeof(int64_t));
    if (!w.chunk_start)
        return llm_fail(err, LLM_ERR_NOMEM, "synth: out of memory");
    for (int64_t i = 0; i < s->n; i++) {
        struct tensor *t = &s->t[i];
        t->data = malloc(t->row_size * (size_t)t->ne[1]);
        if (!t->data) {
            free(w.chunk_start);
            return llm_fail(err, LLM_ERR_NOMEM, "synth: out of memory for tensor '%s'", t->name);
        }
        w.chunk_start[i + 1] = w.chunk_start[i] + (t->ne[1] + CHUNK_ROWS - 1) / CHUNK_ROWS;
        if (t->ne[0] > w.max_ne0)
            w.max_ne0 = t->ne[0];
    }
    atomic_init(&w.next, 0);
    int nt = s->o->n_threads < 1 ? 1 : s->o->n_threads > 64 ? 64 : s->o->n_threads;
    pthread_t th[64];
    int started = 0;
    for (; started < nt - 1; started++)
        if (pthread_create(&th[started], NULL, worker, &w) != 0)
            break;
    bool failed = worker(&w) != NULL;
    for (int i = 0; i < started; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        failed |= ret != NULL;
    }
    free(w.chunk_start);
    if (failed)
        return llm_fail(err, LLM_ERR_NOMEM, "synth: out of memory");
    return 0;
}

/* ---- the file --------------------------------------------------------------------------------- */

static int add_metadata(const struct synth *s, struct gguf_writer *w, struct llm_error *err)
{
    const struct preset *p = s->p;
    const char *arch = s->arch->name;
    char key[96], name[96];
    snprintf(name, sizeof name, "synth %s %s%s", p->name, s->o->type, s->o->pure ? " pure" : "");
    gguf_writer_add_str(w, "general.architecture", arch);
    gguf_writer_add_str(w, "general.name", name);
    gguf_writer_add_u32(w, "general.file_type", (uint32_t)s->ftype);
    if (llm_type_info(s->base)->is_quantized)
        gguf_writer_add_u32(w, "general.quantization_version", 2);
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gguf_writer_add_u32(w, KEY("context_length"), p->n_ctx);
    gguf_writer_add_u32(w, KEY("embedding_length"), p->n_embd);
    gguf_writer_add_u32(w, KEY("block_count"), p->n_layer);
    gguf_writer_add_u32(w, KEY("feed_forward_length"), p->n_ff);
    gguf_writer_add_u32(w, KEY("attention.head_count"), p->n_head);
    gguf_writer_add_u32(w, KEY("attention.head_count_kv"), p->n_head_kv);
    gguf_writer_add_u32(w, KEY("rope.dimension_count"), p->n_embd / p->n_head);
    gguf_writer_add_f32(w, KEY("rope.freq_base"), s->arch->rope_freq_base);
    gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), s->arch->rms_eps);
#undef KEY
    if (!s->vocab_src)
        return llm_synth_vocab(w, s->arch->bpe_vocab, s->n_vocab, err);
    for (uint64_t i = 0; i < s->vocab_src->n_kv; i++) {
        const struct gguf_kv *kv = &s->vocab_src->kv[i];
        if (kv->key.len > 10 && memcmp(kv->key.ptr, "tokenizer.", 10) == 0)
            gguf_writer_copy_kv(w, kv);
    }
    return 0;
}

int llm_synth_write(const struct llm_synth_opts *o, const char *path, struct llm_error *err)
{
    struct synth s;
    struct gguf_writer *w = NULL;
    int r = setup(&s, o, err);
    if (r == 0)
        r = generate(&s, err);
    if (r == 0 && !(w = gguf_writer_new()))
        r = llm_fail(err, LLM_ERR_NOMEM, "synth: out of memory");
    if (r == 0)
        r = add_metadata(&s, w, err);
    if (r == 0) {
        for (int64_t i = 0; i < s.n; i++) {
            const struct tensor *t = &s.t[i];
            gguf_writer_add_tensor(w, t->name, t->type, t->ne[1] == 1 ? 1 : 2, t->ne, t->data);
        }
        r = gguf_writer_write(w, path, err);
    }
    gguf_writer_free(w);
    teardown(&s);
    return r;
}
