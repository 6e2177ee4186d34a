/* Tokenizers against llama.cpp: the test vectors ref/tokenizer/ggml-vocab-{llama-spm,gpt-2,qwen2}
 * .gguf.inp/.out (add_special = false, parse_special = false) and every line of
 * ref/tokenizer/extra.jsonl (ids and both detokenize round trips). The llama-bpe vectors run only
 * when models/vocab/ggml-vocab-llama-bpe.gguf exists: there is no Llama-3 vocabulary among the
 * fixtures today, so they are a counted and shown skip (the one legitimate skip; every other
 * missing file or $LLM is a failure). Also every ref/gen/NAME.json: prompt_ids, greedy text from
 * pieces, end-of-generation. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

#include "clock.h"
#include "harness.h"
#include "model/gguf.h"
#include "model/unicode.h"
#include "model/vocab.h"
#include "model/vocab_impl.h"

#define SEP "\n__ggml_vocab_test__\n"

struct loaded {
    struct gguf_file *f;
    struct vocab *v;
};

static struct loaded load(const char *rel)
{
    struct loaded l = { 0 };
    struct llm_error err = { 0 };
    const double t0 = llm_now_us();
    if (gguf_open(test_path(rel), &l.f, &err) != 0 || vocab_load(l.f, &l.v, &err) != 0) {
        fprintf(stderr, "cannot load %s: %s\n", rel, err.msg);
        gguf_close(l.f);
        l.f = NULL;
    }
    if (l.v)
        printf("loaded %s: %d tokens in %.1f ms\n", rel, vocab_n_tokens(l.v), (llm_now_us() - t0) / 1e3);
    return l;
}

static void unload(struct loaded *l)
{
    vocab_free(l->v);
    gguf_close(l->f);
}

static void print_case(const char *text, size_t len, const int32_t *got, int64_t n_got,
                       const int32_t *want, int64_t n_want)
{
    fprintf(stderr, "  text: \"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n')
            fprintf(stderr, "\\n");
        else if (c < 0x20 || c == '"' || c == '\\')
            fprintf(stderr, "\\x%02x", c);
        else
            fputc(c, stderr);
    }
    fprintf(stderr, "\"\n  got: ");
    for (int64_t i = 0; i < n_got; i++)
        fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "\n  want:");
    for (int64_t i = 0; i < n_want; i++)
        fprintf(stderr, " %d", want[i]);
    fputc('\n', stderr);
}

/* Tokenize into a fresh array (*n ids); exercises the "call again with more room" contract. */
static int32_t *tokenize(const struct vocab *v, const char *text, size_t len, bool add_special,
                         bool parse_special, int64_t *n)
{
    int32_t probe[4];
    int64_t total = vocab_tokenize(v, text, len, add_special, parse_special, probe, 4);
    int32_t *ids = malloc(((size_t)(total > 0 ? total : 0) + 1) * sizeof *ids);
    *n = vocab_tokenize(v, text, len, add_special, parse_special, ids, total);
    return ids;
}

static bool same_ids(const int32_t *a, int64_t na, const int32_t *b, int64_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

/* One CHECK per vector of ref/tokenizer/<name>.inp/.out. */
static void run_vectors(const char *name, const char *model)
{
    char rel[256];
    size_t inp_len, out_len;
    snprintf(rel, sizeof rel, "ref/tokenizer/%s.inp", name);
    char *inp = test_read_file(test_path(rel), &inp_len);
    snprintf(rel, sizeof rel, "ref/tokenizer/%s.out", name);
    char *out = test_read_file(test_path(rel), &out_len);
    struct loaded l = load(model);
    CHECK(inp && out && l.v, "%s: fixtures missing", name);
    if (!inp || !out || !l.v)
        goto done;
    int cases = 0;
    char *text = inp, *line = out;
    for (char *sep; (sep = strstr(text, SEP)); text = sep + strlen(SEP)) {
        char *eol = strchr(line, '\n');
        if (!eol)
            break;
        *eol = '\0';
        int32_t want[1024];
        int64_t n_want = 0;
        for (char *p = line, *q; n_want < 1024; p = q) {
            long id = strtol(p, &q, 10);
            if (q == p)
                break;
            want[n_want++] = (int32_t)id;
        }
        line = eol + 1;
        int64_t n;
        size_t len = (size_t)(sep - text);
        int32_t *got = tokenize(l.v, text, len, false, false, &n);
        bool ok = same_ids(got, n, want, n_want);
        CHECK(ok, "%s case %d", name, cases);
        if (!ok)
            print_case(text, len, got, n, want, n_want);
        free(got);
        cases++;
    }
    printf("%s: %d cases\n", name, cases);
    CHECK_EQ_INT(cases, 46);
done:
    unload(&l);
    free(inp);
    free(out);
}

static size_t hex_decode(const char *hex, char *out)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned b;
        sscanf(hex, "%2x", &b);
        out[n++] = (char)b;
    }
    return n;
}

