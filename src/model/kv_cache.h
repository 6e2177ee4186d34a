/* The KV cache of a context: one K and one V tensor per layer, each its own buffer in the memory
 * of the backend that runs the layer (so a layer and its cache can later live on different
 * devices). Written by SET_ROWS through an index input, so decode graphs keep fixed addresses. */
#ifndef LLM_KV_CACHE_H
#define LLM_KV_CACHE_H

#include "../backend.h"
#include "model.h"

#define LLM_KV_PAD 256 /* attention sees the cache in windows of this many cells */

struct llm_kv_cache {
    struct llm_tensor k[LLM_MAX_LAYERS]; /* [n_embd_k_gqa, n_cells] F16 or F32 */
    struct llm_tensor v[LLM_MAX_LAYERS]; /* [n_embd_v_gqa, n_cells], same type rules */
    int32_t n_layer;
    int32_t n_cells;                      /* allocated cells: n_ctx padded to 256 */
    int32_t n_used;                       /* cells holding tokens of the current sequence */
};

/* Allocate and zero the cache for n_ctx tokens, layer il's in the memory of layer_backends[il]
 * (zero, so that masked cells never hold NaNs that 0·x would spread); none for a NULL backend (a
 * layer another pipeline stage runs). */
int llm_kv_cache_init(struct llm_kv_cache *kv, const struct llm_hparams *hp, struct llm_backend *const *layer_backends,
                      int32_t n_ctx, enum llm_type type_k, enum llm_type type_v, struct llm_error *err);
void llm_kv_cache_release(struct llm_kv_cache *kv);

/* Cells attention must see after n_new more tokens: n_used + n_new padded to 256, ≤ n_cells. */
int32_t llm_kv_cache_window(const struct llm_kv_cache *kv, int32_t n_new);

#endif
