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

#endif
