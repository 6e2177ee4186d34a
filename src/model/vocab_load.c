/* vocab_load(): copy tokenizer.ggml.* out of a GGUF file into hash tables, then apply llama.cpp's
 * defaults and its text-based special-token rules (src/model/README.md: tokenizers). */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "model.h"
#include "vocab_impl.h"

#define KEY(name) "tokenizer.ggml." name
#define VOCAB_MAX_ENTRIES (1u << 30) /* keeps the hash table sizes in 32 bits */

/* Smallest power of two >= 2n (load factor <= 1/2). */
static uint32_t table_size(uint32_t n)
{
    uint32_t s = 16;
    while (s < 2 * (uint64_t)n)
        s *= 2;
    return s;
}

static int32_t *new_slots(uint32_t size)
{
    int32_t *slots = malloc((size_t)size * sizeof *slots);
    if (slots)
        memset(slots, 0xff, (size_t)size * sizeof *slots); /* all -1 */
    return slots;
}

static bool same_token(const struct vocab *v, int32_t a, int32_t b)
{
    return v->tok[a].len == v->tok[b].len &&
           !memcmp(v->text + v->tok[a].off, v->text + v->tok[b].off, v->tok[a].len);
}

static bool same_merge(const struct vocab *v, int32_t a, int32_t b)
{
    const struct vocab_merge *x = &v->merge[a], *y = &v->merge[b];
    return x->left_len == y->left_len && x->right_len == y->right_len &&
           !memcmp(v->merge_text + x->off, v->merge_text + y->off, x->left_len + 1 + x->right_len);
}

/* A merge matches a pair of non-empty symbols only when both sides are non-empty; other entries
 * (" ", "", "a ") keep their rank but stay out of the table, where they could never be found and
 * would only lengthen the probe runs of the rest. */
static bool merge_usable(const struct vocab *v, uint32_t i)
{
    return v->merge[i].left_len > 0 && v->merge[i].right_len > 0;
}

/* Insert keys 0..n-1 (those usable() accepts; all when NULL) with precomputed hashes into an
 * open-addressing table; a key equal to one already present replaces it (replace) or is dropped.
 * Prefetching a few keys ahead hides the cache misses of the random slot accesses, which dominate
 * loading. Every slot visited counts in v->probes. */
static void fill_slots(struct vocab *v, int32_t *slots, uint32_t mask, const uint32_t *hash, uint32_t n,
                       bool (*same)(const struct vocab *, int32_t, int32_t), bool replace,
                       bool (*usable)(const struct vocab *, uint32_t))
{
    uint64_t probes = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i + 16 < n)
            __builtin_prefetch(&slots[hash[i + 16] & mask], 1);
        if (usable && !usable(v, i))
            continue;
        for (uint32_t h = hash[i] & mask;; h = (h + 1) & mask) {
            int32_t k = slots[h];
            probes++;
            if (k < 0) {
                slots[h] = (int32_t)i;
                break;
            }
            if (same(v, k, (int32_t)i)) {
                if (replace)
                    slots[h] = (int32_t)i;
                break;
            }
        }
    }
    v->probes += probes;
}

/* Seed of the table hashes: from the kernel, else from the clock and an address. */
static uint64_t new_hash_seed(const void *salt)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
        return seed;
    return (llm_now_ns() * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uintptr_t)salt;
}

