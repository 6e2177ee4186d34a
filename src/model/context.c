#include "context.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "build.h"
#include "graph.h"
#include "pipeline.h"
#include "profile.h"
#include "split_exec.h"
#include "trace.h"
#include "weights.h"

/* Host-side contents of the input tensors and their home in backend memory. */
enum { IN_TOKENS, IN_POS, IN_KV_IDX, IN_OUT_IDS, IN_MASK, IN_EMBD, IN_COUNT };

/* -ot, compiled: the weights whose names match pattern live on device. */
struct tensor_override {
    regex_t pattern;
    enum llm_device device;
};
#define MAX_OVERRIDES 16
#define MAX_BACKEND_OPTIONS 16

struct llm_context {
    struct llm_model *model;
    struct llm_context_params p;
    /* in priority order: the npu (when p.device is npu), then the cpu, which runs what the npu
     * does not and owns host memory (the inputs, weights not offloaded) */
    struct llm_backend *backends[2];
    int n_backends;
    struct llm_weights weights;      /* offloaded weights in backends[0]'s memory        */
    struct llm_split_exec exec;      /* arenas, the schedule and its copies              */
    struct llm_ctx *gctx;            /* tensor pool reused by every graph build          */
    struct llm_kv_cache kv;
    struct tensor_override overrides[MAX_OVERRIDES];
    int n_overrides;
    /* Fixed input buffers in host memory, sized for n_ubatch tokens and n_cells cells: the
     * graph's input tensors point at them (backends that need them get copies). */
    void *host[IN_COUNT];
    float *logits;                   /* [n_outputs][n_vocab] of the last decode (n_embd: -embd) */
    /* The last graph, kept for reuse: inputs live in fixed buffers and the arenas give the
     * same shape the same addresses, so an unchanged shape needs no rebuild. */
    struct llm_graph *graph;
    struct llm_build_inputs graph_in;
    struct llm_tensor *graph_logits;
    unsigned graph_generation;       /* arena generation the graph was placed in */
    double schedule_us;              /* time spent scheduling and placing new graph shapes */
    int64_t schedules;
    int32_t n_logits_rows;
    int32_t logits_cap_rows;
    /* This process's pipeline stage: layers [first, end), and how activations travel (NULL: one
     * process runs the whole model); pipe: rank 0's handle on the other ranks' stages. */
    int32_t first, end;
    const struct llm_stage_io *io;
    struct llm_pipe *pipe;
    /* llm_decode_next's sampler; draw_remote: the last rank of the pipeline draws */
    struct llm_sampler *smpl;
    bool draw_remote;
    double draw_us;
};

struct llm_context_params llm_context_default_params(void)
{
    return (struct llm_context_params){
        .n_ctx = 4096, .n_batch = 2048, .n_ubatch = 512, .n_threads = 2,
        .type_k = LLM_TYPE_F16, .type_v = LLM_TYPE_F16, .flash_attn = true,
        .device = LLM_DEVICE_CPU, .n_gpu_layers = -1,
    };
}

void llm_context_free(struct llm_context *c)
{
    if (!c)
        return;
    for (int b = 0; b < c->n_backends; b++)
        c->backends[b]->iface->synchronize(c->backends[b]);
    llm_pipe_close(c->pipe);
    llm_split_exec_release(&c->exec);
    llm_kv_cache_release(&c->kv);
    llm_weights_release(&c->weights);
    for (int b = 0; b < c->n_backends; b++)
        llm_backend_free(c->backends[b]);
    for (int i = 0; i < c->n_overrides; i++)
        regfree(&c->overrides[i].pattern);
    llm_graph_free(c->graph);
    llm_ctx_free(c->gctx);
    for (int i = 0; i < IN_COUNT; i++)
        free(c->host[i]);
    free(c->logits);
    llm_sampler_free(c->smpl);
    free(c);
}

/* Bytes of each input for n_ubatch tokens and n_cells cells. */
static void input_sizes(const struct llm_context *c, size_t size[IN_COUNT])
{
    const size_t nu = (size_t)c->p.n_ubatch;
    size[IN_TOKENS] = size[IN_POS] = size[IN_KV_IDX] = size[IN_OUT_IDS] = nu * sizeof(int32_t);
    size[IN_MASK] = nu * (size_t)c->kv.n_cells * sizeof(float);
    size[IN_EMBD] = c->first > 0 ? nu * c->model->hp.n_embd * sizeof(float) : 0;
}

/* Is this the last stage (the one with the output layer)? */
static bool last_stage(const struct llm_context *c)
{
    return c->end == (int32_t)c->model->hp.n_layer;
}

