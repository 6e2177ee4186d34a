#include "build.h"

#include <math.h>

/* W·x plus an optional bias. */
static struct llm_tensor *linear(struct llm_ctx *ctx, struct llm_tensor *w, struct llm_tensor *b,
                                 struct llm_tensor *x)
{
    struct llm_tensor *y = llm_mul_mat(ctx, w, x);
    return b ? llm_add(ctx, y, b) : y;
}

static struct llm_tensor *norm(struct llm_ctx *ctx, struct llm_tensor *x, struct llm_tensor *w,
                               float eps)
{
    return llm_mul(ctx, llm_rms_norm(ctx, x, eps), w);
}

/* Write this batch's K and V rows into the cache, then return views of the first n_kv cells as
 * [head_dim, n_kv, n_head_kv]. The views hang off the SET_ROWS nodes so attention runs after them. */
static void store_kv(struct llm_ctx *ctx, const struct llm_hparams *hp, struct llm_kv_cache *kv, int il,
                     const struct llm_build_inputs *in, struct llm_tensor *k, struct llm_tensor *v,
                     struct llm_tensor **k_view, struct llm_tensor **v_view)
{
    struct llm_tensor *kc = &kv->k[il], *vc = &kv->v[il];
    const int64_t n_embd_k = (int64_t)hp->n_embd_head_k * hp->n_head_kv;
    const int64_t n_embd_v = (int64_t)hp->n_embd_head_v * hp->n_head_kv;
    struct llm_tensor *ks = llm_set_rows(ctx, kc, llm_reshape_2d(ctx, k, n_embd_k, in->n_tokens), in->kv_idx);
    struct llm_tensor *vs = llm_set_rows(ctx, vc, llm_reshape_2d(ctx, v, n_embd_v, in->n_tokens), in->kv_idx);
    *k_view = llm_view_3d(ctx, ks, hp->n_embd_head_k, in->n_kv, hp->n_head_kv, kc->nb[1],
                          llm_row_size(kc->type, hp->n_embd_head_k), 0);
    *v_view = llm_view_3d(ctx, vs, hp->n_embd_head_v, in->n_kv, hp->n_head_kv, vc->nb[1],
                          llm_row_size(vc->type, hp->n_embd_head_v), 0);
}

/* Attention of q [hd, n_head, n] over the cache views; returns [n_head*hd_v, n]. */
static struct llm_tensor *attention(struct llm_ctx *ctx, const struct llm_hparams *hp,
                                    const struct llm_build_inputs *in, struct llm_tensor *q,
                                    struct llm_tensor *k, struct llm_tensor *v, bool flash_attn)
{
    const float scale = 1.0f / sqrtf((float)hp->n_embd_head_k);
    struct llm_tensor *qp = llm_permute(ctx, q, 0, 2, 1, 3); /* [hd, n, n_head] */
    struct llm_tensor *out;
    if (flash_attn) {
        out = llm_flash_attn(ctx, qp, k, v, in->mask, scale);           /* [hd_v, n_head, n] */
    } else {
        struct llm_tensor *kq = llm_mul_mat(ctx, k, qp);                  /* [n_kv, n, n_head] */
        kq = llm_soft_max(ctx, kq, in->mask, scale);
        struct llm_tensor *vt = llm_cont(ctx, llm_permute(ctx, v, 1, 0, 2, 3)); /* [n_kv, hd_v, kv] */
        struct llm_tensor *kqv = llm_mul_mat(ctx, vt, kq);               /* [hd_v, n, n_head] */
        out = llm_cont(ctx, llm_permute(ctx, kqv, 0, 2, 1, 3));           /* [hd_v, n_head, n] */
    }
    return llm_reshape_2d(ctx, out, (int64_t)hp->n_embd_head_v * hp->n_head, in->n_tokens);
}

/* A batch of at least this many tokens takes the FFN's gate and up products in one node, which
 * never holds both [n_ff, n] products in memory (a prefill's largest buffers); below it they are a
 * few MiB, and decode keeps the two products' own nodes. */
#define FFN_FUSE_MIN_TOKENS 32