static bool check_roundtrip(const struct vocab *v, const int32_t *ids, int64_t n, bool special,
                            const cJSON *text, const cJSON *hex)
{
    size_t len = vocab_detokenize(v, ids, n, special, NULL, 0);
    char *buf = malloc(len + 1);
    size_t len2 = vocab_detokenize(v, ids, n, special, buf, len);
    char *want = NULL;
    size_t want_len = 0;
    if (cJSON_IsString(hex)) {
        want = malloc(strlen(hex->valuestring) / 2 + 1);
        want_len = hex_decode(hex->valuestring, want);
    } else if (cJSON_IsString(text)) {
        want_len = strlen(text->valuestring);
        want = malloc(want_len + 1);
        memcpy(want, text->valuestring, want_len + 1);
    }
    bool ok = want && len == len2 && len == want_len && !memcmp(buf, want, len);
    if (!ok)
        fprintf(stderr, "  round trip (special=%d): got \"%.*s\" want \"%.*s\"\n", special,
                (int)len2, buf, (int)want_len, want ? want : "");
    free(buf);
    free(want);
    return ok;
}

/* One CHECK per line of ref/tokenizer/extra.jsonl: ids and both round trips. */
static void run_extra(void)
{
    static const char *const models[] = { "qwen2-tiny-f16.gguf", "stories260K.gguf",
                                          "llama-2-tiny-random.gguf" };
    struct loaded l[3];
    char rel[128];
    for (int i = 0; i < 3; i++) {
        snprintf(rel, sizeof rel, "models/%s", models[i]);
        l[i] = load(rel);
    }
    size_t len;
    char *all = test_read_file(test_path("ref/tokenizer/extra.jsonl"), &len);
    CHECK(all != NULL, "extra.jsonl missing");
    int lines = 0;
    for (char *p = all, *eol; p && *p; p = eol ? eol + 1 : NULL) {
        eol = strchr(p, '\n');
        if (eol)
            *eol = '\0';
        if (!*p)
            continue;
        lines++;
        cJSON *j = cJSON_Parse(p);
        const cJSON *model = cJSON_GetObjectItem(j, "model"), *text = cJSON_GetObjectItem(j, "text");
        const cJSON *jids = cJSON_GetObjectItem(j, "ids");
        const struct vocab *v = NULL;
        for (int i = 0; i < 3 && cJSON_IsString(model); i++)
            if (!strcmp(model->valuestring, models[i]))
                v = l[i].v;
        if (!v || !cJSON_IsString(text) || !cJSON_IsArray(jids)) {
            CHECK(false, "extra.jsonl line %d: unusable (model missing?)", lines);
            cJSON_Delete(j);
            continue;
        }
        int64_t n_want = cJSON_GetArraySize(jids), n;
        int32_t *want = malloc(((size_t)n_want + 1) * sizeof *want);
        for (int64_t i = 0; i < n_want; i++)
            want[i] = (int32_t)cJSON_GetArrayItem(jids, (int)i)->valueint;
        const char *t = text->valuestring;
        bool add_special = cJSON_IsTrue(cJSON_GetObjectItem(j, "add_special"));
        bool parse_special = cJSON_IsTrue(cJSON_GetObjectItem(j, "parse_special"));
        int32_t *got = tokenize(v, t, strlen(t), add_special, parse_special, &n);
        bool ids_ok = same_ids(got, n, want, n_want);
        /* round trips are of the reference ids, so they test detokenize on its own */
        bool rt = check_roundtrip(v, want, n_want, false, cJSON_GetObjectItem(j, "text_roundtrip"),
                                  cJSON_GetObjectItem(j, "text_roundtrip_hex"));
        bool rts = check_roundtrip(v, want, n_want, true,
                                   cJSON_GetObjectItem(j, "text_roundtrip_special"),
                                   cJSON_GetObjectItem(j, "text_roundtrip_special_hex"));
        CHECK(ids_ok && rt && rts, "extra.jsonl line %d (%s, add_special=%d parse_special=%d): "
              "ids %s, round trip %s, special round trip %s", lines, model->valuestring,
              add_special, parse_special, ids_ok ? "ok" : "DIFFER", rt ? "ok" : "DIFFER",
              rts ? "ok" : "DIFFER");
        if (!ids_ok)
            print_case(t, strlen(t), got, n, want, n_want);
        free(got);
        free(want);
        cJSON_Delete(j);
    }
    CHECK_EQ_INT(lines, 93);
    free(all);
    for (int i = 0; i < 3; i++)
        unload(&l[i]);
}