/* Floats per output row: logits, or the residual stream a later stage goes on from. */
/* Floats per output row: logits, or hidden states (-embd, or a stage before the last: its residual). */
static int32_t out_width(const struct llm_context *c)
{
    return (int32_t)(last_stage(c) && !c->p.embeddings ? c->model->hp.n_vocab : c->model->hp.n_embd);
}

static int init_inputs(struct llm_context *c, struct llm_error *err)
{
    size_t size[IN_COUNT];
    input_sizes(c, size);
    for (int i = 0; i < IN_COUNT; i++) {
        const size_t bytes = (size[i] + 63) & ~(size_t)63; /* cache-line aligned, as arenas are */
        c->host[i] = aligned_alloc(64, bytes ? bytes : 64);
        if (!c->host[i])
            return llm_fail(err, LLM_ERR_NOMEM, "cannot allocate %zu bytes of inputs", bytes);
        memset(c->host[i], 0, bytes);
    }
    return LLM_OK;
}

/* Input tensors for one micro-batch: views of the fixed buffers. */
static void make_inputs(struct llm_context *c, struct llm_build_inputs *in, int32_t n, int32_t n_kv,
                        int32_t n_out)
{
    struct llm_ctx *g = c->gctx;
    in->n_tokens = n;
    in->n_kv = n_kv;
    in->n_outputs = n_out;
    in->embeddings = c->p.embeddings;
    in->tokens = llm_new_tensor_1d(g, LLM_TYPE_I32, n);
    in->pos = llm_new_tensor_1d(g, LLM_TYPE_I32, n);
    in->kv_idx = llm_new_tensor_1d(g, LLM_TYPE_I32, n);
    in->mask = llm_new_tensor_2d(g, LLM_TYPE_F32, n_kv, n);
    in->out_ids = llm_new_tensor_1d(g, LLM_TYPE_I32, n_out);
    if (llm_ctx_overflowed(g))
        return;
    in->tokens->data = c->host[IN_TOKENS];
    in->pos->data = c->host[IN_POS];
    in->kv_idx->data = c->host[IN_KV_IDX];
    in->mask->data = c->host[IN_MASK];
    in->out_ids->data = c->host[IN_OUT_IDS];
    llm_set_name(in->tokens, "inp_tokens");
    llm_set_name(in->pos, "inp_pos");
    llm_set_name(in->kv_idx, "inp_kv_idx");
    llm_set_name(in->mask, "inp_mask");
    llm_set_name(in->out_ids, "inp_out_ids");
    in->tokens->flags = in->pos->flags = in->kv_idx->flags = LLM_TENSOR_INPUT;
    in->mask->flags = in->out_ids->flags = LLM_TENSOR_INPUT;
    in->layer_first = c->first;
    in->layer_end = c->end;
    in->embd = NULL;
    if (c->first > 0 && (in->embd = llm_new_tensor_2d(g, LLM_TYPE_F32, c->model->hp.n_embd, n))) {
        in->embd->data = c->host[IN_EMBD]; /* the previous stage's residual arrives here */
        in->embd->flags = LLM_TENSOR_INPUT;
    }
}

/* Build the graph of one micro-batch; NULL when the tensor pool or memory ran out. */
static struct llm_graph *build_graph(struct llm_context *c, struct llm_build_inputs *in, int32_t n,
                                     int32_t n_kv, int32_t n_out, struct llm_tensor **logits)
{
    llm_ctx_reset(c->gctx);
    make_inputs(c, in, n, n_kv, n_out);
    if (llm_ctx_overflowed(c->gctx))
        return NULL;
    *logits = llm_build_forward(c->gctx, c->weights.model, &c->kv, in, c->p.flash_attn);
    if (llm_ctx_overflowed(c->gctx) || llm_ctx_error(c->gctx))
        return NULL;
    return llm_graph_build(logits, 1);
}

/* ---- where tensors live (the scheduler's questions) ------------------------------------------ */

static int cpu_index(const struct llm_context *c)
{
    return c->n_backends - 1;
}

/* The backend whose buffer holds the leaf; plain host memory (the mapped file, inputs) is the cpu's. */
static int leaf_backend(void *user, const struct llm_tensor *leaf)
{
    const struct llm_context *c = user;
    const struct llm_backend *owner = llm_tensor_backend(leaf);
    for (int b = 0; b < c->n_backends; b++)
        if (c->backends[b] == owner)
            return b;
    return cpu_index(c);
}

