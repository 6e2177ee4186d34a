#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEIGHT_ALIGN 64

static size_t align_up(size_t n)
{
    return (n + WEIGHT_ALIGN - 1) & ~(size_t)(WEIGHT_ALIGN - 1);
}

/* Where model tensor t lives for this context (NULL stays NULL). */
static struct llm_tensor *remap(const struct llm_weights *w, const struct llm_tensor *t)
{
    if (!t)
        return NULL;
    const int64_t i = t - w->model->tensors;
    return w->uploaded[i] ? &w->tensors[i] : (struct llm_tensor *)t;
}

static void remap_layer(const struct llm_weights *w, const struct llm_layer *src, struct llm_layer *dst)
{
#define REMAP(field, ...) dst->field = remap(w, src->field);
    LLM_LAYER_TENSORS(REMAP)
#undef REMAP
}

int64_t llm_weights_layer_of(const char *name, uint32_t n_layer)
{
    unsigned il;
    int len = 0;
    if (sscanf(name, "blk.%u.%n", &il, &len) == 1 && len > 0)
        return il;
    return strncmp(name, "output", 6) == 0 ? (int64_t)n_layer : -1;
}

/* Copy the tensors offload accepts into one device buffer and point the copied model at them. */
static int upload(struct llm_weights *w, const struct llm_model *m, llm_weights_offload_fn offload, void *user,
                  struct llm_error *err)
{
    struct llm_backend *b = w->backend;
    w->tensors = llm_calloc((size_t)m->n_tensors + 1, sizeof *w->tensors);
    w->uploaded = llm_calloc((size_t)m->n_tensors + 1, sizeof *w->uploaded);
    w->layers = llm_calloc(m->hp.n_layer ? m->hp.n_layer : 1, sizeof *w->layers);
    if (!w->tensors || !w->uploaded || !w->layers)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    size_t total = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct llm_tensor *t = &m->tensors[i];
        w->uploaded[i] = offload(user, t, llm_weights_layer_of(t->name, m->hp.n_layer));
        total += w->uploaded[i] ? align_up(llm_nbytes(t)) : 0;
    }
    /* a tied output matrix is the token embedding, which stays on the host: an offloaded output
     * layer gets a copy of its own in the last slot (llama.cpp duplicates it likewise) */
    const int64_t tied = m->n_tensors;
    w->uploaded[tied] = m->output && m->output == m->tok_embd && offload(user, m->output, m->hp.n_layer);
    total += w->uploaded[tied] ? align_up(llm_nbytes(m->output)) : 0;
    w->buf = total ? llm_buffer_new(b, total) : NULL;
    if (total && !w->buf)
        return llm_fail(err, LLM_ERR_NOMEM, "cannot place %zu bytes of weights in %s memory", total,
                        b->iface->name);
    size_t offs = 0;
    for (int64_t i = 0; i <= tied; i++) {
        if (!w->uploaded[i])
            continue;
        struct llm_tensor *t = &w->tensors[i];
        *t = i == tied ? *m->output : m->tensors[i];
        const void *from = t->data;
        llm_buffer_place(w->buf, t, offs);
        const size_t n = llm_nbytes(t);
        int rc = llm_tensor_set(t, from, 0, n, err);
        if (rc)
            return rc;
        offs += align_up(n);
    }
    w->copy = *m;
    w->copy.tok_embd = remap(w, m->tok_embd);
    w->copy.output_norm = remap(w, m->output_norm);
    w->copy.output = w->uploaded[tied] ? &w->tensors[tied] : remap(w, m->output);
    w->copy.output_b = remap(w, m->output_b);
    w->copy.rope_freqs = remap(w, m->rope_freqs);
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        remap_layer(w, &m->layers[il], &w->layers[il]);
    w->copy.layers = w->layers;
    w->model = &w->copy;
    return LLM_OK;
}

int llm_weights_place(struct llm_weights *w, const struct llm_model *m, struct llm_backend *b,
                      llm_weights_offload_fn offload, void *user, struct llm_error *err)
{
    *w = (struct llm_weights){ .model = m, .backend = b };
    if (b->iface->host_memory || !offload)
        return LLM_OK;
    int rc = upload(w, m, offload, user, err);
    if (rc)
        llm_weights_release(w);
    return rc;
}

void llm_weights_release(struct llm_weights *w)
{
    llm_buffer_free(w->buf);
    free(w->tensors);
    free(w->uploaded);
    free(w->layers);
    *w = (struct llm_weights){ 0 };
}

