/* The forward graph of llama and qwen2 for one micro-batch (src/model/README.md: forward pass). */
#ifndef LLM_BUILD_H
#define LLM_BUILD_H

#include "graph.h"
#include "kv_cache.h"
#include "model.h"

/* Per-micro-batch inputs. Each tensor is a view on a fixed input buffer, so the same shape gets the
 * same addresses from one graph to the next; the host fills them before compute. */
struct llm_build_inputs {
    int32_t n_tokens;            /* tokens in this micro-batch                          */
    int32_t n_kv;                /* cache cells attended to (multiple of 256, ≤ n_cells) */
    int32_t n_outputs;           /* rows of logits wanted                               */
    struct llm_tensor *tokens;   /* I32 [n_tokens]                                      */
    struct llm_tensor *pos;      /* I32 [n_tokens] positions                            */
    struct llm_tensor *kv_idx;   /* I32 [n_tokens] cache cell of each token             */
    struct llm_tensor *mask;     /* F32 [n_kv, n_tokens] 0 or -inf                      */
    struct llm_tensor *out_ids;  /* I32 [n_outputs] rows whose logits are wanted        */
    bool embeddings;             /* the output rows are the final-normed hidden states   */
    /* A pipeline stage builds layers [layer_first, layer_end) only (0, n_layer: the whole model). */
    int32_t layer_first, layer_end;
    struct llm_tensor *embd;     /* F32 [n_embd, n_tokens]: a later stage's input, the
                                    previous stage's residual (else NULL)                */
};

/* Build the graph; returns the logits tensor F32 [n_vocab, n_outputs], with in->embeddings the
 * hidden states after the output norm, F32 [n_embd, n_outputs] (the output matrix is not applied),
 * or for a stage that ends before the last layer its residual stream F32 [n_embd, n_tokens]. */
struct llm_tensor *llm_build_forward(struct llm_ctx *ctx, const struct llm_model *m,
                                     struct llm_kv_cache *kv, const struct llm_build_inputs *in,
                                     bool flash_attn);

#endif
