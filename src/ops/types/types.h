/* Type traits: the kernel columns of each element type (dequantize, quantize, dot products). The
 * geometry (name, block size, bytes) is core IR: llm_type_info() in tensor.h. Adding a type means a
 * row in src/type_info.c and, when it gets kernels, one in types.c. */
#ifndef LLM_TYPES_H
#define LLM_TYPES_H

#include "tensor.h"

typedef void (*llm_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*llm_from_float_fn)(const float *src, void *dst, int64_t n);
/* *s = dot(x, y) over n elements: x a row of this type, y a row of vec_dot_type. */
typedef void (*llm_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);
/* s[r] = dot(w[r], x) for r < 4: four rows of this type, x a row of vec_dot_type. */
typedef void (*llm_vec_dot4_fn)(int64_t n, float *s, const void *const *w, const void *x);
/* s[m] = dot(row m, x) for m < rows (a multiple of 4), rows stride bytes apart from w: vec_dot4 over
 * consecutive groups of four rows, the same floats, the loop inside the kernel. */
typedef void (*llm_vec_dot_rows_fn)(int64_t n, int64_t rows, float *s, const void *w, size_t stride, const void *x);
/* s[4g + r] = dot(row r of group g, x) for g < groups: w the first group's bytes in the repacked
 * decode layout (repack.h), x the activation row of n elements as the kernel reads it
 * (llm_repack_x: its vec_dot_type row, or the form its pack_x made of that row). */
typedef void (*llm_vec_dot_packed_fn)(int64_t n, int64_t groups, float *s, const void *w, const void *x);
/* The form a packed kernel reads the activations in, made once per activation row: x a row of
 * vec_dot_type of n elements, into out; returns the bytes of the form (out NULL: only that). */
typedef size_t (*llm_pack_x_fn)(int64_t n, const void *x, void *out);
/* dst[n * ldd + m] = dot(w row m, x row n) for m < M, n < N, rows of k elements: weight rows
 * wstride bytes apart, Q8_0 rows xstride bytes apart; scratch holds llm_gemm_scratch_size(k, N)
 * bytes of the caller's. Each product depends on its two rows alone (not on M, N or the rows'
 * places in a tile), so any split of the rows over threads gives the same floats. */
typedef void (*llm_gemm_fn)(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                            size_t xstride, float *dst, size_t ldd, void *scratch);
size_t llm_gemm_scratch_size(int64_t k, int64_t N);
/* Scratch of a gemm_f32 kernel (the llm_gemm_fn contract with F32 activation rows). */
size_t llm_gemm_f32_scratch_size(int64_t k);

struct llm_type_traits {
    llm_to_float_fn to_float;     /* reference dequantize n elements (n % blck == 0), or NULL */
    llm_from_float_fn from_float; /* reference quantize n elements (n % blck == 0), or NULL   */
    /* Fast paths, chosen once at start-up from the CPU's features (AVX-512, AVX2/FMA/F16C or scalar).
     * Each has a *_ref twin in src/ops that serves as its test oracle. */
    llm_to_float_fn to_float_fast;     /* dequantize (BLAS path, GET_ROWS): same floats as
                                        * to_float, or NULL when to_float is NULL              */
    llm_from_float_fn from_float_fast; /* used to convert activations to vec_dot_type     */
    llm_vec_dot_fn vec_dot;            /* weight row · activation row, or NULL            */
    llm_vec_dot_fn vec_dot_ref;        /* scalar oracle of vec_dot (tests), or NULL       */
    /* four rows at once (matrix-vector products of small rows), or NULL: vec_dot row by row.
     * Its oracle is vec_dot_ref per row; a row's result does not depend on the other three. */
    llm_vec_dot4_fn vec_dot4;
    /* vec_dot4 over many groups (decode of short rows, where a call per group costs as much as the
     * arithmetic), or NULL. Its oracle is vec_dot4. */
    llm_vec_dot_rows_fn vec_dot_rows;
    /* one row with the sums vec_dot4 gives it (decode of long rows streamed from memory reads them
     * one after the other: one sequential stream instead of four), or NULL. Its oracle is vec_dot4. */
    llm_vec_dot_fn vec_dot1;
    /* decode's product over weights repacked at load (repack.h), or NULL: the type is not repacked
     * on this CPU. An AVX2 kernel; each row gets the floats the type's AVX2 four-row kernel gives it
     * (vec_dot4, Q4_0 / Q5_0 / Q8_0) or its AVX2 vec_dot (Q4_K / Q6_K), and it is installed where
     * that kernel is the one decode of the file's layout runs (every AVX2 CPU for Q4_K / Q6_K; for
     * the others, CPUs whose vec_dot4 of the type is not an AVX-512 or AVX-VNNI one). In the
     * environment, LLM_REPACK=0 takes it away and LLM_REPACK=all installs it on every AVX2 CPU (A/B
     * runs). Its oracle is llm_vec_dot_packed_ref. */
    llm_vec_dot_packed_fn vec_dot_packed;
    /* the form vec_dot_packed reads its activations in, or NULL: it reads the vec_dot_type row */
    llm_pack_x_fn pack_x;
    /* integer GEMM of many rows at once (prefill), AVX2 or AVX-512 VNNI, or NULL. Its oracle is
     * vec_dot_ref per pair of rows. */
    llm_gemm_fn gemm;
    /* gemm reading a matrix repacked at load (repack.h) in place, or NULL (then the caller unpacks
     * the rows for gemm). w is the start of the group holding row 0 (a call starts at a group
     * boundary), wstride = llm_repack_group_size(type, k), M rows from there: the last group may
     * hold zero padding rows past M, which are never stored. Each row gets gemm's floats. */
    llm_gemm_fn gemm_packed;
    /* float GEMM (prefill of F16 / BF16 weights and of the quantized ones without an integer GEMM):
     * llm_gemm_fn with F32 activation rows, AVX2 or AVX-512, or NULL. Its oracle is the F32 dot
     * product of the dequantized rows. */
    llm_gemm_fn gemm_f32;
    enum llm_type vec_dot_type;        /* type activations are converted to for vec_dot   */
};

/* Kernels of type t, or NULL when t is not a known type id (exactly when llm_type_info(t) is NULL).
 * Known types without kernels get a row whose kernels are all NULL. */
const struct llm_type_traits *llm_type_traits(int t);

/* IEEE binary16 and bfloat16 conversions (exact reference versions). */
float llm_fp16_to_fp32(uint16_t h);
uint16_t llm_fp32_to_fp16(float f);   /* round to nearest even, NaN/Inf kept */
float llm_bf16_to_fp32(uint16_t h);
uint16_t llm_fp32_to_bf16(float f);   /* round to nearest even, NaN quietened */

#endif
