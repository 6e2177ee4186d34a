/* The type traits table: kernels of the types we have them for (geometry: src/type_info.c). */
#include "types.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "quants.h"

/* One row per type with kernels (other known types stay zeroed): the public traits (with reference
 * kernels) plus the AVX2/FMA/F16C twins that init_traits() installs as to_float_fast /
 * from_float_fast / vec_dot / vec_dot4 when the CPU has those features, and the AVX-512 VNNI
 * vec_dot4 and GEMM kernels, preferred over the AVX-VNNI ones, preferred over the AVX2 ones. The float
 * GEMM of the types without an integer one comes from each instruction set's lookup by type
 * (llm_gemm_f32_avx512 / _avx2, quants.h). */
struct row {
    struct llm_type_traits t;
    llm_to_float_fn to_float_avx2;
    llm_from_float_fn from_float_avx2;
    llm_vec_dot_fn vec_dot_avx2;
    llm_vec_dot4_fn vec_dot4_avx2, vec_dot4_avxvnni, vec_dot4_avx512;
    llm_vec_dot_rows_fn vec_dot_rows_avx2, vec_dot_rows_avx512; /* twins of the vec_dot4 ones */
    llm_vec_dot_fn vec_dot1_avx2, vec_dot1_avx512;              /* likewise */
    llm_vec_dot_packed_fn vec_dot_packed_avx2;                  /* likewise, repack.h */
    llm_pack_x_fn pack_x_avx2;                                  /* the activations' form it reads */
    llm_gemm_fn gemm_avx2, gemm_avxvnni, gemm_avx512;
    llm_gemm_fn gemm_packed_avx2; /* gemm_avx2's twin on repacked groups */
};

