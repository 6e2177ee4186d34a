/* Model loading: hyper-parameters and weights of llama and qwen2 models from a GGUF file.
 * Weights are llm_tensors whose data points into the read-only mapping (used in place). */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "error.h"
#include "gguf.h"
#include "tensor.h"
#include "vocab.h"

#define LLM_MAX_LAYERS 512


struct llm_hparams {
    enum llm_arch arch;
    uint32_t n_ctx_train;     /* <arch>.context_length                                   */
    uint32_t n_embd;          /* <arch>.embedding_length                                 */
    uint32_t n_layer;         /* <arch>.block_count                                      */
    uint32_t n_ff;            /* <arch>.feed_forward_length                              */
    uint32_t n_head;          /* <arch>.attention.head_count                             */
    uint32_t n_head_kv;       /* <arch>.attention.head_count_kv (default n_head)         */
    uint32_t n_embd_head_k;   /* key_length (default n_embd / n_head)                    */
    uint32_t n_embd_head_v;   /* value_length (default n_embd / n_head)                  */
    uint32_t n_rot;           /* rope.dimension_count (default n_embd_head_k)            */
    uint32_t n_vocab;         /* <arch>.vocab_size or the token count                    */
    float f_norm_rms_eps;     /* attention.layer_norm_rms_epsilon                        */
    float rope_freq_base;     /* rope.freq_base (default 10000)                          */
    float rope_freq_scale;    /* 1 / rope.scaling.factor for linear scaling, else 1      */
    enum llm_rope_type rope_type; /* the architecture's (arch.h)                         */
    int32_t file_type;        /* general.file_type or -1 when absent                     */
};

/* The tensors of one layer, listed once: the struct, binding (model.c), placement and upload
 * (weights.c) and synthetic files (synth.c) all follow this list. Each row: field, GGUF name after
 * "blk.N.", shape [ne0, ne1] in the sizes D (n_embd), Q (n_head·head), KV (n_head_kv·head), FF (n_ff)
 * (ne1 0 for a vector), role (MATRIX: a dot-product weight; NORM: an F32 norm weight; BIAS: an F32
 * bias), and presence (REQUIRED; QKV_BIAS: optional, written by synth for architectures with q/k/v
 * biases; OPTIONAL). */
#define LLM_LAYER_TENSORS(X)                                   \
    X(attn_norm, "attn_norm.weight", D, 0, NORM, REQUIRED)     \
    X(wq, "attn_q.weight", D, Q, MATRIX, REQUIRED)             \
    X(wk, "attn_k.weight", D, KV, MATRIX, REQUIRED)            \
    X(wv, "attn_v.weight", D, KV, MATRIX, REQUIRED)            \
    X(bq, "attn_q.bias", Q, 0, BIAS, QKV_BIAS)                 \
    X(bk, "attn_k.bias", KV, 0, BIAS, QKV_BIAS)                \
    X(bv, "attn_v.bias", KV, 0, BIAS, QKV_BIAS)                \
    X(wo, "attn_output.weight", Q, D, MATRIX, REQUIRED)        \
    X(bo, "attn_output.bias", D, 0, BIAS, OPTIONAL)            \
    X(ffn_norm, "ffn_norm.weight", D, 0, NORM, REQUIRED)       \
    X(ffn_gate, "ffn_gate.weight", D, FF, MATRIX, REQUIRED)    \
    X(ffn_up, "ffn_up.weight", D, FF, MATRIX, REQUIRED)        \
    X(ffn_down, "ffn_down.weight", FF, D, MATRIX, REQUIRED)

struct llm_layer {
#define LLM_LAYER_FIELD(field, name, ne0, ne1, role, presence) struct llm_tensor *field;
    LLM_LAYER_TENSORS(LLM_LAYER_FIELD)
#undef LLM_LAYER_FIELD
};

struct llm_model {
    struct gguf_file *file;        /* owns the memory the weights point into    */
    struct vocab *vocab;
    struct llm_hparams hp;
    struct llm_tensor *tensors;    /* one per tensor of the file, data in the mapping */
    int64_t n_tensors;
    struct llm_tensor *tok_embd;   /* [n_embd, n_vocab]                         */
    struct llm_tensor *output_norm;/* [n_embd]                                  */
    struct llm_tensor *output;     /* [n_embd, n_vocab]; == tok_embd when tied  */
    struct llm_tensor *output_b;   /* optional [n_vocab]                        */
    struct llm_tensor *rope_freqs; /* optional [n_rot/2]                        */
    struct llm_layer *layers;      /* n_layer entries                           */
    char desc[128];                /* "llama ?B all F32" as llama-bench prints  */
    uint64_t n_bytes;              /* Σ tensor bytes                            */
    uint64_t n_params;             /* Σ tensor elements                         */
    int32_t ftype;                 /* hp.file_type, or guessed from the tensor types when absent */
    bool ftype_guessed;            /* general.file_type was absent              */
    void *repacked;                /* mapping of the repacked matrices (anonymous, or the repack cache's entry), or NULL */
    size_t repacked_bytes;
};

