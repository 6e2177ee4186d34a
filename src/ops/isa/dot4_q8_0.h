/* Internal to src/ops: the loop of the AVX2 vec_dot4 kernel of Q8_0 weights and the AVX-VNNI ones
 * of Q4_0 / Q8_0 against Q8_0 activations (the AVX-512 ones take four blocks per zmm instead).
 * Each passes its loader of 8 blocks' fp16 scales and its kernel of one block of the four rows; the
 * loop is always inlined, so both become direct calls that inline too. The fp16 scales of 8 blocks
 * of a row are converted as one vector;
 * each row has its own accumulator, fed block by block in order, so a row's sum does not depend
 * on the other three. */
#ifndef LLM_OPS_DOT4_Q8_0_H
#define LLM_OPS_DOT4_Q8_0_H

#include "ops/types/blocks.h"
#include "simd.h"
#include "tensor.h"

typedef __m256 (*scales8_fn)(const void *blocks, size_t stride);
/* acc[r] += d[r][0] * (block b of row r · activation block b) for the four rows */
typedef void (*block4_fn)(enum llm_type t, size_t ws, const char *const *w, const struct block_q8_0 *yb, int64_t b,
                          const float *const *d, __m256 *acc);

static inline __attribute__((always_inline)) AVX2 void dot4_q8_0(enum llm_type t, int64_t n, float *s,
                                                                const void *const *w, const void *x,
                                                                scales8_fn scales, block4_fn block4)
{
    const size_t ws = t == LLM_TYPE_Q4_0 ? sizeof(struct block_q4_0) : sizeof(struct block_q8_0);
    const struct block_q8_0 *yb = x;
    const char *rows[4] = { w[0], w[1], w[2], w[3] };
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    float d[4][8];
    int64_t nb = n / QK, i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m256 dy = scales(yb + i, sizeof *yb);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            _mm256_storeu_ps(d[r], _mm256_mul_ps(scales(rows[r] + i * ws, ws), dy));
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const float *dk[4] = { &d[0][k], &d[1][k], &d[2][k], &d[3][k] };
            block4(t, ws, rows, yb, i + k, dk, acc);
        }
    }
    for (; i < nb; i++) {
        const float *dk[4] = { &d[0][0], &d[1][0], &d[2][0], &d[3][0] };
        for (int r = 0; r < 4; r++) {
            uint16_t h;
            memcpy(&h, rows[r] + i * ws, sizeof h);
            d[r][0] = fp16_avx2(h) * fp16_avx2(yb[i].d);
        }
        block4(t, ws, rows, yb, i, dk, acc);
    }
    for (int r = 0; r < 4; r++)
        s[r] = hsum_ps(acc[r]);
}

#endif
