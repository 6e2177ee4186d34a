/* A model's weights as one backend sees them. A backend whose memory is host memory uses the
 * tensors of the mapped file in place; any other gets its own uploaded copy per context, so a model
 * shared by several contexts is never modified. */
#ifndef LLM_WEIGHTS_H
#define LLM_WEIGHTS_H

#include "../backend.h"
#include "model.h"

struct llm_weights {
    const struct llm_model *model; /* the model to build graphs from: the loaded one or `copy` */
    struct llm_model copy;         /* shallow copy whose tensor pointers lead to `tensors`     */
    struct llm_tensor *tensors;    /* uploaded tensors (NULL when used in place)              */
    struct llm_layer *layers;
    void *buf;                     /* backend memory holding every uploaded tensor's data     */
    struct llm_backend *backend;
};

/* Place m's weights for backend b (uploading them when b's memory is not host memory). */
int llm_weights_place(struct llm_weights *w, const struct llm_model *m, struct llm_backend *b,
                      struct llm_error *err);
void llm_weights_release(struct llm_weights *w);

#endif
