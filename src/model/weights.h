/* A model's weights as the backends of a context see them: the tensors a device takes are uploaded
 * into one buffer of its memory, once per context; the rest are used in place, in the mapped file
 * (host memory). The model a context builds graphs from points at each tensor where it lives, so a
 * model shared by several contexts is never modified. */
#ifndef LLM_WEIGHTS_H
#define LLM_WEIGHTS_H

#include "backend.h"
#include "model.h"

struct llm_weights {
    const struct llm_model *model; /* the model to build graphs from: the loaded one or `copy` */
    struct llm_model copy;         /* shallow copy whose tensor pointers lead to where each lives */
    struct llm_tensor *tensors;    /* one slot per model tensor; the uploaded ones have data   */
    bool *uploaded;                /* per model tensor                                          */
    struct llm_layer *layers;
    struct llm_buffer *buf;        /* device memory holding every uploaded tensor's data        */
    struct llm_backend *backend;
};

/* Does the device take model tensor t of layer il (0..n_layer-1; n_layer: the output layer;
 * -1: the token embedding and other tensors of no layer)? */
typedef bool (*llm_weights_offload_fn)(void *user, const struct llm_tensor *t, int64_t il);

/* Place m's weights: the tensors offload accepts go to device b (nothing when b's memory is host
 * memory, or offload is NULL). */
int llm_weights_place(struct llm_weights *w, const struct llm_model *m, struct llm_backend *b,
                      llm_weights_offload_fn offload, void *user, struct llm_error *err);
void llm_weights_release(struct llm_weights *w);

/* The layer of a model tensor by its GGUF name: blk.N.* -> N, output* -> n_layer, else -1. */
int64_t llm_weights_layer_of(const char *name, uint32_t n_layer);

#endif
