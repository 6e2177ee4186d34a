#include "arch.h"

#include <string.h>

#include "model.h"

/* llama.cpp's size classes, by layer count and what tells apart the sizes sharing one. */
static const char *llama_size_class(const struct llm_hparams *hp)
{
    switch (hp->n_layer) {
    case 16: case 22: return "1B";
    case 26: case 28: return "3B";
    case 32: return hp->n_vocab < 40000 ? "7B" : "8B";
    case 40: return "13B";
    case 48: return "34B";
    case 60: return "30B";
    case 80: return hp->n_head == hp->n_head_kv ? "65B" : "70B";
    default: return "?B";
    }
}

static const char *qwen2_size_class(const struct llm_hparams *hp)
{
    switch (hp->n_layer) {
    case 24: return hp->n_embd == 1024 ? "0.5B" : "1B";
    case 28: return hp->n_embd == 1536 ? "1.5B" : "7B";
    case 32: return "7B";
    case 36: return "3B";
    case 40: return hp->n_head == 20 ? "4B" : "13B";
    case 48: return "14B";
    case 64: return "32B";
    case 80: return "70B";
    default: return "?B";
    }
}

static const struct llm_arch_info archs[] = {
    [LLM_ARCH_LLAMA] = { "llama", LLM_ROPE_NORMAL, true, false, false, false, 10000.0f, 1e-5f, llama_size_class },
    [LLM_ARCH_QWEN2] = { "qwen2", LLM_ROPE_NEOX, false, true, true, true, 1000000.0f, 1e-6f, qwen2_size_class },
};
_Static_assert(sizeof archs / sizeof archs[0] == LLM_ARCH_COUNT, "one row per architecture");

const struct llm_arch_info *llm_arch_info(enum llm_arch a)
{
    return &archs[a];
}

const char *llm_arch_name(enum llm_arch a)
{
    return (unsigned)a < LLM_ARCH_COUNT ? archs[a].name : "?";
}

int llm_arch_find(const char *name, size_t len)
{
    for (int a = 0; a < LLM_ARCH_COUNT; a++)
        if (strlen(archs[a].name) == len && !memcmp(archs[a].name, name, len))
            return a;
    return -1;
}