static int load_tokens(struct vocab *v, const struct gguf_file *f, struct llm_error *err)
{
    const struct gguf_kv *toks, *scores = NULL, *types = NULL;
    int rc = gguf_get_arr(f, KEY("tokens"), GGUF_STRING, &toks, err);
    if (rc < 0)
        return -rc;
    if (rc == 0)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: no " KEY("tokens") " array", f->path);
    if (toks->arr_n == 0 || toks->arr_n > VOCAB_MAX_ENTRIES)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: " KEY("tokens") " has %llu entries", f->path,
                        (unsigned long long)toks->arr_n);
    uint32_t n = (uint32_t)toks->arr_n;
    if ((rc = gguf_get_arr(f, KEY("scores"), GGUF_F32, &scores, err)) < 0 ||
        (rc = gguf_get_arr(f, KEY("token_type"), GGUF_I32, &types, err)) < 0)
        return -rc;
    if (scores && scores->arr_n != n)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: " KEY("scores") " has %llu entries, expected %u",
                        f->path, (unsigned long long)scores->arr_n, n);
    if (types && types->arr_n != n)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: " KEY("token_type") " has %llu entries, expected %u",
                        f->path, (unsigned long long)types->arr_n, n);

    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += toks->strs[i].len + 1;
    if (total > UINT32_MAX)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: token texts too large", f->path);

    v->n_tokens = (int32_t)n;
    v->tok = llm_calloc(n, sizeof *v->tok);
    v->text = malloc(total);
    v->tok_mask = table_size(n) - 1;
    v->tok_slots = new_slots(v->tok_mask + 1);
    if (!v->tok || !v->text || !v->tok_slots)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory loading the vocabulary");

    uint32_t *hash = malloc((size_t)n * sizeof *hash);
    if (!hash)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory loading the vocabulary");
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct vocab_token *t = &v->tok[i];
        struct gguf_str s = toks->strs[i];
        memcpy(v->text + off, s.ptr, s.len);
        v->text[off + s.len] = '\0';
        hash[i] = hash_end(llm_fnv_feed(v->hash_seed, v->text + off, s.len));
        t->off = off;
        t->len = (uint32_t)s.len;
        off += (uint32_t)s.len + 1;
        t->score = scores ? (float)gguf_arr_f64(scores, i) : 0.0f;
        int64_t ty = types ? gguf_arr_i64(types, i) : VOCAB_TT_NORMAL;
        t->type = ty >= VOCAB_TT_NORMAL && ty <= VOCAB_TT_BYTE ? (uint8_t)ty : VOCAB_TT_UNDEFINED;
    }
    /* a later duplicate text replaces the earlier id, as in llama.cpp's map */
    fill_slots(v, v->tok_slots, v->tok_mask, hash, n, same_token, true, NULL);
    free(hash);
    return 0;
}

static int load_merges(struct vocab *v, const struct gguf_file *f, struct llm_error *err)
{
    const struct gguf_kv *m;
    int rc = gguf_get_arr(f, KEY("merges"), GGUF_STRING, &m, err);
    if (rc < 0)
        return -rc;
    if (rc == 0)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: gpt2 tokenizer without " KEY("merges"), f->path);
    if (m->arr_n > VOCAB_MAX_ENTRIES)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: too many merges", f->path);
    uint32_t n = (uint32_t)m->arr_n;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += m->strs[i].len;
    if (total > UINT32_MAX)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: merges too large", f->path);

    v->merge = llm_calloc(n, sizeof *v->merge);
    v->merge_text = malloc(total ? total : 1);
    v->merge_mask = table_size(n) - 1;
    v->merge_slots = new_slots(v->merge_mask + 1);
    if (!v->merge || !v->merge_text || !v->merge_slots)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory loading the merges");

    uint32_t *hash = malloc((size_t)n * sizeof *hash + 1);
    if (!hash)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory loading the merges");
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct gguf_str s = m->strs[i];
        struct vocab_merge *e = &v->merge[i];
        const char *t = v->merge_text + off;
        memcpy(v->merge_text + off, s.ptr, s.len);
        e->off = off;
        off += (uint32_t)s.len;
        /* split at the first space after index 0 (a merge may start with a space); without one
         * the entry matches no pair of non-empty symbols and keeps left_len 0 */
        const char *sp = s.len > 1 ? memchr(t + 1, ' ', s.len - 1) : NULL;
        if (sp) {
            e->left_len = (uint32_t)(sp - t);
            e->right_len = (uint32_t)(s.len - e->left_len - 1);
        }
        hash[i] = hash_end(llm_fnv_feed(v->hash_seed, t, s.len));
    }
    /* a repeated pair keeps its first (lowest) rank */
    fill_slots(v, v->merge_slots, v->merge_mask, hash, n, same_merge, false, merge_usable);
    free(hash);
    v->n_merges = (int32_t)n;
    return 0;
}

