#include "context.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../alloc.h"
#include "../graph.h"
#include "../ops/types.h"
#include "build.h"

#define KV_PAD 256

struct llm_context {
    struct llm_model *model;
    struct llm_context_params p;
    struct llm_backend *backend;
    struct llm_allocator *alloc;
    struct llm_ctx *gctx;            /* tensor pool reused by every graph build      */
    struct llm_kv_cache kv;
    /* Fixed input buffers, sized for n_ubatch tokens and n_cells cells. */
    int32_t *in_tokens, *in_pos, *in_kv_idx, *in_out_ids;
    float *in_mask;
    float *logits;                   /* [n_outputs][n_vocab] of the last decode      */
    /* The last graph, kept for reuse: inputs live in fixed buffers and the allocator gives the
     * same shape the same addresses, so an unchanged shape needs no rebuild. */
    struct llm_graph *graph;
    struct llm_tensor *graph_logits;
    int32_t graph_n, graph_n_kv, graph_n_out;
    unsigned graph_generation;       /* allocator generation the graph was placed in */
    int32_t n_logits_rows;
    int32_t logits_cap_rows;
};

struct llm_context_params llm_context_default_params(void)
{
    return (struct llm_context_params){
        .n_ctx = 4096, .n_batch = 2048, .n_ubatch = 512, .n_threads = 2,
        .type_k = LLM_TYPE_F16, .type_v = LLM_TYPE_F16, .flash_attn = true,
    };
}

static void *backend_alloc(void *user, size_t size)
{
    struct llm_backend *b = user;
    return b->iface->buffer_alloc(b, size);
}

static void backend_release(void *user, void *ptr)
{
    struct llm_backend *b = user;
    b->iface->buffer_free(b, ptr);
}

static int32_t pad_to(int32_t n, int32_t m)
{
    return (n + m - 1) / m * m;
}

static int init_kv(struct llm_context *c, struct llm_error *err)
{
    const struct llm_hparams *hp = &c->model->hp;
    struct llm_kv_cache *kv = &c->kv;
    kv->n_cells = pad_to(c->p.n_ctx, KV_PAD);
    const int64_t n_k = (int64_t)hp->n_embd_head_k * hp->n_head_kv;
    const int64_t n_v = (int64_t)hp->n_embd_head_v * hp->n_head_kv;
    const size_t k_bytes = llm_row_size(c->p.type_k, n_k) * (size_t)kv->n_cells;
    const size_t v_bytes = llm_row_size(c->p.type_v, n_v) * (size_t)kv->n_cells;
    const size_t per_layer = k_bytes + v_bytes;
    kv->buf = c->backend->iface->buffer_alloc(c->backend, per_layer * hp->n_layer + 64);
    if (!kv->buf)
        return llm_fail(err, LLM_ERR_NOMEM, "cannot allocate a KV cache of %zu bytes",
                        per_layer * hp->n_layer);
    memset(kv->buf, 0, per_layer * hp->n_layer);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct llm_tensor *k = &kv->k[il], *v = &kv->v[il];
        *k = (struct llm_tensor){ .type = c->p.type_k, .ne = { n_k, kv->n_cells, 1, 1 } };
        *v = (struct llm_tensor){ .type = c->p.type_v, .ne = { n_v, kv->n_cells, 1, 1 } };
        k->nb[0] = llm_type_traits(k->type)->type_size;
        k->nb[1] = llm_row_size(k->type, n_k);
        k->nb[2] = k->nb[3] = k_bytes;
        v->nb[0] = llm_type_traits(v->type)->type_size;
        v->nb[1] = llm_row_size(v->type, n_v);
        v->nb[2] = v->nb[3] = v_bytes;
        k->data = (char *)kv->buf + per_layer * il;
        v->data = (char *)k->data + k_bytes;
        snprintf(k->name, sizeof k->name, "cache_k_l%u", il);
        snprintf(v->name, sizeof v->name, "cache_v_l%u", il);
    }
    return LLM_OK;
}

void llm_context_free(struct llm_context *c)
{
    if (!c)
        return;
    if (c->backend) {
        llm_allocator_free(c->alloc);
        if (c->kv.buf)
            c->backend->iface->buffer_free(c->backend, c->kv.buf);
        llm_backend_free(c->backend);
    }
    llm_graph_free(c->graph);
    llm_ctx_free(c->gctx);
    free(c->in_tokens);
    free(c->in_pos);
    free(c->in_kv_idx);
    free(c->in_out_ids);
    free(c->in_mask);
    free(c->logits);
    free(c);
}

