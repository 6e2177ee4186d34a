/* AVX-512 vec_dot4 kernels (decode's matrix-vector product): the sums of vec_dot4_avx2.c and of
 * the F16 dot4 in vec_dot_avx2.c, with wider steps. Each row has its own accumulators, fed in the same order whatever
 * the other three rows are, so a row's sum does not depend on its place. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ops/types/blocks.h"
#include "ops/types/quants.h"
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

/* One row with llm_vec_dot4_f16_avx512's sums for it (the same accumulators fed in the same
 * order): decode of long rows reads them one after the other, one sequential stream that the
 * hardware prefetcher follows at the core's full read rate, where four rows read side by side are
 * four streams (bench/results/kernel_choices.md). */
void AVX512 llm_vec_dot1_f16_avx512(int64_t n, float *s, const void *w, const void *x)
{
    const uint16_t *wh = w, *xh = x;
    __m512 a = _mm512_setzero_ps(), b = a;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = _mm512_fmadd_ps(load_f16x16(wh + i, 0xffff), load_f16x16(xh + i, 0xffff), a);
        b = _mm512_fmadd_ps(load_f16x16(wh + i + 16, 0xffff), load_f16x16(xh + i + 16, 0xffff), b);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        a = _mm512_fmadd_ps(load_f16x16(wh + i, m), load_f16x16(xh + i, m), a);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
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

static inline __attribute__((always_inline)) AVX512 void dot4_f32(int64_t n, float *s, const float *w0,
                                                                 const float *w1, const float *w2, const float *w3,
                                                                 const float *xf)
{
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

void AVX512 llm_vec_dot4_f32_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_f32(n, s, w[0], w[1], w[2], w[3], x);
}

/* The loop over groups of four rows inside the kernel: a call per group, with its spills, cost a
 * tiny model as much as its 64-float rows' arithmetic. */
void AVX512 llm_vec_dot_rows_f32_avx512(int64_t n, int64_t rows, float *s, const void *w, size_t stride,
                                        const void *x)
{
    const char *r = w;
    for (int64_t m = 0; m < rows; m += 4, r += 4 * stride, s += 4)
        dot4_f32(n, s, (const float *)r, (const float *)(r + stride), (const float *)(r + 2 * stride),
                 (const float *)(r + 3 * stride), x);
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
    if (t == LLM_TYPE_Q5_0) {
        const struct block_q5_0 *b = (const struct block_q5_0 *)wb;
        uint32_t qh;
        memcpy(&qh, b->qh, sizeof qh);
        __m256i q = nibbles32_u(b->qs);
        return _mm256_dpbusd_epi32(start, _mm256_mask_add_epi8(q, qh, q, _mm256_set1_epi8(16)), yv);
    }
    __m256i q = _mm256_xor_si256(loadu256(((const struct block_q8_0 *)wb)->qs), _mm256_set1_epi8((char)0x80));
    return _mm256_dpbusd_epi32(start, q, yv);
}

static inline __attribute__((always_inline)) AVX512 void block4(enum llm_type t, size_t ws, const char *const *w,
                                                               const struct block_q8_0 *yb, int64_t b,
                                                               const float *const *d, __m256 *acc)
{
    __m256i yv = loadu256(yb[b].qs);
    __m256i sy = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), yv);
    __m256i start = _mm256_sub_epi32(_mm256_setzero_si256(),
                                     _mm256_slli_epi32(sy, t == LLM_TYPE_Q4_0 ? 3 : t == LLM_TYPE_Q5_0 ? 4 : 7));
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(d[r]),
                                 _mm256_cvtepi32_ps(block_sum(t, w[r] + b * ws, yv, start)), acc[r]);
}

/* The last blocks [i, nb) of the first R rows (R = 1 or 4), one per ymm (fewer than four remain),
 * then the sums. */
