/* The type traits table: geometry of every known GGUF type; kernels where we have them. */
#include "types.h"

#include <pthread.h>
#include <strings.h>
#include <string.h>

#include "quants.h"

static struct llm_type_traits traits[LLM_TYPE_COUNT] = {
    [LLM_TYPE_F32] = { .name = "F32", .blck_size = 1, .type_size = 4,
        .to_float = llm_to_float_f32, .from_float = llm_from_float_f32 },
    [LLM_TYPE_F16] = { .name = "F16", .blck_size = 1, .type_size = 2,
        .to_float = llm_to_float_f16, .from_float = llm_from_float_f16 },
    [LLM_TYPE_Q4_0] = { .name = "Q4_0", .blck_size = 32, .type_size = 18, .is_quantized = true,
        .to_float = llm_to_float_q4_0, .from_float = llm_from_float_q4_0 },
    [LLM_TYPE_Q4_1] = { .name = "Q4_1", .blck_size = 32, .type_size = 20, .is_quantized = true,
        .to_float = llm_to_float_q4_1, .from_float = llm_from_float_q4_1 },
    [LLM_TYPE_Q5_0] = { .name = "Q5_0", .blck_size = 32, .type_size = 22, .is_quantized = true,
        .to_float = llm_to_float_q5_0, .from_float = llm_from_float_q5_0 },
    [LLM_TYPE_Q5_1] = { .name = "Q5_1", .blck_size = 32, .type_size = 24, .is_quantized = true,
        .to_float = llm_to_float_q5_1, .from_float = llm_from_float_q5_1 },
    [LLM_TYPE_Q8_0] = { .name = "Q8_0", .blck_size = 32, .type_size = 34, .is_quantized = true,
        .to_float = llm_to_float_q8_0, .from_float = llm_from_float_q8_0 },
    [LLM_TYPE_Q8_1] = { .name = "Q8_1", .blck_size = 32, .type_size = 36, .is_quantized = true,
        .to_float = llm_to_float_q8_1, .from_float = llm_from_float_q8_1 },
    [LLM_TYPE_Q2_K] = { .name = "Q2_K", .blck_size = 256, .type_size = 84, .is_quantized = true,
        .to_float = llm_to_float_q2_K },
    [LLM_TYPE_Q3_K] = { .name = "Q3_K", .blck_size = 256, .type_size = 110, .is_quantized = true,
        .to_float = llm_to_float_q3_K },
    [LLM_TYPE_Q4_K] = { .name = "Q4_K", .blck_size = 256, .type_size = 144, .is_quantized = true,
        .to_float = llm_to_float_q4_K, .from_float = llm_from_float_q4_K },
    [LLM_TYPE_Q5_K] = { .name = "Q5_K", .blck_size = 256, .type_size = 176, .is_quantized = true,
        .to_float = llm_to_float_q5_K },
    [LLM_TYPE_Q6_K] = { .name = "Q6_K", .blck_size = 256, .type_size = 210, .is_quantized = true,
        .to_float = llm_to_float_q6_K, .from_float = llm_from_float_q6_K },
    [LLM_TYPE_Q8_K] = { .name = "Q8_K", .blck_size = 256, .type_size = 292, .is_quantized = true,
        .to_float = llm_to_float_q8_K, .from_float = llm_from_float_q8_K },
    [LLM_TYPE_IQ2_XXS] = { .name = "IQ2_XXS", .blck_size = 256, .type_size = 66, .is_quantized = true },
    [LLM_TYPE_IQ2_XS] = { .name = "IQ2_XS", .blck_size = 256, .type_size = 74, .is_quantized = true },
    [LLM_TYPE_IQ3_XXS] = { .name = "IQ3_XXS", .blck_size = 256, .type_size = 98, .is_quantized = true },
    [LLM_TYPE_IQ1_S] = { .name = "IQ1_S", .blck_size = 256, .type_size = 50, .is_quantized = true },
    [LLM_TYPE_IQ4_NL] = { .name = "IQ4_NL", .blck_size = 32, .type_size = 18, .is_quantized = true },
    [LLM_TYPE_IQ3_S] = { .name = "IQ3_S", .blck_size = 256, .type_size = 110, .is_quantized = true },
    [LLM_TYPE_IQ2_S] = { .name = "IQ2_S", .blck_size = 256, .type_size = 82, .is_quantized = true },
    [LLM_TYPE_IQ4_XS] = { .name = "IQ4_XS", .blck_size = 256, .type_size = 136, .is_quantized = true },
    [LLM_TYPE_I8] = { .name = "I8", .blck_size = 1, .type_size = 1 },
    [LLM_TYPE_I16] = { .name = "I16", .blck_size = 1, .type_size = 2 },
    [LLM_TYPE_I32] = { .name = "I32", .blck_size = 1, .type_size = 4 },
    [LLM_TYPE_I64] = { .name = "I64", .blck_size = 1, .type_size = 8 },
    [LLM_TYPE_F64] = { .name = "F64", .blck_size = 1, .type_size = 8 },
    [LLM_TYPE_IQ1_M] = { .name = "IQ1_M", .blck_size = 256, .type_size = 56, .is_quantized = true },
    [LLM_TYPE_BF16] = { .name = "BF16", .blck_size = 1, .type_size = 2,
        .to_float = llm_to_float_bf16, .from_float = llm_from_float_bf16 },
    [LLM_TYPE_TQ1_0] = { .name = "TQ1_0", .blck_size = 256, .type_size = 54, .is_quantized = true },
    [LLM_TYPE_TQ2_0] = { .name = "TQ2_0", .blck_size = 256, .type_size = 66, .is_quantized = true },
    [LLM_TYPE_MXFP4] = { .name = "MXFP4", .blck_size = 32, .type_size = 17, .is_quantized = true },
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Fill the fast-path slots once (thread-safe via pthread_once). */
static void init_traits(void)
{
    for (int t = 0; t < LLM_TYPE_COUNT; t++)
        traits[t].from_float_fast = traits[t].from_float;
}

const struct llm_type_traits *llm_type_traits(int t)
{
    pthread_once(&init_once, init_traits);
    if (t < 0 || t >= LLM_TYPE_COUNT || !traits[t].name)
        return NULL;
    return &traits[t];
}

const char *llm_type_name(enum llm_type t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return tt ? tt->name : "?";
}

int llm_type_from_name(const char *name)
{
    for (int t = 0; t < LLM_TYPE_COUNT; t++)
        if (traits[t].name && strcasecmp(traits[t].name, name) == 0)
            return t;
    return -1;
}

size_t llm_row_size(enum llm_type t, int64_t ne0)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return (size_t)(ne0 / tt->blck_size) * tt->type_size;
}