/* Vocabulary facts from ref/README.md and models/MODELS.md. */
static void run_vocab_facts(void)
{
    struct loaded q = load("models/qwen2-tiny-f16.gguf");
    struct loaded s = load("models/stories260K.gguf");
    CHECK(q.v && s.v, "models missing");
    if (q.v) {
        static const int32_t eog[] = { 128247, 151643, 151645, 151662, 151663, 151664 };
        int n_eog = 0;
        bool all = true;
        for (int32_t id = 0; id < vocab_n_tokens(q.v); id++)
            n_eog += vocab_is_eog(q.v, id);
        for (size_t i = 0; i < sizeof eog / sizeof eog[0]; i++)
            all = all && vocab_is_eog(q.v, eog[i]);
        CHECK(all && n_eog == 6, "qwen2 end-of-generation set: %d tokens", n_eog);
        CHECK(vocab_kind(q.v) == VOCAB_BPE && !vocab_add_bos(q.v) && vocab_bos(q.v) == 151643 &&
              vocab_eos(q.v) == 151645, "qwen2 specials");
        CHECK(vocab_token_type(q.v, 151659) == VOCAB_TT_CONTROL &&
              vocab_token_type(q.v, 151664) == VOCAB_TT_CONTROL &&
              vocab_token_type(q.v, 128247) == VOCAB_TT_CONTROL &&
              vocab_token_type(q.v, 151657) == VOCAB_TT_USER_DEFINED &&
              vocab_token_type(q.v, 151658) == VOCAB_TT_USER_DEFINED, "qwen2 forced CONTROL");
        char piece[64];
        size_t n = vocab_token_to_piece(q.v, 151645, false, piece, sizeof piece);
        CHECK_EQ_INT(n, 0);
        n = vocab_token_to_piece(q.v, 151645, true, piece, sizeof piece);
        CHECK(n == 10 && !memcmp(piece, "<|im_end|>", 10), "control piece with special");
        n = vocab_token_to_piece(q.v, 220, false, piece, 0); /* " " */
        CHECK_EQ_INT(n, 1);
        n = vocab_token_to_piece(q.v, 151700, true, piece, sizeof piece); /* [PAD151700], unused */
        CHECK_EQ_INT(n, 0);
    }
    if (s.v) {
        int n_eog = 0;
        for (int32_t id = 0; id < vocab_n_tokens(s.v); id++)
            n_eog += vocab_is_eog(s.v, id);
        CHECK(vocab_kind(s.v) == VOCAB_SPM && vocab_add_bos(s.v) && vocab_bos(s.v) == 1 &&
              vocab_eos(s.v) == 2 && n_eog == 1 && vocab_is_eog(s.v, 2), "stories260K specials");
        char piece[8];
        size_t n = vocab_token_to_piece(s.v, 3 + 0x41, false, piece, sizeof piece); /* <0x41> */
        CHECK(n == 1 && piece[0] == 'A', "byte token piece");
        /* truncated output still reports the full length */
        int32_t ids[8] = { 0 };
        CHECK(vocab_tokenize(s.v, "Hello world", 11, true, false, ids, 1) == 7 && ids[0] == 1 &&
              ids[1] == 0, "tokenize count beyond cap");
        vocab_tokenize(s.v, "Hello world", 11, true, false, ids, 8);
        char text[16] = "xxxxxxxxxxxxxxx";
        CHECK(vocab_detokenize(s.v, ids, 7, false, text, 4) == 12 && !memcmp(text, " Hel", 4) &&
              text[4] == 'x', "detokenize beyond cap");
        /* lead bytes swallowing part of an escaped space make more symbols than characters */
        const char *odd = "\xc3 \xc3 \xc3 \xc3 \xc3 \xc3 ";
        int64_t n_odd;
        int32_t *odd_ids = tokenize(s.v, odd, strlen(odd), false, false, &n_odd);
        bool in_range = n_odd >= 12;
        for (int64_t i = 0; i < n_odd; i++)
            in_range = in_range && odd_ids[i] >= 0 && odd_ids[i] < vocab_n_tokens(s.v);
        CHECK(in_range, "split escaped spaces: %lld ids", (long long)n_odd);
        free(odd_ids);
        /* without BOS the first token's prefix space is dropped */
        CHECK(vocab_detokenize(s.v, ids + 1, 6, false, text, sizeof text) == 11 &&
              !memcmp(text, "Hello world", 11), "SPM leading space");
    }
    unload(&q);
    unload(&s);

    /* gpt-2 keeps llama.cpp's clean-up of spaces before punctuation and contractions */
    struct loaded g = load("models/vocab/ggml-vocab-gpt-2.gguf");
    CHECK(g.v != NULL, "gpt-2 vocabulary missing");
    if (g.v) {
        const char *t = "Hello , world ! it 's ok . I 've";
        int64_t n;
        int32_t *ids = tokenize(g.v, t, strlen(t), false, false, &n);
        char out[64];
        size_t len = vocab_detokenize(g.v, ids, n, false, out, sizeof out);
        CHECK(len == 27 && !memcmp(out, "Hello, world! it's ok. I've", 27), "clean spaces: %.*s",
              (int)len, out);
        len = vocab_detokenize(g.v, ids, n, false, out, 5);
        CHECK(len == 27 && !memcmp(out, "Hello", 5), "clean spaces, small buffer");
        free(ids);
    }
    unload(&g);
}