/* A special-token id key: an id outside the vocabulary keeps the default (llama.cpp warns). */
static int get_id(const struct gguf_file *f, const char *key, int32_t n, int32_t *id,
                  struct llm_error *err)
{
    int64_t val;
    int rc = gguf_get_int(f, key, &val, err);
    if (rc > 0 && val >= 0 && val < n)
        *id = (int32_t)val;
    return rc < 0 ? -rc : 0;
}

static int get_flag(const struct gguf_file *f, const char *key, bool *flag, struct llm_error *err)
{
    int rc = gguf_get_bool(f, key, flag, err);
    return rc < 0 ? -rc : 0;
}

static int read_pre(struct vocab *v, const struct gguf_file *f, struct llm_error *err)
{
    struct gguf_str pre;
    int rc = gguf_get_str(f, KEY("pre"), &pre, err);
    if (rc < 0)
        return -rc;
    v->clean_spaces = true;
    if (rc == 0 || gguf_str_eq(pre, "default")) {
        v->pre = PRE_DEFAULT;
    } else if (gguf_str_eq(pre, "gpt-2")) {
        v->pre = PRE_GPT2;
    } else if (gguf_str_eq(pre, "qwen2") || gguf_str_eq(pre, "deepseek-r1-qwen")) {
        v->pre = PRE_QWEN2;
        v->clean_spaces = false;
    } else if (gguf_str_eq(pre, "llama3") || gguf_str_eq(pre, "llama-v3") ||
               gguf_str_eq(pre, "llama-bpe")) {
        v->pre = PRE_LLAMA3;
        v->ignore_merges = true;
        v->add_bos = true;
    } else {
        char name[300];
        llm_escape(name, sizeof name, pre.ptr, pre.len, 64, LLM_ESC_QUOTES);
        return llm_fail(err, LLM_ERR_UNSUPPORTED, "%s: unknown pre-tokenizer '%s'", f->path, name);
    }
    return 0;
}

