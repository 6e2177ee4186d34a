#ifndef LLM_HASH_H
#define LLM_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a over n bytes, continuing from state h (start from LLM_FNV_SEED, or a seed of the caller's
 * own); a key in several pieces is hashed by feeding each piece in turn. Each step is a bijection of
 * the 64-bit state, so keys of equal length never collide in it. Not a cryptographic hash. */
#define LLM_FNV_SEED 0xcbf29ce484222325ull

static inline uint64_t llm_fnv_feed(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

#endif
