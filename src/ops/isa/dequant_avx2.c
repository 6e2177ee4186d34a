/* AVX2/F16C dequantization (to_float_fast): twins of the reference to_float kernels in fp16.c,
 * quants.c and quants_k.c, giving the same floats bit for bit. Each output is computed with the
 * same float operations in the same order as the reference (a product, then an add/sub of the
 * min where the type has one; never fused, -std=c11 keeps contraction off), so only the lane
 * width differs. Quants are widened to int32 and converted exactly; scales are the reference's
 * scalar expressions. Blocks are packed, so every load is unaligned. */
#include <stdint.h>
#include <string.h>

#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "simd.h"

/* ---- plain types ---------------------------------------------------------------------------- */

void AVX2 llm_to_float_f16_avx2(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i)));
        /* F16C quietens signalling NaNs; the reference keeps their bits: redo such lanes */
        if (__builtin_expect(_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0, 0)) {
            llm_to_float_f16(h + i, dst + i, 8);
            continue;
        }
        _mm256_storeu_ps(dst + i, v);
    }
    llm_to_float_f16(h + i, dst + i, n - i);
}

void AVX2 llm_to_float_bf16_avx2(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
    }
    llm_to_float_bf16(h + i, dst + i, n - i);
}

/* ---- helpers --------------------------------------------------------------------------------- */

/* Scale of a block, as llm_fp16_to_fp32 gives it: F16C is exact for every non-NaN half, and a
 * NaN scale makes every product the same quiet NaN either way. */
static inline AVX2 __m256 half_ps(uint16_t h)
{
    return _mm256_set1_ps(_cvtsh_ss(h));
}

/* 8 signed bytes (low half of b) -> 8 floats. */
static inline AVX2 __m256 i8_ps(__m128i b)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

/* dst[0..8) = d * q, q the 8 signed bytes in the low half of b. */
static inline AVX2 void put_mul(float *dst, __m128i b, __m256 d)
{
    _mm256_storeu_ps(dst, _mm256_mul_ps(d, i8_ps(b)));
}

/* dst[0..8) = d * q + m (the legacy types with a min). */
static inline AVX2 void put_mul_add(float *dst, __m128i b, __m256 d, __m256 m)
{
    _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_mul_ps(d, i8_ps(b)), m));
}

/* dst[0..8) = d * q - m (the K-quants with a min). */
static inline AVX2 void put_mul_sub(float *dst, __m128i b, __m256 d, __m256 m)
{
    _mm256_storeu_ps(dst, _mm256_sub_ps(_mm256_mul_ps(d, i8_ps(b)), m));
}

/* 16 bytes -> their low nibbles (elements 0..15) then high nibbles (16..31) in one register. */
static inline AVX2 __m256i nibbles(const uint8_t *qs)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

/* The 32 bits of a Q5 qh field as 32 bytes: 0x10 where bit j is set, else 0. */
static inline AVX2 __m256i high_bits(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    /* byte j takes byte j/8 of h (set1 fills both lanes, so lane 1 picks bytes 2 and 3) */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 4 groups of 8 bytes of q, each in the low half of a register. */
static inline AVX2 void split4(__m256i q, __m128i g[4])
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    g[0] = lo;
    g[1] = _mm_unpackhi_epi64(lo, lo);
    g[2] = hi;
    g[3] = _mm_unpackhi_epi64(hi, hi);
}

/* dst[0..32) = d * q for 32 signed bytes q. */
static inline AVX2 void put32_mul(float *dst, __m256i q, __m256 d)
{
    __m128i g[4];
    split4(q, g);
    for (int k = 0; k < 4; k++)
        put_mul(dst + 8 * k, g[k], d);
}

static inline AVX2 void put32_mul_add(float *dst, __m256i q, __m256 d, __m256 m)
{
    __m128i g[4];
    split4(q, g);
    for (int k = 0; k < 4; k++)
        put_mul_add(dst + 8 * k, g[k], d, m);
}

static inline AVX2 void put32_mul_sub(float *dst, __m256i q, __m256 d, __m256 m)
{
    __m128i g[4];
    split4(q, g);
    for (int k = 0; k < 4; k++)
        put_mul_sub(dst + 8 * k, g[k], d, m);
}

/* ---- legacy 32-element blocks ---------------------------------------------------------------- */

void AVX2 llm_to_float_q4_0_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        __m256i q = _mm256_sub_epi8(nibbles(b->qs), _mm256_set1_epi8(8));
        put32_mul(dst, q, half_ps(b->d));
    }
}

void AVX2 llm_to_float_iq4_nl_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_iq4_nl *b = src;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4_nl_values));
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK)
        put32_mul(dst, _mm256_shuffle_epi8(table, nibbles(b->qs)), half_ps(b->d));
}

void AVX2 llm_to_float_q4_1_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK)
        put32_mul_add(dst, nibbles(b->qs), half_ps(b->d), half_ps(b->m));
}

void AVX2 llm_to_float_q5_0_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        __m256i q = _mm256_or_si256(nibbles(b->qs), high_bits(b->qh));
        put32_mul(dst, _mm256_sub_epi8(q, _mm256_set1_epi8(16)), half_ps(b->d));
    }
}