static bool backend_runs(void *user, int b, const struct llm_tensor *node)
{
    const struct llm_context *c = user;
    return c->backends[b]->iface->supports_op(c->backends[b], node);
}

/* Op offload's batch threshold: llama.cpp's GGML_OP_OFFLOAD_MIN_BATCH default. */
#define OP_OFFLOAD_MIN_BATCH 32

static struct llm_sched_query sched_query(struct llm_context *c)
{
    return (struct llm_sched_query){ .n_backends = c->n_backends, .leaf_backend = leaf_backend,
                                     .supports = backend_runs, .user = c,
                                     .op_offload_min_batch = c->p.no_op_offload ? 0 : OP_OFFLOAD_MIN_BATCH };
}

/* Reserve the arenas and the backends' buffers for one graph shape. */
static int reserve_shape(struct llm_context *c, int32_t n, int32_t n_kv, int32_t n_out, struct llm_error *err)
{
    struct llm_build_inputs in;
    struct llm_tensor *logits;
    struct llm_graph *g = build_graph(c, &in, n, n_kv, n_out, &logits);
    const struct llm_sched_query q = sched_query(c);
    int rc = g ? llm_split_exec_prepare(&c->exec, g, &q, true, err)
               : llm_fail(err, LLM_ERR_NOMEM, "graph too large");
    llm_graph_free(g);
    return rc;
}

/* Reserve for every graph this context can build, so none grows a buffer later (a capturing npu
 * could not): a full micro-batch over every cell with one output row or all of them, and one
 * decoded token. Smaller windows need no more (every tensor and scratch grows with the cells
 * attended to), and backends size scratch for smaller batches from these (llm_cpu_work_size_bound). */
static int reserve(struct llm_context *c, struct llm_error *err)
{
    const int32_t nu = c->p.n_ubatch, cells = c->kv.n_cells;
    const int32_t shapes[][2] = { { nu, 1 }, { nu, nu }, { 1, 1 } };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int rc = reserve_shape(c, shapes[i][0], cells, shapes[i][1], err);
        if (rc)
            return rc;
    }
    return LLM_OK;
}

/* The backends: the npu first when asked for, then the cpu (with the same thread count). */
static int make_backends(struct llm_context *c, struct llm_error *err)
{
    struct llm_backend_option opts[MAX_BACKEND_OPTIONS + 1];
    const int n_opts = c->p.n_backend_options;
    if (n_opts < 0 || n_opts > MAX_BACKEND_OPTIONS)
        return llm_fail(err, LLM_ERR_ARG, "%d backend options (at most %d)", n_opts, MAX_BACKEND_OPTIONS);
    if (n_opts)
        memcpy(opts, c->p.backend_options, (size_t)n_opts * sizeof *opts);
    struct llm_backend_params bp = { .device = c->p.device, .n_threads = c->p.n_threads, .options = opts,
                                     .n_options = n_opts };
    if (c->p.device != LLM_DEVICE_CPU) {
        if (!(c->backends[c->n_backends] = llm_backend_new(&bp, err)))
            return err ? err->code : LLM_ERR_NOMEM;
        c->n_backends++;
        /* the device's threads run while the cpu's wait: the cpu's sleep at once, unless told */
        memmove(opts + 1, opts, (size_t)n_opts * sizeof *opts);
        opts[0] = (struct llm_backend_option){ LLM_DEVICE_CPU, "idle_spin_us", 1 };
        bp.n_options++;
    }
    bp.device = LLM_DEVICE_CPU;
    if (!(c->backends[c->n_backends] = llm_backend_new(&bp, err)))
        return err ? err->code : LLM_ERR_NOMEM;
    c->n_backends++;
    if (c->p.profile || c->p.trace) {
        llm_trace_track(c->p.trace, LLM_TRACE_HOST, "host");
        for (int b = 0; b < c->n_backends; b++)
            c->backends[b]->iface->observe(c->backends[b], c->p.profile, c->p.trace);
    }
    return LLM_OK;
}

/* Is layer il (n_layer: the output layer) offloaded? -ngl N offloads the last N (llama.cpp). */
static bool layer_offloaded(const struct llm_context *c, int64_t il)
{
    const int64_t n_layer = c->model->hp.n_layer, ngl = c->p.n_gpu_layers;
    return c->n_backends > 1 && il >= 0 && (ngl < 0 || il >= n_layer + 1 - ngl);
}

/* Does layer il's KV cache live on the device? With its layer, unless -nkvo, or the cache is
 * quantized: the npu's SET_ROWS and attention take float caches only (as CANN's), so a quantized
 * cache stays in host memory and the cpu runs the layer's cache writes and attention. */
