/* AVX2 vec_dot4 of Q4_0 / Q5_0 / Q8_0 weights against Q8_0 activations (decode's matrix-vector product).
 * One activation block is loaded once for four weight rows (the loop: dot4_q8_0.h). */
#include <stdint.h>

#include "dot4_q8_0.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "prefetch.h"
#include "simd.h"

/* int32 lane sums of one block's bytes after its fp16 d (Q4_0 / Q8_0 quants, Q5_0's qh then quants,
 * as the file stores them) against activation quants yv; off is maddubs(8, yv) (Q4_0, whose
 * quants are stored +8) or maddubs(16, yv) (Q5_0, +16), shared by the four rows. */
static inline __attribute__((always_inline)) AVX2 __m256i quant_sum(enum llm_type t, const uint8_t *qs, __m256i yv,
                                                                   __m256i off)
{
    const __m256i ones = _mm256_set1_epi16(1);
    if (t != LLM_TYPE_Q8_0) {
        __m256i q = t == LLM_TYPE_Q4_0 ? nibbles32_u(qs) : _mm256_or_si256(nibbles32_u(qs + 4), fifth_bits(qs));
        return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), off), ones);
    }
    /* signed x signed through the sign trick (activations never hold -128) */
    __m256i q = loadu256(qs);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q)), ones);
}

/* int32 lane sums of one weight block of type t (see quant_sum). */
static inline __attribute__((always_inline)) AVX2 __m256i block_sum(enum llm_type t, const char *wb, __m256i yv,
                                                                   __m256i off)
{
    return quant_sum(t, (const uint8_t *)wb + sizeof(uint16_t), yv, off);
}

/* Block b of the four rows; d[r] points at row r's combined scale of that block. */
static inline __attribute__((always_inline)) AVX2 void block4(enum llm_type t, size_t ws, const char *const *w,
                                                             const struct block_q8_0 *yb, int64_t b,
                                                             const float *const *d, __m256 *acc)
{
    __m256i yv = loadu256(yb[b].qs);
    __m256i off = _mm256_maddubs_epi16(_mm256_set1_epi8(t == LLM_TYPE_Q5_0 ? 16 : 8), yv);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(d[r]), _mm256_cvtepi32_ps(block_sum(t, w[r] + b * ws, yv, off)),
                                 acc[r]);
}

void AVX2 llm_vec_dot4_q4_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q4_0, n, s, w, x, scales8, block4);
}

void AVX2 llm_vec_dot4_q5_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q5_0, n, s, w, x, scales8, block4);
}

void AVX2 llm_vec_dot4_q8_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q8_0, n, s, w, x, scales8, block4);
}

/* ---- repacked rows (repack.h) ------------------------------------------------------------- */

/* Groups of four rows in the repacked layout, streamed front to back: per chunk of up to 8 blocks,
 * the rows' scales, then each block's four quant runs. Each row's combined scales, accumulator and
 * order of blocks are those of dot4_q8_0, so every row's sum keeps the bits vec_dot4 gives it. */
static inline __attribute__((always_inline)) AVX2 void dot_packed(enum llm_type t, int64_t n, int64_t groups,
                                                                 float *s, const void *w, const void *x)
{
    const size_t qb = (t == LLM_TYPE_Q4_0   ? sizeof(struct block_q4_0)
                       : t == LLM_TYPE_Q5_0 ? sizeof(struct block_q5_0)
                                            : sizeof(struct block_q8_0)) - sizeof(uint16_t);
    const struct block_q8_0 *yb = x;
    const int64_t nb = n / QK;
    const char *p = w;
    for (int64_t g = 0; g < groups; g++) {
        __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
        for (int64_t c = 0; c < nb; c += 8) {
            const int64_t nbc = nb - c < 8 ? nb - c : 8;
            const char *qs = p + 4 * nbc * 2;
            prefetch_ahead(p, (size_t)(4 * nbc) * (2 + qb), PREFETCH_AHEAD_QUANT);
            float d[4][8];
            if (nbc == 8) {
                __m256 dy = scales8(yb + c, sizeof *yb);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    _mm256_storeu_ps(d[r], _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + r * 16))), dy));
            } else {
                for (int r = 0; r < 4; r++)
                    for (int64_t k = 0; k < nbc; k++) {
                        uint16_t h;
                        memcpy(&h, p + (r * nbc + k) * 2, sizeof h);
                        d[r][k] = fp16_avx2(h) * fp16_avx2(yb[c + k].d);
                    }
            }
#pragma GCC unroll 8
            for (int64_t k = 0; k < nbc; k++) {
                const char *q = qs + (size_t)k * 4 * qb;
                __m256i yv = loadu256(yb[c + k].qs);
                __m256i off = _mm256_maddubs_epi16(_mm256_set1_epi8(t == LLM_TYPE_Q5_0 ? 16 : 8), yv);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[r][k]),
                                             _mm256_cvtepi32_ps(quant_sum(t, (const uint8_t *)q + r * qb, yv, off)),
                                             acc[r]);
            }
            p += 4 * nbc * (2 + qb);
        }
        for (int r = 0; r < 4; r++)
            s[4 * g + r] = hsum_ps(acc[r]);
    }
}

void AVX2 llm_vec_dot_packed_q4_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    dot_packed(LLM_TYPE_Q4_0, n, groups, s, w, x);
}

void AVX2 llm_vec_dot_packed_q5_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    dot_packed(LLM_TYPE_Q5_0, n, groups, s, w, x);
}

void AVX2 llm_vec_dot_packed_q8_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    dot_packed(LLM_TYPE_Q8_0, n, groups, s, w, x);
}
