/* Model loading: hyper-parameters from <arch>.* keys, weights bound by name with shape and type
 * checks (src/model/README.md: llama and qwen2 files), vocabulary. */
#include "model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels/blas.h"
#include "ops/types/types.h"

/* A file's string for an error message: escaped, at most 64 bytes shown. */
static const char *esc_name(char *buf, size_t cap, const char *s, size_t len)
{
    llm_escape(buf, cap, s, len, 64, LLM_ESC_QUOTES);
    return buf;
}

/* ---- hyper-parameters ---------------------------------------------------------------------- */

struct loader {
    const struct gguf_file *f;
    const char *path;
    const char *arch;
    struct llm_error *err;
};

static void arch_key(const struct loader *l, const char *suffix, char *key, size_t cap)
{
    snprintf(key, cap, "%s.%s", l->arch, suffix);
}

/* 1 found, 0 absent (error when required), <0 error. */
static int read_u32(const struct loader *l, const char *suffix, bool required, uint32_t *out)
{
    char key[128];
    arch_key(l, suffix, key, sizeof key);
    int64_t idx = gguf_find_key(l->f, key);
    if (idx >= 0 && l->f->kv[idx].type == GGUF_ARRAY)
        return -llm_fail(l->err, LLM_ERR_UNSUPPORTED,
                         "%s: key '%s' is an array: per-layer arrays are not supported", l->path, key);
    uint64_t v;
    int r = gguf_get_uint(l->f, key, &v, l->err);
    if (r < 0)
        return r;
    if (r == 0) {
        if (required)
            return -llm_fail(l->err, LLM_ERR_FORMAT, "%s: missing required key '%s'", l->path, key);
        return 0;
    }
    if (v > UINT32_MAX)
        return -llm_fail(l->err, LLM_ERR_FORMAT, "%s: key '%s' value %" PRIu64 " is out of range",
                         l->path, key, v);
    *out = (uint32_t)v;
    return 1;
}

static int read_f32(const struct loader *l, const char *suffix, bool required, float *out)
{
    char key[128];
    arch_key(l, suffix, key, sizeof key);
    double v;
    int r = gguf_get_float(l->f, key, &v, l->err);
    if (r < 0)
        return r;
    if (r == 0) {
        if (required)
            return -llm_fail(l->err, LLM_ERR_FORMAT, "%s: missing required key '%s'", l->path, key);
        return 0;
    }
    *out = (float)v;
    return 1;
}

static int bad_hparam(const struct loader *l, const char *what)
{
    return -llm_fail(l->err, LLM_ERR_FORMAT, "%s: invalid hyper-parameters: %s", l->path, what);
}

static int read_rope_scaling(const struct loader *l, struct llm_hparams *hp)
{
    char key[128];
    struct gguf_str type = { "", 0 };
    arch_key(l, "rope.scaling.type", key, sizeof key);
    int r = gguf_get_str(l->f, key, &type, l->err);
    if (r < 0)
        return r;
    hp->rope_freq_scale = 1.0f;
    if (r == 1 && gguf_str_eq(type, "none"))
        return 0;
    char name[300];
    if (r == 1 && !gguf_str_eq(type, "linear"))
        return -llm_fail(l->err, LLM_ERR_UNSUPPORTED,
                         "%s: key '%s': rope scaling '%s' is not supported (only linear)", l->path,
                         key, esc_name(name, sizeof name, type.ptr, type.len));
    float factor = 0.0f;
    if ((r = read_f32(l, "rope.scaling.factor", false, &factor)) < 0)
        return r;
    if (factor < 0.0f)
        return bad_hparam(l, "rope.scaling.factor is negative");
    if (factor > 0.0f)
        hp->rope_freq_scale = 1.0f / factor;
    return 0;
}

