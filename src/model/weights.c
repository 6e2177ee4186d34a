#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define WEIGHT_ALIGN 64
#define PAD_BYTES (1u << 20) /* a padded matrix goes to the device this much at a time */

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

/* Upload into t, whose rows the device lays out at stride t->nb[1], the dense rows of file's tensor
 * at from, a few hundred rows at a time through a small zeroed buffer (pads stay zero). */
static int upload_padded(struct llm_tensor *t, const void *from, struct llm_error *err)
{
    const size_t stride = t->nb[1], dense = llm_row_size(t->type, t->ne[0]);
    const int64_t rows = llm_nrows(t), step = (PAD_BYTES / stride) > 0 ? (int64_t)(PAD_BYTES / stride) : 1;
    char *buf = calloc((size_t)step, stride);
    if (!buf)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    int rc = LLM_OK;
    for (int64_t m0 = 0; m0 < rows && rc == LLM_OK; m0 += step) {
        const int64_t m1 = m0 + step < rows ? m0 + step : rows;
        for (int64_t r = m0; r < m1; r++)
            memcpy(buf + (size_t)(r - m0) * stride, (const char *)from + (size_t)r * dense, dense);
        rc = llm_tensor_set(t, buf, (size_t)m0 * stride, (size_t)(m1 - m0) * stride, err);
    }
    free(buf);
    return rc;
}

/* t (a copy of a model tensor, strides and flags as in the model) as backend b lays it out: rows
 * padded where b's kernels want them so. Padding takes float rows only, so a matrix the model holds
 * repacked (quantized) keeps that layout on the device: the device runs the cpu's kernels, and this
 * is the layout they decode fastest (unpacked, the device's matrix-vector products lost to the
 * cpu's on the same weights: bench/results/graph_ab.md). */
static void device_layout(struct llm_backend *b, struct llm_tensor *t)
{
    if (b->iface->weight_row_align)
        llm_pad_rows(t, b->iface->weight_row_align(b, t));
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
        w->tensors[i] = *t;
        device_layout(b, &w->tensors[i]);
        total += w->uploaded[i] ? align_up(llm_nbytes(&w->tensors[i])) : 0;
    }
    /* a tied output matrix is the token embedding, which stays on the host: an offloaded output
     * layer gets a copy of its own in the last slot (llama.cpp duplicates it likewise) */
    const int64_t tied = m->n_tensors;
    w->uploaded[tied] = m->output && m->output == m->tok_embd && offload(user, m->output, m->hp.n_layer);
    if (w->uploaded[tied]) {
        w->tensors[tied] = *m->output;
        device_layout(b, &w->tensors[tied]);
        total += align_up(llm_nbytes(&w->tensors[tied]));
    }
    w->buf = total ? llm_buffer_new(b, total) : NULL;
    if (total && !w->buf)
        return llm_backend_alloc_failed(b, "weights", total, err);
    size_t offs = 0;
    for (int64_t i = 0; i <= tied; i++) {
        if (!w->uploaded[i])
            continue;
        struct llm_tensor *t = &w->tensors[i];
        const struct llm_tensor *file = i == tied ? m->output : &m->tensors[i];
        const void *from = t->data;
        llm_buffer_place(w->buf, t, offs);
        const size_t n = llm_nbytes(t);
        int rc = t->nb[1] != file->nb[1] ? upload_padded(t, from, err) : llm_tensor_set(t, from, 0, n, err);
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