static bool kv_offloaded(const struct llm_context *c, int64_t il)
{
    return layer_offloaded(c, il) && !c->p.no_kv_offload && llm_type_info(c->p.type_k)->blck_size == 1 &&
           llm_type_info(c->p.type_v)->blck_size == 1;
}

/* Does this stage use layer il (n_layer: the output layer; -1: the embedding and the rest)? */
static bool layer_here(const struct llm_context *c, int64_t il)
{
    if (il == (int64_t)c->model->hp.n_layer)
        return last_stage(c);
    return il < 0 || (il >= c->first && il < c->end);
}

/* Where -ot's device name puts a weight; -1 when it names none. */
static int override_device(const char *name, size_t len)
{
    static const struct { const char *name; enum llm_device device; } names[] = {
        { "cpu", LLM_DEVICE_CPU }, { "npu", LLM_DEVICE_NPU }, { "cann", LLM_DEVICE_NPU }, { "cann0", LLM_DEVICE_NPU },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == len && !strncasecmp(name, names[i].name, len))
            return (int)names[i].device;
    return -1;
}

/* Compile -ot's "PATTERN=DEVICE" items (',' or ';' between them). */
static int parse_overrides(struct llm_context *c, const char *spec, struct llm_error *err)
{
    for (const char *p = spec; p && *p;) {
        const size_t len = strcspn(p, ",;");
        const char *eq = memchr(p, '=', len);
        const int dev = eq ? override_device(eq + 1, len - (size_t)(eq + 1 - p)) : -1;
        if (!eq || eq == p || dev < 0)
            return llm_fail(err, LLM_ERR_ARG, "-ot: '%.*s' is not PATTERN=DEVICE (DEVICE cpu or npu)", (int)len, p);
        if (c->n_overrides == MAX_OVERRIDES)
            return llm_fail(err, LLM_ERR_ARG, "-ot: more than %d overrides", MAX_OVERRIDES);
        char pattern[256];
        snprintf(pattern, sizeof pattern, "%.*s", (int)(eq - p), p);
        struct tensor_override *o = &c->overrides[c->n_overrides];
        if (regcomp(&o->pattern, pattern, REG_EXTENDED | REG_NOSUB) != 0)
            return llm_fail(err, LLM_ERR_ARG, "-ot: '%s' is not a regular expression", pattern);
        o->device = (enum llm_device)dev;
        c->n_overrides++;
        p += len + (p[len] != '\0');
    }
    return LLM_OK;
}

static bool offload_tensor(void *user, const struct llm_tensor *t, int64_t il)
{
    const struct llm_context *c = user;
    struct llm_backend *npu = c->backends[0];
    if (!layer_here(c, il))
        return false; /* another rank's: never touched here */
    bool offload = layer_offloaded(c, il);
    for (int i = 0; i < c->n_overrides; i++)
        if (regexec(&c->overrides[i].pattern, t->name, 0, NULL, 0) == 0) {
            offload = c->overrides[i].device == LLM_DEVICE_NPU;
            break;
        }
    return offload && npu->iface->supports_type(npu, t->type);
}

/* Device bytes the placement at c->p.n_gpu_layers takes: offloaded weights and their layers' caches. */
static size_t placement_bytes(struct llm_context *c)
{
    const struct llm_model *m = c->model;
    const struct llm_hparams *hp = &m->hp;
    size_t bytes = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct llm_tensor *t = &m->tensors[i];
        bytes += offload_tensor(c, t, llm_weights_layer_of(t->name, hp->n_layer)) ? llm_nbytes(t) : 0;
    }
    if (m->output && m->output == m->tok_embd && offload_tensor(c, m->output, hp->n_layer))
        bytes += llm_nbytes(m->output); /* the tied output matrix's copy */
    const size_t cells = (size_t)(c->p.n_ctx + LLM_KV_PAD - 1) / LLM_KV_PAD * LLM_KV_PAD;
    const size_t row = llm_row_size(c->p.type_k, (int64_t)hp->n_embd_head_k * hp->n_head_kv) +
                       llm_row_size(c->p.type_v, (int64_t)hp->n_embd_head_v * hp->n_head_kv);
    for (uint32_t il = 0; il < hp->n_layer; il++)
        bytes += kv_offloaded(c, il) ? row * cells : 0;
    return bytes;
}

/* -fitt: the largest -ngl (at most the one asked for) whose placement leaves fit_target_mib MiB of
 * the device's memory free, as llama-bench's fit target. */
