/* The type geometry table: name, block size and bytes per block of every known GGUF type. */
#include "tensor.h"

#include <strings.h>

#define ROW(nm, bs, ts, q) { .name = nm, .blck_size = bs, .type_size = ts, .is_quantized = q }

/* Unsized so that the last row fixes the length; retired ids are left zeroed (name NULL). */
static const struct llm_type_info infos[] = {
    [LLM_TYPE_F32] = ROW("F32", 1, 4, false),
    [LLM_TYPE_F16] = ROW("F16", 1, 2, false),
    [LLM_TYPE_Q4_0] = ROW("Q4_0", 32, 18, true),
    [LLM_TYPE_Q4_1] = ROW("Q4_1", 32, 20, true),
    [LLM_TYPE_Q5_0] = ROW("Q5_0", 32, 22, true),
    [LLM_TYPE_Q5_1] = ROW("Q5_1", 32, 24, true),
    [LLM_TYPE_Q8_0] = ROW("Q8_0", 32, 34, true),
    [LLM_TYPE_Q8_1] = ROW("Q8_1", 32, 36, true),
    [LLM_TYPE_Q2_K] = ROW("Q2_K", 256, 84, true),
    [LLM_TYPE_Q3_K] = ROW("Q3_K", 256, 110, true),
    [LLM_TYPE_Q4_K] = ROW("Q4_K", 256, 144, true),
    [LLM_TYPE_Q5_K] = ROW("Q5_K", 256, 176, true),
    [LLM_TYPE_Q6_K] = ROW("Q6_K", 256, 210, true),
    [LLM_TYPE_Q8_K] = ROW("Q8_K", 256, 292, true),
    [LLM_TYPE_IQ2_XXS] = ROW("IQ2_XXS", 256, 66, true),
    [LLM_TYPE_IQ2_XS] = ROW("IQ2_XS", 256, 74, true),
    [LLM_TYPE_IQ3_XXS] = ROW("IQ3_XXS", 256, 98, true),
    [LLM_TYPE_IQ1_S] = ROW("IQ1_S", 256, 50, true),
    [LLM_TYPE_IQ4_NL] = ROW("IQ4_NL", 32, 18, true),
    [LLM_TYPE_IQ3_S] = ROW("IQ3_S", 256, 110, true),
    [LLM_TYPE_IQ2_S] = ROW("IQ2_S", 256, 82, true),
    [LLM_TYPE_IQ4_XS] = ROW("IQ4_XS", 256, 136, true),
    [LLM_TYPE_I8] = ROW("I8", 1, 1, false),
    [LLM_TYPE_I16] = ROW("I16", 1, 2, false),
    [LLM_TYPE_I32] = ROW("I32", 1, 4, false),
    [LLM_TYPE_I64] = ROW("I64", 1, 8, false),
    [LLM_TYPE_F64] = ROW("F64", 1, 8, false),
    [LLM_TYPE_IQ1_M] = ROW("IQ1_M", 256, 56, true),
    [LLM_TYPE_BF16] = ROW("BF16", 1, 2, false),
    [LLM_TYPE_TQ1_0] = ROW("TQ1_0", 256, 54, true),
    [LLM_TYPE_TQ2_0] = ROW("TQ2_0", 256, 66, true),
    [LLM_TYPE_MXFP4] = ROW("MXFP4", 32, 17, true),
};
_Static_assert(sizeof infos / sizeof infos[0] == LLM_TYPE_COUNT,
               "infos must end at the last id below LLM_TYPE_COUNT");

const struct llm_type_info *llm_type_info(int t)
{
    return t >= 0 && t < LLM_TYPE_COUNT && infos[t].name ? &infos[t] : NULL;
}

const char *llm_type_name(enum llm_type t)
{
    const struct llm_type_info *ti = llm_type_info((int)t);
    return ti ? ti->name : "?";
}

int llm_type_from_name(const char *name)
{
    for (int t = 0; t < LLM_TYPE_COUNT; t++)
        if (infos[t].name && strcasecmp(infos[t].name, name) == 0)
            return t;
    return -1;
}

size_t llm_row_size(enum llm_type t, int64_t ne0)
{
    const struct llm_type_info *ti = llm_type_info((int)t);
    return (size_t)(ne0 / ti->blck_size) * ti->type_size;
}

size_t llm_nbytes(const struct llm_tensor *t)
{
    const struct llm_type_info *ti = llm_type_info(t->type);
    if (t->flags & LLM_TENSOR_REPACKED) /* 2-D, rows in whole groups */
        return llm_row_size(t->type, t->ne[0]) * (size_t)((t->ne[1] + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS * LLM_REPACK_ROWS);
    /* a row of whole elements may be strided (a transposed view); quantized rows are packed */
    size_t n = ti->blck_size > 1 || t->ne[0] < 1 ? llm_row_size(t->type, t->ne[0])
                                                 : ti->type_size + (size_t)(t->ne[0] - 1) * t->nb[0];
    for (int i = 1; i < LLM_MAX_DIMS; i++)
        if (t->ne[i] > 1)
            n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}
