/* The KV cache of a context: one K and one V tensor per layer, each its own buffer in the memory
 * of the backend that runs the layer (so a layer and its cache can later live on different
 * devices). Written by SET_ROWS through an index input, so decode graphs keep fixed addresses. */
#ifndef LLM_KV_CACHE_H
#define LLM_KV_CACHE_H

#include "backend.h"
#include "model.h"

#define LLM_KV_PAD 256 /* attention sees the cache in windows of this many cells */

struct llm_kv_cache {
    struct llm_tensor k[LLM_MAX_LAYERS]; /* [n_embd_k_gqa, n_cells], a llm_kv_cache_type_ok type */
    struct llm_tensor v[LLM_MAX_LAYERS]; /* [n_embd_v_gqa, n_cells], same type rules */
    int32_t n_layer;
    int32_t n_cells;                      /* allocated cells: n_ctx padded to 256 */
    int32_t n_used;                       /* cells holding tokens of the current sequence */
};

/* The cache types a context takes (llama-bench's list): F32, F16, BF16, Q8_0, Q4_0, Q4_1, IQ4_NL,
 * Q5_0, Q5_1. The quantized ones are written a row of whole blocks at a time and read block by
 * block by FLASH_ATTN, so their block size must divide the head dim, and a quantized V needs
 * flash attention (the unfused path transposes V). */
bool llm_kv_cache_type_ok(enum llm_type t);
/* The cache type of a name as llama.cpp's -ctk/-ctv take it ("q8_0", case ignored), or -1. */
int llm_kv_cache_type_from_name(const char *name);
/* Checks those rules for a model's head dims (hp NULL: the rules that need no model, the types
 * and flash attention): LLM_OK, or LLM_ERR_ARG with one line naming the type and the rule. */
int llm_kv_cache_check(const struct llm_hparams *hp, enum llm_type type_k, enum llm_type type_v, bool flash_attn,
                       struct llm_error *err);

/* Allocate and zero the cache for n_ctx tokens, layer il's in the memory of layer_backends[il]
 * (zero, so that masked cells never hold NaNs that 0·x would spread); none for a NULL backend (a
 * layer another pipeline stage runs). */
int llm_kv_cache_init(struct llm_kv_cache *kv, const struct llm_hparams *hp, struct llm_backend *const *layer_backends,
                      int32_t n_ctx, enum llm_type type_k, enum llm_type type_v, struct llm_error *err);
void llm_kv_cache_release(struct llm_kv_cache *kv);
/* Bytes one cell takes over the layers this cache holds: K and V rows of every layer. */
size_t llm_kv_cache_cell_bytes(const struct llm_kv_cache *kv);

/* Cells attention must see after n_new more tokens: n_used + n_new padded to 256, ≤ n_cells. */
int32_t llm_kv_cache_window(const struct llm_kv_cache *kv, int32_t n_new);

#endif
