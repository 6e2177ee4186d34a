/* Hostile files (issue 10): generated GGUF files that once loaded and then misbehaved, each checked
 * to be refused at load with a message naming what is wrong, or to run cleanly:
 *  - general.alignment below 8 (tensor data at addresses F32 kernels may not read);
 *  - vocabularies whose merges or tokens are all alike or aimed at one hash slot (loading must stay
 *    linear: the hash probes are counted, not timed);
 *  - special-token id keys of the wrong type (every key, not only bos/eos/unk/eot);
 *  - norm weights, biases or matrices of types the graph cannot use;
 *  - names and strings with control characters, in library messages and in what bin/llm prints;
 *  - --ignore-eos on a model whose greedy choice is always the end of generation.
 * The bin/llm checks use $LLM, else the llm beside this test's build tree (../bin/llm). */
#include "harness.h"
#include "model/context.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/vocab.h"
#include "model/vocab_impl.h"

#include <inttypes.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];
static char llm_bin[1024];

/* A path in the test's folder; the last 8 results stay valid. */
static const char *tmp_file(const char *name)
{
    static char buf[8][sizeof tmpdir + 256];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

/* ---- a tiny llama with one thing changed ------------------------------------------------------ */

#define D 32   /* n_embd */
#define FF 64  /* n_ff   */
#define NV 512 /* n_vocab */

struct spec {
    uint32_t alignment;          /* 0: the default (32) */
    const char *odd_tensor;      /* this tensor gets odd_type instead of its usual type */
    enum llm_type odd_type;
    bool q_bias;                 /* add blk.0.attn_q.bias (F32 unless it is odd_tensor) */
    bool eos_bias;               /* add output.bias making </s> (id 2) the greedy choice */
    const char *extra_tensor;    /* a 1-D [D] F32 tensor the model does not use */
    const char *extra_key;       /* a string entry extra_key = extra_val */
    const char *extra_val;
    const char *arch;            /* general.architecture (default llama) */
};

/* Bytes of a tensor of type t and shape [ne0, ne1]: small random values when F32, zeros else. */
static void *tensor_data(enum llm_type t, int64_t ne0, int64_t ne1)
{
    size_t n = llm_row_size(t, ne0) * (size_t)ne1;
    uint8_t *p = calloc(1, n + 4);
    if (p && t == LLM_TYPE_F32)
        for (size_t i = 0; i < (size_t)(ne0 * ne1); i++) {
            float v = ((float)(test_rand() % 2001) - 1000.0f) / 20000.0f;
            memcpy(p + 4 * i, &v, 4);
        }
    return p;
}

/* Tensor buffers stay alive until the file is written. */
static void *bufs[64];
static int n_bufs;

static void add_tensor(struct gguf_writer *w, const struct spec *s, const char *name, int64_t ne0, int64_t ne1,
                       bool norm)
{
    enum llm_type t = s->odd_tensor && !strcmp(s->odd_tensor, name) ? s->odd_type : LLM_TYPE_F32;
    void *p = tensor_data(t, ne0, ne1);
    if (norm && t == LLM_TYPE_F32)
        for (int64_t i = 0; i < ne0; i++) {
            float one = 1.0f;
            memcpy((char *)p + 4 * i, &one, 4);
        }
    bufs[n_bufs++] = p;
    int64_t ne[2] = { ne0, ne1 };
    gguf_writer_add_tensor(w, name, t, ne1 > 1 ? 2 : 1, ne, p);
}

static const char *write_model(const struct spec *s, const char *fname)
{
    const char *path = tmp_file(fname);
    struct gguf_writer *w = gguf_writer_new();
    const char *arch = s->arch ? s->arch : "llama";
    if (s->alignment)
        gguf_writer_set_alignment(w, s->alignment);
    gguf_writer_add_str(w, "general.architecture", arch);
    char key[128];
    static const char *const keys[] = { "context_length", "embedding_length", "block_count", "feed_forward_length",
                                        "attention.head_count", "attention.head_count_kv" };
    const uint32_t vals[] = { 256, D, 1, FF, 4, 2 };
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, keys[i]);
        gguf_writer_add_u32(w, key, vals[i]);
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    gguf_writer_add_f32(w, key, 1e-5f);
    if (s->extra_key)
        gguf_writer_add_str(w, s->extra_key, s->extra_val);
    struct llm_error err = { 0 };
    CHECK(llm_synth_vocab(w, false, NV, &err) == 0, "%s", err.msg);
    add_tensor(w, s, "token_embd.weight", D, NV, false);
    add_tensor(w, s, "output_norm.weight", D, 1, true);
    add_tensor(w, s, "output.weight", D, NV, false);
    if (s->eos_bias) {
        float *b = calloc(NV, sizeof *b);
        b[2] = 100.0f;
        bufs[n_bufs++] = b;
        gguf_writer_add_tensor(w, "output.bias", LLM_TYPE_F32, 1, (int64_t[]){ NV }, b);
    }
    add_tensor(w, s, "blk.0.attn_norm.weight", D, 1, true);
    add_tensor(w, s, "blk.0.attn_q.weight", D, D, false);
    if (s->q_bias)
        add_tensor(w, s, "blk.0.attn_q.bias", D, 1, false);
    add_tensor(w, s, "blk.0.attn_k.weight", D, D / 2, false);
    add_tensor(w, s, "blk.0.attn_v.weight", D, D / 2, false);
    add_tensor(w, s, "blk.0.attn_output.weight", D, D, false);
    add_tensor(w, s, "blk.0.ffn_norm.weight", D, 1, true);
    add_tensor(w, s, "blk.0.ffn_gate.weight", D, FF, false);
    add_tensor(w, s, "blk.0.ffn_up.weight", D, FF, false);
    add_tensor(w, s, "blk.0.ffn_down.weight", FF, D, false);
    if (s->extra_tensor)
        add_tensor(w, s, s->extra_tensor, D, 1, false);
    CHECK(gguf_writer_write(w, path, &err) == 0, "writing %s: %s", fname, err.msg);
    gguf_writer_free(w);
    for (int i = 0; i < n_bufs; i++)
        free(bufs[i]);
    n_bufs = 0;
    return path;
}

