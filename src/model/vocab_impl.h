/* Internals of the vocabulary shared by vocab*.c (not part of the public API). */
#ifndef LLM_VOCAB_IMPL_H
#define LLM_VOCAB_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "vocab.h"

/* BPE pre-tokenizer (llama.cpp's regex sets, hand-coded in vocab_pretok.c). */
enum vocab_pre { PRE_DEFAULT, PRE_GPT2, PRE_QWEN2, PRE_LLAMA3 };

struct vocab_token {
    uint32_t off;  /* text at vocab.text + off, NUL-terminated */
    uint32_t len;
    float score;   /* SPM merge priority (0 when absent) */
    uint8_t type;  /* enum vocab_token_type, after llama.cpp's overrides */
    bool eog;      /* in the end-of-generation set */
};

struct vocab_merge {
    uint32_t off;       /* "left right" at vocab.merge_text + off */
    uint32_t left_len;
    uint32_t right_len;
};

struct vocab {
    enum vocab_kind kind;
    enum vocab_pre pre;
    int32_t n_tokens;
    struct vocab_token *tok;
    char *text;                /* all token texts                                   */
    int32_t *tok_slots;        /* open addressing text → id, -1 = empty             */
    uint32_t tok_mask;         /* slots - 1 (power of two)                          */

    int32_t n_merges;          /* BPE only                                          */
    struct vocab_merge *merge;
    char *merge_text;
    int32_t *merge_slots;      /* open addressing (left, right) → rank, -1 = empty  */
    uint32_t merge_mask;

    int32_t *special;          /* partition candidates, longest text first          */
    int32_t n_special;
    int32_t byte_tok[256];     /* SPM byte fallback token per byte, -1 when none     */

    uint64_t hash_seed;        /* random per vocab: a file cannot aim its keys at one slot */
    uint64_t probes;           /* slots visited while filling the tables (work bound tests) */

    int32_t bos, eos, unk, eot; /* -1 = none */
    bool add_bos, add_eos;
    bool add_space_prefix;     /* SPM: prefix raw fragments after a special with ' ' */
    bool ignore_merges;        /* BPE: a word that is a token is emitted whole       */
    bool clean_spaces;         /* BPE detokenize: drop spaces before , . ! ? 's 'm 're 've */
};

/* Growable id list used while tokenizing. */
struct id_vec {
    int32_t *v;
    size_t n, cap;
    bool oom; /* an append failed; the list is incomplete */
};

void id_push(struct id_vec *out, int32_t id);

/* Hash of a key given in several pieces: start from v->hash_seed, llm_fnv_feed() each piece (hash.h),
 * then hash_end(). The final mix spreads every state bit into the table index bits, so with the
 * random seed a file cannot pick keys that share one slot (which would make loading quadratic). */
static inline uint32_t hash_end(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return (uint32_t)h;
}

/* Token id of exactly these bytes, or -1. */
int32_t vocab_find(const struct vocab *v, const char *s, size_t n);

/* Merge rank of the pair (left, right), or -1. */
int32_t vocab_merge_rank(const struct vocab *v, const char *l, size_t ln, const char *r, size_t rn);

/* Tokenize one raw-text fragment, appending ids (out->oom set on allocation failure). SPM:
 * space_prefix prepends one space before spaces are escaped as U+2581. */
void spm_tokenize(const struct vocab *v, const char *text, size_t len, bool space_prefix,
                  struct id_vec *out);
void bpe_tokenize(const struct vocab *v, const char *text, size_t len, struct id_vec *out);

/* Split n code points (with their UCAT_* flags) into words; writes each word's end index to ends
 * (capacity n) and returns the number of words. Returns SIZE_MAX on allocation failure. */
size_t pretok_split(enum vocab_pre pre, const uint32_t *cp, const uint8_t *fl, size_t n,
                    uint32_t *ends);

/* GPT-2 byte ↔ code point mapping. */
uint32_t bpe_byte_to_cp(unsigned char b);
int bpe_cp_to_byte(uint32_t cp); /* -1 when cp is not in the mapping */

#endif
