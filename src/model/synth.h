/* Synthetic models: GGUF files with the exact shapes and metadata of real llama/qwen2 models and
 * deterministic random weights, for benchmarks and tests (`llm synth`). */
#ifndef LLM_SYNTH_H
#define LLM_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"

struct llm_synth_opts {
    const char *preset;     /* "qwen2-0.5b", "qwen2-1.5b", "qwen2-3b" (Qwen2.5 shapes), "tinyllama-1.1b",
                               "llama2-7b" or "tiny" (d256 L2 h8/kv4 ff512)                       */
    const char *arch;       /* "llama", "qwen2", or NULL: the preset's (tiny: llama)              */
    const char *type;       /* F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K(_M) Q4_K(_M)
                               Q5_K(_M) Q6_K                                                      */
    bool pure;              /* every matrix of `type`; else llama-quantize's default mix          */
    uint64_t seed;
    const char *vocab_from; /* copy every tokenizer.* key from this GGUF, or NULL to generate one */
    int n_threads;          /* threads generating weights (values do not depend on it)            */
};

/* What a file made with these options holds (size and params as llama-bench counts them). */
struct llm_synth_plan {
    int64_t n_tensors;
    uint64_t n_bytes;       /* Σ tensor bytes   */
    uint64_t n_params;      /* Σ tensor elements */
    int32_t ftype;          /* general.file_type written */
    uint32_t n_vocab;
};

/* Check the options and compute the plan without generating weights. */
int llm_synth_plan(const struct llm_synth_opts *o, struct llm_synth_plan *plan,
                   struct llm_error *err);

/* Generate and write the model to path (temporary file renamed into place). */
int llm_synth_write(const struct llm_synth_opts *o, const char *path, struct llm_error *err);

/* Add a generated vocabulary of n_vocab tokens for arch "llama" (SentencePiece with <0xXX> byte
 * tokens, scores and types) or "qwen2" (gpt2 byte-level BPE with pre "qwen2", a few merges,
 * <|endoftext|>/<|im_start|>/<|im_end|> and [PAD<id>] tokens). n_vocab must be >= 512. */
int llm_synth_vocab(struct gguf_writer *w, bool qwen2, uint32_t n_vocab, struct llm_error *err);

#endif