static void run_load_errors(void)
{
    struct gguf_writer *w = gguf_writer_new();
    struct gguf_file *f = NULL;
    struct vocab *v = (struct vocab *)1;
    struct llm_error err = { 0 };
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_tokenizer_%d.gguf", (int)getpid());
    gguf_writer_add_str(w, "general.architecture", "llama");
    int rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    if (rc == 0)
        rc = gguf_open(path, &f, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (f) {
        rc = vocab_load(f, &v, &err);
        CHECK(rc != 0 && v == NULL && strstr(err.msg, "no vocabulary"), "no vocab: %s", err.msg);
        gguf_close(f);
    }
    remove(path);

    w = gguf_writer_new();
    struct gguf_str toks[2] = { { "a", 1 }, { "b", 1 } };
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", "no-such-pre");
    gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 2);
    rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    f = NULL;
    if (rc == 0)
        rc = gguf_open(path, &f, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (f) {
        rc = vocab_load(f, &v, &err);
        CHECK(rc == LLM_ERR_UNSUPPORTED && strstr(err.msg, "no-such-pre"), "bad pre: %s", err.msg);
        gguf_close(f);
    }
    remove(path);
}

static void run_unicode(void)
{
    uint32_t cp;
    CHECK(unicode_decode("\xc3\x84", 2, &cp) == 2 && cp == 0xC4, "2-byte");
    CHECK(unicode_decode("\xf0\x9f\xa6\x99", 4, &cp) == 4 && cp == 0x1F999, "4-byte");
    CHECK(unicode_decode("\x80", 1, &cp) == 1 && cp == UNICODE_REPLACEMENT, "stray continuation");
    CHECK(unicode_decode("\xe2\x96", 2, &cp) == 1 && cp == UNICODE_REPLACEMENT, "truncated");
    CHECK(unicode_decode("\xf4\x90\x80\x80", 4, &cp) == 1 && cp == UNICODE_REPLACEMENT, "> U+10FFFF");
    char buf[4];
    CHECK(unicode_encode(0x2581, buf) == 3 && !memcmp(buf, "\xe2\x96\x81", 3), "encode");
    CHECK(unicode_flags('a') == UCAT_LETTER && unicode_flags('7') == UCAT_NUMBER, "ascii");
    CHECK(unicode_flags(' ') == UCAT_SPACE && unicode_flags('\n') == UCAT_SPACE, "ascii space");
    CHECK(unicode_flags('!') == UCAT_PUNCT && unicode_flags('$') == 0, "ascii punct/symbol");
    CHECK(unicode_flags(0xBD) == UCAT_NUMBER, "½ is No");
    CHECK(unicode_flags(0xA0) == UCAT_SPACE && unicode_flags(0x3000) == UCAT_SPACE, "nbsp");
    CHECK(unicode_flags(0x4E2D) == UCAT_LETTER && unicode_flags(0x20000) == UCAT_LETTER, "CJK");
    CHECK(unicode_flags(0x0301) == 0 && unicode_flags(0x1F999) == 0, "mark, emoji");
    CHECK(unicode_flags(0x3002) == UCAT_PUNCT && unicode_flags(0x0660) == UCAT_NUMBER, "。٠");
}

static int32_t *json_ids(const cJSON *arr, int64_t *n)
{
    *n = cJSON_GetArraySize(arr);
    int32_t *ids = malloc(((size_t)*n + 1) * sizeof *ids);
    for (int64_t i = 0; i < *n; i++)
        ids[i] = (int32_t)cJSON_GetArrayItem(arr, (int)i)->valueint;
    return ids;
}

/* One CHECK per ref/gen/NAME.json: prompt_ids (add_special, parse_special), the greedy text as the
 * concatenated pieces of greedy_ids (special = false), and where generation stopped: only the
 * final token of an `eog` run ends generation. */
static void check_gen(const char *name, struct loaded *cache, char (*cache_names)[64], int *n_cache)
{
    char rel[512];
    size_t len;
    snprintf(rel, sizeof rel, "ref/gen/%s", name);
    char *raw = test_read_file(test_path(rel), &len);
    cJSON *j = raw ? cJSON_Parse(raw) : NULL;
    free(raw);
    const cJSON *model = cJSON_GetObjectItem(j, "model"), *prompt = cJSON_GetObjectItem(j, "prompt");
    const cJSON *hex = cJSON_GetObjectItem(j, "greedy_text_hex");
    if (!cJSON_IsString(model) || !cJSON_IsString(prompt)) {
        CHECK(false, "%s: unreadable", name);
        cJSON_Delete(j);
        return;
    }
    const struct vocab *v = NULL;
    for (int i = 0; i < *n_cache && !v; i++)
        if (!strcmp(cache_names[i], model->valuestring))
            v = cache[i].v;
    if (!v && *n_cache < 32) {
        snprintf(rel, sizeof rel, "models/%s", model->valuestring);
        snprintf(cache_names[*n_cache], 64, "%s", model->valuestring);
        cache[*n_cache] = load(rel);
        v = cache[(*n_cache)++].v;
    }
    if (!v) {
        CHECK(false, "%s: no vocabulary", name);
        cJSON_Delete(j);
        return;
    }
    int64_t n_want, n_greedy, n_got;
    int32_t *want = json_ids(cJSON_GetObjectItem(j, "prompt_ids"), &n_want);
    int32_t *greedy = json_ids(cJSON_GetObjectItem(j, "greedy_ids"), &n_greedy);
    const char *p = prompt->valuestring;
    int32_t *got = tokenize(v, p, strlen(p), true, true, &n_got);
    bool ids_ok = same_ids(got, n_got, want, n_want);

    size_t tl = 0, el;
    for (int64_t i = 0; i < n_greedy; i++)
        tl += vocab_token_to_piece(v, greedy[i], false, NULL, 0);
    char *text = malloc(tl + 1), *expect = NULL;
    size_t at = 0;
    for (int64_t i = 0; i < n_greedy; i++)
        at += vocab_token_to_piece(v, greedy[i], false, text + at, tl - at);
    if (cJSON_IsString(hex)) {
        expect = malloc(strlen(hex->valuestring) / 2 + 1);
        el = hex_decode(hex->valuestring, expect);
    } else {
        el = strlen(cJSON_GetObjectItem(j, "greedy_text")->valuestring);
        expect = malloc(el + 1);
        memcpy(expect, cJSON_GetObjectItem(j, "greedy_text")->valuestring, el);
    }
    bool text_ok = tl == el && !memcmp(text, expect, el);

    bool eog = cJSON_IsTrue(cJSON_GetObjectItem(j, "eog")), eog_ok = true;
    for (int64_t i = 0; i < n_greedy; i++)
        eog_ok = eog_ok && vocab_is_eog(v, greedy[i]) == (eog && i == n_greedy - 1);

    CHECK(ids_ok && text_ok && eog_ok, "%s: prompt ids %s, greedy text %s, eog %s", name,
          ids_ok ? "ok" : "DIFFER", text_ok ? "ok" : "DIFFER", eog_ok ? "ok" : "DIFFER");
    if (!ids_ok)
        print_case(p, strlen(p), got, n_got, want, n_want);
    free(text);
    free(expect);
    free(got);
    free(want);
    free(greedy);
    cJSON_Delete(j);
}

static void run_gen(void)
{
    struct loaded cache[32];
    char names[32][64];
    int n_cache = 0, files = 0;
    DIR *d = opendir(test_path("ref/gen"));
    CHECK(d != NULL, "ref/gen missing");
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) {
            check_gen(e->d_name, cache, names, &n_cache);
            files++;
        }
    }
    if (d)
        closedir(d);
    CHECK_EQ_INT(files, 60);
    for (int i = 0; i < n_cache; i++)
        unload(&cache[i]);
}