static struct row rows[LLM_TYPE_COUNT] = {
    [LLM_TYPE_F32] = {
        .t = { .to_float = llm_to_float_f32, .from_float = llm_from_float_f32,
               .vec_dot_ref = llm_vec_dot_f32_ref, .vec_dot_type = LLM_TYPE_F32 },
        .vec_dot_avx2 = llm_vec_dot_f32_avx2,
        .vec_dot4_avx2 = llm_vec_dot4_f32_avx2,
        .vec_dot4_avx512 = llm_vec_dot4_f32_avx512,
        .vec_dot_rows_avx2 = llm_vec_dot_rows_f32_avx2,
        .vec_dot_rows_avx512 = llm_vec_dot_rows_f32_avx512 },
    [LLM_TYPE_F16] = {
        .t = { .to_float = llm_to_float_f16, .from_float = llm_from_float_f16,
               .vec_dot_ref = llm_vec_dot_f16_ref, .vec_dot_type = LLM_TYPE_F16 },
        .to_float_avx2 = llm_to_float_f16_avx2,
        .from_float_avx2 = llm_from_float_f16_avx2,
        .vec_dot_avx2 = llm_vec_dot_f16_avx2,
        .vec_dot4_avx2 = llm_vec_dot4_f16_avx2,
        .vec_dot1_avx2 = llm_vec_dot1_f16_avx2,
        .vec_dot4_avx512 = llm_vec_dot4_f16_avx512,
        .vec_dot1_avx512 = llm_vec_dot1_f16_avx512 },
    [LLM_TYPE_Q4_0] = {
        .t = { .to_float = llm_to_float_q4_0, .from_float = llm_from_float_q4_0,
               .vec_dot_ref = llm_vec_dot_q4_0_ref, .vec_dot_type = LLM_TYPE_Q8_0 },
        .to_float_avx2 = llm_to_float_q4_0_avx2,
        .vec_dot_avx2 = llm_vec_dot_q4_0_avx2,
        .vec_dot4_avx2 = llm_vec_dot4_q4_0_avx2,
        .vec_dot4_avxvnni = llm_vec_dot4_q4_0_avxvnni,
        .vec_dot4_avx512 = llm_vec_dot4_q4_0_avx512,
        .vec_dot1_avx512 = llm_vec_dot1_q4_0_avx512,
        .vec_dot_packed_avx2 = llm_vec_dot_packed_q4_0_avx2,
        .pack_x_avx2 = llm_pack_x_q4_0_avx2,
        .gemm_avx2 = llm_gemm_q4_0_avx2,
        .gemm_packed_avx2 = llm_gemm_q4_0_packed_avx2,
        .gemm_avxvnni = llm_gemm_q4_0_avxvnni,
        .gemm_avx512 = llm_gemm_q4_0_avx512 },
    [LLM_TYPE_Q4_1] = {
        .t = { .to_float = llm_to_float_q4_1, .from_float = llm_from_float_q4_1,
               .vec_dot_ref = llm_vec_dot_q4_1_ref, .vec_dot_type = LLM_TYPE_Q8_1 },
        .to_float_avx2 = llm_to_float_q4_1_avx2,
        .vec_dot_avx2 = llm_vec_dot_q4_1_avx2 },
    [LLM_TYPE_Q5_0] = {
        .t = { .to_float = llm_to_float_q5_0, .from_float = llm_from_float_q5_0,
               .vec_dot_ref = llm_vec_dot_q5_0_ref, .vec_dot_type = LLM_TYPE_Q8_0 },
        .to_float_avx2 = llm_to_float_q5_0_avx2,
        .vec_dot_avx2 = llm_vec_dot_q5_0_avx2,
        .vec_dot4_avx2 = llm_vec_dot4_q5_0_avx2,
        .vec_dot4_avx512 = llm_vec_dot4_q5_0_avx512,
        .vec_dot1_avx512 = llm_vec_dot1_q5_0_avx512,
        .vec_dot_packed_avx2 = llm_vec_dot_packed_q5_0_avx2,
        .pack_x_avx2 = llm_pack_x_q5_0_avx2,
        .gemm_avx2 = llm_gemm_q5_0_avx2,
        .gemm_packed_avx2 = llm_gemm_q5_0_packed_avx2 },
    [LLM_TYPE_Q5_1] = {
        .t = { .to_float = llm_to_float_q5_1, .from_float = llm_from_float_q5_1,
               .vec_dot_ref = llm_vec_dot_q5_1_ref, .vec_dot_type = LLM_TYPE_Q8_1 },
        .to_float_avx2 = llm_to_float_q5_1_avx2,
        .vec_dot_avx2 = llm_vec_dot_q5_1_avx2 },
    [LLM_TYPE_Q8_0] = {
        .t = { .to_float = llm_to_float_q8_0, .from_float = llm_from_float_q8_0,
               .vec_dot_ref = llm_vec_dot_q8_0_ref, .vec_dot_type = LLM_TYPE_Q8_0 },
        .to_float_avx2 = llm_to_float_q8_0_avx2,
        .from_float_avx2 = llm_from_float_q8_0_avx2,
        .vec_dot_avx2 = llm_vec_dot_q8_0_avx2,
        .vec_dot4_avx2 = llm_vec_dot4_q8_0_avx2,
        .vec_dot4_avxvnni = llm_vec_dot4_q8_0_avxvnni,
        .vec_dot4_avx512 = llm_vec_dot4_q8_0_avx512,
        .vec_dot1_avx512 = llm_vec_dot1_q8_0_avx512,
        .vec_dot_packed_avx2 = llm_vec_dot_packed_q8_0_avx2,
        .gemm_avx2 = llm_gemm_q8_0_avx2,
        .gemm_packed_avx2 = llm_gemm_q8_0_packed_avx2,
        .gemm_avxvnni = llm_gemm_q8_0_avxvnni,
        .gemm_avx512 = llm_gemm_q8_0_avx512 },
    [LLM_TYPE_IQ4_NL] = {
        .t = { .to_float = llm_to_float_iq4_nl, .from_float = llm_from_float_iq4_nl,
               .vec_dot_ref = llm_vec_dot_iq4_nl_ref, .vec_dot_type = LLM_TYPE_Q8_0 },
        .to_float_avx2 = llm_to_float_iq4_nl_avx2 },
    [LLM_TYPE_Q8_1] = {
        .t = { .to_float = llm_to_float_q8_1, .from_float = llm_from_float_q8_1 },
        .from_float_avx2 = llm_from_float_q8_1_avx2 },
    [LLM_TYPE_Q2_K] = {
        .t = { .to_float = llm_to_float_q2_K, .vec_dot_ref = llm_vec_dot_q2_K_ref,
               .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q2_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q2_K_avx2 },
    [LLM_TYPE_Q3_K] = {
        .t = { .to_float = llm_to_float_q3_K, .vec_dot_ref = llm_vec_dot_q3_K_ref,
               .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q3_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q3_K_avx2 },
    [LLM_TYPE_Q4_K] = {
        .t = { .to_float = llm_to_float_q4_K, .from_float = llm_from_float_q4_K,
               .vec_dot_ref = llm_vec_dot_q4_K_ref, .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q4_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q4_K_avx2,
        .vec_dot_packed_avx2 = llm_vec_dot_packed_q4_K_avx2 },
    [LLM_TYPE_Q5_K] = {
        .t = { .to_float = llm_to_float_q5_K, .vec_dot_ref = llm_vec_dot_q5_K_ref,
               .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q5_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q5_K_avx2 },
    [LLM_TYPE_Q6_K] = {
        .t = { .to_float = llm_to_float_q6_K, .from_float = llm_from_float_q6_K,
               .vec_dot_ref = llm_vec_dot_q6_K_ref, .vec_dot_type = LLM_TYPE_Q8_K },
        .to_float_avx2 = llm_to_float_q6_K_avx2,
        .vec_dot_avx2 = llm_vec_dot_q6_K_avx2,
        .vec_dot_packed_avx2 = llm_vec_dot_packed_q6_K_avx2 },
    [LLM_TYPE_Q8_K] = {
        .t = { .to_float = llm_to_float_q8_K, .from_float = llm_from_float_q8_K },
        .from_float_avx2 = llm_from_float_q8_K_avx2 },
    [LLM_TYPE_BF16] = {
        .t = { .to_float = llm_to_float_bf16, .from_float = llm_from_float_bf16,
               .vec_dot_ref = llm_vec_dot_bf16_ref, .vec_dot_type = LLM_TYPE_BF16 },
        .to_float_avx2 = llm_to_float_bf16_avx2,
        .from_float_avx2 = llm_from_float_bf16_avx2,
        .vec_dot_avx2 = llm_vec_dot_bf16_avx2,
        .vec_dot4_avx2 = llm_vec_dot4_bf16_avx2 },
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Fill the fast-path slots once (thread-safe via pthread_once). */
static void init_traits(void)
{
    bool avx2 = llm_cpu_has_avx2(), vnni = llm_cpu_has_avxvnni(), avx512 = llm_cpu_has_avx512();
    const char *mode = getenv("LLM_REPACK");
    const bool repack = !mode || strcmp(mode, "0") != 0, repack_all = mode && strcmp(mode, "all") == 0;
    for (int t = 0; t < LLM_TYPE_COUNT; t++) {
        struct row *r = &rows[t];
        r->t.to_float_fast = avx2 && r->to_float_avx2 ? r->to_float_avx2 : r->t.to_float;
        r->t.from_float_fast = avx2 && r->from_float_avx2 ? r->from_float_avx2 : r->t.from_float;
        r->t.vec_dot = avx2 && r->vec_dot_avx2 ? r->vec_dot_avx2 : r->t.vec_dot_ref;
        r->t.vec_dot4 = avx512 && r->vec_dot4_avx512   ? r->vec_dot4_avx512
                        : vnni && r->vec_dot4_avxvnni ? r->vec_dot4_avxvnni
                        : avx2                        ? r->vec_dot4_avx2
                                                      : NULL;
        /* only beside the vec_dot4 it loops over */
        r->t.vec_dot_rows = r->t.vec_dot4 == r->vec_dot4_avx512 ? r->vec_dot_rows_avx512
                            : r->t.vec_dot4 == r->vec_dot4_avx2 ? r->vec_dot_rows_avx2
                                                                 : NULL;
        r->t.vec_dot1 = r->t.vec_dot4 == r->vec_dot4_avx512 ? r->vec_dot1_avx512
                        : r->t.vec_dot4 == r->vec_dot4_avx2 ? r->vec_dot1_avx2
                                                            : NULL;
        /* The AVX2 repacked kernel where decode of the file's layout runs its AVX2 twin, whose bits
         * it keeps (so repacked or not, and on the npu, which reads the file's layout, every row's
         * sum is the same): every AVX2 CPU for Q4_K / Q6_K, whose one decode kernel is the AVX2
         * one, and the 32-element types where vec_dot4 is the AVX2 one. LLM_REPACK=all takes it on
         * AVX-512 and AVX-VNNI CPUs too, in place of their wider kernels on the file's layout: an
         * A/B of layout against width (bench/results/cpus.md), whose decode bits then differ. */
        const bool twin = r->t.vec_dot4 ? r->t.vec_dot4 == r->vec_dot4_avx2 : r->t.vec_dot == r->vec_dot_avx2;
        r->t.vec_dot_packed = avx2 && repack && (twin || repack_all) ? r->vec_dot_packed_avx2 : NULL;
        r->t.pack_x = r->t.vec_dot_packed ? r->pack_x_avx2 : NULL;
        r->t.gemm = avx512 && r->gemm_avx512   ? r->gemm_avx512
                    : vnni && r->gemm_avxvnni ? r->gemm_avxvnni
                    : avx2                    ? r->gemm_avx2
                                              : NULL;
        r->t.gemm_packed = r->t.gemm == r->gemm_avx2 ? r->gemm_packed_avx2 : NULL;
        r->t.gemm_f32 = avx512 ? llm_gemm_f32_avx512(t) : avx2 ? llm_gemm_f32_avx2(t) : NULL;
    }
}

const struct llm_type_traits *llm_type_traits(int t)
{
    if (!llm_type_info(t))
        return NULL;
    pthread_once(&init_once, init_traits);
    return &rows[t].t;
}
