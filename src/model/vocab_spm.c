/* SentencePiece ("llama") tokenization of one raw fragment (src/model/README.md): escape spaces as
 * U+2581, split into UTF-8 characters, merge the best-scoring adjacent pair that forms a token
 * until none is left, then emit tokens with <0xXX> byte fallback. */
#include <stdlib.h>
#include <string.h>

#include "bigram_heap.h"
#include "unicode.h"
#include "vocab_impl.h"

static const char SPM_SPACE[3] = { '\xe2', '\x96', '\x81' }; /* U+2581 */

static bool try_pair(const struct vocab *v, const char *s, const struct merge_sym *sy, int32_t l,
                     int32_t r, struct bigram_heap *h)
{
    if (l < 0 || r < 0)
        return true;
    uint32_t size = sy[l].n + sy[r].n;
    int32_t id = vocab_find(v, s + sy[l].start, size);
    if (id < 0)
        return true;
    return bigram_push(h, (struct bigram){ v->tok[id].score, l, r, size });
}

static void emit(const struct vocab *v, const char *s, size_t n, struct id_vec *out)
{
    int32_t id = vocab_find(v, s, n);
    if (id >= 0) {
        id_push(out, id);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t b = v->byte_tok[(unsigned char)s[i]];
        if (b < 0)
            b = v->unk;
        if (b >= 0)
            id_push(out, b);
    }
}

void spm_tokenize(const struct vocab *v, const char *text, size_t len, bool space_prefix,
                  struct id_vec *out)
{
    size_t cap = 3 * (len + 1);
    char *s = malloc(cap);
    struct merge_sym *sy = malloc(cap * sizeof *sy); /* at most one symbol per escaped byte */
    struct bigram_heap heap = { 0 };
    bool ok = s && sy;
    size_t n = 0;
    if (ok) {
        if (space_prefix) {
            memcpy(s, SPM_SPACE, 3);
            n = 3;
        }
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ') {
                memcpy(s + n, SPM_SPACE, 3);
                n += 3;
            } else {
                s[n++] = text[i];
            }
        }
    }
    int32_t ns = ok ? bigram_merge(v, s, n, sy, &heap, try_pair) : -1;
    ok = ns >= 0;
    for (int32_t i = ns > 0 ? 0 : -1; ok && i >= 0; i = sy[i].next)
        emit(v, s + sy[i].start, sy[i].n, out);
    if (!ok)
        out->oom = true;
    bigram_heap_free(&heap);
    free(sy);
    free(s);
}
