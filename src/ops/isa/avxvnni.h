/* Internal to src/ops: what the AVX-VNNI kernels (gemm_avxvnni.c, vec_dot4_avxvnni.c) share.
 * vpdpbusd multiplies unsigned by signed bytes, so the weights go in unsigned (Q4_0's stored
 * nibbles 0..15, Q8_0's q + 128) and each int32 lane starts from -offset times the sum of its 4
 * activation bytes: the lane then holds Σ w·x over its 4 bytes, exact in int32 and equal to the
 * lane of the AVX2 kernels' maddubs + madd, so the float steps after it give the AVX2 bits. */
#ifndef LLM_OPS_AVXVNNI_H
#define LLM_OPS_AVXVNNI_H

#include "ops/types/blocks.h"
#include "simd.h"
#include "tensor.h"

/* The target of the AVX-VNNI kernels, after llm_cpu_has_avxvnni() */
#define AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

/* The offset of type t's unsigned weights, in every byte. */
static inline AVXVNNI __m256i vnni_offset(enum llm_type t)
{
    return _mm256_set1_epi8(t == LLM_TYPE_Q4_0 ? 8 : (char)0x80);
}

/* The 32 quants of one Q4_0 / Q8_0 weight block as unsigned bytes w + offset. */
static inline __attribute__((always_inline)) AVXVNNI __m256i vnni_quants(enum llm_type t, const void *block)
{
    if (t == LLM_TYPE_Q4_0)
        return nibbles32_u(((const struct block_q4_0 *)block)->qs);
    return _mm256_xor_si256(loadu256(((const struct block_q8_0 *)block)->qs), vnni_offset(t));
}

/* -offset · Σ of each lane's 4 activation bytes: where a lane of every weight row against the
 * activation quants xq starts. */
static inline AVXVNNI __m256i vnni_start(enum llm_type t, __m256i xq)
{
    const __m256i zero = _mm256_setzero_si256();
    return _mm256_sub_epi32(zero, _mm256_dpbusd_avx_epi32(zero, vnni_offset(t), xq));
}

#endif