/* Word splits of each pre-tokenizer; expectations computed with Python's `regex` module on the
 * original expressions (listed in vocab_pretok.c). */
static void run_pretok(void)
{
    static const struct {
        enum vocab_pre pre;
        const char *text;
        uint32_t ends[16];
        size_t n;
    } cases[] = {
        { PRE_QWEN2, "ied 4 \xc2\xbd months", { 3, 4, 5, 6, 7, 14 }, 6 },
        { PRE_QWEN2, "I'M\r\n  ok", { 1, 3, 5, 6, 9 }, 5 },
        { PRE_LLAMA3, "12345 abc\n\n  x", { 3, 5, 9, 11, 12, 14 }, 6 },
        { PRE_GPT2, "Hello  world's 123 \t", { 5, 6, 12, 14, 18, 20 }, 6 },
        { PRE_DEFAULT, "a+b=12345, x's \xc2\xbd", { 1, 2, 3, 4, 7, 9, 10, 12, 13, 14, 15, 16 }, 12 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *t = cases[c].text;
        size_t len = strlen(t), n = 0;
        uint32_t cp[64], ends[64];
        uint8_t fl[64];
        for (size_t off = 0; off < len; n++) {
            off += unicode_decode(t + off, len - off, &cp[n]);
            fl[n] = (uint8_t)unicode_flags(cp[n]);
        }
        size_t nw = pretok_split(cases[c].pre, cp, fl, n, ends);
        CHECK(nw == cases[c].n && !memcmp(ends, cases[c].ends, nw * sizeof *ends),
              "pretok case %zu: %zu words", c, nw);
    }
}

/* bin/llm tokenize (the binary named by $LLM, as tests/run.sh sets it). */
static void run_tool(void)
{
    const char *llm = getenv("LLM");
    CHECK(llm && *llm && access(llm, X_OK) == 0, "LLM (the bin/llm to test, set by tests/run.sh) is %s%s",
          llm ? "not executable: " : "not set", llm ? llm : "");
    if (!llm || !*llm || access(llm, X_OK) != 0)
        return;
    char cmd[4096], out[4096];
    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' -p 'Hello world' --ids 2>&1", llm,
             test_path("models/stories260K.gguf"));
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    int rc = p ? pclose(p) : -1;
    CHECK(rc == 0 && !strcmp(out, "[1, 346, 306, 414, 263, 304, 341]\n"), "ids: %s", out);

    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' -p 'a<|im_end|>' --no-bos --parse-special 2>&1",
             llm, test_path("models/qwen2-tiny-f16.gguf"));
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    rc = p ? pclose(p) : -1;
    CHECK(rc == 0 && !strcmp(out, "    64 -> 'a'\n151645 -> '<|im_end|>'\n"), "pieces: %s", out);

    snprintf(cmd, sizeof cmd, "%s tokenize -m /nonexistent.gguf -p x 2>&1", llm);
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    rc = p ? pclose(p) : -1;
    CHECK(rc != 0 && !strncmp(out, "llm: error: ", 12) && strchr(out, '\n') == out + n - 1,
          "error line: %s", out);
}

int main(void)
{
    run_unicode();
    run_pretok();
    run_tool();
    run_load_errors();
    run_vectors("ggml-vocab-llama-spm.gguf", "models/vocab/ggml-vocab-llama-spm.gguf");
    run_vectors("ggml-vocab-gpt-2.gguf", "models/vocab/ggml-vocab-gpt-2.gguf");
    run_vectors("ggml-vocab-qwen2.gguf", "models/qwen2-tiny-f16.gguf");
    if (access(test_path("models/vocab/ggml-vocab-llama-bpe.gguf"), F_OK) == 0)
        run_vectors("ggml-vocab-llama-bpe.gguf", "models/vocab/ggml-vocab-llama-bpe.gguf");
    else
        SKIP("ggml-vocab-llama-bpe.gguf vectors: no Llama-3 vocabulary among the fixtures (%s)",
             test_path("models/vocab/ggml-vocab-llama-bpe.gguf"));
    run_extra();
    run_gen();
    run_vocab_facts();
    return test_done("test_tokenizer");
}
