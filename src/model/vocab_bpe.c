/* Byte-level BPE ("gpt2") tokenization of one raw fragment (src/model/README.md): decode to code
 * points, pre-tokenize into words, byte-encode each word through the GPT-2 byte→unicode table and
 * merge adjacent symbols by lowest merge rank. */
#include <stdlib.h>
#include <string.h>

#include "bigram_heap.h"
#include "unicode.h"
#include "vocab_impl.h"

/* Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves; the other 68 map in byte order
 * to U+0100.. (0x00-0x20 → U+0100.., 0x7F-0xA0 → U+0121.., 0xAD → U+0143). */
uint32_t bpe_byte_to_cp(unsigned char b)
{
    if (b <= 0x20)
        return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x121u + (b - 0x7Fu);
    if (b == 0xAD)
        return 0x143u;
    return b;
}

int bpe_cp_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120)
        return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142)
        return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143)
        return 0xAD;
    return -1;
}

struct bpe_scratch {
    char *enc;          /* byte-encoded word */
    size_t enc_cap;
    struct merge_sym *sy;
    size_t sy_cap;
    struct bigram_heap heap;
};

static bool try_pair(const struct vocab *v, const char *s, const struct merge_sym *sy, int32_t l,
                     int32_t r, struct bigram_heap *h)
{
    if (l < 0 || r < 0)
        return true;
    int32_t rank = vocab_merge_rank(v, s + sy[l].start, sy[l].n, s + sy[r].start, sy[r].n);
    if (rank < 0)
        return true;
    return bigram_push(h, (struct bigram){ -(double)rank, l, r, sy[l].n + sy[r].n });
}

static void emit(const struct vocab *v, const char *s, size_t n, struct id_vec *out)
{
    int32_t id = vocab_find(v, s, n);
    if (id >= 0) {
        id_push(out, id);
        return;
    }
    for (size_t i = 0; i < n; i++) { /* rare: single-byte tokens of the symbol's bytes */
        id = vocab_find(v, s + i, 1);
        if (id >= 0)
            id_push(out, id);
    }
}

/* Merge one encoded word s[0..n) and emit its tokens. */
static bool bpe_word(const struct vocab *v, const char *s, size_t n, struct bpe_scratch *w,
                     struct id_vec *out)
{
    if (v->ignore_merges) {
        int32_t id = vocab_find(v, s, n);
        if (id >= 0) {
            id_push(out, id);
            return true;
        }
    }
    if (n > w->sy_cap) {
        struct merge_sym *p = realloc(w->sy, n * sizeof *p);
        if (!p)
            return false;
        w->sy = p;
        w->sy_cap = n;
    }
    struct merge_sym *sy = w->sy;
    int32_t ns = bigram_merge(v, s, n, sy, &w->heap, try_pair);
    if (ns < 0)
        return false;
    for (int32_t i = ns > 0 ? 0 : -1; i >= 0; i = sy[i].next)
        emit(v, s + sy[i].start, sy[i].n, out);
    return true;
}

/* UTF-8 of the code points cp[0..n) with every byte replaced by its mapped code point. */
static bool encode_word(const uint32_t *cp, size_t n, struct bpe_scratch *w, size_t *len)
{
    size_t need = 8 * n; /* 4 bytes per code point, each mapped to at most 2 bytes */
    if (need > w->enc_cap) {
        char *p = realloc(w->enc, need);
        if (!p)
            return false;
        w->enc = p;
        w->enc_cap = need;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char raw[4];
        size_t rl = unicode_encode(cp[i], raw);
        for (size_t j = 0; j < rl; j++)
            k += unicode_encode(bpe_byte_to_cp((unsigned char)raw[j]), w->enc + k);
    }
    *len = k;
    return true;
}

void bpe_tokenize(const struct vocab *v, const char *text, size_t len, struct id_vec *out)
{
    uint32_t *cp = malloc((len + 1) * sizeof *cp);
    uint8_t *fl = malloc(len + 1);
    uint32_t *ends = malloc((len + 1) * sizeof *ends);
    struct bpe_scratch w = { 0 };
    bool ok = cp && fl && ends;
    size_t n = 0;
    for (size_t off = 0; ok && off < len; n++) {
        off += unicode_decode(text + off, len - off, &cp[n]);
        fl[n] = (uint8_t)unicode_flags(cp[n]);
    }
    size_t nw = ok ? pretok_split(v->pre, cp, fl, n, ends) : 0;
    if (nw == SIZE_MAX)
        ok = false;
    for (size_t i = 0, start = 0; ok && i < nw; start = ends[i++]) {
        size_t el;
        ok = encode_word(cp + start, ends[i] - start, &w, &el) && bpe_word(v, w.enc, el, &w, out);
    }
    if (!ok)
        out->oom = true;
    bigram_heap_free(&w.heap);
    free(w.sy);
    free(w.enc);
    free(ends);
    free(fl);
    free(cp);
}