static void fit_layers(struct llm_context *c)
{
    struct llm_backend *npu = c->backends[0];
    if (c->p.fit_target_mib <= 0 || c->n_backends < 2 || !npu->iface->memory)
        return;
    size_t free_bytes = 0, total = 0;
    npu->iface->memory(npu, &free_bytes, &total);
    const size_t margin = (size_t)c->p.fit_target_mib << 20;
    const int32_t all = (int32_t)c->model->hp.n_layer + 1;
    int32_t ngl = c->p.n_gpu_layers < 0 || c->p.n_gpu_layers > all ? all : c->p.n_gpu_layers;
    for (; ngl > 0; ngl--) {
        c->p.n_gpu_layers = ngl;
        if (placement_bytes(c) + margin <= free_bytes)
            return;
    }
    c->p.n_gpu_layers = 0;
}

int32_t llm_context_n_gpu_layers(const struct llm_context *c)
{
    return c->p.n_gpu_layers;
}

static int context_init(struct llm_context *c, struct llm_error *err)
{
    int rc = parse_overrides(c, c->p.tensor_overrides, err);
    if (!rc)
        rc = make_backends(c, err);
    if (rc)
        return rc;
    rc = llm_split_exec_init(&c->exec, c->backends, c->n_backends, err);
    c->gctx = llm_ctx_new(64 * (int)c->model->hp.n_layer + 256);
    if (!rc && !c->gctx)
        rc = llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    if (!rc)
        fit_layers(c);
    if (!rc)
        rc = llm_weights_place(&c->weights, c->model, c->backends[0], offload_tensor, c, err);
    struct llm_backend *kv_home[LLM_MAX_LAYERS];
    for (uint32_t il = 0; il < c->model->hp.n_layer && il < LLM_MAX_LAYERS; il++) {
        kv_home[il] = !layer_here(c, il) ? NULL /* another rank's */
                      : c->backends[kv_offloaded(c, il) ? 0 : cpu_index(c)];
    }
    if (!rc)
        rc = llm_kv_cache_init(&c->kv, &c->model->hp, kv_home, c->p.n_ctx, c->p.type_k, c->p.type_v, err);
    if (!rc)
        rc = init_inputs(c, err);
    if (!rc)
        rc = reserve(c, err);
    return rc;
}

/* The layers this process runs: all of them, a later rank's stage as given, or on rank 0 of a job
 * the first stage, after the other ranks opened theirs. */
static int stage_init(struct llm_context *c, struct llm_error *err)
{
    const int32_t n_layer = (int32_t)c->model->hp.n_layer;
    c->first = 0;
    c->end = n_layer;
    if (c->p.layer_end > 0) {
        if (c->p.layer_first < 0 || c->p.layer_first >= c->p.layer_end || c->p.layer_end > n_layer)
            return llm_fail(err, LLM_ERR_ARG, "stage layers [%d, %d) outside the model's %d", c->p.layer_first,
                            c->p.layer_end, n_layer);
        if (!c->p.io)
            return llm_fail(err, LLM_ERR_ARG, "a stage of layers [%d, %d) needs a transport", c->p.layer_first,
                            c->p.layer_end);
        c->first = c->p.layer_first;
        c->end = c->p.layer_end;
        c->io = c->p.io;
    } else if (llm_link_size(c->p.link) > 1) {
        int rc = llm_pipe_open(c->p.link, c->model, &c->p, &c->pipe, &c->end, err);
        if (rc)
            return rc;
        c->io = llm_pipe_io(c->pipe);
    }
    /* a stage's model was loaded without the repack (LLM_LOAD_NO_REPACK): its own layers get it */
    return c->io ? llm_model_repack_layers(c->model, c->first, c->end, err) : LLM_OK;
}

/* A context with parameters p in *out, also when making it failed (NULL only without memory). */
static int context_make(struct llm_model *model, const struct llm_context_params *p, struct llm_context **out,
                        struct llm_error *err)
{
    struct llm_context *c = *out = calloc(1, sizeof *c);
    if (!c)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    c->model = model;
    c->p = *p;
    if (c->p.n_ubatch > c->p.n_batch)
        c->p.n_ubatch = c->p.n_batch;
    int rc = stage_init(c, err);
    if (!rc)
        rc = context_init(c, err);
    if (!rc && p->sampler &&
        (!(c->smpl = llm_sampler_new(p->sampler, (int32_t)model->hp.n_vocab)) || !llm_sampler_ban(c->smpl, p->sampler_banned)))
        rc = llm_fail(err, LLM_ERR_NOMEM, "out of memory for the sampler");
    c->draw_remote = c->pipe && llm_pipe_draws(c->pipe);
    c->p.sampler = NULL, c->p.sampler_banned = NULL; /* copied: the caller's may go */
    return rc;
}

