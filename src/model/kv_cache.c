#include "kv_cache.h"

#include <stdio.h>

static const enum llm_type cache_types[] = { LLM_TYPE_F32,  LLM_TYPE_F16,    LLM_TYPE_BF16,
                                             LLM_TYPE_Q8_0, LLM_TYPE_Q4_0,   LLM_TYPE_Q4_1,
                                             LLM_TYPE_IQ4_NL, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1 };

bool llm_kv_cache_type_ok(enum llm_type t)
{
    for (size_t i = 0; i < sizeof cache_types / sizeof cache_types[0]; i++)
        if (cache_types[i] == t)
            return true;
    return false;
}

int llm_kv_cache_type_from_name(const char *name)
{
    int t = llm_type_from_name(name);
    return t >= 0 && llm_kv_cache_type_ok((enum llm_type)t) ? t : -1;
}

int llm_kv_cache_check(const struct llm_hparams *hp, enum llm_type type_k, enum llm_type type_v, bool flash_attn,
                       struct llm_error *err)
{
    if (!llm_kv_cache_type_ok(type_k) || !llm_kv_cache_type_ok(type_v))
        return llm_fail(err, LLM_ERR_ARG, "KV cache type %s/%s: use f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1",
                        llm_type_name(type_k), llm_type_name(type_v));
    const int64_t bk = llm_type_info(type_k)->blck_size, bv = llm_type_info(type_v)->blck_size;
    if (bv > 1 && !flash_attn)
        return llm_fail(err, LLM_ERR_ARG, "a quantized V cache (%s) needs flash attention: use -fa on", llm_type_name(type_v));
    if (!hp)
        return LLM_OK;
    if (hp->n_embd_head_k % bk)
        return llm_fail(err, LLM_ERR_ARG, "K cache type %s with block size %lld does not divide the head dim %u",
                        llm_type_name(type_k), (long long)bk, hp->n_embd_head_k);
    if (hp->n_embd_head_v % bv)
        return llm_fail(err, LLM_ERR_ARG, "V cache type %s with block size %lld does not divide the head dim %u",
                        llm_type_name(type_v), (long long)bv, hp->n_embd_head_v);
    return LLM_OK;
}

static int32_t pad_to(int32_t n, int32_t m)
{
    return (n + m - 1) / m * m;
}

/* One [n_embd, n_cells] tensor of type in its own backend buffer, zeroed, its rows (cells) padded
 * as b's kernels want them (the npu's ALIGN rows, src/npu/layout.h). */
static int cache_tensor(struct llm_backend *b, struct llm_tensor *t, enum llm_type type, int64_t n_embd,
                        int32_t n_cells, const char *name, uint32_t il, struct llm_error *err)
{
    *t = (struct llm_tensor){ .type = type, .ne = { n_embd, n_cells, 1, 1 } };
    t->nb[0] = llm_type_info(type)->type_size;
    t->nb[1] = llm_row_size(type, n_embd);
    t->nb[2] = t->nb[3] = t->nb[1] * (size_t)n_cells;
    if (b->iface->weight_row_align)
        llm_pad_rows(t, b->iface->weight_row_align(b, t));
    const size_t bytes = t->nb[2];
    snprintf(t->name, sizeof t->name, "%s_l%u", name, il);
    struct llm_buffer *buf = llm_buffer_new(b, bytes);
    if (!buf)
        return llm_backend_alloc_failed(b, t->name, bytes, err);
    llm_buffer_place(buf, t, 0);
    return llm_tensor_memset(t, 0, 0, bytes, err);
}

int llm_kv_cache_init(struct llm_kv_cache *kv, const struct llm_hparams *hp, struct llm_backend *const *layer_backends,
                      int32_t n_ctx, enum llm_type type_k, enum llm_type type_v, struct llm_error *err)
{
    *kv = (struct llm_kv_cache){ .n_cells = pad_to(n_ctx, LLM_KV_PAD) };
    const int64_t n_k = (int64_t)hp->n_embd_head_k * hp->n_head_kv;
    const int64_t n_v = (int64_t)hp->n_embd_head_v * hp->n_head_kv;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct llm_backend *b = layer_backends[il];
        kv->n_layer = (int32_t)il + 1; /* what release must free from here on */
        if (!b)
            continue; /* another pipeline stage's layer */
        int rc = cache_tensor(b, &kv->k[il], type_k, n_k, kv->n_cells, "cache_k", il, err);
        if (!rc)
            rc = cache_tensor(b, &kv->v[il], type_v, n_v, kv->n_cells, "cache_v", il, err);
        if (rc)
            return rc;
    }
    return LLM_OK;
}

void llm_kv_cache_release(struct llm_kv_cache *kv)
{
    for (int32_t il = 0; il < kv->n_layer; il++) {
        llm_buffer_free(kv->k[il].buffer);
        llm_buffer_free(kv->v[il].buffer);
    }
    kv->n_layer = 0;
}

size_t llm_kv_cache_cell_bytes(const struct llm_kv_cache *kv)
{
    size_t bytes = 0;
    for (int32_t il = 0; il < kv->n_layer; il++)
        bytes += kv->k[il].buffer ? kv->k[il].nb[1] + kv->v[il].nb[1] : 0;
    return bytes;
}

int32_t llm_kv_cache_window(const struct llm_kv_cache *kv, int32_t n_new)
{
    int32_t n = pad_to(kv->n_used + n_new, LLM_KV_PAD);
    return n < kv->n_cells ? n : kv->n_cells;
}
