/* The vocabulary's tables: token accessors, lookup by text, merge ranks, and the growing id list
 * the tokenizers fill. */
#include <stdlib.h>
#include <string.h>

#include "vocab_impl.h"

enum vocab_kind vocab_kind(const struct vocab *v) { return v->kind; }
int32_t vocab_n_tokens(const struct vocab *v) { return v->n_tokens; }
int32_t vocab_bos(const struct vocab *v) { return v->bos; }
int32_t vocab_eos(const struct vocab *v) { return v->eos; }
bool vocab_add_bos(const struct vocab *v) { return v->add_bos; }

bool vocab_is_eog(const struct vocab *v, int32_t id)
{
    return id >= 0 && id < v->n_tokens && v->tok[id].eog;
}

int vocab_token_type(const struct vocab *v, int32_t id)
{
    return id >= 0 && id < v->n_tokens ? v->tok[id].type : VOCAB_TT_UNDEFINED;
}

const char *vocab_token_text(const struct vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n_tokens) {
        *len = 0;
        return NULL;
    }
    *len = v->tok[id].len;
    return v->text + v->tok[id].off;
}

int32_t vocab_find(const struct vocab *v, const char *s, size_t n)
{
    uint32_t h = hash_end(llm_fnv_feed(v->hash_seed, s, n)) & v->tok_mask;
    for (;; h = (h + 1) & v->tok_mask) {
        int32_t id = v->tok_slots[h];
        if (id < 0)
            return -1;
        if (v->tok[id].len == n && !memcmp(v->text + v->tok[id].off, s, n))
            return id;
    }
}

int32_t vocab_merge_rank(const struct vocab *v, const char *l, size_t ln, const char *r, size_t rn)
{
    if (!v->merge_slots)
        return -1;
    uint32_t h = hash_end(llm_fnv_feed(llm_fnv_feed(llm_fnv_feed(v->hash_seed, l, ln), " ", 1), r, rn)) & v->merge_mask;
    for (;; h = (h + 1) & v->merge_mask) {
        int32_t k = v->merge_slots[h];
        if (k < 0)
            return -1;
        const struct vocab_merge *m = &v->merge[k];
        const char *t = v->merge_text + m->off;
        if (m->left_len == ln && m->right_len == rn && !memcmp(t, l, ln) && !memcmp(t + ln + 1, r, rn))
            return k;
    }
}

void id_push(struct id_vec *out, int32_t id)
{
    if (out->oom)
        return;
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 64;
        int32_t *p = realloc(out->v, cap * sizeof *p);
        if (!p) {
            out->oom = true;
            return;
        }
        out->v = p;
        out->cap = cap;
    }
    out->v[out->n++] = id;
}
