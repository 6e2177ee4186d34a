/* Binary heap of struct bigram, and the merge loop both tokenizers run on it. */
#include "bigram_heap.h"

#include <stdlib.h>

#include "unicode.h"

static bool before(const struct bigram *a, const struct bigram *b)
{
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

bool bigram_push(struct bigram_heap *h, struct bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        struct bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&b, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return true;
}

bool bigram_pop(struct bigram_heap *h, struct bigram *out)
{
    if (h->n == 0)
        return false;
    *out = h->v[0];
    struct bigram last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return true;
}

void bigram_heap_free(struct bigram_heap *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

int32_t bigram_merge(const struct vocab *v, const char *s, size_t n, struct merge_sym *sy,
                     struct bigram_heap *h, merge_pair_fn pair)
{
    int32_t ns = 0;
    for (size_t off = 0; off < n; ns++) {
        size_t cl = unicode_len_utf8((unsigned char)s[off]);
        if (cl > n - off)
            cl = n - off;
        sy[ns] = (struct merge_sym){ (uint32_t)off, (uint32_t)cl, ns - 1, -1 };
        off += cl;
        sy[ns].next = off < n ? ns + 1 : -1;
    }
    h->n = 0;
    for (int32_t i = 1; i < ns; i++)
        if (!pair(v, s, sy, i - 1, i, h))
            return -1;
    struct bigram b;
    while (bigram_pop(h, &b)) {
        struct merge_sym *l = &sy[b.left], *r = &sy[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sy[r->next].prev = b.left;
        if (!pair(v, s, sy, l->prev, b.left, h) || !pair(v, s, sy, b.left, l->next, h))
            return -1;
    }
    return ns;
}