/* Texts llama.cpp recognises when no id key names the token (first listed text present wins). */
static const char *const eot_texts[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
    "<|endoftext|>", "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL };
static const char *const eom_texts[] = { "<|eom_id|>", NULL };
static const char *const fim_pre_texts[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", NULL };
static const char *const fim_suf_texts[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", NULL };
static const char *const fim_mid_texts[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", NULL };
static const char *const fim_pad_texts[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", NULL };
static const char *const fim_rep_texts[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
    "<REPO>", "<reponame>", NULL };
static const char *const fim_sep_texts[] = { "<|file_sep|>", "<fim-sep>", "<file_sep>", NULL };
/* Tokens with these texts end generation (and are made CONTROL). */
static const char *const eog_texts[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>",
    "<|call|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<end_of_utterance>", "</s>", NULL };

static void make_control(struct vocab *v, int32_t id)
{
    if (id >= 0)
        v->tok[id].type = VOCAB_TT_CONTROL;
}

/* Fill *id from the first text found (and make that token CONTROL) unless a key already set it. */
static void detect(struct vocab *v, int32_t *id, const char *const *texts)
{
    if (*id >= 0)
        return;
    for (; *texts; texts++) {
        int32_t t = vocab_find(v, *texts, strlen(*texts));
        if (t >= 0) {
            *id = t;
            make_control(v, t);
            return;
        }
    }
}

static void mark_eog(struct vocab *v, int32_t id)
{
    if (id >= 0)
        v->tok[id].eog = true;
}

/* Every special-token id key llama.cpp reads, and where its value goes. Each one is read (and so
 * type-checked: an integer, else an error naming the key) even when we do not use the token. */
enum { S_BOS, S_EOS, S_UNK, S_EOT, S_EOM, S_SEP, S_PAD, S_CLS, S_MASK, S_FIM_PRE, S_FIM_SUF, S_FIM_MID,
       S_FIM_PAD, S_FIM_REP, S_FIM_SEP, N_SPECIAL_IDS };
static const struct { const char *key; int slot; } special_keys[] = {
    { KEY("bos_token_id"), S_BOS },         { KEY("eos_token_id"), S_EOS },
    { KEY("unknown_token_id"), S_UNK },     { KEY("eot_token_id"), S_EOT },
    { KEY("eom_token_id"), S_EOM },         { KEY("seperator_token_id"), S_SEP },
    { KEY("padding_token_id"), S_PAD },     { KEY("cls_token_id"), S_CLS },
    { KEY("mask_token_id"), S_MASK },       { KEY("fim_pre_token_id"), S_FIM_PRE },
    { KEY("prefix_token_id"), S_FIM_PRE },  { KEY("fim_suf_token_id"), S_FIM_SUF },
    { KEY("suffix_token_id"), S_FIM_SUF },  { KEY("fim_mid_token_id"), S_FIM_MID },
    { KEY("middle_token_id"), S_FIM_MID },  { KEY("fim_pad_token_id"), S_FIM_PAD },
    { KEY("fim_rep_token_id"), S_FIM_REP }, { KEY("fim_sep_token_id"), S_FIM_SEP },
};

static int read_specials(struct vocab *v, const struct gguf_file *f, struct llm_error *err)
{
    static const char *const *const fim_texts[6] = { fim_pre_texts, fim_suf_texts, fim_mid_texts,
                                                     fim_pad_texts, fim_rep_texts, fim_sep_texts };
    int32_t id[N_SPECIAL_IDS];
    for (int k = 0; k < N_SPECIAL_IDS; k++)
        id[k] = -1;
    id[S_BOS] = v->bos;
    id[S_EOS] = v->eos;
    id[S_UNK] = v->unk;
    id[S_EOT] = v->eot;
    int rc;
    for (size_t k = 0; k < sizeof special_keys / sizeof special_keys[0]; k++)
        if ((rc = get_id(f, special_keys[k].key, v->n_tokens, &id[special_keys[k].slot], err)) != 0)
            return rc;
    v->bos = id[S_BOS];
    v->eos = id[S_EOS];
    v->unk = id[S_UNK];
    v->eot = id[S_EOT];
    int32_t eom = id[S_EOM], *fim = &id[S_FIM_PRE];
    if ((rc = get_flag(f, KEY("add_bos_token"), &v->add_bos, err)) != 0 ||
        (rc = get_flag(f, KEY("add_eos_token"), &v->add_eos, err)) != 0 ||
        (rc = get_flag(f, KEY("add_space_prefix"), &v->add_space_prefix, err)) != 0)
        return rc;

    detect(v, &v->eot, eot_texts);
    detect(v, &eom, eom_texts);
    for (int k = 0; k < 6; k++)
        detect(v, &fim[k], fim_texts[k]);

    for (int k = 3; k < 6; k++) /* fim pad, repo, file separator */
        mark_eog(v, fim[k]);
    for (const char *const *t = eog_texts; *t; t++) {
        int32_t tid = vocab_find(v, *t, strlen(*t));
        mark_eog(v, tid);
        make_control(v, tid);
    }
    mark_eog(v, v->eos);
    mark_eog(v, v->eot);
    mark_eog(v, eom);
    return 0;
}

struct len_id {
    uint32_t len;
    int32_t id;
};

static int longer_first(const void *a, const void *b)
{
    const struct len_id *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool is_special(const struct vocab_token *t)
{
    return t->len > 0 && (t->type == VOCAB_TT_CONTROL || t->type == VOCAB_TT_USER_DEFINED ||
                          t->type == VOCAB_TT_UNKNOWN);
}

/* Partition candidates: CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first (ties by
 * id, so the order is deterministic). */
static int build_special_list(struct vocab *v)
{
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        n += is_special(&v->tok[i]);
    struct len_id *tmp = llm_calloc((size_t)n, sizeof *tmp);
    v->special = llm_calloc((size_t)n, sizeof *v->special);
    if (!tmp || !v->special) {
        free(tmp);
        return -1;
    }
    for (int32_t i = 0, k = 0; i < v->n_tokens; i++)
        if (is_special(&v->tok[i]))
            tmp[k++] = (struct len_id){ v->tok[i].len, i };
    qsort(tmp, (size_t)n, sizeof *tmp, longer_first);
    for (int32_t k = 0; k < n; k++)
        v->special[k] = tmp[k].id;
    v->n_special = n;
    free(tmp);
    return 0;
}

/* SPM byte fallback: <0xXX>, else a token whose text is the byte itself. */
static void build_byte_tokens(struct vocab *v)
{
    for (int b = 0; b < 256; b++) {
        static const char hex[] = "0123456789ABCDEF";
        char name[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' };
        char raw = (char)b;
        v->byte_tok[b] = vocab_find(v, name, sizeof name);
        if (v->byte_tok[b] < 0)
            v->byte_tok[b] = vocab_find(v, &raw, 1);
    }
}

int vocab_load(const struct gguf_file *f, struct vocab **out, struct llm_error *err)
{
    struct gguf_str model;
    *out = NULL;
    int rc = gguf_get_str(f, KEY("model"), &model, err);
    if (rc < 0)
        return -rc;
    if (rc == 0)
        return llm_fail(err, LLM_ERR_FORMAT, "%s: no vocabulary (" KEY("model") " missing)", f->path);

    struct vocab *v = calloc(1, sizeof *v);
    if (!v)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory loading the vocabulary");
    v->hash_seed = new_hash_seed(v);
    v->bos = v->eos = v->unk = v->eot = -1;
    if (gguf_str_eq(model, "llama")) {
        v->kind = VOCAB_SPM;
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_bos = true;
        v->add_space_prefix = true;
    } else if (gguf_str_eq(model, "gpt2")) {
        v->kind = VOCAB_BPE;
        v->bos = v->eos = 11; /* llama.cpp's placeholder defaults */
        if ((rc = read_pre(v, f, err)) != 0)
            goto fail;
    } else {
        char name[300];
        llm_escape(name, sizeof name, model.ptr, model.len, 64, LLM_ESC_QUOTES);
        rc = llm_fail(err, LLM_ERR_UNSUPPORTED, "%s: unsupported tokenizer model '%s'", f->path, name);
        goto fail;
    }
    if ((rc = load_tokens(v, f, err)) != 0)
        goto fail;
    if (v->kind == VOCAB_BPE && (rc = load_merges(v, f, err)) != 0)
        goto fail;
    /* defaults outside the vocabulary mean "none" */
    if (v->bos >= v->n_tokens)
        v->bos = -1;
    if (v->eos >= v->n_tokens)
        v->eos = -1;
    if (v->unk >= v->n_tokens)
        v->unk = -1;
    if ((rc = read_specials(v, f, err)) != 0)
        goto fail;
    if (build_special_list(v) < 0) {
        rc = llm_fail(err, LLM_ERR_NOMEM, "out of memory loading the vocabulary");
        goto fail;
    }
    if (v->kind == VOCAB_SPM)
        build_byte_tokens(v);
    *out = v;
    return 0;
fail:
    vocab_free(v);
    return rc;
}

void vocab_free(struct vocab *v)
{
    if (!v)
        return;
    free(v->tok);
    free(v->text);
    free(v->tok_slots);
    free(v->merge);
    free(v->merge_text);
    free(v->merge_slots);
    free(v->special);
    free(v);
}
