/* The model description llama-bench prints ("qwen2 1B Q8_0", src/model/README.md) and its size
 * cells. */
#include "model.h"

#include <stdio.h>

struct ftype_row {
    int32_t ftype;
    const char *name;
    int guess_type; /* tensor type that makes this the guessed ftype, or -1 */
};

/* llama_ftype values and names as llama.cpp prints them. */
static const struct ftype_row ftypes[] = {
    { 0, "all F32", LLM_TYPE_F32 },
    { 1, "F16", LLM_TYPE_F16 },
    { 2, "Q4_0", LLM_TYPE_Q4_0 },
    { 3, "Q4_1", LLM_TYPE_Q4_1 },
    { 7, "Q8_0", LLM_TYPE_Q8_0 },
    { 8, "Q5_0", LLM_TYPE_Q5_0 },
    { 9, "Q5_1", LLM_TYPE_Q5_1 },
    { 10, "Q2_K - Medium", LLM_TYPE_Q2_K },
    { 11, "Q3_K - Small", -1 },
    { 12, "Q3_K - Medium", LLM_TYPE_Q3_K },
    { 13, "Q3_K - Large", -1 },
    { 14, "Q4_K - Small", -1 },
    { 15, "Q4_K - Medium", LLM_TYPE_Q4_K },
    { 16, "Q5_K - Small", -1 },
    { 17, "Q5_K - Medium", LLM_TYPE_Q5_K },
    { 18, "Q6_K", LLM_TYPE_Q6_K },
    { 19, "IQ2_XXS - 2.0625 bpw", LLM_TYPE_IQ2_XXS },
    { 20, "IQ2_XS - 2.3125 bpw", LLM_TYPE_IQ2_XS },
    { 21, "Q2_K - Small", -1 },
    { 22, "IQ3_XS - 3.3 bpw", -1 },
    { 23, "IQ3_XXS - 3.0625 bpw", LLM_TYPE_IQ3_XXS },
    { 24, "IQ1_S - 1.5625 bpw", LLM_TYPE_IQ1_S },
    { 25, "IQ4_NL - 4.5 bpw", LLM_TYPE_IQ4_NL },
    { 26, "IQ3_S - 3.4375 bpw", LLM_TYPE_IQ3_S },
    { 27, "IQ3_S mix - 3.66 bpw", -1 },
    { 28, "IQ2_S - 2.5 bpw", LLM_TYPE_IQ2_S },
    { 29, "IQ2_M - 2.7 bpw", -1 },
    { 30, "IQ4_XS - 4.25 bpw", LLM_TYPE_IQ4_XS },
    { 31, "IQ1_M - 1.75 bpw", LLM_TYPE_IQ1_M },
    { 32, "BF16", LLM_TYPE_BF16 },
    { 36, "TQ1_0 - 1.69 bpw ternary", LLM_TYPE_TQ1_0 },
    { 37, "TQ2_0 - 2.06 bpw ternary", LLM_TYPE_TQ2_0 },
    { 38, "MXFP4 MoE", LLM_TYPE_MXFP4 },
};
#define N_FTYPES (sizeof ftypes / sizeof ftypes[0])

const char *llm_ftype_name(int32_t ftype)
{
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype)
            return ftypes[i].name;
    return NULL;
}

/* The ftype of the most common tensor type (ties to the lower type id), or -1. */
static int32_t guess_ftype(const struct llm_model *m)
{
    int64_t count[LLM_TYPE_COUNT] = { 0 };
    for (int64_t i = 0; i < m->n_tensors; i++)
        if ((int)m->tensors[i].type >= 0 && m->tensors[i].type < LLM_TYPE_COUNT)
            count[m->tensors[i].type]++;
    int best = 0;
    for (int t = 1; t < LLM_TYPE_COUNT; t++)
        if (count[t] > count[best])
            best = t;
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].guess_type == best)
            return ftypes[i].ftype;
    return -1;
}

const char *llm_model_size_class(const struct llm_hparams *hp)
{
    return llm_arch_info(hp->arch)->size_class(hp);
}

void llm_model_describe(struct llm_model *m)
{
    m->ftype_guessed = m->hp.file_type < 0;
    m->ftype = m->ftype_guessed ? guess_ftype(m) : m->hp.file_type;
    const char *name = llm_ftype_name(m->ftype);
    snprintf(m->desc, sizeof m->desc, "%s %s %s%s", llm_arch_name(m->hp.arch),
             llm_model_size_class(&m->hp), m->ftype_guessed ? "(guessed) " : "",
             name ? name : "unknown, may not work");
}

void llm_format_size(uint64_t n_bytes, char *buf, size_t cap)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    if ((double)n_bytes < gib)
        snprintf(buf, cap, "%.2f MiB", (double)n_bytes / (1024.0 * 1024.0));
    else
        snprintf(buf, cap, "%.2f GiB", (double)n_bytes / gib);
}

void llm_format_params(uint64_t n_params, char *buf, size_t cap)
{
    if ((double)n_params < 1e9)
        snprintf(buf, cap, "%.2f M", (double)n_params / 1e6);
    else
        snprintf(buf, cap, "%.2f B", (double)n_params / 1e9);
}
