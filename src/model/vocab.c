/* Special-token partitioning and the tokenize entry point (the tables it reads: vocab_table.c). */
#include <stdlib.h>
#include <string.h>

#include "vocab_impl.h"

/* A piece of the input: a matched special token (tok >= 0) or raw text [off, off+len). */
struct frag {
    int32_t tok;
    size_t off, len;
};

struct frag_vec {
    struct frag *v;
    size_t n, cap;
};

static bool frag_push(struct frag_vec *fv, struct frag f)
{
    if (fv->n == fv->cap) {
        size_t cap = fv->cap ? 2 * fv->cap : 16;
        struct frag *p = realloc(fv->v, cap * sizeof *p);
        if (!p)
            return false;
        fv->v = p;
        fv->cap = cap;
    }
    fv->v[fv->n++] = f;
    return true;
}

/* Split every raw fragment of *cur at each occurrence of token id's text, left to right. */
static bool split_on(const struct vocab *v, const char *text, int32_t id, struct frag_vec *cur,
                     struct frag_vec *next)
{
    const char *tt = v->text + v->tok[id].off;
    size_t tl = v->tok[id].len;
    next->n = 0;
    for (size_t i = 0; i < cur->n; i++) {
        struct frag f = cur->v[i];
        if (f.tok >= 0 || f.len < tl) {
            if (!frag_push(next, f))
                return false;
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        const char *hit;
        while (pos < end && (hit = memmem(text + pos, end - pos, tt, tl))) {
            size_t at = (size_t)(hit - text);
            if (at > pos && !frag_push(next, (struct frag){ -1, pos, at - pos }))
                return false;
            if (!frag_push(next, (struct frag){ id, at, tl }))
                return false;
            pos = at + tl;
        }
        if (pos < end && !frag_push(next, (struct frag){ -1, pos, end - pos }))
            return false;
    }
    struct frag_vec t = *cur;
    *cur = *next;
    *next = t;
    return true;
}

/* Special-token partitioning (src/model/README.md): longest candidates first; with !parse_special
 * only USER_DEFINED tokens are matched. */
static bool partition(const struct vocab *v, const char *text, size_t len, bool parse_special,
                      struct frag_vec *frags)
{
    struct frag_vec spare = { 0 };
    bool ok = frag_push(frags, (struct frag){ -1, 0, len });
    for (int32_t k = 0; ok && k < v->n_special; k++) {
        int32_t id = v->special[k];
        int ty = v->tok[id].type;
        if (!parse_special && (ty == VOCAB_TT_CONTROL || ty == VOCAB_TT_UNKNOWN))
            continue;
        ok = split_on(v, text, id, frags, &spare);
    }
    free(spare.v);
    return ok;
}

int64_t vocab_tokenize(const struct vocab *v, const char *text, size_t len, bool add_special,
                       bool parse_special, int32_t *ids, int64_t cap)
{
    struct id_vec out = { 0 };
    struct frag_vec frags = { 0 };
    if (len > VOCAB_MAX_TEXT)
        return -1;
    if (add_special && v->add_bos && v->bos >= 0)
        id_push(&out, v->bos);
    if (len > 0 && !partition(v, text, len, parse_special, &frags))
        out.oom = true;
    bool prev_special = true; /* SPM: the first raw fragment gets the space prefix too */
    for (size_t i = 0; i < frags.n && !out.oom; i++) {
        const struct frag *f = &frags.v[i];
        if (f->tok >= 0) {
            id_push(&out, f->tok);
            prev_special = true;
        } else if (v->kind == VOCAB_SPM) {
            spm_tokenize(v, text + f->off, f->len, v->add_space_prefix && prev_special, &out);
            prev_special = false;
        } else {
            bpe_tokenize(v, text + f->off, f->len, &out);
        }
    }
    if (add_special && v->add_eos && v->eos >= 0)
        id_push(&out, v->eos);
    free(frags.v);
    if (out.oom) {
        free(out.v);
        return -1;
    }
    for (size_t i = 0; i < out.n && (int64_t)i < cap; i++)
        ids[i] = out.v[i];
    free(out.v);
    return (int64_t)out.n;
}
