#include "kv_cache.h"

#include <stdio.h>

static int32_t pad_to(int32_t n, int32_t m)
{
    return (n + m - 1) / m * m;
}

/* One [n_embd, n_cells] tensor of type in its own backend buffer, zeroed. */
static int cache_tensor(struct llm_backend *b, struct llm_tensor *t, enum llm_type type, int64_t n_embd,
                        int32_t n_cells, const char *name, uint32_t il, struct llm_error *err)
{
    const size_t row = llm_row_size(type, n_embd), bytes = row * (size_t)n_cells;
    *t = (struct llm_tensor){ .type = type, .ne = { n_embd, n_cells, 1, 1 } };
    t->nb[0] = llm_type_info(type)->type_size;
    t->nb[1] = row;
    t->nb[2] = t->nb[3] = bytes;
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

int32_t llm_kv_cache_window(const struct llm_kv_cache *kv, int32_t n_new)
{
    int32_t n = pad_to(kv->n_used + n_new, LLM_KV_PAD);
    return n < kv->n_cells ? n : kv->n_cells;
}
