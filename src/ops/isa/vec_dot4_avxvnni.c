/* AVX-VNNI vec_dot4 of Q4_0 / Q8_0 weights against Q8_0 activations (decode's matrix-vector
 * product): the loop and scales of the AVX2 kernel (dot4_q8_0.h, scales8), each row's block sum
 * one vpdpbusd from the start the four rows share (avxvnni.h), so the sums are the AVX2 bits. */
#include <stdint.h>

#include "avxvnni.h"
#include "dot4_q8_0.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"

/* Block b of the four rows; d[r] points at row r's combined scale of that block. */
static inline __attribute__((always_inline)) AVXVNNI void block4(enum llm_type t, size_t ws, const char *const *w,
                                                                const struct block_q8_0 *yb, int64_t b,
                                                                const float *const *d, __m256 *acc)
{
    __m256i yv = loadu256(yb[b].qs), start = vnni_start(t, yv);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        __m256i sum = _mm256_dpbusd_avx_epi32(start, vnni_quants(t, w[r] + b * ws), yv);
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(d[r]), _mm256_cvtepi32_ps(sum), acc[r]);
    }
}

void AVXVNNI llm_vec_dot4_q4_0_avxvnni(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q4_0, n, s, w, x, scales8, block4);
}

void AVXVNNI llm_vec_dot4_q8_0_avxvnni(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q8_0, n, s, w, x, scales8, block4);
}
