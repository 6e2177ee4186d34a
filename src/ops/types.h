/* Type traits: one row per element type (geometry, dequantize, quantize). Adding a type means
 * filling one row in types.c. */
#ifndef LLM_TYPES_H
#define LLM_TYPES_H

#include "../tensor.h"

typedef void (*llm_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*llm_from_float_fn)(const float *src, void *dst, int64_t n);
/* *s = dot(x, y) over n elements: x a row of this type, y a row of vec_dot_type. */
typedef void (*llm_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

struct llm_type_traits {
    const char *name;        /* "F32", "Q4_K", ... as llama.cpp prints it         */
    int64_t blck_size;       /* elements per block (1 for plain types)            */
    size_t type_size;        /* bytes per block                                   */
    bool is_quantized;
    llm_to_float_fn to_float;     /* reference dequantize n elements (n % blck == 0), or NULL */
    llm_from_float_fn from_float; /* reference quantize n elements (n % blck == 0), or NULL   */
    /* Fast paths, chosen once at start-up from the CPU's features (AVX2/FMA/F16C or scalar).
     * Each has a *_ref twin in src/ops that serves as its test oracle. */
    llm_to_float_fn to_float_fast;     /* dequantize (BLAS path, GET_ROWS): same floats as
                                        * to_float, or NULL when to_float is NULL              */
    llm_from_float_fn from_float_fast; /* used to convert activations to vec_dot_type     */
    llm_vec_dot_fn vec_dot;            /* weight row · activation row, or NULL            */
    llm_vec_dot_fn vec_dot_ref;        /* scalar oracle of vec_dot (tests), or NULL       */
    enum llm_type vec_dot_type;        /* type activations are converted to for vec_dot   */
};

/* Traits of type t, or NULL when t is not a known type id (retired or out of range).
 * Known types without kernels have to_float == NULL. */
const struct llm_type_traits *llm_type_traits(int t);

/* Type from its name ("q8_0" or "Q8_0"); returns -1 when unknown. */
int llm_type_from_name(const char *name);

const char *llm_type_name(enum llm_type t);

/* Bytes of a row of ne0 elements (ne0 must be a multiple of the block size). */
size_t llm_row_size(enum llm_type t, int64_t ne0);

/* IEEE binary16 and bfloat16 conversions (exact reference versions). */
float llm_fp16_to_fp32(uint16_t h);
uint16_t llm_fp32_to_fp16(float f);   /* round to nearest even, NaN/Inf kept */
float llm_bf16_to_fp32(uint16_t h);
uint16_t llm_fp32_to_bf16(float f);   /* round to nearest even, NaN quietened */

#endif