/* SWIGLU(W_gate·h, W_up·h). The fused node runs both products on one plan, so it takes weights of
 * one type (the loader has given them one shape). */
static struct llm_tensor *ffn_swiglu(struct llm_ctx *ctx, const struct llm_layer *L, struct llm_tensor *h)
{
    if (h->ne[1] >= FFN_FUSE_MIN_TOKENS && L->ffn_gate->type == L->ffn_up->type)
        return llm_mul_mat_swiglu(ctx, L->ffn_gate, L->ffn_up, h);
    return llm_swiglu(ctx, llm_mul_mat(ctx, L->ffn_gate, h), llm_mul_mat(ctx, L->ffn_up, h));
}

struct llm_tensor *llm_build_forward(struct llm_ctx *ctx, const struct llm_model *m,
                                     struct llm_kv_cache *kv, const struct llm_build_inputs *in,
                                     bool flash_attn)
{
    const struct llm_hparams *hp = &m->hp;
    const int64_t n = in->n_tokens;
    const float eps = hp->f_norm_rms_eps;
    struct llm_tensor *x = in->layer_first > 0 ? in->embd : llm_get_rows(ctx, m->tok_embd, in->tokens);
    llm_set_name(x, "inp_embd"); /* [n_embd, n] */

    for (uint32_t il = (uint32_t)in->layer_first; il < (uint32_t)in->layer_end; il++) {
        const struct llm_layer *L = &m->layers[il];
        struct llm_tensor *h = norm(ctx, x, L->attn_norm, eps);

        struct llm_tensor *q = linear(ctx, L->wq, L->bq, h);
        struct llm_tensor *k = linear(ctx, L->wk, L->bk, h);
        struct llm_tensor *v = linear(ctx, L->wv, L->bv, h);
        q = llm_reshape_3d(ctx, q, hp->n_embd_head_k, hp->n_head, n);
        k = llm_reshape_3d(ctx, k, hp->n_embd_head_k, hp->n_head_kv, n);
        q = llm_rope(ctx, q, in->pos, m->rope_freqs, (int)hp->n_rot, hp->rope_type,
                     (int)hp->n_ctx_train, hp->rope_freq_base, hp->rope_freq_scale);
        k = llm_rope(ctx, k, in->pos, m->rope_freqs, (int)hp->n_rot, hp->rope_type,
                     (int)hp->n_ctx_train, hp->rope_freq_base, hp->rope_freq_scale);
        llm_set_name(q, "q_rope-%u", il);
        llm_set_name(k, "k_rope-%u", il);

        struct llm_tensor *kv_k, *kv_v;
        store_kv(ctx, hp, kv, (int)il, in, k, v, &kv_k, &kv_v);
        struct llm_tensor *a = attention(ctx, hp, in, q, kv_k, kv_v, flash_attn);
        a = linear(ctx, L->wo, L->bo, a);

        if (il == hp->n_layer - 1 && in->n_outputs < n) {
            /* Only the rows whose logits are wanted go through the rest of the network. */
            a = llm_get_rows(ctx, a, in->out_ids);
            x = llm_get_rows(ctx, x, in->out_ids);
        }
        struct llm_tensor *ffn_in = llm_add(ctx, a, x);
        llm_set_name(ffn_in, "ffn_inp-%u", il);

        h = norm(ctx, ffn_in, L->ffn_norm, eps);
        struct llm_tensor *g = ffn_swiglu(ctx, L, h);
        struct llm_tensor *f = llm_mul_mat(ctx, L->ffn_down, g);
        x = llm_add(ctx, f, ffn_in);
        llm_set_name(x, "l_out-%u", il);
    }
    if ((uint32_t)in->layer_end < hp->n_layer)
        return x; /* the next stage goes on from the residual */
    if (hp->n_layer == 0 && in->n_outputs < n)
        x = llm_get_rows(ctx, x, in->out_ids);
    x = norm(ctx, x, m->output_norm, eps);
    if (in->embeddings) {
        llm_set_name(x, "embd");
        return x;
    }
    struct llm_tensor *logits = linear(ctx, m->output, m->output_b, x);
    llm_set_name(logits, "logits");
    return logits;
}