/* Input tensors for one micro-batch: views of the fixed buffers. */
static void make_inputs(struct llm_context *c, struct llm_build_inputs *in, int32_t n, int32_t n_kv,
                        int32_t n_out)
{
    struct llm_ctx *g = c->gctx;
    in->n_tokens = n;
    in->n_kv = n_kv;
    in->n_outputs = n_out;
    in->tokens = llm_new_tensor_1d(g, LLM_TYPE_I32, n);
    in->pos = llm_new_tensor_1d(g, LLM_TYPE_I32, n);
    in->kv_idx = llm_new_tensor_1d(g, LLM_TYPE_I32, n);
    in->mask = llm_new_tensor_2d(g, LLM_TYPE_F32, n_kv, n);
    in->out_ids = llm_new_tensor_1d(g, LLM_TYPE_I32, n_out);
    in->tokens->data = c->in_tokens;
    in->pos->data = c->in_pos;
    in->kv_idx->data = c->in_kv_idx;
    in->mask->data = c->in_mask;
    in->out_ids->data = c->in_out_ids;
    llm_set_name(in->tokens, "inp_tokens");
    llm_set_name(in->pos, "inp_pos");
    llm_set_name(in->kv_idx, "inp_kv_idx");
    llm_set_name(in->mask, "inp_mask");
    llm_set_name(in->out_ids, "inp_out_ids");
    in->tokens->flags = in->pos->flags = in->kv_idx->flags = LLM_TENSOR_INPUT;
    in->mask->flags = in->out_ids->flags = LLM_TENSOR_INPUT;
}

/* Build the graph of one micro-batch; NULL when the tensor pool or memory ran out. */
static struct llm_graph *build_graph(struct llm_context *c, struct llm_build_inputs *in, int32_t n,
                                     int32_t n_kv, int32_t n_out, struct llm_tensor **logits)
{
    llm_ctx_reset(c->gctx);
    make_inputs(c, in, n, n_kv, n_out);
    *logits = llm_build_forward(c->gctx, c->model, &c->kv, in, c->p.flash_attn);
    if (llm_ctx_overflowed(c->gctx))
        return NULL;
    return llm_graph_build(logits, 1);
}

int llm_context_new(struct llm_model *model, const struct llm_context_params *p,
                    struct llm_context **out, struct llm_error *err)
{
    *out = NULL;
    if (p->n_ctx < 1 || p->n_batch < 1 || p->n_ubatch < 1 || p->n_threads < 1)
        return llm_fail(err, LLM_ERR_ARG, "context sizes and thread count must be positive");
    if ((p->type_k != LLM_TYPE_F16 && p->type_k != LLM_TYPE_F32) ||
        (p->type_v != LLM_TYPE_F16 && p->type_v != LLM_TYPE_F32))
        return llm_fail(err, LLM_ERR_UNSUPPORTED, "KV cache type must be f16 or f32");
    struct llm_context *c = calloc(1, sizeof *c);
    if (!c)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    c->model = model;
    c->p = *p;
    if (c->p.n_ubatch > c->p.n_batch)
        c->p.n_ubatch = c->p.n_batch;
    c->backend = llm_backend_cpu_new(p->n_threads);
    if (!c->backend) {
        llm_context_free(c);
        return llm_fail(err, LLM_ERR_NOMEM, "cannot start %d threads", p->n_threads);
    }
    c->alloc = llm_allocator_new(backend_alloc, backend_release, c->backend);
    c->gctx = llm_ctx_new(64 * (int)model->hp.n_layer + 256);
    int rc = (!c->alloc || !c->gctx) ? llm_fail(err, LLM_ERR_NOMEM, "out of memory") : init_kv(c, err);
    if (rc) {
        llm_context_free(c);
        return rc;
    }
    const int32_t nu = c->p.n_ubatch;
    c->in_tokens = calloc((size_t)nu, sizeof(int32_t));
    c->in_pos = calloc((size_t)nu, sizeof(int32_t));
    c->in_kv_idx = calloc((size_t)nu, sizeof(int32_t));
    c->in_out_ids = calloc((size_t)nu, sizeof(int32_t));
    c->in_mask = calloc((size_t)nu * (size_t)c->kv.n_cells, sizeof(float));
    if (!c->in_tokens || !c->in_pos || !c->in_kv_idx || !c->in_out_ids || !c->in_mask) {
        llm_context_free(c);
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    }
    /* Reserve the compute arena with the largest graph so later graphs keep fixed addresses. */
    struct llm_build_inputs in;
    struct llm_tensor *logits;
    struct llm_graph *g = build_graph(c, &in, nu, c->kv.n_cells, 1, &logits);
    rc = g ? llm_allocator_reserve(c->alloc, g, err) : llm_fail(err, LLM_ERR_NOMEM, "graph too large");
    llm_graph_free(g);
    if (rc) {
        llm_context_free(c);
        return rc;
    }
    *out = c;
    return LLM_OK;
}

