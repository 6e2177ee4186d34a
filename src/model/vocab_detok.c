/* Token → bytes (llama_token_to_piece) and llama_detokenize with remove_special = false. */
#include <stdlib.h>
#include <string.h>

#include "unicode.h"
#include "vocab_impl.h"

/* Output that counts every byte but stores only the first cap. */
struct sink {
    char *buf;
    size_t cap, n;
    bool strip; /* drop one leading ' ' of the next non-empty write */
};

static void put(struct sink *s, const char *p, size_t len)
{
    if (len && s->strip) {
        if (*p == ' ') {
            p++;
            len--;
        }
        s->strip = false;
    }
    if (s->n < s->cap)
        memcpy(s->buf + s->n, p, len < s->cap - s->n ? len : s->cap - s->n);
    s->n += len;
}

static void put_spm_normal(struct sink *s, const char *t, size_t len)
{
    size_t start = 0;
    for (size_t i = 0; i + 3 <= len; i++) {
        if (!memcmp(t + i, "\xe2\x96\x81", 3)) { /* U+2581 → space */
            put(s, t + start, i - start);
            put(s, " ", 1);
            start = i + 3;
            i += 2;
        }
    }
    put(s, t + start, len - start);
}

static void put_bpe_normal(struct sink *s, const char *t, size_t len)
{
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t cl = unicode_decode(t + i, len - i, &cp);
        int b = bpe_cp_to_byte(cp);
        if (b >= 0) {
            char c = (char)b;
            put(s, &c, 1);
        } else { /* not a mapped byte: shown as its UTF-8 in hex, like llama.cpp */
            static const char hex[] = "0123456789abcdef";
            put(s, "[UNK_BYTE_0x", 12);
            for (size_t k = 0; k < cl; k++) {
                unsigned char u = (unsigned char)t[i + k];
                char h[2] = { hex[u >> 4], hex[u & 15] };
                put(s, h, 2);
            }
            put(s, "]", 1);
        }
        i += cl;
    }
}

/* "<0xXX>" → the byte */
static char byte_of(const char *t, size_t len)
{
    unsigned v = 0;
    for (size_t i = 3; i < len; i++) {
        char c = t[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16u;
        if (d == 16)
            break;
        v = v * 16 + d;
    }
    return (char)v;
}

static void piece(const struct vocab *v, int32_t id, bool special, struct sink *s)
{
    if (id < 0 || id >= v->n_tokens)
        return;
    const struct vocab_token *t = &v->tok[id];
    const char *text = v->text + t->off;
    switch (t->type) {
    case VOCAB_TT_CONTROL:
    case VOCAB_TT_UNKNOWN:
        if (special)
            put(s, text, t->len);
        break;
    case VOCAB_TT_USER_DEFINED:
        put(s, text, t->len);
        break;
    case VOCAB_TT_NORMAL:
        if (v->kind == VOCAB_SPM)
            put_spm_normal(s, text, t->len);
        else
            put_bpe_normal(s, text, t->len);
        break;
    case VOCAB_TT_BYTE:
        if (v->kind == VOCAB_SPM) {
            char b = byte_of(text, t->len);
            put(s, &b, 1);
        }
        break;
    default: /* unused / undefined tokens print nothing */
        break;
    }
}

size_t vocab_token_to_piece(const struct vocab *v, int32_t id, bool special, char *buf, size_t cap)
{
    struct sink s = { buf, cap, 0, false };
    piece(v, id, special, &s);
    return s.n;
}

static size_t render(const struct vocab *v, const int32_t *ids, int64_t n, bool special,
                     char *buf, size_t cap)
{
    struct sink s = { buf, cap, 0, false };
    for (int64_t i = 0; i < n; i++) {
        s.strip = i == 0 && v->add_space_prefix; /* the SPM prefix space of the first token */
        piece(v, ids[i], special, &s);
    }
    return s.n;
}

/* A space dropped by clean-up: before , . ! ? and before 's 'm 're 've. */
static bool drop_space(const char *t, size_t r, size_t n)
{
    if (r + 1 >= n)
        return false;
    char c = t[r + 1];
    if (c == '?' || c == '!' || c == '.' || c == ',')
        return true;
    if (c != '\'' || r + 2 >= n)
        return false;
    char x1 = t[r + 2];
    if (x1 == 's' || x1 == 'm')
        return true;
    return r + 3 < n && (x1 == 'r' || x1 == 'v') && t[r + 3] == 'e';
}

static size_t clean_spaces(char *t, size_t n)
{
    size_t w = 0;
    for (size_t r = 0; r < n; r++)
        if (t[r] != ' ' || !drop_space(t, r, n))
            t[w++] = t[r];
    return w;
}

size_t vocab_detokenize(const struct vocab *v, const int32_t *ids, int64_t n, bool special,
                        char *buf, size_t cap)
{
    size_t len = render(v, ids, n, special, buf, cap);
    if (!v->clean_spaces)
        return len;
    if (len <= cap)
        return clean_spaces(buf, len);
    char *tmp = malloc(len);
    if (!tmp)
        return SIZE_MAX;
    render(v, ids, n, special, tmp, len);
    len = clean_spaces(tmp, len);
    if (cap)
        memcpy(buf, tmp, len < cap ? len : cap);
    free(tmp);
    return len;
}
