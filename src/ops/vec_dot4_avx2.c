/* AVX2 vec_dot4 of Q4_0 / Q5_0 / Q8_0 weights against Q8_0 activations (decode's matrix-vector product).
 * One activation block is loaded once for four weight rows (the loop: dot4_q8_0.h). */
#include <stdint.h>

#include "blocks.h"
#include "dot4_q8_0.h"
#include "quants.h"
#include "simd.h"

/* int32 lane sums of one weight block of type t against activation quants yv; off is
 * maddubs(8, yv) (Q4_0, whose quants are stored +8) or maddubs(16, yv) (Q5_0, +16), shared by the
 * four rows. */
static inline __attribute__((always_inline)) AVX2 __m256i block_sum(enum llm_type t, const char *wb, __m256i yv,
                                                                   __m256i off)
{
    const __m256i ones = _mm256_set1_epi16(1);
    if (t != LLM_TYPE_Q8_0) {
        const struct block_q5_0 *b5 = (const struct block_q5_0 *)wb;
        __m256i q = t == LLM_TYPE_Q4_0 ? nibbles32_u(((const struct block_q4_0 *)wb)->qs)
                                       : _mm256_or_si256(nibbles32_u(b5->qs), fifth_bits(b5->qh));
        return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), off), ones);
    }
    /* signed x signed through the sign trick (activations never hold -128) */
    __m256i q = loadu256(((const struct block_q8_0 *)wb)->qs);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q)), ones);
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
