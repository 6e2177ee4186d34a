/* An inference context: a model, a backend, a KV cache and the fixed input tensors. llm_decode()
 * evaluates a batch of tokens (split into micro-batches of n_ubatch), appending them to the cache. */
#ifndef LLM_CONTEXT_H
#define LLM_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "error.h"
#include "model.h"
#include "sampler.h"

struct llm_link;

/* How a pipeline stage's activations and logits travel (src/model/pipeline.c fills it): the first
 * stage announces each decode (begin), sends its output (send) and at the end takes the logits of
 * the last stage (finish); a later stage receives its input (recv) and, unless it is the last,
 * sends its output. A NULL slot is not called. */
struct llm_stage_io {
    /* draw: the last stage draws the next token (llm_decode_next) and finish takes its id */
    int (*begin)(void *user, int32_t n_tokens, bool logits_all, bool draw, struct llm_error *err);
    int (*recv)(void *user, void *dst, size_t bytes, struct llm_error *err);
    int (*send)(void *user, const void *src, size_t bytes, struct llm_error *err);
    /* rows of logits (0: none), then the drawn token when token is not NULL */
    int (*finish)(void *user, float *logits, int32_t rows, int32_t *token, struct llm_error *err);
    void *user;
};

struct llm_context_params {
    int32_t n_ctx;         /* tokens the context can hold (cells are padded to 256)   */
    int32_t n_batch;       /* logical batch: max tokens per llm_decode call         */
    int32_t n_ubatch;      /* physical batch: max tokens per graph                  */
    int32_t n_threads;
    enum llm_type type_k;  /* KV cache types: F16 (default), F32, BF16 or quantized
                              (llm_kv_cache_type_ok; its rules: llm_kv_cache_check)   */
    enum llm_type type_v;
    bool flash_attn;       /* fused FLASH_ATTN node (default) or mul_mat+soft_max   */
    enum llm_device device;/* the device beside the cpu: cpu (none, the default) or npu */
    int32_t n_gpu_layers;  /* -ngl: the last N layers (the output layer counted as one)
                              on the device; -1 (default) all; 0 none                  */
    bool no_kv_offload;    /* -nkvo: every layer's KV cache in host memory            */
    bool no_op_offload;    /* -nopo 1: a batch of 32+ rows over a weight in host memory stays
                              on the cpu (else it runs on the device, the weight copied in) */
    int32_t fit_target_mib; /* -fitt: > 0 lowers n_gpu_layers to the largest count whose weights,
                              KV cache and compute buffers leave this many MiB of the device's
                              memory free, and at 0 turns op offload off if still needed (0: off) */
    bool embeddings;       /* -embd: decode keeps the final-normed hidden state of each output
                              row (llm_get_embeddings) instead of its logits              */
    const char *tensor_overrides; /* -ot: "PATTERN=DEVICE" items separated by ',' or ';'
                              (DEVICE cpu or npu; CPU, NPU, CANN, CANN0 too): the first
                              whose POSIX extended regex matches a weight's name decides
                              where it lives, before -ngl; NULL or "" for none          */
    const struct llm_backend_option *backend_options; /* the backends' own settings (the npu's
                              acl_graph and launch_us, say: src/npu/npu_backend.h); at most 16 */
    int n_backend_options;
    struct llm_profile *profile; /* per-op times by phase, or NULL (src/profile.h)  */
    struct llm_trace *trace;     /* timeline of host and backend threads, or NULL  */
    struct llm_link *link;       /* the job mpirun started (src/mpi/link.h), or NULL: with more
                                    than one rank this context is rank 0's first stage and drives
                                    the others (src/model/pipeline.h)                          */
    const char *ranks_split;     /* --ranks-split "a/b/...": shares of layers per rank; NULL or
                                    "" for equal shares                                         */
    const struct llm_sampler_params *sampler; /* llm_decode_next's draws (copied), or NULL     */
    const int32_t *sampler_banned; /* tokens it never draws, -1 terminated (--ignore-eos), or NULL */
    int32_t layer_first, layer_end; /* a later rank's stage: layers [first, end) (0, 0: all)   */
    const struct llm_stage_io *io;  /* that stage's transport; NULL                            */
};

struct llm_context_params llm_context_default_params(void);

struct llm_context;

/* The context borrows model (it must outlive the context). Creates the backends (p->device's, then
 * the cpu), uploads the offloaded layers' weights to the device once per context (weights of types
 * it lacks stay in host memory, and the nodes reading them run on the cpu), places each layer's KV
 * cache with its layer, and reserves every buffer for the largest graphs, so graphs keep their
 * addresses from then on. Each graph is scheduled over the backends (src/scheduler.h). */
