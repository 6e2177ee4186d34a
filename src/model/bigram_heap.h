/* Priority queue of merge candidates shared by the SPM and BPE tokenizers: highest prio first,
 * ties broken by the smaller left symbol index (llama.cpp's order). */
#ifndef LLM_BIGRAM_HEAP_H
#define LLM_BIGRAM_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bigram {
    double prio;         /* SPM: merged token's score; BPE: -rank          */
    int32_t left, right; /* symbol indices                                 */
    uint32_t size;       /* byte length of left+right when pushed (staleness) */
};

struct bigram_heap {
    struct bigram *v;
    size_t n, cap;
};

/* Returns false on allocation failure (the heap is unchanged). */
bool bigram_push(struct bigram_heap *h, struct bigram b);
/* Removes the best entry into *out; false when empty. */
bool bigram_pop(struct bigram_heap *h, struct bigram *out);
void bigram_heap_free(struct bigram_heap *h);

/* A symbol of the word being merged: bytes [start, start + n) of the text, linked to its
 * neighbours; n = 0 once it has been merged into its left neighbour. */
struct merge_sym {
    uint32_t start, n;
    int32_t prev, next;
};

struct vocab;

/* Scores the pair of symbols (l, r) and pushes it when the tokenizer may merge it; l or r may be
 * -1 (no pair, nothing to do). False on allocation failure. */
typedef bool (*merge_pair_fn)(const struct vocab *v, const char *s, const struct merge_sym *sy,
                              int32_t l, int32_t r, struct bigram_heap *h);

/* Split s[0..n) into UTF-8 characters (sy has room for n), then merge the best candidate pair as
 * long as there is one, skipping stale entries. Returns the number of initial symbols (walk the
 * result from sy[0] by next), or -1 on allocation failure. */
int32_t bigram_merge(const struct vocab *v, const char *s, size_t n, struct merge_sym *sy,
                     struct bigram_heap *h, merge_pair_fn pair);

#endif
