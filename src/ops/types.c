/* The type traits table: geometry of every known GGUF type; kernels where we have them. */
#include "types.h"

#include <pthread.h>
#include <strings.h>
#include <string.h>

#include "cpu_features.h"
#include "quants.h"

/* One row per type: the public traits (with reference kernels) plus the AVX2/FMA/F16C twins that
 * init_traits() installs as to_float_fast / from_float_fast / vec_dot when the CPU has those features. */
struct row {
    struct llm_type_traits t;
    llm_to_float_fn to_float_avx2;
    llm_from_float_fn from_float_avx2;
    llm_vec_dot_fn vec_dot_avx2;
};

/* Types we only know the geometry of (no kernels). */
#define GEOMETRY(nm, bs, ts, q) \
    { .t = { .name = nm, .blck_size = bs, .type_size = ts, .is_quantized = q } }

static struct row rows[LLM_TYPE_COUNT] = {
    [LLM_TYPE_F32] = {
        .t = { .name = "F32", .blck_size = 1, .type_size = 4,
               .to_float = llm_to_float_f32, .from_float = llm_from_float_f32,
               .vec_dot_ref = llm_vec_dot_f32_ref, .vec_dot_type = LLM_TYPE_F32 },
        .vec_dot_avx2 = llm_vec_dot_f32_avx2 },
    [LLM_TYPE_F16] = {
        .t = { .name = "F16", .blck_size = 1, .type_size = 2,
               .to_float = llm_to_float_f16, .from_float = llm_from_float_f16,
               .vec_dot_ref = llm_vec_dot_f16_ref, .vec_dot_type = LLM_TYPE_F16 },
        .to_float_avx2 = llm_to_float_f16_avx2,
        .from_float_avx2 = llm_from_float_f16_avx2,
        .vec_dot_avx2 = llm_vec_dot_f16_avx2 },
    [LLM_TYPE_Q4_0] = {
        .t = { .name = "Q4_0", .blck_size = 32, .type_size = 18, .is_quantized = true,
               .to_float = llm_to_float_q4_0, .from_float = llm_from_float_q4_0,
               .vec_dot_ref = llm_vec_dot_q4_0_ref, .vec_dot_type = LLM_TYPE_Q8_0 },
        .to_float_avx2 = llm_to_float_q4_0_avx2,
        .vec_dot_avx2 = llm_vec_dot_q4_0_avx2 },
    [LLM_TYPE_Q4_1] = {
        .t = { .name = "Q4_1", .blck_size = 32, .type_size = 20, .is_quantized = true,
               .to_float = llm_to_float_q4_1, .from_float = llm_from_float_q4_1,
               .vec_dot_ref = llm_vec_dot_q4_1_ref, .vec_dot_type = LLM_TYPE_Q8_1 },
        .to_float_avx2 = llm_to_float_q4_1_avx2,
        .vec_dot_avx2 = llm_vec_dot_q4_1_avx2 },
    [LLM_TYPE_Q5_0] = {
        .t = { .name = "Q5_0", .blck_size = 32, .type_size = 22, .is_quantized = true,
               .to_float = llm_to_float_q5_0, .from_float = llm_from_float_q5_0,
               .vec_dot_ref = llm_vec_dot_q5_0_ref, .vec_dot_type = LLM_TYPE_Q8_0 },
        .to_float_avx2 = llm_to_float_q5_0_avx2,
        .vec_dot_avx2 = llm_vec_dot_q5_0_avx2 },
    [LLM_TYPE_Q5_1] = {
        .t = { .name = "Q5_1", .blck_size = 32, .type_size = 24, .is_quantized = true,
               .to_float = llm_to_float_q5_1, .from_float = llm_from_float_q5_1,
               .vec_dot_ref = llm_vec_dot_q5_1_ref, .vec_dot_type = LLM_TYPE_Q8_1 },
        .to_float_avx2 = llm_to_float_q5_1_avx2,
        .vec_dot_avx2 = llm_vec_dot_q5_1_avx2 },
    [LLM_TYPE_Q8_0] = {
        .t = { .name = "Q8_0", .blck_size = 32, .type_size = 34, .is_quantized = true,
               .to_float = llm_to_float_q8_0, .from_float = llm_from_float_q8_0,
               .vec_dot_ref = llm_vec_dot_q8_0_ref, .vec_dot_type = LLM_TYPE_Q8_0 },
        .to_float_avx2 = llm_to_float_q8_0_avx2,
        .from_float_avx2 = llm_from_float_q8_0_avx2,
        .vec_dot_avx2 = llm_vec_dot_q8_0_avx2 },
    [LLM_TYPE_Q8_1] = {
        .t = { .name = "Q8_1", .blck_size = 32, .type_size = 36, .is_quantized = true,
               .to_float = llm_to_float_q8_1, .from_float = llm_from_float_q8_1 },
        .from_float_avx2 = llm_from_float_q8_1_avx2 },
    [LLM_TYPE_Q2_K] = {
        .t = { .name = "Q2_K", .blck_size = 256, .type_size = 84, .is_quantized = true,
               .to_float = llm_to_float_q2_K, .vec_dot_ref = llm_vec_dot_q2_K_ref,
               .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q2_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q2_K_avx2 },
    [LLM_TYPE_Q3_K] = {
        .t = { .name = "Q3_K", .blck_size = 256, .type_size = 110, .is_quantized = true,
               .to_float = llm_to_float_q3_K, .vec_dot_ref = llm_vec_dot_q3_K_ref,
               .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q3_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q3_K_avx2 },
    [LLM_TYPE_Q4_K] = {
        .t = { .name = "Q4_K", .blck_size = 256, .type_size = 144, .is_quantized = true,
               .to_float = llm_to_float_q4_K, .from_float = llm_from_float_q4_K,
               .vec_dot_ref = llm_vec_dot_q4_K_ref, .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q4_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q4_K_avx2 },
    [LLM_TYPE_Q5_K] = {
        .t = { .name = "Q5_K", .blck_size = 256, .type_size = 176, .is_quantized = true,
               .to_float = llm_to_float_q5_K, .vec_dot_ref = llm_vec_dot_q5_K_ref,
               .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q5_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q5_K_avx2 },
    [LLM_TYPE_Q6_K] = {
        .t = { .name = "Q6_K", .blck_size = 256, .type_size = 210, .is_quantized = true,
               .to_float = llm_to_float_q6_K, .from_float = llm_from_float_q6_K,
               .vec_dot_ref = llm_vec_dot_q6_K_ref, .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q6_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q6_K_avx2 },
    [LLM_TYPE_Q8_K] = {
        .t = { .name = "Q8_K", .blck_size = 256, .type_size = 292, .is_quantized = true,
               .to_float = llm_to_float_q8_K, .from_float = llm_from_float_q8_K },
        .from_float_avx2 = llm_from_float_q8_K_avx2 },
    [LLM_TYPE_IQ2_XXS] = GEOMETRY("IQ2_XXS", 256, 66, true),
    [LLM_TYPE_IQ2_XS] = GEOMETRY("IQ2_XS", 256, 74, true),
    [LLM_TYPE_IQ3_XXS] = GEOMETRY("IQ3_XXS", 256, 98, true),
    [LLM_TYPE_IQ1_S] = GEOMETRY("IQ1_S", 256, 50, true),
    [LLM_TYPE_IQ4_NL] = GEOMETRY("IQ4_NL", 32, 18, true),
    [LLM_TYPE_IQ3_S] = GEOMETRY("IQ3_S", 256, 110, true),
    [LLM_TYPE_IQ2_S] = GEOMETRY("IQ2_S", 256, 82, true),
    [LLM_TYPE_IQ4_XS] = GEOMETRY("IQ4_XS", 256, 136, true),
    [LLM_TYPE_I8] = GEOMETRY("I8", 1, 1, false),
    [LLM_TYPE_I16] = GEOMETRY("I16", 1, 2, false),
    [LLM_TYPE_I32] = GEOMETRY("I32", 1, 4, false),
    [LLM_TYPE_I64] = GEOMETRY("I64", 1, 8, false),
    [LLM_TYPE_F64] = GEOMETRY("F64", 1, 8, false),
    [LLM_TYPE_IQ1_M] = GEOMETRY("IQ1_M", 256, 56, true),
    [LLM_TYPE_BF16] = {
        .t = { .name = "BF16", .blck_size = 1, .type_size = 2,
               .to_float = llm_to_float_bf16, .from_float = llm_from_float_bf16,
               .vec_dot_ref = llm_vec_dot_bf16_ref, .vec_dot_type = LLM_TYPE_BF16 },
        .to_float_avx2 = llm_to_float_bf16_avx2,
        .from_float_avx2 = llm_from_float_bf16_avx2,
        .vec_dot_avx2 = llm_vec_dot_bf16_avx2 },
    [LLM_TYPE_TQ1_0] = GEOMETRY("TQ1_0", 256, 54, true),
    [LLM_TYPE_TQ2_0] = GEOMETRY("TQ2_0", 256, 66, true),
    [LLM_TYPE_MXFP4] = GEOMETRY("MXFP4", 32, 17, true),
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Fill the fast-path slots once (thread-safe via pthread_once). */
static void init_traits(void)
{
    bool avx2 = llm_cpu_has_avx2();
    for (int t = 0; t < LLM_TYPE_COUNT; t++) {
        struct row *r = &rows[t];
        r->t.to_float_fast = avx2 && r->to_float_avx2 ? r->to_float_avx2 : r->t.to_float;
        r->t.from_float_fast = avx2 && r->from_float_avx2 ? r->from_float_avx2 : r->t.from_float;
        r->t.vec_dot = avx2 && r->vec_dot_avx2 ? r->vec_dot_avx2 : r->t.vec_dot_ref;
    }
}

const struct llm_type_traits *llm_type_traits(int t)
{
    pthread_once(&init_once, init_traits);
    if (t < 0 || t >= LLM_TYPE_COUNT || !rows[t].t.name)
        return NULL;
    return &rows[t].t;
}

const char *llm_type_name(enum llm_type t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return tt ? tt->name : "?";
}

int llm_type_from_name(const char *name)
{
    for (int t = 0; t < LLM_TYPE_COUNT; t++)
        if (rows[t].t.name && strcasecmp(rows[t].t.name, name) == 0)
            return t;
    return -1;
}

size_t llm_row_size(enum llm_type t, int64_t ne0)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return (size_t)(ne0 / tt->blck_size) * tt->type_size;
}
