/* Binary heap of struct bigram. */
#include "bigram_heap.h"

#include <stdlib.h>

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