static inline __attribute__((always_inline)) AVX512 void finish_rows(enum llm_type t, int R, const void *const *w,
                                                                    const struct block_q8_0 *y, int64_t i, int64_t nb,
                                                                    const __m512 *acc, float *s)
{
    const size_t ws = t == LLM_TYPE_Q4_0   ? sizeof(struct block_q4_0)
                      : t == LLM_TYPE_Q5_0 ? sizeof(struct block_q5_0)
                                           : sizeof(struct block_q8_0);
    const char *rows[4] = { w[0], w[1], w[2], w[3] };
    __m256 tail[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (; i < nb; i++) {
        float d[4];
        const float *dk[4] = { &d[0], &d[1], &d[2], &d[3] };
        for (int r = 0; r < 4; r++) {
            uint16_t h;
            memcpy(&h, rows[r] + i * ws, sizeof h);
            d[r] = fp16_avx2(h) * fp16_avx2(y[i].d);
        }
        block4(t, ws, rows, y, i, dk, tail);
    }
    for (int r = 0; r < R; r++)
        s[r] = _mm512_reduce_add_ps(acc[r]) + hsum_ps(tail[r]);
}

/* ---- Q4_0 and Q5_0: four blocks of a row per zmm -------------------------------------------------
 * One block per ymm left most of the work per weight byte in unpacking, converting and scaling,
 * which ran slower than one core streams from memory. Here the 16-byte quants of four consecutive
 * blocks of a row fill one zmm: its low nibbles pair with the activations' first 16 bytes of each
 * block and its high nibbles with their last 16, so one AND, one shift and two vpdpbusd cover
 * 128 weights, and lane group j (4 lanes) holds block j's sum, scaled by a 16-float vector of the
 * four blocks' d_w * d_y. The activation side is rearranged once for the four rows. */

/* The 32 quants of two Q8_0 blocks, the first in the low half. */
static inline __attribute__((always_inline)) AVX512 __m512i quants2(const struct block_q8_0 *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(loadu256(b[0].qs)), loadu256(b[1].qs), 1);
}

/* Elements 0..15 (lo) and 16..31 (hi) of four consecutive Q8_0 blocks, block j in 128-bit lane j. */
static inline __attribute__((always_inline)) AVX512 void act4(const struct block_q8_0 *y, __m512i *lo, __m512i *hi)
{
    __m512i a = quants2(y), b = quants2(y + 2);
    *lo = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    *hi = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1));
}

/* The fp16 d of four consecutive blocks (ws bytes apart, first word of each: words 0, 9, 18, 27 of
 * Q4_0, 0, 17, 34, 51 of Q8_0), each repeated over its 4 lanes. Four Q4_0 blocks span 72 bytes and
 * four Q8_0 blocks 136, so the 64- and 128-byte loads stay inside them. */
static inline __attribute__((always_inline)) AVX512 __m512 scales4x4(const void *blocks, size_t ws)
{
    const __m512i *p = blocks;
    if (ws == sizeof(struct block_q4_0)) {
        const __m256i idx = _mm256_setr_epi16(0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27);
        return _mm512_cvtph_ps(_mm512_castsi512_si256(
            _mm512_permutexvar_epi16(_mm512_castsi256_si512(idx), _mm512_loadu_si512(p))));
    }
    const __m256i idx = _mm256_setr_epi16(0, 0, 0, 0, 17, 17, 17, 17, 34, 34, 34, 34, 51, 51, 51, 51);
    return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(
        _mm512_loadu_si512(p), _mm512_castsi256_si512(idx), _mm512_loadu_si512(p + 1))));
}

/* The 16 quant bytes of four consecutive Q4_0 or Q5_0 blocks (t), block j in 128-bit lane j. */
static inline __attribute__((always_inline)) AVX512 __m512i quants4(enum llm_type t, const char *b)
{
    const size_t ws = t == LLM_TYPE_Q4_0 ? sizeof(struct block_q4_0) : sizeof(struct block_q5_0);
    const char *qs = b + (t == LLM_TYPE_Q4_0 ? offsetof(struct block_q4_0, qs) : offsetof(struct block_q5_0, qs));
    __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)qs));
    q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(qs + ws)), 1);
    q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(qs + 2 * ws)), 2);
    return _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(qs + 3 * ws)), 3);
}

/* The fp16 d of four consecutive Q5_0 blocks, each repeated over its 4 lanes (22-byte blocks: a
 * vector load of all four would read past the 88 bytes they span). */
static inline __attribute__((always_inline)) AVX512 __m512 scales4x4_q5_0(const struct block_q5_0 *b)
{
    const uint64_t w = b[0].d | (uint64_t)b[1].d << 16 | (uint64_t)b[2].d << 32 | (uint64_t)b[3].d << 48;
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)w))));
}

/* R rows (1 or 4) of Q4_0 or Q5_0 (t); both constants after inlining. Each row's sums are the same
 * whatever R. Q5_0's 5th bits come from each block's 32-bit qh: bits 0-15 go with the low nibbles
 * (the lane group's first 16 weights), bits 16-31 with the high ones; assembled as two 64-bit byte
 * masks, they add 16 to the selected quants. */