/* Load, make a context and decode a few tokens: every logit finite. */
static bool runs(const char *path, const char *what)
{
    struct llm_model *m = NULL;
    struct llm_context *c = NULL;
    struct llm_error err = { 0 };
    bool ok = llm_model_load(path, &m, &err) == 0;
    CHECK(ok, "%s: load: %s", what, err.msg);
    struct llm_context_params cp = llm_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    if (ok) {
        ok = llm_context_new(m, &cp, &c, &err) == 0;
        CHECK(ok, "%s: context: %s", what, err.msg);
    }
    const int32_t toks[3] = { 1, 100, 200 };
    if (ok) {
        ok = llm_decode(c, toks, 3, false, &err) == 0 && llm_decode(c, toks + 1, 1, false, &err) == 0;
        CHECK(ok, "%s: decode: %s", what, err.msg);
    }
    if (ok) {
        const float *l = llm_get_logits(c, 0);
        for (int i = 0; i < NV && ok; i++)
            ok = isfinite(l[i]);
        CHECK(ok, "%s: logits not finite", what);
    }
    llm_context_free(c);
    llm_model_free(m);
    return ok;
}

/* Loading fails and the message holds every one of want (NULL-terminated). */
static void load_fails(const char *path, const char *what, const char *const *want)
{
    struct llm_model *m = (struct llm_model *)1;
    struct llm_error err = { 0 };
    CHECK(llm_model_load(path, &m, &err) != 0 && m == NULL, "%s: loaded", what);
    for (; *want; want++)
        CHECK(strstr(err.msg, *want) != NULL, "%s: '%s' lacks '%s'", what, err.msg, *want);
}

/* ---- bin/llm ------------------------------------------------------------------------------------ */

struct cmd_out {
    char out[1 << 16], err[1 << 14];
    size_t n_out, n_err;
    int status; /* exit status, or 128 + signal */
};

static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return n;
}

/* Run "$LLM args" with stdout and stderr captured. False when there is no llm to run. */
static bool run_llm(const char *args, struct cmd_out *r)
{
    if (!llm_bin[0])
        return false;
    char cmd[4096], ofile[sizeof tmpdir + 256], efile[sizeof tmpdir + 256];
    snprintf(ofile, sizeof ofile, "%s/cmd.out", tmpdir);
    snprintf(efile, sizeof efile, "%s/cmd.err", tmpdir);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s' </dev/null", llm_bin, args, ofile, efile);
    int st = system(cmd);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    r->n_out = slurp(ofile, r->out, sizeof r->out);
    r->n_err = slurp(efile, r->err, sizeof r->err);
    return true;
}