/* -fitt: fit_layers counts weights and KV cache only, before the compute buffers exist. A context
 * (made with result rc) whose compute buffers then do not fit the device, or leave less than the
 * margin free, is made again a layer lower, and at -ngl 0 without op offload (whose weight copies
 * and scratch are the device's): true with q set for the next try, false to keep this one. */
static bool refit(const struct llm_context *c, int rc, struct llm_context_params *q)
{
    const int32_t ngl = c->p.n_gpu_layers;
    if (c->p.fit_target_mib <= 0 || c->n_backends < 2 || c->pipe || ngl < 0 || (ngl == 0 && c->p.no_op_offload) ||
        (rc && rc != LLM_ERR_NOMEM))
        return false;
    struct llm_backend *npu = c->backends[0];
    size_t free_bytes = 0, total = 0;
    if (!rc && npu->iface->memory)
        npu->iface->memory(npu, &free_bytes, &total);
    if (!rc && free_bytes >= (size_t)c->p.fit_target_mib << 20)
        return false;
    q->n_gpu_layers = ngl > 0 ? ngl - 1 : 0;
    q->no_op_offload = ngl == 0;
    return true;
}

int llm_context_new(struct llm_model *model, const struct llm_context_params *p,
                    struct llm_context **out, struct llm_error *err)
{
    *out = NULL;
    if (p->n_ctx < 1 || p->n_batch < 1 || p->n_ubatch < 1 || p->n_threads < 1)
        return llm_fail(err, LLM_ERR_ARG, "context sizes and thread count must be positive");
    int rc = llm_kv_cache_check(&model->hp, p->type_k, p->type_v, p->flash_attn, err);
    if (rc)
        return rc;
    struct llm_context_params q = *p;
    for (;;) {
        struct llm_context *c = NULL;
        rc = context_make(model, &q, &c, err);
        const bool again = c && refit(c, rc, &q);
        if (rc || again)
            llm_context_free(c);
        if (!again) {
            *out = rc ? NULL : c;
            return rc;
        }
    }
}

/* Fill the inputs for tokens[0..n) at positions n_past.. (one sequence, cell = position) in their
 * host buffers, which the graph's input tensors point at. */
static void fill_inputs(struct llm_context *c, const int32_t *tokens, int32_t n)
{
    const struct llm_build_inputs *in = &c->graph_in;
    const int32_t n_past = c->kv.n_used, n_kv = in->n_kv, n_out = in->n_outputs;
    int32_t *tok = c->host[IN_TOKENS], *pos = c->host[IN_POS], *idx = c->host[IN_KV_IDX];
    int32_t *out_ids = c->host[IN_OUT_IDS];
    float *mask = c->host[IN_MASK];
    for (int32_t i = 0; i < n; i++) {
        tok[i] = tokens ? tokens[i] : 0;
        pos[i] = idx[i] = n_past + i;
        float *row = mask + (size_t)i * (size_t)n_kv;
        for (int32_t j = 0; j < n_kv; j++)
            row[j] = j <= n_past + i ? 0.0f : -INFINITY;
    }
    for (int32_t i = 0; i < n_out; i++)
        out_ids[i] = n_out == n ? i : n - 1;
}

/* Make c->graph the allocated graph of this shape, reusing the last one when nothing changed. */
static int prepare_graph(struct llm_context *c, int32_t n, int32_t n_kv, int32_t n_out, struct llm_error *err)
{
    const struct llm_build_inputs *last = &c->graph_in;
    if (c->graph && last->n_tokens == n && last->n_kv == n_kv && last->n_outputs == n_out &&
        c->graph_generation == llm_split_exec_generation(&c->exec))
        return LLM_OK;
    llm_graph_free(c->graph);
    c->graph = build_graph(c, &c->graph_in, n, n_kv, n_out, &c->graph_logits);
    if (!c->graph)
        return llm_fail(err, LLM_ERR_NOMEM, "cannot build the compute graph (%s)",
                        llm_ctx_error(c->gctx) ? llm_ctx_error(c->gctx) : "out of memory");
    const struct llm_sched_query q = sched_query(c);
    const double t0 = llm_now_us();
    int rc = llm_split_exec_prepare(&c->exec, c->graph, &q, false, err);
    c->schedule_us += llm_now_us() - t0;
    c->schedules++;
    if (rc) {
        llm_graph_free(c->graph);
        c->graph = NULL;
        return rc;
    }
    c->graph_generation = llm_split_exec_generation(&c->exec);
    return LLM_OK;
}