static inline __attribute__((always_inline)) AVX512 void nibble_rows(enum llm_type t, int R, int64_t n, float *s,
                                                                    const void *const *w, const void *x)
{
    const struct block_q8_0 *y = x;
    const size_t ws = t == LLM_TYPE_Q4_0 ? sizeof(struct block_q4_0) : sizeof(struct block_q5_0);
    const char *rows[4] = { w[0], w[R > 1], w[R > 2 ? 2 : 0], w[R > 3 ? 3 : 0] };
    const __m512i m4 = _mm512_set1_epi8(0x0f), ones = _mm512_set1_epi8(1), b16 = _mm512_set1_epi8(16);
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
    int64_t nb = n / QK, i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i lo, hi;
        act4(y + i, &lo, &hi);
        /* lane start: -8 (Q4_0) or -16 (Q5_0) times the sum of its 8 activations: the quants are
         * stored with that offset */
        __m512i sy = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, lo), ones, hi);
        __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sy, t == LLM_TYPE_Q4_0 ? 3 : 4));
        __m512 dy = scales4x4(y + i, sizeof *y);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const char *b = rows[r] + i * ws;
            __m512i q = quants4(t, b);
            __m512i ql = _mm512_and_si512(q, m4), qu = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            __m512 dw;
            if (t == LLM_TYPE_Q5_0) {
                const struct block_q5_0 *b5 = (const struct block_q5_0 *)b;
                uint64_t mlo = 0, mhi = 0;
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    uint32_t qh;
                    memcpy(&qh, b5[j].qh, sizeof qh);
                    mlo |= (uint64_t)(qh & 0xffff) << (16 * j);
                    mhi |= (uint64_t)(qh >> 16) << (16 * j);
                }
                ql = _mm512_mask_add_epi8(ql, mlo, ql, b16);
                qu = _mm512_mask_add_epi8(qu, mhi, qu, b16);
                dw = scales4x4_q5_0(b5);
            } else {
                dw = scales4x4(b, ws);
            }
            __m512i sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, ql, lo), qu, hi);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(sum), acc[r]);
        }
    }
    finish_rows(t, R, (const void *const *)rows, y, i, nb, acc, s);
}

void AVX512 llm_vec_dot4_q4_0_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    nibble_rows(LLM_TYPE_Q4_0, 4, n, s, w, x);
}

void AVX512 llm_vec_dot1_q4_0_avx512(int64_t n, float *s, const void *w, const void *x)
{
    nibble_rows(LLM_TYPE_Q4_0, 1, n, s, &w, x);
}

void AVX512 llm_vec_dot4_q5_0_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    nibble_rows(LLM_TYPE_Q5_0, 4, n, s, w, x);
}

void AVX512 llm_vec_dot1_q5_0_avx512(int64_t n, float *s, const void *w, const void *x)
{
    nibble_rows(LLM_TYPE_Q5_0, 1, n, s, &w, x);
}

/* ---- Q8_0: two blocks of a row per zmm ------------------------------------------------------
 * The same idea for Q8_0: blocks b and b+1 of a row fill one zmm (lanes 0-7 block b, 8-15 block
 * b+1), weights made unsigned by +128 (an XOR), the activation side built once for four rows. */

static inline __attribute__((always_inline)) AVX512 void q8_0_rows(int R, int64_t n, float *s, const void *const *w,
                                                                  const void *x)
{
    const struct block_q8_0 *y = x;
    const struct block_q8_0 *rows[4] = { w[0], w[R > 1], w[R > 2 ? 2 : 0], w[R > 3 ? 3 : 0] };
    const __m512i ones = _mm512_set1_epi8(1), bias = _mm512_set1_epi8((char)0x80);
    /* a 4-lanes-per-block scale vector spread to 8 lanes per block: blocks 0, 1 and blocks 2, 3 */
    const __m512i first = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
    int64_t nb = n / QK, i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i y01 = quants2(y + i), y23 = quants2(y + i + 2);
        /* lane starts: -128 * the sum of its 4 activations */
        __m512i s01 = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, y01), 7);
        __m512i s23 = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, y23), 7);
        s01 = _mm512_sub_epi32(_mm512_setzero_si512(), s01);
        s23 = _mm512_sub_epi32(_mm512_setzero_si512(), s23);
        __m512 dy = scales4x4(y + i, sizeof *y);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512i a = _mm512_dpbusd_epi32(s01, _mm512_xor_si512(quants2(rows[r] + i), bias), y01);
            __m512i b = _mm512_dpbusd_epi32(s23, _mm512_xor_si512(quants2(rows[r] + i + 2), bias), y23);
            __m512 d = _mm512_mul_ps(scales4x4(rows[r] + i, sizeof *rows[r]), dy);
            acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(first, d), _mm512_cvtepi32_ps(a), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(second, d), _mm512_cvtepi32_ps(b), acc[r]);
        }
    }
    finish_rows(LLM_TYPE_Q8_0, R, (const void *const *)rows, y, i, nb, acc, s);
}

void AVX512 llm_vec_dot4_q8_0_avx512(int64_t n, float *s, const void *const *w, const void *x)
{
    q8_0_rows(4, n, s, w, x);
}

void AVX512 llm_vec_dot1_q8_0_avx512(int64_t n, float *s, const void *w, const void *x)
{
    q8_0_rows(1, n, s, &w, x);
}