/* Bytes a terminal acts on: C0 controls other than newline and tab, DEL (ESC sequences start with
 * one), C1 controls in UTF-8. */
static bool has_controls(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ||
            (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f))
            return true;
    }
    return false;
}

static int count_lines(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* One "llm: error: " line on stderr, nothing else, exit 1. */
static void one_error_line(const struct cmd_out *r, const char *what)
{
    CHECK(r->status == 1 && count_lines(r->err, r->n_err) == 1 && !strncmp(r->err, "llm: error: ", 12) &&
              !has_controls(r->err, r->n_err),
          "%s: exit %d, stderr: %s", what, r->status, r->err);
}

/* ---- general.alignment ------------------------------------------------------------------------ */

static void test_alignment(void)
{
    /* below 8 the F32 data lands at addresses that are not multiples of 4 */
    static const uint32_t bad[] = { 1, 2, 4 };
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "align%u.gguf", bad[i]);
        const char *path = write_model(&(struct spec){ .alignment = bad[i] }, name);
        struct gguf_file *f = (struct gguf_file *)1;
        struct llm_error err = { 0 };
        CHECK(gguf_open(path, &f, &err) != 0 && f == NULL, "%s opened", name);
        CHECK(strstr(err.msg, "general.alignment") && strstr(err.msg, "multiple of 8"), "%s: '%s'", name, err.msg);
        load_fails(path, name, (const char *const[]){ "general.alignment", NULL });
        struct cmd_out r;
        char args[512];
        snprintf(args, sizeof args, "run -m '%s' -p hi -n 2", path);
        if (run_llm(args, &r)) {
            one_error_line(&r, name);
            CHECK(r.n_out == 0, "%s: stdout: %s", name, r.out);
        }
    }
    /* every accepted alignment runs, on every kernel path the tiny model takes */
    static const uint32_t good[] = { 8, 16, 64 };
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "align%u.gguf", good[i]);
        runs(write_model(&(struct spec){ .alignment = good[i] }, name), name);
    }
    runs(write_model(&(struct spec){ .alignment = 8, .odd_tensor = "blk.0.ffn_up.weight", .odd_type = LLM_TYPE_F16 },
                     "align8-f16.gguf"),
         "align8 with an F16 matrix");

    /* gguf_parse takes any buffer: one that would put F32 data off its alignment is refused */
    size_t len = 0;
    char *file = test_read_file(tmp_file("align8.gguf"), &len);
    CHECK(file != NULL, "read align8.gguf");
    char *buf = file ? malloc(len + 1) : NULL;
    if (buf) {
        memcpy(buf + 1, file, len);
        struct gguf_file *f = (struct gguf_file *)1;
        struct llm_error err = { 0 };
        CHECK(gguf_parse(buf + 1, len, "shifted", &f, &err) != 0 && f == NULL, "misaligned buffer parsed");
        CHECK(strstr(err.msg, "not aligned"), "'%s'", err.msg);
        memcpy(buf, file, len); /* and the same bytes at an aligned address parse */
        CHECK(gguf_parse(buf, len, "aligned", &f, &err) == 0, "%s", err.msg);
        gguf_close(f);
    }
    free(buf);
    free(file);
}

/* ---- vocabulary loading: work bounded by the file's size whatever it holds ---------------------- */

/* The 32-bit FNV-1a index the hash tables used before issue 10, to aim keys at one slot. */
static uint32_t old_slot(const char *s, size_t n, uint32_t mask)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return (uint32_t)h & mask;
}

/* vocab table size for n keys (vocab_load.c: smallest power of two >= 2n, at least 16) */
static uint32_t slots_for(uint32_t n)
{
    uint32_t s = 16;
    while (s < 2 * (uint64_t)n)
        s *= 2;
    return s;
}

enum merge_kind { M_SPACE, M_EMPTY, M_SAME, M_AIMED, M_NORMAL };

