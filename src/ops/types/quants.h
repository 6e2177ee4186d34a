/* Row kernels behind the type traits table (types.c): reference dequantize (to_float), quantize
 * (from_float) and dot products (vec_dot_*_ref), plus their AVX2/FMA/F16C twins (*_avx2), which
 * must only be called when the CPU has those features. Callers use them through
 * llm_type_traits(); they are declared here for types.c and the kernel files.
 *
 * Contracts: n is a multiple of the type's block size; src/dst rows do not overlap.
 * vec_dot(n, s, x, y): *s = sum_i x[i] * y[i], x a row of the weight type, y a row of its
 * vec_dot_type. Quantizers are deterministic; the *_avx2 quantizers produce the same bytes as
 * the reference ones, and the *_avx2 dequantizers the same float bits as the reference ones (for
 * the quantized types, a NaN output may differ in its payload only: NaN/Inf block scales). */
#ifndef LLM_QUANTS_H
#define LLM_QUANTS_H

#include <stdint.h>

#include "types.h"

/* plain types (fp16.c) */
void llm_to_float_f32(const void *src, float *dst, int64_t n);
void llm_from_float_f32(const float *src, void *dst, int64_t n);
void llm_to_float_f16(const void *src, float *dst, int64_t n);
void llm_from_float_f16(const float *src, void *dst, int64_t n);
void llm_to_float_bf16(const void *src, float *dst, int64_t n);
void llm_from_float_bf16(const float *src, void *dst, int64_t n);

/* legacy 32-element blocks (quants.c) */
void llm_to_float_q4_0(const void *src, float *dst, int64_t n);
void llm_to_float_q4_1(const void *src, float *dst, int64_t n);
void llm_to_float_q5_0(const void *src, float *dst, int64_t n);
void llm_to_float_q5_1(const void *src, float *dst, int64_t n);
void llm_to_float_q8_0(const void *src, float *dst, int64_t n);
void llm_to_float_q8_1(const void *src, float *dst, int64_t n);
void llm_from_float_q4_0(const float *src, void *dst, int64_t n);
void llm_from_float_q4_1(const float *src, void *dst, int64_t n);
void llm_from_float_q5_0(const float *src, void *dst, int64_t n);
void llm_from_float_q5_1(const float *src, void *dst, int64_t n);
void llm_from_float_q8_0(const float *src, void *dst, int64_t n);
void llm_from_float_q8_1(const float *src, void *dst, int64_t n);
/* IQ4_NL: a quantizer of our own (the best of a few scales by squared error, then least squares
 * on the chosen codes), not ggml's bytes. */
void llm_to_float_iq4_nl(const void *src, float *dst, int64_t n);
void llm_from_float_iq4_nl(const float *src, void *dst, int64_t n);

/* K-quants, 256-element super-blocks (quants_k.c) */
void llm_to_float_q2_K(const void *src, float *dst, int64_t n);
void llm_to_float_q3_K(const void *src, float *dst, int64_t n);
void llm_to_float_q4_K(const void *src, float *dst, int64_t n);
void llm_to_float_q5_K(const void *src, float *dst, int64_t n);
void llm_to_float_q6_K(const void *src, float *dst, int64_t n);
void llm_to_float_q8_K(const void *src, float *dst, int64_t n);
/* Simple quantizers (min/max plus least-squares refinement, no importance matrix): valid blocks
 * with error close to ggml's reference quantizer, but not its bytes. */
void llm_from_float_q4_K(const float *src, void *dst, int64_t n);
void llm_from_float_q6_K(const float *src, void *dst, int64_t n);
/* Activation quantizer, rounding like ggml's reference (nearest, ties to even). */
void llm_from_float_q8_K(const float *src, void *dst, int64_t n);