/* Room for rows of n_vocab floats (the widest rows: logits; hidden states with -embd and a stage's
 * residual rows are n_embd wide). */
static int logits_room(struct llm_context *c, int32_t rows, struct llm_error *err)
{
    const int32_t n_vocab = (int32_t)(c->model->hp.n_vocab > c->model->hp.n_embd ? c->model->hp.n_vocab
                                                                                  : c->model->hp.n_embd);
    if (rows > c->logits_cap_rows) {
        float *nl = realloc(c->logits, (size_t)rows * (size_t)n_vocab * sizeof(float));
        if (!nl)
            return llm_fail(err, LLM_ERR_NOMEM, "out of memory for logits");
        c->logits = nl;
        c->logits_cap_rows = rows;
    }
    return LLM_OK;
}

/* Append the n_out rows of the graph's output (logits, or a stage's residual) to c->logits. */
static int read_logits(struct llm_context *c, int32_t n_out, struct llm_error *err)
{
    const int32_t rows = c->n_logits_rows + n_out;
    int rc = logits_room(c, rows, err);
    if (rc)
        return rc;
    const struct llm_tensor *logits = c->graph_logits;
    float *dst = c->logits + (size_t)c->n_logits_rows * (size_t)out_width(c);
    rc = llm_tensor_get(logits, dst, 0, (size_t)n_out * logits->nb[1], err);
    if (!rc)
        c->n_logits_rows = rows;
    return rc;
}

/* One host step of a decode on the host track of the trace. */
static void host_span(struct llm_context *c, const char *name, double t0)
{
    llm_trace_span(c->p.trace, LLM_TRACE_HOST, name, "host", t0, llm_now_us() - t0, NULL);
}

static int decode_ubatch(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all,
                         struct llm_error *err)
{
    const int32_t n_out = logits_all || !last_stage(c) ? n : 1;
    struct llm_profile *prof = c->p.profile;
    const enum llm_phase phase = n > 1 ? LLM_PHASE_PREFILL : LLM_PHASE_DECODE;
    if (prof)
        prof->phase = phase;
    double t0 = llm_now_us();
    int rc = prepare_graph(c, n, llm_kv_cache_window(&c->kv, n), n_out, err);
    host_span(c, "graph build + allocation", t0);
    t0 = llm_now_us();
    if (!rc)
        fill_inputs(c, tokens, n);
    if (!rc && c->first > 0) /* the previous stage's residual, into the fixed input buffer */
        rc = c->io->recv(c->io->user, c->host[IN_EMBD], (size_t)n * c->model->hp.n_embd * sizeof(float), err);
    host_span(c, "input upload", t0);
    t0 = llm_now_us();
    if (!rc)
        rc = llm_split_exec_run(&c->exec, err);
    if (prof && !rc) {
        prof->graphs[phase]++;
        prof->tokens[phase] += (uint64_t)n;
        prof->graph_us[phase] += llm_now_us() - t0;
    }
    host_span(c, "graph compute", t0);
    t0 = llm_now_us();
    if (!rc)
        rc = read_logits(c, n_out, err);
    if (!rc && !last_stage(c)) { /* on to the next stage */
        if (c->io->send)
            rc = c->io->send(c->io->user, c->logits, (size_t)n * (size_t)out_width(c) * sizeof(float), err);
        c->n_logits_rows = 0;
    }
    host_span(c, "logits read", t0);
    llm_trace_flush(c->p.trace);
    if (!rc)
        c->kv.n_used += n;
    return rc;
}

/* llm_decode; token: the last stage draws the next token and this takes it instead of a row of
 * logits (the rows of logits_all still come). */
