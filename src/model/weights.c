#include "weights.h"

#include <stdlib.h>
#include <string.h>

#define WEIGHT_ALIGN 64

static size_t align_up(size_t n)
{
    return (n + WEIGHT_ALIGN - 1) & ~(size_t)(WEIGHT_ALIGN - 1);
}

/* The copy of model tensor t (NULL stays NULL). */
static struct llm_tensor *remap(const struct llm_weights *w, const struct llm_tensor *t)
{
    return t ? w->tensors + (t - w->model->tensors) : NULL;
}

static void remap_layer(const struct llm_weights *w, const struct llm_layer *src, struct llm_layer *dst)
{
    dst->attn_norm = remap(w, src->attn_norm);
    dst->wq = remap(w, src->wq);
    dst->wk = remap(w, src->wk);
    dst->wv = remap(w, src->wv);
    dst->bq = remap(w, src->bq);
    dst->bk = remap(w, src->bk);
    dst->bv = remap(w, src->bv);
    dst->wo = remap(w, src->wo);
    dst->bo = remap(w, src->bo);
    dst->ffn_norm = remap(w, src->ffn_norm);
    dst->ffn_gate = remap(w, src->ffn_gate);
    dst->ffn_up = remap(w, src->ffn_up);
    dst->ffn_down = remap(w, src->ffn_down);
}

/* Copy every tensor into one backend buffer and point the copied model at them. */
static int upload(struct llm_weights *w, const struct llm_model *m, struct llm_error *err)
{
    struct llm_backend *b = w->backend;
    size_t total = 0;
    for (int64_t i = 0; i < m->n_tensors; i++)
        total += align_up(llm_nbytes(&m->tensors[i]));
    w->tensors = llm_calloc((size_t)m->n_tensors, sizeof *w->tensors);
    w->layers = llm_calloc(m->hp.n_layer ? m->hp.n_layer : 1, sizeof *w->layers);
    w->buf = total ? b->iface->buffer_alloc(b, total) : NULL;
    if (!w->tensors || !w->layers || (total && !w->buf))
        return llm_fail(err, LLM_ERR_NOMEM, "cannot place %zu bytes of weights in %s memory", total,
                        b->iface->name);
    size_t offs = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        struct llm_tensor *t = &w->tensors[i];
        *t = m->tensors[i];
        t->data = (char *)w->buf + offs;
        const size_t n = llm_nbytes(t);
        int rc = b->iface->tensor_set(b, t, m->tensors[i].data, 0, n, err);
        if (rc)
            return rc;
        offs += align_up(n);
    }
    w->copy = *m;
    w->copy.tensors = w->tensors;
    w->copy.tok_embd = remap(w, m->tok_embd);
    w->copy.output_norm = remap(w, m->output_norm);
    w->copy.output = remap(w, m->output);
    w->copy.output_b = remap(w, m->output_b);
    w->copy.rope_freqs = remap(w, m->rope_freqs);
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        remap_layer(w, &m->layers[il], &w->layers[il]);
    w->copy.layers = w->layers;
    w->model = &w->copy;
    return LLM_OK;
}

int llm_weights_place(struct llm_weights *w, const struct llm_model *m, struct llm_backend *b,
                      struct llm_error *err)
{
    *w = (struct llm_weights){ .model = m, .backend = b };
    if (b->iface->host_memory)
        return LLM_OK;
    int rc = upload(w, m, err);
    if (rc)
        llm_weights_release(w);
    return rc;
}

void llm_weights_release(struct llm_weights *w)
{
    if (w->buf)
        w->backend->iface->buffer_free(w->backend, w->buf);
    free(w->tensors);
    free(w->layers);
    *w = (struct llm_weights){ 0 };
}