void AVX2 llm_to_float_q5_1_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        __m256i q = _mm256_or_si256(nibbles(b->qs), high_bits(b->qh));
        put32_mul_add(dst, q, half_ps(b->d), half_ps(b->m));
    }
}

void AVX2 llm_to_float_q8_0_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK)
        put32_mul(dst, _mm256_loadu_si256((const __m256i *)b->qs), half_ps(b->d));
}

/* ---- K-quants -------------------------------------------------------------------------------- */

/* 2-bit field at `shift` of each of 32 bytes. */
static inline AVX2 __m256i crumbs(__m256i q, int shift)
{
    return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(3));
}

void AVX2 llm_to_float_q2_K_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q2_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
        int is = 0;
        for (int half = 0; half < 2; half++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * half));
            for (int shift = 0; shift < 8; shift += 2, dst += 32) {
                __m128i g[4];
                split4(crumbs(q, shift), g);
                /* bytes 0..15 and 16..31 are two sub-blocks with their own scale byte */
                for (int sub = 0; sub < 2; sub++) {
                    int sc = b->scales[is++];
                    __m256 dl = _mm256_set1_ps(d * (float)(sc & 0xf));
                    __m256 ml = _mm256_set1_ps(dmin * (float)(sc >> 4));
                    put_mul_sub(dst + 16 * sub, g[2 * sub], dl, ml);
                    put_mul_sub(dst + 16 * sub + 8, g[2 * sub + 1], dl, ml);
                }
            }
        }
    }
}

void AVX2 llm_to_float_q3_K_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q3_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = _cvtsh_ss(b->d);
        int sc[16];
        q3_K_scales(b->scales, sc);
        __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
        int is = 0, bit = 0;
        for (int half = 0; half < 2; half++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * half));
            for (int shift = 0; shift < 8; shift += 2, bit++, dst += 32) {
                /* subtract 4 where the hmask bit is clear */
                __m256i h = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(bit)),
                                             _mm256_set1_epi8(1));
                __m256i v = _mm256_sub_epi8(crumbs(q, shift),
                                            _mm256_andnot_si256(_mm256_slli_epi16(h, 2),
                                                                _mm256_set1_epi8(4)));
                __m128i g[4];
                split4(v, g);
                for (int sub = 0; sub < 2; sub++) {
                    __m256 dl = _mm256_set1_ps(d * (float)sc[is++]);
                    put_mul(dst + 16 * sub, g[2 * sub], dl);
                    put_mul(dst + 16 * sub + 8, g[2 * sub + 1], dl);
                }
            }
        }
    }
}

void AVX2 llm_to_float_q4_K_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q4_K *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
            for (int h = 0; h < 2; h++, dst += 32) {
                int sc, mn;
                k4_scale_min(b->scales, 2 * c + h, &sc, &mn);
                __m256i v = _mm256_and_si256(h ? _mm256_srli_epi16(q, 4) : q, m4);
                put32_mul_sub(dst, v, _mm256_set1_ps(d * (float)sc), _mm256_set1_ps(dmin * (float)mn));
            }
        }
    }
}

void AVX2 llm_to_float_q5_K_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q5_K *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
        __m256i qh = _mm256_loadu_si256((const __m256i *)b->qh);
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
            for (int h = 0; h < 2; h++, dst += 32) {
                int sc, mn;
                k4_scale_min(b->scales, 2 * c + h, &sc, &mn);
                __m256i v = _mm256_and_si256(h ? _mm256_srli_epi16(q, 4) : q, m4);
                __m256i hb = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + h));
                v = _mm256_or_si256(v, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
                put32_mul_sub(dst, v, _mm256_set1_ps(d * (float)sc), _mm256_set1_ps(dmin * (float)mn));
            }
        }
    }
}

void AVX2 llm_to_float_q6_K_avx2(const void *src, float *dst, int64_t n)
{
    const struct block_q6_K *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = _cvtsh_ss(b->d);
        for (int half = 0; half < 2; half++, dst += 128) {
            const uint8_t *ql = b->ql + 64 * half;
            const int8_t *sc = b->scales + 8 * half;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * half));
            /* quarter k of the 128 outputs: nibble of l0/l1, 2 high bits at 2k of qh */
            __m256i lo[4] = { _mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                              _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                              _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4) };
            for (int k = 0; k < 4; k++) {
                __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), m2);
                __m256i v = _mm256_sub_epi8(_mm256_or_si256(lo[k], _mm256_slli_epi16(hi, 4)), off);
                __m128i g[4];
                split4(v, g);
                /* the reference computes (d * scale) * q */
                __m256 d0 = _mm256_set1_ps(d * (float)sc[2 * k]);
                __m256 d1 = _mm256_set1_ps(d * (float)sc[2 * k + 1]);
                put_mul(dst + 32 * k, g[0], d0);
                put_mul(dst + 32 * k + 8, g[1], d0);
                put_mul(dst + 32 * k + 16, g[2], d1);
                put_mul(dst + 32 * k + 24, g[3], d1);
            }
        }
    }
}