/* reference dot products (vec_dot.c) */
void llm_vec_dot_f32_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_f16_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_bf16_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q4_0_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_iq4_nl_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q4_1_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q5_0_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q5_1_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q8_0_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q2_K_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q3_K_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q4_K_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q5_K_ref(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q6_K_ref(int64_t n, float *s, const void *x, const void *y);

/* AVX-512 (F, BW, VL, VNNI) twins of the decode kernels (vec_dot_avx512.c) */
void llm_vec_dot4_f16_avx512(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot1_f16_avx512(int64_t n, float *s, const void *w, const void *x);
void llm_vec_dot4_f32_avx512(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot_rows_f32_avx512(int64_t n, int64_t rows, float *s, const void *w, size_t stride, const void *x);
void llm_vec_dot4_q4_0_avx512(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot1_q4_0_avx512(int64_t n, float *s, const void *w, const void *x);
void llm_vec_dot4_q5_0_avx512(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot1_q5_0_avx512(int64_t n, float *s, const void *w, const void *x);
void llm_vec_dot4_q8_0_avx512(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot1_q8_0_avx512(int64_t n, float *s, const void *w, const void *x);

/* AVX-VNNI (256-bit, VEX) twins of the AVX2 decode kernels, the same bits (vec_dot4_avxvnni.c;
 * only when llm_cpu_has_avxvnni()) */
void llm_vec_dot4_q4_0_avxvnni(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot4_q8_0_avxvnni(int64_t n, float *s, const void *const *w, const void *x);

/* AVX2/FMA/F16C twins (vec_dot_avx2.c, dequant_avx2.c, quants_avx2.c) */
void llm_vec_dot_f32_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_f16_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_bf16_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot4_f32_avx2(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot_rows_f32_avx2(int64_t n, int64_t rows, float *s, const void *w, size_t stride, const void *x);
void llm_vec_dot4_f16_avx2(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot1_f16_avx2(int64_t n, float *s, const void *w, const void *x);
void llm_vec_dot4_bf16_avx2(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot4_q4_0_avx2(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot4_q5_0_avx2(int64_t n, float *s, const void *const *w, const void *x);
void llm_vec_dot4_q8_0_avx2(int64_t n, float *s, const void *const *w, const void *x);
/* Over groups of rows repacked at load (repack.h), the same floats per row as the AVX2 kernel decode
 * runs on the file's layout: vec_dot4_avx2 (Q4_0, Q5_0, Q8_0), vec_dot_avx2 (Q4_K, Q6_K) */
void llm_vec_dot_packed_q4_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x);
void llm_vec_dot_packed_q5_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x);
void llm_vec_dot_packed_q8_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x);
void llm_vec_dot_packed_q4_K_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x);
void llm_vec_dot_packed_q6_K_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x);
/* The activations' form the Q4_0 / Q5_0 ones read (llm_pack_x_fn) */
size_t llm_pack_x_q4_0_avx2(int64_t n, const void *x, void *out);
size_t llm_pack_x_q5_0_avx2(int64_t n, const void *x, void *out);
void llm_vec_dot_q4_0_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q4_1_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q5_0_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q5_1_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q8_0_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q2_K_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q3_K_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q4_K_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q5_K_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_vec_dot_q6_K_avx2(int64_t n, float *s, const void *x, const void *y);
void llm_to_float_f16_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_bf16_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q4_0_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q4_1_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q5_0_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q5_1_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q8_0_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_iq4_nl_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q2_K_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q3_K_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q4_K_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q5_K_avx2(const void *src, float *dst, int64_t n);
void llm_to_float_q6_K_avx2(const void *src, float *dst, int64_t n);
void llm_from_float_f16_avx2(const float *src, void *dst, int64_t n);
void llm_from_float_bf16_avx2(const float *src, void *dst, int64_t n);
void llm_from_float_q8_0_avx2(const float *src, void *dst, int64_t n);
void llm_from_float_q8_1_avx2(const float *src, void *dst, int64_t n);
void llm_from_float_q8_K_avx2(const float *src, void *dst, int64_t n);

/* integer GEMM (llm_gemm_fn, types.h) against Q8_0 rows: gemm_q8_0_avx2.c (and its twin reading a
 * repacked matrix's groups, the gemm_packed contract of types.h), gemm_avx2.c (the old Q8_0 tiles),
 * gemm_q4_0_avx2.c (Q4_0 and Q5_0, each with its twin on repacked groups), gemm_avxvnni.c (only when llm_cpu_has_avxvnni(); Q8_0 gives the old AVX2
 * tiles' bits), gemm_avx512.c (AVX-512 F/BW/VL + VNNI, only when llm_cpu_has_avx512()) */
void llm_gemm_q8_0_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                        size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q8_0_packed_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                               size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q8_0_tiles_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                              size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q4_0_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                        size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q5_0_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                        size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q4_0_packed_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                               size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q5_0_packed_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                               size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q8_0_avxvnni(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                           size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q4_0_avxvnni(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                           size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q8_0_avx512(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                          size_t xstride, float *dst, size_t ldd, void *scratch);
void llm_gemm_q4_0_avx512(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                          size_t xstride, float *dst, size_t ldd, void *scratch);

/* The float GEMM (gemm_f32 slot, types.h) of weights of type t against F32 rows, or NULL when t
 * has none (F16, BF16, Q4_1, Q5_0, Q5_1 and the K-quants have one): gemm_f16_avx2.c,
 * gemm_f16_avx512.c (only when llm_cpu_has_avx512()). */
llm_gemm_fn llm_gemm_f32_avx2(enum llm_type t);
llm_gemm_fn llm_gemm_f32_avx512(enum llm_type t);

#endif