static int read_hparams(const struct loader *l, struct llm_hparams *hp)
{
    int r;
    if ((r = read_u32(l, "context_length", true, &hp->n_ctx_train)) < 0 ||
        (r = read_u32(l, "embedding_length", true, &hp->n_embd)) < 0 ||
        (r = read_u32(l, "block_count", true, &hp->n_layer)) < 0 ||
        (r = read_u32(l, "feed_forward_length", true, &hp->n_ff)) < 0 ||
        (r = read_u32(l, "attention.head_count", true, &hp->n_head)) < 0)
        return r;
    if (hp->n_embd == 0 || hp->n_ff == 0 || hp->n_head == 0)
        return bad_hparam(l, "embedding_length, feed_forward_length and head_count must be > 0");
    if (hp->n_layer == 0 || hp->n_layer > LLM_MAX_LAYERS)
        return bad_hparam(l, "block_count must be in 1..512");

    hp->n_head_kv = hp->n_head;
    if ((r = read_u32(l, "attention.head_count_kv", false, &hp->n_head_kv)) < 0)
        return r;
    if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
        return bad_hparam(l, "head_count must be a multiple of head_count_kv (> 0)");

    if (hp->n_embd % hp->n_head != 0) {
        hp->n_embd_head_k = hp->n_embd_head_v = 0;
    } else {
        hp->n_embd_head_k = hp->n_embd_head_v = hp->n_embd / hp->n_head;
    }
    if ((r = read_u32(l, "attention.key_length", false, &hp->n_embd_head_k)) < 0 ||
        (r = read_u32(l, "attention.value_length", false, &hp->n_embd_head_v)) < 0)
        return r;
    if (hp->n_embd_head_k == 0 || hp->n_embd_head_v == 0)
        return bad_hparam(l, "head size is 0 (embedding_length not a multiple of head_count?)");
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return bad_hparam(l, "key_length != value_length is not supported");

    hp->n_rot = hp->n_embd_head_k;
    if ((r = read_u32(l, "rope.dimension_count", false, &hp->n_rot)) < 0)
        return r;
    if (hp->n_rot == 0 || hp->n_rot > hp->n_embd_head_k || hp->n_rot % 2 != 0)
        return bad_hparam(l, "rope.dimension_count must be even and at most the head size");
    if (llm_arch_info(hp->arch)->rope_whole_head && hp->n_rot != hp->n_embd_head_k)
        return bad_hparam(l, "this architecture needs rope.dimension_count == head size");

    if ((r = read_f32(l, "attention.layer_norm_rms_epsilon", true, &hp->f_norm_rms_eps)) < 0)
        return r;
    if (!(hp->f_norm_rms_eps > 0.0f))
        return bad_hparam(l, "attention.layer_norm_rms_epsilon must be > 0");
    hp->rope_freq_base = 10000.0f;
    if ((r = read_f32(l, "rope.freq_base", false, &hp->rope_freq_base)) < 0)
        return r;
    if (!(hp->rope_freq_base > 0.0f))
        return bad_hparam(l, "rope.freq_base must be > 0");
    if ((r = read_rope_scaling(l, hp)) < 0)
        return r;
    hp->rope_type = llm_arch_info(hp->arch)->rope;

    uint64_t ft;
    hp->file_type = -1;
    if ((r = gguf_get_uint(l->f, "general.file_type", &ft, l->err)) < 0)
        return r;
    if (r == 1) {
        if (ft > INT32_MAX)
            return -llm_fail(l->err, LLM_ERR_FORMAT, "%s: key 'general.file_type' is out of range",
                             l->path);
        hp->file_type = (int32_t)ft;
    }
    return 0;
}

/* ---- tensors --------------------------------------------------------------------------------- */

struct binder {
    struct llm_model *m;
    const char *path;
    bool *used;            /* per file tensor: bound to a model slot */
    struct llm_error *err;
};

