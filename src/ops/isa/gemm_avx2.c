/* The old AVX2 integer GEMM tiles (gemm.h) of Q8_0 weights against Q8_0 activations, no longer
 * dispatched (gemm_q8_0_avx2.c, 8 rows a register, is 1.4-2x faster from N = 32): kept as the bit
 * twin of the AVX-VNNI Q8_0 kernel (test_gemm) and the baseline of llm-gemm-ab. Per block of 32,
 * the weights as signed bytes w, Σ w·x in 8 int32 lanes by maddubs(|w|, sign(x, w)) and madd, then
 * one float FMA by d_w·d_x per pair. Each loaded weight block serves RN activation rows and each
 * activation block RM weight rows; 16 vector registers hold RM·RN = 8 accumulators. */
#include <string.h>

#include "gemm.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "simd.h"

#define RM 4
#define RN 2

/* The fp16 scale at the start of a block, in all 8 lanes. */
static inline AVX2 __m256 scale8(const void *block)
{
    uint16_t h;
    memcpy(&h, block, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

static AVX2 void tile_q8_0(int64_t nb, const void *const *w, const void *const *x, float *out)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[RM][RN];
    #pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xq[RN];
        __m256 dx[RN];
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            const struct block_q8_0 *xb = (const struct block_q8_0 *)x[j] + b;
            xq[j] = loadu256(xb->qs);
            dx[j] = scale8(xb);
        }
        #pragma GCC unroll 8
        for (int i = 0; i < RM; i++) {
            const struct block_q8_0 *wb = (const struct block_q8_0 *)w[i] + b;
            __m256i q = loadu256(wb->qs), aq = _mm256_sign_epi8(q, q);
            __m256 dw = scale8(wb);
            #pragma GCC unroll 8
            for (int j = 0; j < RN; j++) {
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(xq[j], q)), ones);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, dx[j]), acc[i][j]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            out[i * RN + j] = hsum_ps(acc[i][j]);
}

void llm_gemm_q8_0_tiles_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                              size_t xstride, float *dst, size_t ldd, void *scratch)
{
    (void)scratch; /* the tiles read the rows in place */
    llm_gemm_tiles(tile_q8_0, RM, RN, k, M, N, w, wstride, x, xstride, dst, ldd);
}