/* n distinct "left right" texts that all fall in one slot of the old hash (brute force). */
static char (*aimed_texts(uint32_t n, uint32_t mask, bool with_space))[16]
{
    static const char hex[] = "0123456789abcdef";
    char (*t)[16] = calloc(n, sizeof *t);
    uint32_t k = 0;
    for (uint32_t i = 0; t && k < n; i++) {
        char s[16]; /* "l r" or "l.r": the 8 hex digits of i split in two (distinct for distinct i) */
        for (int d = 0; d < 8; d++)
            s[d < 4 ? d : d + 1] = hex[(i >> (4 * (7 - d))) & 15];
        s[4] = with_space ? ' ' : '.';
        s[9] = '\0';
        if (old_slot(s, 9, mask) == 0)
            memcpy(t[k++], s, 10);
    }
    return t;
}

/* A gpt2 vocabulary of n_tok tokens ("t0".. or all aimed at one slot) and n_merges merges. */
static const char *write_bpe_vocab(const char *fname, uint32_t n_tok, bool aimed_tokens, uint32_t n_merges,
                                   enum merge_kind mk)
{
    const char *path = tmp_file(fname);
    struct gguf_str *toks = calloc(n_tok, sizeof *toks), *merges = calloc(n_merges ? n_merges : 1, sizeof *merges);
    char (*tt)[16] = aimed_tokens ? aimed_texts(n_tok, slots_for(n_tok) - 1, false) : calloc(n_tok, 16);
    char (*mt)[16] = mk == M_AIMED ? aimed_texts(n_merges, slots_for(n_merges) - 1, true) : calloc(n_merges + 1, 16);
    for (uint32_t i = 0; i < n_tok; i++) {
        if (!aimed_tokens)
            snprintf(tt[i], 16, "t%u", i);
        toks[i] = (struct gguf_str){ tt[i], strlen(tt[i]) };
    }
    for (uint32_t i = 0; i < n_merges; i++) {
        if (mk == M_SPACE || mk == M_EMPTY || mk == M_SAME)
            snprintf(mt[i], 16, "%s", mk == M_SPACE ? " " : mk == M_EMPTY ? "" : "t 0");
        else if (mk == M_NORMAL)
            snprintf(mt[i], 16, "t %u", i);
        merges[i] = (struct gguf_str){ mt[i], strlen(mt[i]) };
    }
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", "qwen2");
    gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, n_tok);
    gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, n_merges);
    struct llm_error err = { 0 };
    CHECK(gguf_writer_write(w, path, &err) == 0, "writing %s: %s", fname, err.msg);
    gguf_writer_free(w);
    free(toks);
    free(merges);
    free(tt);
    free(mt);
    return path;
}

/* Load a vocab and check the slots it visited stay within 8 per token and merge. */
static struct vocab *load_bounded(const char *path, const char *what)
{
    struct gguf_file *f = NULL;
    struct vocab *v = NULL;
    struct llm_error err = { 0 };
    CHECK(gguf_open(path, &f, &err) == 0 && vocab_load(f, &v, &err) == 0, "%s: %s", what, err.msg);
    gguf_close(f);
    if (!v)
        return NULL;
    uint64_t keys = (uint64_t)v->n_tokens + (uint64_t)v->n_merges;
    CHECK(v->probes <= 8 * keys, "%s: %" PRIu64 " hash probes for %" PRIu64 " keys (quadratic?)", what, v->probes,
          keys);
    return v;
}