/* Fill the fixed inputs for tokens[0..n) at positions n_past.. (one sequence, cell = position). */
static void fill_inputs(struct llm_context *c, const int32_t *tokens, int32_t n, int32_t n_kv,
                        int32_t n_out)
{
    const int32_t n_past = c->kv.n_used;
    for (int32_t i = 0; i < n; i++) {
        c->in_tokens[i] = tokens[i];
        c->in_pos[i] = n_past + i;
        c->in_kv_idx[i] = n_past + i;
        float *row = c->in_mask + (size_t)i * (size_t)n_kv;
        for (int32_t j = 0; j < n_kv; j++)
            row[j] = j <= n_past + i ? 0.0f : -INFINITY;
    }
    for (int32_t i = 0; i < n_out; i++)
        c->in_out_ids[i] = n_out == n ? i : n - 1;
}

/* Make c->graph the allocated graph of this shape, reusing the last one when nothing changed. */
static int prepare_graph(struct llm_context *c, int32_t n, int32_t n_kv, int32_t n_out, struct llm_error *err)
{
    if (c->graph && c->graph_n == n && c->graph_n_kv == n_kv && c->graph_n_out == n_out &&
        c->graph_generation == llm_allocator_generation(c->alloc))
        return LLM_OK;
    llm_graph_free(c->graph);
    struct llm_build_inputs in;
    c->graph = build_graph(c, &in, n, n_kv, n_out, &c->graph_logits);
    if (!c->graph)
        return llm_fail(err, LLM_ERR_NOMEM, "cannot build the compute graph");
    int rc = llm_allocator_alloc_graph(c->alloc, c->graph, err);
    if (rc) {
        llm_graph_free(c->graph);
        c->graph = NULL;
        return rc;
    }
    c->graph_n = n;
    c->graph_n_kv = n_kv;
    c->graph_n_out = n_out;
    c->graph_generation = llm_allocator_generation(c->alloc);
    return LLM_OK;
}

static int decode_ubatch(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all,
                         struct llm_error *err)
{
    const int32_t n_out = logits_all ? n : 1;
    int32_t n_kv = pad_to(c->kv.n_used + n, KV_PAD);
    if (n_kv > c->kv.n_cells)
        n_kv = c->kv.n_cells;
    int rc = prepare_graph(c, n, n_kv, n_out, err);
    if (rc)
        return rc;
    fill_inputs(c, tokens, n, n_kv, n_out);
    rc = llm_backend_compute(c->backend, c->graph, err);
    if (rc)
        return rc;
    const struct llm_tensor *logits = c->graph_logits;
    const int32_t n_vocab = (int32_t)c->model->hp.n_vocab;
    const int32_t rows = c->n_logits_rows + n_out;
    if (rows > c->logits_cap_rows) {
        float *nl = realloc(c->logits, (size_t)rows * (size_t)n_vocab * sizeof(float));
        if (!nl)
            return llm_fail(err, LLM_ERR_NOMEM, "out of memory for logits");
        c->logits = nl;
        c->logits_cap_rows = rows;
    }
    for (int32_t r = 0; r < n_out; r++)
        memcpy(c->logits + (size_t)(c->n_logits_rows + r) * (size_t)n_vocab,
               (const char *)logits->data + (size_t)r * logits->nb[1], (size_t)n_vocab * sizeof(float));
    c->n_logits_rows = rows;
    c->kv.n_used += n;
    return LLM_OK;
}

int llm_decode(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all,
               struct llm_error *err)
{
    if (n < 1)
        return llm_fail(err, LLM_ERR_ARG, "decode: empty batch");
    if (n > c->p.n_batch)
        return llm_fail(err, LLM_ERR_ARG, "decode: %d tokens exceed the batch size %d", n, c->p.n_batch);
    if (c->kv.n_used + n > c->p.n_ctx)
        return llm_fail(err, LLM_ERR_ARG, "context full: %d + %d tokens exceed n_ctx = %d",
                        c->kv.n_used, n, c->p.n_ctx);
    const int32_t n_vocab = (int32_t)c->model->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return llm_fail(err, LLM_ERR_ARG, "decode: token id %d out of range [0, %d)", tokens[i], n_vocab);
    c->n_logits_rows = 0;
    for (int32_t done = 0; done < n;) {
        int32_t nu = n - done < c->p.n_ubatch ? n - done : c->p.n_ubatch;
        bool last = done + nu == n;
        int rc = decode_ubatch(c, tokens + done, nu, logits_all, err);
        if (rc)
            return rc;
        if (!logits_all && !last)
            c->n_logits_rows = 0; /* only the final micro-batch's last row is kept */
        done += nu;
    }
    return LLM_OK;
}

const float *llm_get_logits(const struct llm_context *c, int32_t i)
{
    if (i < 0 || i >= c->n_logits_rows)
        return NULL;
    return c->logits + (size_t)i * c->model->hp.n_vocab;
}

int32_t llm_n_past(const struct llm_context *c)
{
    return c->kv.n_used;
}

int32_t llm_n_ctx(const struct llm_context *c)
{
    return c->p.n_ctx;
}

void llm_kv_clear(struct llm_context *c)
{
    c->kv.n_used = 0;
}

const struct llm_model *llm_context_model(const struct llm_context *c)
{
    return c->model;
}