/* Repack the matrices the cpu decodes faster in the layout of src/ops/types/repack.h (their data then
 * points into m->repacked and they carry LLM_TENSOR_REPACKED), dropping the file's pages of each;
 * llm_model_load does it, on n_threads threads (1..64; others are clamped, and a thread that cannot
 * be created leaves its share to the caller's). The bytes do not depend on n_threads. A file loaded
 * mapped takes its copy from the repack cache when it is there, and leaves it there when it was not
 * (src/model/repack_cache.h; m->repacked then maps the cache's entry, read-only). Non-zero (an
 * llm_error code) when the memory cannot be mapped. */
int llm_model_repack(struct llm_model *m, int n_threads, struct llm_error *err);
/* Repack the matrices of layers [first, end) that llm_model_repack would repack and that are not
 * repacked yet, at the places it would give them (only their pages take memory), dropping the file's
 * pages of each: a pipeline stage over MPI, whose model was loaded with LLM_LOAD_NO_REPACK, decodes
 * its own layers repacked without copying the others'. The other tensors stay where they are. Single
 * threaded; callers must not run a graph of m meanwhile. Non-zero (an llm_error code) when the
 * memory cannot be mapped. */
int llm_model_repack_layers(struct llm_model *m, int32_t first, int32_t end, struct llm_error *err);
void llm_model_repack_free(struct llm_model *m);

/* Open path, read hyper-parameters, bind every weight by name with shape and type checks, load the
 * vocabulary. Errors name the file and the key or tensor (unknown architecture, missing required
 * key, per-layer arrays, missing tensor, wrong shape, a type the graph cannot use for that tensor
 * (matrices need a dot-product kernel, the token embedding dequantization, norm weights, biases
 * and rope factors F32), a tensor the model does not use, fused QKV, rope scaling other than
 * linear, vocab-only file). Names from the file appear escaped (llm_escape). A model that loads
 * runs: every op its graph builds supports these types. On error *out is NULL. */
int llm_model_load(const char *path, struct llm_model **out, struct llm_error *err);
/* llm_model_load with the file brought into memory as mode says (gguf_open_mode): the weights then
 * point into the file's mapping or into the anonymous memory it was read into, or into the repacked
 * copy (llm_model_repack, on n_threads threads; llm_model_load takes one). n_threads
 * LLM_LOAD_NO_REPACK repacks nothing: a pipeline stage over MPI touches only its own layers'
 * tensors, where a repack would copy every one (src/mpi/README.md); its context repacks those
 * (llm_model_repack_layers). */
#define LLM_LOAD_NO_REPACK 0
int llm_model_load_mode(const char *path, enum gguf_load_mode mode, int n_threads, struct llm_model **out,
                        struct llm_error *err);
void llm_model_free(struct llm_model *m);

/* Set m->ftype, m->ftype_guessed and m->desc ("<arch> <size class> <ftype name>",
 * src/model/README.md) from the hyper-parameters and the tensors' types. llm_model_load calls it. */
void llm_model_describe(struct llm_model *m);

/* Size class llama.cpp gives these hyper-parameters ("0.5B", "1B", "?B" when unknown). */
const char *llm_model_size_class(const struct llm_hparams *hp);

/* llama-bench's size and params cells: "%.2f MiB" below 1 GiB else "%.2f GiB"; "%.2f M" below 1e9
 * else "%.2f B". */
void llm_format_size(uint64_t n_bytes, char *buf, size_t cap);
void llm_format_params(uint64_t n_params, char *buf, size_t cap);

/* Name of a llama_ftype as llama-bench prints it ("Q4_K - Medium"), or NULL when unknown. */
const char *llm_ftype_name(int32_t ftype);

/* Text from a file (or anything untrusted) made safe to print on one terminal line: control
 * characters (C0, DEL, C1, U+2028/2029, bidi overrides) become \n, \r, \t, \xNN or \uNNNN,
 * bytes that are not UTF-8 \xNN; valid UTF-8 is kept. With LLM_ESC_QUOTES also \ ' and " get a
 * backslash (text shown between quotes). At most max input bytes are shown, then "...". Writes a
 * NUL-terminated string of at most cap bytes and returns the full length (as snprintf). */
#define LLM_ESC_QUOTES 1u
size_t llm_escape(char *buf, size_t cap, const char *s, size_t len, size_t max, unsigned flags);

#endif