int llm_context_new(struct llm_model *model, const struct llm_context_params *p,
                    struct llm_context **out, struct llm_error *err);
void llm_context_free(struct llm_context *c);

/* Evaluate n tokens at positions llm_n_past().. and append them to the cache. Logits of every token
 * when logits_all, else of the last one. Errors: n < 1, n > n_batch, context full. */
int llm_decode(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all,
               struct llm_error *err);

/* llm_decode, then the next token drawn from the last row by the context's sampler (p->sampler; an
 * error without one, or with p->embeddings) into *next. The sampler has seen every token decoded
 * (its repeat-penalty history), so one draw per call gives the same tokens as llm_sampler_sample
 * on llm_get_logits after each llm_decode. With a pipeline over MPI and no repeat penalty the
 * last rank draws and sends back the 4-byte id instead of a row of logits: llm_get_logits is then
 * NULL unless logits_all (those rows still travel). */
int llm_decode_next(struct llm_context *c, const int32_t *tokens, int32_t n, bool logits_all, int32_t *next,
                    struct llm_error *err);
/* Milliseconds this process spent in llm_decode_next's draws (the last rank's, when it draws). */
double llm_draw_ms(const struct llm_context *c);

/* Logits of the i-th output row of the last llm_decode (n_vocab floats). */
const float *llm_get_logits(const struct llm_context *c, int32_t i);
/* With p->embeddings: the hidden state after the output norm of the i-th output row of the last
 * llm_decode (n_embd floats; the last token's is llama.cpp's "last" pooling); NULL otherwise, as
 * llm_get_logits is NULL in that mode. */
const float *llm_get_embeddings(const struct llm_context *c, int32_t i);

/* Bytes one KV cell takes: the K and V rows of every layer this context holds (a Q8_0 cache takes
 * 34 bytes per 32 elements, F16 2 per element). */
size_t llm_context_kv_cell_bytes(const struct llm_context *c);
/* The -ngl the context placed its layers with (after -fitt; -1: all). */
int32_t llm_context_n_gpu_layers(const struct llm_context *c);
int32_t llm_n_past(const struct llm_context *c);
int32_t llm_n_ctx(const struct llm_context *c);
/* Forget every token in the cache. */
void llm_kv_clear(struct llm_context *c);
const struct llm_model *llm_context_model(const struct llm_context *c);
/* The backends' figures so far (the npu's graph cache, launches, host and device time), up to cap of
 * them; returns how many were written. None on cpu. */
int llm_context_stats(const struct llm_context *c, struct llm_backend_stat *out, int cap);
/* The device beside the cpu (the npu), NULL when the context runs on the cpu alone. */
struct llm_backend *llm_context_device(const struct llm_context *c);
const char *llm_context_backend_name(const struct llm_context *c);

/* Split i (0 .. llm_context_n_splits() - 1) of the last graph's schedule: its backend, its node
 * range and the inputs copied in from another backend before it runs. */
struct llm_split_info {
    const char *backend;
    int first, end;
    int n_inputs;
    size_t input_bytes;
};
int llm_context_n_splits(const struct llm_context *c);
/* Time spent scheduling and placing graphs so far, and how many: a graph shape is scheduled once
 * and reused while the shape stays (every 256 tokens of decode, each prompt micro-batch size). */
void llm_context_schedule_time(const struct llm_context *c, double *us, int64_t *graphs);
/* Bytes the last graph copied between backends, per token it evaluated (0 before any graph). */
double llm_context_copy_bytes_per_token(const struct llm_context *c);
void llm_context_split(const struct llm_context *c, int i, struct llm_split_info *out);

/* The pipeline stages of a context driven over MPI (one stage, rank 0, otherwise): up to cap of
 * them, each with its layers [first, end) (end == n_layer: it has the output layer) and resident
 * memory, asked of each rank now. Returns how many were written. */
struct llm_rank_info {
    int rank;
    int32_t first, end;
    double rss_bytes; /* the rank process's resident memory (VmRSS), 0 when unknown */
    /* time in this context's decodes, [0] prompts (more than one token) and [1] single tokens:
     * computing its stage, and waiting for its input, for the next rank to take its output or
     * (rank 0) for the logits; wait / (busy + wait) is the rank's share of pipeline bubble */
    double busy_ms[2], wait_ms[2];
    /* rank 0: bytes the last rank sent back per decode (logits, or the drawn token's id) */
    double back_bytes[2];
};
int llm_context_ranks(const struct llm_context *c, struct llm_rank_info *out, int cap);

#endif
