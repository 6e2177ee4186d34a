/* AVX-VNNI integer GEMM tiles (gemm.h) of Q8_0 / Q4_0 weights against Q8_0 activations: the AVX2
 * kernel's 4 x 2 tiles over the rows in place (gemm_avx2.c), one vpdpbusd per block and pair in
 * place of sign, maddubs and madd (avxvnni.h: unsigned weights, each lane started from the
 * offset's share, computed once per activation block for the RM weight rows), and the pairs'
 * scales d_w·d_x 8 blocks at a time (faster than per block: bench/results/kernel_choices.md). The
 * int32 lanes and the float operations are the old AVX2 Q8_0 tiles', so its Q8_0 products are those
 * tiles' bits (the AVX2 kernels of 8 rows a register, gemm_q4_0_avx2.c and gemm_q8_0_avx2.c, sum
 * each row in one lane: their last bits differ). */
#include <string.h>

#include "avxvnni.h"
#include "gemm.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"

#define RM 4
#define RN 2

/* The combined scales d_w·d_x of blocks b0 .. b0 + nk - 1 (nk <= 8) of each pair of the tile:
 * 8 blocks' fp16 scales at once where 8 remain, so the block loop only broadcasts them from memory. */
static inline __attribute__((always_inline)) AVXVNNI void pair_scales(size_t wsize, int64_t b0, int64_t nk,
                                                                     const void *const *w, const void *const *x,
                                                                     float d[RM][RN][8])
{
    const size_t xsize = sizeof(struct block_q8_0);
    if (nk == 8) {
        __m256 dx[RN];
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            dx[j] = scales8((const char *)x[j] + b0 * xsize, xsize);
        #pragma GCC unroll 8
        for (int i = 0; i < RM; i++) {
            __m256 dw = scales8((const char *)w[i] + b0 * wsize, wsize);
            #pragma GCC unroll 8
            for (int j = 0; j < RN; j++)
                _mm256_storeu_ps(d[i][j], _mm256_mul_ps(dw, dx[j]));
        }
        return;
    }
    for (int64_t k = 0; k < nk; k++)
        for (int i = 0; i < RM; i++)
            for (int j = 0; j < RN; j++) {
                uint16_t hw, hx;
                memcpy(&hw, (const char *)w[i] + (b0 + k) * wsize, sizeof hw);
                memcpy(&hx, (const char *)x[j] + (b0 + k) * xsize, sizeof hx);
                d[i][j][k] = fp16_avx2(hw) * fp16_avx2(hx);
            }
}

static inline __attribute__((always_inline)) AVXVNNI void tile(enum llm_type t, int64_t nb, const void *const *w,
                                                              const void *const *x, float *out)
{
    const size_t wsize = t == LLM_TYPE_Q4_0 ? sizeof(struct block_q4_0) : sizeof(struct block_q8_0);
    __m256 acc[RM][RN];
    float d[RM][RN][8];
    #pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        int64_t nk = nb - b0 < 8 ? nb - b0 : 8;
        pair_scales(wsize, b0, nk, w, x, d);
        for (int64_t k = 0; k < nk; k++) {
            __m256i xq[RN], start[RN];
            #pragma GCC unroll 8
            for (int j = 0; j < RN; j++) {
                xq[j] = loadu256(((const struct block_q8_0 *)x[j] + b0 + k)->qs);
                start[j] = vnni_start(t, xq[j]);
            }
            #pragma GCC unroll 8
            for (int i = 0; i < RM; i++) {
                __m256i q = vnni_quants(t, (const char *)w[i] + (b0 + k) * wsize);
                #pragma GCC unroll 8
                for (int j = 0; j < RN; j++) {
                    __m256i p = _mm256_dpbusd_avx_epi32(start[j], q, xq[j]);
                    acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&d[i][j][k]), acc[i][j]);
                }
            }
        }
    }
    #pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            out[i * RN + j] = hsum_ps(acc[i][j]);
}

static AVXVNNI void tile_q8_0(int64_t nb, const void *const *w, const void *const *x, float *out)
{
    tile(LLM_TYPE_Q8_0, nb, w, x, out);
}

static AVXVNNI void tile_q4_0(int64_t nb, const void *const *w, const void *const *x, float *out)
{
    tile(LLM_TYPE_Q4_0, nb, w, x, out);
}

void llm_gemm_q8_0_avxvnni(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                           size_t xstride, float *dst, size_t ldd, void *scratch)
{
    (void)scratch; /* the tiles read the rows in place */
    llm_gemm_tiles(tile_q8_0, RM, RN, k, M, N, w, wstride, x, xstride, dst, ldd);
}

void llm_gemm_q4_0_avxvnni(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                           size_t xstride, float *dst, size_t ldd, void *scratch)
{
    (void)scratch; /* the tiles read the rows in place */
    llm_gemm_tiles(tile_q4_0, RM, RN, k, M, N, w, wstride, x, xstride, dst, ldd);
}
