/* The model architectures, one table row each: everything that differs between them outside the
 * graph itself. Adding an architecture is one row here plus whatever its graph needs (build.c). */
#ifndef LLM_ARCH_H
#define LLM_ARCH_H

#include <stdbool.h>
#include <stddef.h>

struct llm_hparams;

enum llm_arch { LLM_ARCH_LLAMA, LLM_ARCH_QWEN2, LLM_ARCH_COUNT };
enum llm_rope_type { LLM_ROPE_NORMAL = 0, LLM_ROPE_NEOX = 2 };

struct llm_arch_info {
    const char *name;            /* general.architecture and the GGUF key prefix            */
    enum llm_rope_type rope;     /* how RoPE pairs a head's elements                         */
    bool rope_whole_head;        /* rope.dimension_count must equal the head size            */
    /* what synthetic files (synth.c) of the architecture have */
    bool qkv_bias;               /* the q/k/v projections carry biases                       */
    bool tied_output;            /* the output matrix is the token embedding                 */
    bool bpe_vocab;              /* a byte-level BPE vocabulary (else SentencePiece)         */
    float rope_freq_base, rms_eps; /* rope.freq_base and the norms' epsilon                  */
    /* the size class llama.cpp prints for these hyper-parameters ("0.5B", "?B" unknown) */
    const char *(*size_class)(const struct llm_hparams *hp);
};

/* The row of a (a valid enum value). */
const struct llm_arch_info *llm_arch_info(enum llm_arch a);
const char *llm_arch_name(enum llm_arch a);
/* The architecture named name[0..len); -1 when none is. */
int llm_arch_find(const char *name, size_t len);

#endif