static void test_vocab_work(void)
{
    static const struct { const char *file; uint32_t n_tok; bool aimed_tok; uint32_t n_merges; enum merge_kind mk; }
    cases[] = {
        { "merges-space.gguf", 1000, false, 60000, M_SPACE },   /* the issue: qwen2 merges edited to " " */
        { "merges-empty.gguf", 1000, false, 60000, M_EMPTY },
        { "merges-same.gguf", 1000, false, 60000, M_SAME },     /* one merge 60000 times */
        { "merges-aimed.gguf", 1000, false, 1024, M_AIMED },    /* distinct, one slot of the old hash */
        { "tokens-aimed.gguf", 1024, true, 10, M_NORMAL },
        { "merges-normal.gguf", 1000, false, 999, M_NORMAL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_bpe_vocab(cases[i].file, cases[i].n_tok, cases[i].aimed_tok, cases[i].n_merges,
                                           cases[i].mk);
        struct vocab *v = load_bounded(path, cases[i].file);
        if (!v)
            continue;
        /* and it still tokenizes */
        int32_t ids[64];
        int64_t n = vocab_tokenize(v, "t1 t2", 5, false, true, ids, 64);
        CHECK(n >= 0, "%s: tokenize gave %" PRId64, cases[i].file, n);
        vocab_free(v);
    }
    /* the merge that exists is still found (rank 0 of "t 1"), the unusable entries are not */
    struct vocab *v = load_bounded(tmp_file("merges-normal.gguf"), "merges-normal.gguf");
    if (v) {
        CHECK(vocab_merge_rank(v, "t", 1, "1", 1) == 1 && vocab_merge_rank(v, "t", 1, "998", 3) == 998,
              "merge ranks");
        vocab_free(v);
    }
    v = load_bounded(tmp_file("merges-space.gguf"), "merges-space.gguf");
    if (v) {
        CHECK(vocab_merge_rank(v, "", 0, "", 0) == -1, "an unsplittable merge matched");
        vocab_free(v);
    }
    /* the real vocabularies stay within the bound too */
    vocab_free(load_bounded(test_path("models/qwen2-tiny-q8_0.gguf"), "qwen2-tiny vocab"));
    vocab_free(load_bounded(test_path("models/vocab/ggml-vocab-gpt-2.gguf"), "gpt-2 vocab"));
}

/* ---- special-token keys: one type rule for all ------------------------------------------------- */

static void test_special_keys(void)
{
    static const char *const keys[] = {
        "bos_token_id", "eos_token_id", "unknown_token_id", "eot_token_id", "eom_token_id", "seperator_token_id",
        "padding_token_id", "cls_token_id", "mask_token_id", "fim_pre_token_id", "fim_suf_token_id",
        "fim_mid_token_id", "fim_pad_token_id", "fim_rep_token_id", "fim_sep_token_id", "prefix_token_id",
        "suffix_token_id", "middle_token_id",
    };
    static const struct gguf_str toks[] = { { "<unk>", 5 }, { "<s>", 3 }, { "</s>", 4 }, { "a", 1 }, { "b", 1 } };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (int form = 0; form < 4; form++) {
            char key[96], fname[96];
            snprintf(key, sizeof key, "tokenizer.ggml.%s", keys[k]);
            snprintf(fname, sizeof fname, "key%zu-%d.gguf", k, form);
            struct gguf_writer *w = gguf_writer_new();
            gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
            gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
            if (form == 0)
                gguf_writer_add_str(w, key, "1");
            else if (form == 1)
                gguf_writer_add_f32(w, key, 1.0f);
            else if (form == 2)
                gguf_writer_add_u32(w, key, 0xFFFFFFFFu); /* "none", as stories260K writes it */
            else
                gguf_writer_add_i32(w, key, 3);
            struct llm_error err = { 0 };
            CHECK(gguf_writer_write(w, tmp_file(fname), &err) == 0, "%s", err.msg);
            gguf_writer_free(w);
            struct gguf_file *f = NULL;
            struct vocab *v = NULL;
            CHECK(gguf_open(tmp_file(fname), &f, &err) == 0, "%s", err.msg);
            int rc = f ? vocab_load(f, &v, &err) : -1;
            if (form < 2) {
                CHECK(rc != 0 && v == NULL, "%s as %s accepted", key, form ? "f32" : "string");
                CHECK(strstr(err.msg, key) != NULL, "%s: message '%s'", key, err.msg);
            } else {
                CHECK(rc == 0 && v != NULL, "%s as an integer refused: %s", key, err.msg);
            }
            vocab_free(v);
            gguf_close(f);
        }
}

/* ---- tensor types the graph cannot use ----------------------------------------------------------- */

static void test_tensor_types(void)
{
    static const struct { const char *tensor; enum llm_type type; bool bias; const char *type_name; } bad[] = {
        { "blk.0.attn_norm.weight", LLM_TYPE_F16, false, "F16" },
        { "blk.0.attn_norm.weight", LLM_TYPE_BF16, false, "BF16" },
        { "blk.0.ffn_norm.weight", LLM_TYPE_Q8_0, false, "Q8_0" },
        { "output_norm.weight", LLM_TYPE_F16, false, "F16" },
        { "blk.0.attn_q.bias", LLM_TYPE_F16, true, "F16" },
        { "blk.0.attn_q.weight", LLM_TYPE_I16, false, "I16" }, /* no kernel at all */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char fname[64];
        snprintf(fname, sizeof fname, "type%zu.gguf", i);
        const char *path = write_model(&(struct spec){ .odd_tensor = bad[i].tensor, .odd_type = bad[i].type,
                                                      .q_bias = bad[i].bias },
                                       fname);
        char want[128];
        snprintf(want, sizeof want, "tensor '%s' has type %s which is not supported", bad[i].tensor,
                 bad[i].type_name);
        load_fails(path, fname, (const char *const[]){ want, NULL });
        struct cmd_out r;
        char args[512];
        snprintf(args, sizeof args, "run -m '%s' -p hi -n 2", path);
        if (run_llm(args, &r)) { /* refused before any output */
            one_error_line(&r, fname);
            CHECK(r.n_out == 0 && strstr(r.err, bad[i].tensor), "%s: stdout '%s', stderr '%s'", fname, r.out, r.err);
        }
    }
    /* what loads runs: F32 everywhere, an F32 bias, F16 and BF16 matrices; a Q8_1 matrix (no dot
     * product: dequantized into sgemm) loads exactly when OpenBLAS is there to run it */
    const char *q81 = write_model(&(struct spec){ .odd_tensor = "blk.0.attn_q.weight", .odd_type = LLM_TYPE_Q8_1 },
                                  "q8_1.gguf");
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    if (llm_model_load(q81, &m, &err) == 0) {
        llm_model_free(m);
        runs(q81, "Q8_1 matrix");
    } else {
        CHECK(strstr(err.msg, "has type Q8_1") && strstr(err.msg, "OpenBLAS"), "Q8_1 matrix: '%s'", err.msg);
    }
    runs(write_model(&(struct spec){ 0 }, "f32.gguf"), "all F32");
    runs(write_model(&(struct spec){ .q_bias = true }, "bias.gguf"), "F32 bias");
    runs(write_model(&(struct spec){ .odd_tensor = "blk.0.ffn_down.weight", .odd_type = LLM_TYPE_BF16 },
                     "bf16.gguf"),
         "BF16 matrix");
}

/* ---- control characters in names and strings -------------------------------------------------------- */

static void test_escape_helper(void)
{
    char buf[256];
    const char in[] = "a\nb\x1b[2J\r\x7f|\xc2\x9b|\xe2\x80\xae|\xff|'\\|\xc3\xa9";
    size_t n = llm_escape(buf, sizeof buf, in, sizeof in - 1, 100, LLM_ESC_QUOTES);
    CHECK_STR(buf, "a\\nb\\x1b[2J\\r\\x7f|\\x9b|\\u202e|\\xff|\\'\\\\|\xc3\xa9");
    CHECK_EQ_INT(n, strlen(buf));
    llm_escape(buf, sizeof buf, in, sizeof in - 1, 100, 0);
    CHECK_STR(buf, "a\\nb\\x1b[2J\\r\\x7f|\\x9b|\\u202e|\\xff|'\\|\xc3\xa9");
    n = llm_escape(buf, 8, "abcdefghijkl", 12, 6, 0); /* cut to 6 bytes, "...", 8-byte buffer */
    CHECK(n == 9 && !strcmp(buf, "abcdef."), "cut: %zu '%s'", n, buf);
}

static void test_control_chars(void)
{
    static const char evil_tensor[] = "x\n\x1b[2Jllm: all good\r";
    static const char evil_key[] = "general.x\x1b]0;pwned\x07";
    static const char evil_val[] = "ok\r\n\x1b[1;32mall good\x1b[0m\xc2\x9b";
    const char *path = write_model(&(struct spec){ .extra_tensor = evil_tensor, .extra_key = evil_key,
                                                  .extra_val = evil_val },
                                   "evil.gguf");
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    CHECK(llm_model_load(path, &m, &err) != 0, "evil.gguf loaded");
    CHECK(!has_controls(err.msg, strlen(err.msg)) && strstr(err.msg, "unexpected tensor 'x\\n\\x1b[2Jllm"),
          "message '%s'", err.msg);
    const char *arch = write_model(&(struct spec){ .arch = "ll\x1b[2Jama" }, "evil-arch.gguf");
    CHECK(llm_model_load(arch, &m, &err) != 0 && !has_controls(err.msg, strlen(err.msg)) &&
              strstr(err.msg, "ll\\x1b[2Jama"),
          "arch message '%s'", err.msg);

    struct cmd_out r;
    char args[512];
    snprintf(args, sizeof args, "run -m '%s' -p hi", path);
    if (!run_llm(args, &r)) {
        SKIP("no bin/llm to run (set LLM)");
        return;
    }
    one_error_line(&r, "run evil.gguf");
    snprintf(args, sizeof args, "info '%s'", path);
    run_llm(args, &r);
    CHECK(r.status == 0 && !has_controls(r.out, r.n_out), "info: exit %d, control characters in its output", r.status);
    CHECK(strstr(r.out, "x\\n\\x1b[2Jllm: all good\\r") && strstr(r.out, "general.x\\x1b]0;pwned\\x07") &&
              strstr(r.out, "\"ok\\r\\n\\x1b[1;32mall good\\x1b[0m\\x9b\""),
          "info does not show the escaped texts: %.2000s", r.out);
    snprintf(args, sizeof args, "info --json '%s'", path);
    run_llm(args, &r);
    CHECK(r.status == 0 && !has_controls(r.out, r.n_out), "info --json: exit %d", r.status);
    CHECK(strstr(r.out, "\"ok\\r\\n\\u001b[1;32mall good\\u001b[0m\\u009b\""), "info --json value: %.3000s", r.out);
    snprintf(args, sizeof args, "run -m '%s' -p hi", arch);
    run_llm(args, &r);
    one_error_line(&r, "run evil-arch.gguf");
    /* a path with a newline in an error line is escaped too */
    snprintf(args, sizeof args, "run -m '%s/no\nsuch\x1b[2J.gguf' -p hi", tmpdir);
    run_llm(args, &r);
    one_error_line(&r, "missing file with a newline in its name");
}

/* ---- --ignore-eos -------------------------------------------------------------------------------- */

static void test_ignore_eos(void)
{
    const char *path = write_model(&(struct spec){ .eos_bias = true }, "eos.gguf");
    runs(path, "eos.gguf");
    struct cmd_out r;
    char args[512];
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 6 --temp 0", path);
    if (!run_llm(args, &r)) {
        SKIP("no bin/llm to run (set LLM)");
        return;
    }
    CHECK(r.status == 0 && strstr(r.err, "generated 1 tokens"), "greedy stops at </s>: %s", r.err);
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 6 --temp 0 --ignore-eos", path);
    run_llm(args, &r);
    CHECK(r.status == 0 && strstr(r.err, "generated 6 tokens"), "--ignore-eos: exit %d: %s", r.status, r.err);
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 6 --ignore-eos --seed -1", path);
    run_llm(args, &r);
    CHECK(r.status == 0 && strstr(r.err, "generated 6 tokens"), "--ignore-eos sampled: exit %d: %s", r.status, r.err);
}

static void find_llm(const char *argv0)
{
    const char *env = getenv("LLM");
    if (env && *env) {
        snprintf(llm_bin, sizeof llm_bin, "%s", env);
    } else { /* build/x/tests/test_hostile -> build/x/bin/llm */
        snprintf(llm_bin, sizeof llm_bin, "%s", argv0);
        char *slash = strrchr(llm_bin, '/');
        if (slash) {
            snprintf(slash, sizeof llm_bin - (size_t)(slash - llm_bin), "/../bin/llm");
        } else {
            snprintf(llm_bin, sizeof llm_bin, "../bin/llm");
        }
    }
    if (access(llm_bin, X_OK) != 0) {
        fprintf(stderr, "test_hostile: no executable %s: bin/llm checks skipped\n", llm_bin);
        llm_bin[0] = '\0';
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_hostile.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    find_llm(argv[0]);
    test_alignment();
    test_vocab_work();
    test_special_keys();
    test_tensor_types();
    test_escape_helper();
    test_control_chars();
    test_ignore_eos();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (getenv("HOSTILE_KEEP")) /* the generated files, e.g. to try another build on them */
        fprintf(stderr, "test_hostile: files kept in %s\n", tmpdir);
    else if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_done("test_hostile");
}