static void shape_str(const int64_t *ne, int n, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? ", " : "", ne[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* What the graph does with a tensor decides which types it can hold (src/model/build.c):
 * matrices feed MUL_MAT (a dot-product kernel for the type), the token embedding GET_ROWS
 * (dequantization), and vectors (norm weights, biases, rope factors) MUL/ADD/ROPE, which take F32
 * only. Checking here means a model that loads also runs. */
enum role { ROLE_MATRIX, ROLE_EMBD, ROLE_VECTOR };

static const char *role_need(enum role r, enum llm_type t)
{
    const struct llm_type_traits *tt = llm_type_traits((int)t);
    if (r == ROLE_VECTOR)
        return "norm weights, biases and rope factors must be F32";
    if (r == ROLE_MATRIX && tt && tt->to_float)
        return "no dot-product kernel for it, and OpenBLAS, which could multiply it dequantized, is not available";
    return r == ROLE_MATRIX ? "no matrix multiplication kernel for it" : "it cannot be dequantized";
}

/* The same rules as the cpu kernels (src/ops/cpu/cpu.c, matmul.c), which the npu runs too. */
static bool role_ok(enum role r, enum llm_type t)
{
    const struct llm_type_traits *tt = llm_type_traits((int)t);
    if (!tt)
        return false;
    switch (r) {
    case ROLE_VECTOR: return t == LLM_TYPE_F32;
    case ROLE_MATRIX: return tt->vec_dot || (tt->to_float && llm_blas_available());
    case ROLE_EMBD: return tt->to_float != NULL;
    }
    return false;
}

static int bad_type(struct binder *b, const char *name, enum llm_type t, enum role r, const char *as)
{
    return -llm_fail(b->err, LLM_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s which is not supported%s (%s)",
                     b->path, name, llm_type_name(t), as, role_need(r, t));
}

/* Bind tensor `name` of shape [ne0] (ne1 == 0) or [ne0, ne1] used as r. Absent + optional →
 * *out = NULL. */
static int bind(struct binder *b, const char *name, int64_t ne0, int64_t ne1, enum role role, bool required,
                struct llm_tensor **out)
{
    const struct gguf_file *f = b->m->file;
    const struct gguf_tensor_info *ti = gguf_find_tensor(f, name);
    *out = NULL;
    if (!ti) {
        if (required)
            return -llm_fail(b->err, LLM_ERR_FORMAT, "%s: missing tensor '%s'", b->path, name);
        return 0;
    }
    size_t idx = (size_t)(ti - f->tensors);
    struct llm_tensor *t = &b->m->tensors[idx];
    int64_t want[LLM_MAX_DIMS] = { ne0, ne1 ? ne1 : 1, 1, 1 };
    if (memcmp(t->ne, want, sizeof want) != 0) {
        char have_s[128], want_s[64];
        shape_str(t->ne, (int)(ti->n_dims ? ti->n_dims : 1), have_s, sizeof have_s);
        shape_str(want, ne1 ? 2 : 1, want_s, sizeof want_s);
        return -llm_fail(b->err, LLM_ERR_FORMAT, "%s: tensor '%s' has shape %s; expected %s",
                         b->path, name, have_s, want_s);
    }
    if (!role_ok(role, t->type))
        return bad_type(b, name, t->type, role, "");
    b->used[idx] = true;
    *out = t;
    return 1;
}

/* How a row of LLM_LAYER_TENSORS binds: its role, and whether the file must have it. */
#define LAYER_ROLE_MATRIX ROLE_MATRIX
#define LAYER_ROLE_NORM ROLE_VECTOR
#define LAYER_ROLE_BIAS ROLE_VECTOR
#define LAYER_REQUIRED_REQUIRED true
#define LAYER_REQUIRED_QKV_BIAS false
#define LAYER_REQUIRED_OPTIONAL false

static int bind_layer(struct binder *b, uint32_t il)
{
    const struct llm_hparams *hp = &b->m->hp;
    struct llm_layer *L = &b->m->layers[il];
    const int64_t D = hp->n_embd, Q = (int64_t)hp->n_head * hp->n_embd_head_k;
    const int64_t KV = (int64_t)hp->n_head_kv * hp->n_embd_head_k, FF = hp->n_ff;
    char name[LLM_MAX_NAME];
    int r;
    snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", il);
    if (gguf_find_tensor(b->m->file, name))
        return -llm_fail(b->err, LLM_ERR_UNSUPPORTED,
                         "%s: tensor '%s': fused QKV weights are not supported", b->path, name);
#define BIND(field, suffix, ne0, ne1, role, presence)                                                      \
    snprintf(name, sizeof name, "blk.%u.%s", il, suffix);                                                 \
    if ((r = bind(b, name, ne0, ne1, LAYER_ROLE_##role, LAYER_REQUIRED_##presence, &L->field)) < 0)       \
        return r;
    LLM_LAYER_TENSORS(BIND)
#undef BIND
    return 0;
}

static int bind_all(struct llm_model *m, const char *path, struct llm_error *err)
{
    const struct llm_hparams *hp = &m->hp;
    struct binder b = { m, path, llm_calloc(m->file->n_tensors, sizeof(bool)), err };
    if (!b.used)
        return -llm_fail(err, LLM_ERR_NOMEM, "%s: out of memory", path);
    int r;
    if ((r = bind(&b, "token_embd.weight", hp->n_embd, hp->n_vocab, ROLE_EMBD, true, &m->tok_embd)) < 0 ||
        (r = bind(&b, "output_norm.weight", hp->n_embd, 0, ROLE_VECTOR, true, &m->output_norm)) < 0 ||
        (r = bind(&b, "output.weight", hp->n_embd, hp->n_vocab, ROLE_MATRIX, false, &m->output)) < 0 ||
        (r = bind(&b, "output.bias", hp->n_vocab, 0, ROLE_VECTOR, false, &m->output_b)) < 0 ||
        (r = bind(&b, "rope_freqs.weight", hp->n_rot / 2, 0, ROLE_VECTOR, false, &m->rope_freqs)) < 0)
        goto out;
    if (!m->output) {
        m->output = m->tok_embd; /* tied embeddings: the embedding is the output matrix too */
        if (!role_ok(ROLE_MATRIX, m->tok_embd->type)) {
            r = bad_type(&b, "token_embd.weight", m->tok_embd->type, ROLE_MATRIX,
                         " as the output matrix (no output.weight)");
            goto out;
        }
    }
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if ((r = bind_layer(&b, il)) < 0)
            goto out;
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        if (!b.used[i]) {
            const struct gguf_str *n = &m->file->tensors[i].name;
            char name[300];
            r = -llm_fail(err, LLM_ERR_FORMAT, "%s: unexpected tensor '%s' for a %s model", path,
                          esc_name(name, sizeof name, n->ptr, n->len), llm_arch_name(hp->arch));
            goto out;
        }
    }
    r = 0;
out:
    free(b.used);
    return r;
}

/* One llm_tensor per file tensor: contiguous strides, data in the mapping. */
static int make_tensors(struct llm_model *m, const char *path, struct llm_error *err)
{
    const struct gguf_file *f = m->file;
    m->n_tensors = (int64_t)f->n_tensors;
    m->tensors = llm_calloc(f->n_tensors, sizeof *m->tensors);
    if (!m->tensors)
        return -llm_fail(err, LLM_ERR_NOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor_info *ti = &f->tensors[i];
        struct llm_tensor *t = &m->tensors[i];
        t->type = ti->type;
        memcpy(t->ne, ti->ne, sizeof t->ne);
        t->nb[0] = llm_type_info((int)ti->type)->type_size; /* known: gguf_open checked */
        t->nb[1] = llm_row_size(ti->type, ti->ne[0]);
        t->nb[2] = t->nb[1] * (size_t)ti->ne[1];
        t->nb[3] = t->nb[2] * (size_t)ti->ne[2];
        t->op = LLM_OP_NONE;
        t->data = (void *)ti->data;
        size_t n = ti->name.len < LLM_MAX_NAME - 1 ? ti->name.len : LLM_MAX_NAME - 1;
        memcpy(t->name, ti->name.ptr, n);
        t->name[n] = '\0';
        t->flags = LLM_TENSOR_WEIGHT;
        m->n_bytes += ti->nbytes;
        m->n_params += (uint64_t)(ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3]);
    }
    return 0;
}

static int read_arch(const struct gguf_file *f, const char *path, enum llm_arch *arch,
                     struct llm_error *err)
{
    struct gguf_str s;
    char name[300];
    int r = gguf_get_str(f, "general.architecture", &s, err);
    if (r < 0)
        return r;
    if (r == 0)
        return -llm_fail(err, LLM_ERR_FORMAT, "%s: missing required key 'general.architecture'",
                         path);
    const int a = llm_arch_find(s.ptr, s.len);
    if (a < 0)
        return -llm_fail(err, LLM_ERR_UNSUPPORTED, "%s: unknown architecture '%s'", path,
                         esc_name(name, sizeof name, s.ptr, s.len));
    *arch = (enum llm_arch)a;
    return 0;
}

static int load(struct llm_model *m, const char *path, enum gguf_load_mode mode, int n_threads, struct llm_error *err)
{
    int r;
    if ((r = gguf_open_mode(path, mode, &m->file, err)) != 0)
        return r;
    if ((r = read_arch(m->file, path, &m->hp.arch, err)) < 0)
        return r;
    struct loader l = { m->file, path, llm_arch_name(m->hp.arch), err };
    if ((r = read_hparams(&l, &m->hp)) < 0)
        return r;
    if ((r = vocab_load(m->file, &m->vocab, err)) != 0)
        return r;
    uint32_t n_vocab = (uint32_t)vocab_n_tokens(m->vocab);
    if ((r = read_u32(&l, "vocab_size", false, &n_vocab)) < 0)
        return r;
    m->hp.n_vocab = n_vocab;
    if (m->file->n_tensors == 0)
        return -llm_fail(err, LLM_ERR_FORMAT, "%s: the file has no tensors (vocab-only file?)", path);
    m->layers = llm_calloc(m->hp.n_layer, sizeof *m->layers);
    if (!m->layers)
        return -llm_fail(err, LLM_ERR_NOMEM, "%s: out of memory", path);
    if ((r = make_tensors(m, path, err)) < 0 || (r = bind_all(m, path, err)) < 0)
        return r;
    llm_model_describe(m);
    return n_threads == LLM_LOAD_NO_REPACK ? 0 : llm_model_repack(m, n_threads, err);
}

int llm_model_load(const char *path, struct llm_model **out, struct llm_error *err)
{
    return llm_model_load_mode(path, GGUF_LOAD_MMAP, 1, out, err);
}

int llm_model_load_mode(const char *path, enum gguf_load_mode mode, int n_threads, struct llm_model **out,
                        struct llm_error *err)
{
    *out = NULL;
    struct llm_model *m = llm_calloc(1, sizeof *m);
    if (!m)
        return llm_fail(err, LLM_ERR_NOMEM, "%s: out of memory", path);
    int r = load(m, path, mode, n_threads, err);
    if (r != 0) {
        llm_model_free(m);
        return r < 0 ? -r : r;
    }
    *out = m;
    return 0;
}

void llm_model_free(struct llm_model *m)
{
    if (!m)
        return;
    llm_model_repack_free(m);
    free(m->layers);
    free(m->tensors);
    vocab_free(m->vocab);
    gguf_close(m->file);
    free(m);
}
