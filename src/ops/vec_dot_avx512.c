/* AVX-512 vec_dot4 kernels (decode's matrix-vector product), twins of vec_dot4_avx2.c and of the
 * F16 dot4 in vec_dot_avx2.c. Each row has its own accumulators, fed in the same order whatever
 * the other three rows are, so a row's sum does not depend on its place. */
#include <stdint.h>

#include "blocks.h"
#include "dot4_q8_0.h"
#include "quants.h"
#include "simd.h"

/* ---- F16: 16 halves per conversion, the tail through a masked load --------------------------- */

static inline AVX512 __m512 load_f16x16(const uint16_t *p, __mmask16 m)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

void AVX512 llm_vec_dot4_f16_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    const uint16_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3], *xh = x;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 x0 = load_f16x16(xh + i, 0xffff), x1 = load_f16x16(xh + i + 16, 0xffff);
        a0 = _mm512_fmadd_ps(load_f16x16(w0 + i, 0xffff), x0, a0);
        a1 = _mm512_fmadd_ps(load_f16x16(w1 + i, 0xffff), x0, a1);
        a2 = _mm512_fmadd_ps(load_f16x16(w2 + i, 0xffff), x0, a2);
        a3 = _mm512_fmadd_ps(load_f16x16(w3 + i, 0xffff), x0, a3);
        b0 = _mm512_fmadd_ps(load_f16x16(w0 + i + 16, 0xffff), x1, b0);
        b1 = _mm512_fmadd_ps(load_f16x16(w1 + i + 16, 0xffff), x1, b1);
        b2 = _mm512_fmadd_ps(load_f16x16(w2 + i + 16, 0xffff), x1, b2);
        b3 = _mm512_fmadd_ps(load_f16x16(w3 + i + 16, 0xffff), x1, b3);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x0 = load_f16x16(xh + i, m);
        a0 = _mm512_fmadd_ps(load_f16x16(w0 + i, m), x0, a0);
        a1 = _mm512_fmadd_ps(load_f16x16(w1 + i, m), x0, a1);
        a2 = _mm512_fmadd_ps(load_f16x16(w2 + i, m), x0, a2);
        a3 = _mm512_fmadd_ps(load_f16x16(w3 + i, m), x0, a3);
    }
    s[0] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
    s[1] = _mm512_reduce_add_ps(_mm512_add_ps(a1, b1));
    s[2] = _mm512_reduce_add_ps(_mm512_add_ps(a2, b2));
    s[3] = _mm512_reduce_add_ps(_mm512_add_ps(a3, b3));
}

/* ---- F32: a tiny model's rows (64-256 floats) are a few zmm each ------------------------------ */

/* Lower plus upper eight lanes (AVX-512F alone: no DQ extract). */
static inline AVX512 __m256 fold8(__m512 a)
{
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

/* The four rows' lane sums in one reduction: halves folded, then the AVX2 pairwise tree. */
static inline AVX512 __m128 hsum4_512(__m512 a, __m512 b, __m512 c, __m512 d)
{
    __m256 a8 = fold8(a), b8 = fold8(b), c8 = fold8(c), d8 = fold8(d);
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

void AVX512 llm_vec_dot4_f32_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3], *xf = x;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 x0 = _mm512_loadu_ps(xf + i), x1 = _mm512_loadu_ps(xf + i + 16);
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + i), x0, a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + i), x0, a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + i), x0, a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + i), x0, a3);
        b0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + i + 16), x1, b0);
        b1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + i + 16), x1, b1);
        b2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + i + 16), x1, b2);
        b3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + i + 16), x1, b3);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x0 = _mm512_maskz_loadu_ps(m, xf + i);
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + i), x0, a0);
        a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + i), x0, a1);
        a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + i), x0, a2);
        a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + i), x0, a3);
    }
    _mm_storeu_ps(s, hsum4_512(_mm512_add_ps(a0, b0), _mm512_add_ps(a1, b1), _mm512_add_ps(a2, b2),
                               _mm512_add_ps(a3, b3)));
}

/* ---- Q4_0 / Q8_0 against Q8_0 with VNNI ------------------------------------------------------ */

/* vpdpbusd multiplies unsigned by signed bytes: the weights go in as unsigned (Q4_0's stored
 * quants 0..15, Q8_0's q + 128) and each lane starts from -offset·Σy of its 4 activation bytes,
 * which the four rows share. Exact in int32. */
static inline __attribute__((always_inline)) AVX512 __m256i block_sum(enum llm_type t, const char *wb, __m256i yv,
                                                                     __m256i start)
{
    if (t == LLM_TYPE_Q4_0)
        return _mm256_dpbusd_epi32(start, nibbles32_u(((const struct block_q4_0 *)wb)->qs), yv);
    __m256i q = _mm256_xor_si256(loadu256(((const struct block_q8_0 *)wb)->qs), _mm256_set1_epi8((char)0x80));
    return _mm256_dpbusd_epi32(start, q, yv);
}

/* The fp16 d of 8 consecutive blocks of ws bytes (18: Q4_0, 34: Q8_0) as floats: picked out of
 * two or four 64-byte loads by word permutes (the 8 blocks span 144 or 272 bytes, so no load
 * passes their end), much cheaper than eight scalar loads and shifts. */
static inline __attribute__((always_inline)) AVX512 __m256 scales8_512(const void *blocks, size_t ws)
{
    const __m512i *p = blocks;
    if (ws == sizeof(struct block_q4_0)) {
        const __m512i idx = _mm512_setr_epi64(0x001b001200090000, 0x003f0036002d0024, 0, 0, 0, 0, 0, 0);
        __m512i h = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 1));
        return _mm256_cvtph_ps(_mm512_castsi512_si128(h));
    }
    /* words 17k: blocks 0-3 in the first 128 bytes, blocks 4-7 at words 4, 21, 38, 55 of the next */
    const __m512i idx = _mm512_setr_epi64(0x0033002200110000, 0x0037002600150004, 0, 0, 0, 0, 0, 0);
    __m512i lo = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 1));
    __m512i hi = _mm512_permutex2var_epi16(_mm512_loadu_si512(p + 2), idx, _mm512_loadu_si512(p + 3));
    return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_mask_mov_epi16(lo, 0xf0, hi)));
}

static inline __attribute__((always_inline)) AVX512 void block4(enum llm_type t, size_t ws, const char *const *w,
                                                               const struct block_q8_0 *yb, int64_t b,
                                                               const float *const *d, __m256 *acc)
{
    __m256i yv = loadu256(yb[b].qs);
    __m256i sy = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), yv);
    __m256i start = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sy, t == LLM_TYPE_Q4_0 ? 3 : 7));
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(d[r]),
                                 _mm256_cvtepi32_ps(block_sum(t, w[r] + b * ws, yv, start)), acc[r]);
}

void AVX512 llm_vec_dot4_q4_0_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q4_0, n, s, w, x, scales8_512, block4);
}

void AVX512 llm_vec_dot4_q8_0_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q8_0, n, s, w, x, scales8_512, block4);
}
