/* AVX-VNNI integer GEMM tiles (gemm.h) of Q8_0 / Q4_0 weights against Q8_0 activations: the AVX2
 * kernel's 4 x 2 tiles over the rows in place (gemm_avx2.c), one vpdpbusd per block and pair in
 * place of sign, maddubs and madd (avxvnni.h: unsigned weights, each lane started from the
 * offset's share, computed once per activation block for the RM weight rows). The int32 lanes and
 * the float steps are the AVX2 kernel's, so the products are its bits. */
#include <string.h>

#include "avxvnni.h"
#include "blocks.h"
#include "gemm.h"
#include "quants.h"

#define RM 4
#define RN 2

/* The fp16 scale at the start of a block, in all 8 lanes. */
static inline AVXVNNI __m256 scale8(const void *block)
{
    uint16_t h;
    memcpy(&h, block, sizeof h);
    return _mm256_set1_ps(fp16_avx2(h));
}

static inline __attribute__((always_inline)) AVXVNNI void tile(enum llm_type t, int64_t nb, const void *const *w,
                                                              const void *const *x, float *out)
{
    const size_t wsize = t == LLM_TYPE_Q4_0 ? sizeof(struct block_q4_0) : sizeof(struct block_q8_0);
    __m256 acc[RM][RN];
    #pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xq[RN], start[RN];
        __m256 dx[RN];
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            const struct block_q8_0 *xb = (const struct block_q8_0 *)x[j] + b;
            xq[j] = loadu256(xb->qs);
            start[j] = vnni_start(t, xq[j]);
            dx[j] = scale8(xb);
        }
        #pragma GCC unroll 8
        for (int i = 0; i < RM; i++) {
            const char *wb = (const char *)w[i] + b * wsize;
            __m256i q = vnni_quants(t, wb);
            __m256 dw = scale8(wb);
            #pragma GCC unroll 8
            for (int j = 0; j < RN; j++) {
                __m256i p = _mm256_dpbusd_avx_epi32(start[j], q, xq[j]);
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