static int decode(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all, int32_t *token,
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
    if (!tokens && c->first == 0)
        return llm_fail(err, LLM_ERR_ARG, "decode: no tokens");
    for (int32_t i = 0; tokens && i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return llm_fail(err, LLM_ERR_ARG, "decode: token id %d out of range [0, %d)", tokens[i], n_vocab);
    c->n_logits_rows = 0;
    if (c->io && c->io->begin) {
        int rc = c->io->begin(c->io->user, n, logits_all, token != NULL, err);
        if (rc)
            return rc;
    }
    for (int32_t done = 0; done < n;) {
        int32_t nu = n - done < c->p.n_ubatch ? n - done : c->p.n_ubatch;
        bool last = done + nu == n;
        int rc = decode_ubatch(c, tokens ? tokens + done : NULL, nu, logits_all, err);
        if (rc)
            return rc;
        if (!logits_all && !last)
            c->n_logits_rows = 0; /* only the final micro-batch's last row is kept */
        done += nu;
    }
    if (c->io && c->io->finish) { /* the logits (or the drawn token) come back from the last stage */
        const int32_t rows = logits_all ? n : token ? 0 : 1;
        int rc = logits_room(c, rows, err);
        if (!rc)
            rc = c->io->finish(c->io->user, c->logits, rows, token, err);
        if (rc)
            return rc;
        c->n_logits_rows = rows;
    }
    for (int32_t i = 0; c->smpl && tokens && i < n; i++)
        llm_sampler_accept(c->smpl, tokens[i]);
    return LLM_OK;
}

int llm_decode(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all,
               struct llm_error *err)
{
    return decode(c, tokens, n, logits_all, NULL, err);
}

int llm_decode_next(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all, int32_t *next,
                    struct llm_error *err)
{
    if (!c->smpl || c->p.embeddings)
        return llm_fail(err, LLM_ERR_ARG, "decode: drawing a token needs a sampler and logits");
    int rc = decode(c, tokens, n, logits_all, c->draw_remote ? next : NULL, err);
    if (rc || c->draw_remote)
        return rc;
    const double t0 = llm_now_us();
    *next = llm_sampler_sample(c->smpl, llm_get_logits(c, c->n_logits_rows - 1));
    c->draw_us += llm_now_us() - t0;
    return LLM_OK;
}

double llm_draw_ms(const struct llm_context *c)
{
    return c->draw_us / 1e3;
}

const float *llm_get_logits(const struct llm_context *c, int32_t i)
{
    if (c->p.embeddings || i < 0 || i >= c->n_logits_rows)
        return NULL;
    return c->logits + (size_t)i * c->model->hp.n_vocab;
}

const float *llm_get_embeddings(const struct llm_context *c, int32_t i)
{
    if (!c->p.embeddings || i < 0 || i >= c->n_logits_rows)
        return NULL;
    return c->logits + (size_t)i * (size_t)out_width(c);
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
    if (c->pipe)
        llm_pipe_clear(c->pipe, NULL);
    c->kv.n_used = 0;
}

int llm_context_ranks(const struct llm_context *c, struct llm_rank_info *out, int cap)
{
    if (c->pipe)
        return llm_pipe_ranks(c->pipe, out, cap);
    if (cap < 1)
        return 0;
    out[0] = (struct llm_rank_info){ .rank = 0, .first = c->first, .end = c->end };
    return 1;
}

size_t llm_context_kv_cell_bytes(const struct llm_context *c)
{
    return llm_kv_cache_cell_bytes(&c->kv);
}

const struct llm_model *llm_context_model(const struct llm_context *c)
{
    return c->model;
}

struct llm_backend *llm_context_device(const struct llm_context *c)
{
    return c->n_backends > 1 ? c->backends[0] : NULL;
}

int llm_context_stats(const struct llm_context *c, struct llm_backend_stat *out, int cap)
{
    int n = 0;
    for (int b = 0; b < c->n_backends; b++) {
        const int k = c->backends[b]->iface->get_stats(c->backends[b], out + n, cap - n);
        n += k < cap - n ? k : cap - n;
    }
    return n;
}

const char *llm_context_backend_name(const struct llm_context *c)
{
    return c->backends[0]->iface->name;
}

int llm_context_n_splits(const struct llm_context *c)
{
    return c->graph ? c->exec.plan.n_splits : 0;
}

void llm_context_split(const struct llm_context *c, int i, struct llm_split_info *out)
{
    const struct llm_sched_split *sp = &c->exec.plan.splits[i];
    *out = (struct llm_split_info){ .backend = c->backends[sp->backend]->iface->name, .first = sp->first,
                                    .end = sp->end, .n_inputs = sp->n_inputs };
    for (int m = sp->first_input; m < sp->first_input + sp->n_inputs; m++)
        out->input_bytes += llm_nbytes(c->exec.plan.inputs[m]);
}

double llm_context_copy_bytes_per_token(const struct llm_context *c)
{
    double bytes = 0;
    for (int i = 0; i < llm_context_n_splits(c); i++) {
        struct llm_split_info si;
        llm_context_split(c, i, &si);
        bytes += (double)si.input_bytes;
    }
    return c->graph ? bytes / c->graph_in.n_tokens : 0.0;
}

void llm_context_schedule_time(const struct llm_context *c, double *us, int64_t *graphs)
{
    *us = c->schedule_us;
    *graphs = c->schedules;
}
