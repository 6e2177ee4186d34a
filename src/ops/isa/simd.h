/* Internal to src/ops: AVX2/FMA/F16C helpers for the fast kernels (sums, exp, f16 loads). Only call
 * them from functions marked AVX2, after llm_cpu_has_avx2() said yes. */
#ifndef LLM_OPS_SIMD_H
#define LLM_OPS_SIMD_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The target of every AVX2 kernel: the three features come together on every x86 we target, */
#define AVX2 __attribute__((target("avx2,fma,f16c")))
/* ... and of the AVX-512 ones, after llm_cpu_has_avx512() (which checks all five) */
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

static inline AVX2 float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline AVX2 float hmax_ps(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline AVX2 int hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline AVX2 __m256 abs_ps(__m256 v)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

static inline AVX2 float fp16_avx2(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* 8 halfs (unaligned) to floats. */
static inline AVX2 __m256 load_f16x8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* e^x for 8 floats, relative error ~2e-7: x = n·ln2 + r with |r| <= ln2/2, e^r by its Taylor
 * polynomial to degree 7, 2^n put into the exponent bits. Inputs below -87.3 (including -inf)
 * give 0, above 88.7 give +inf. */
static inline AVX2 __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.7f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln2 split in a part exact in float and a correction, so r keeps its low bits */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.4286068203094172e-06f), r);
    __m256 q = _mm256_set1_ps(1.0f / 5040);
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 720));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 120));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 24));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 6));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.5f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
    /* 2^n as two factors so n = 128 (x near 88.7) does not overflow the exponent field */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i h = _mm256_srai_epi32(ni, 1);
    __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
    __m256 p2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(q, p1), p2);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
}

/* exp8 on 16 floats (same reduction and polynomial): 2^n applied by vscalefps, which needs no
 * split of n; inputs below -87.3 (including -inf) give 0, above 88.7 give +inf. */
static inline AVX512 __m512 exp16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f), hi = _mm512_set1_ps(88.7f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __mmask16 over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.4286068203094172e-06f), r);
    __m512 q = _mm512_set1_ps(1.0f / 5040);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 720));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 120));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 24));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 6));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    __m512 y = _mm512_scalef_ps(q, n);
    y = _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
    return _mm512_mask_mov_ps(y, over, _mm512_set1_ps(INFINITY));
}

static inline AVX2 __m256i loadu256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* 32 bits (little-endian qh[4]) -> byte j = 0x10 when bit j is set, else 0. */
static inline AVX2 __m256i fifth_bits(const uint8_t *qh)
{
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
                 (uint32_t)qh[3] << 24;
    /* byte j takes byte j/8 of h, then tests its own bit j%8 */
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Q4_0 block quants 0..15 (not yet offset by -8), low nibbles first, from the 16 bytes q: they go
 * to both halves and the upper half is shifted. */
static inline AVX2 __m256i nibbles32_x(__m128i q)
{
    __m256i both = _mm256_srlv_epi32(_mm256_broadcastsi128_si256(q), _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* The same from memory: a broadcast load, avoiding a cross-lane insert. */
static inline AVX2 __m256i nibbles32_u(const uint8_t *qs)
{
    return nibbles32_x(_mm_loadu_si128((const __m128i *)qs));
}

/* r[0..7] (8 rows of 8 floats) transposed in place: 2x2 then 4x4 within 128-bit lanes, then the
 * lanes swapped. */
static inline __attribute__((always_inline)) AVX2 void transpose8x8_ps(__m256 r[8])
{
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    /* u[4i + c]: rows 4i..4i+3, element c in the low lane and 4 + c in the high one */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* Rows v[0..7] of 8 dwords transposed into out (8 x 32 bytes): out row i holds dword i of v[0], ...,
 * v[7], so one 256-bit load gets the same 4 bytes of 8 rows (the integer GEMMs' packing of 8 weight
 * rows a register). */
static inline AVX2 void transpose8x8_epi32(const __m256i v[8], void *out)
{
    __m256i t[8], u[8];
    for (int r = 0; r < 8; r += 2) {
        t[r] = _mm256_unpacklo_epi32(v[r], v[r + 1]);
        t[r + 1] = _mm256_unpackhi_epi32(v[r], v[r + 1]);
    }
    for (int h = 0; h < 8; h += 4) /* u[h + i] holds dwords i and i + 4 of rows h..h+3 */
        for (int i = 0; i < 2; i++) {
            u[h + 2 * i] = _mm256_unpacklo_epi64(t[h + i], t[h + i + 2]);
            u[h + 2 * i + 1] = _mm256_unpackhi_epi64(t[h + i], t[h + i + 2]);
        }
    __m256i *o = out;
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_si256(o + i, _mm256_permute2x128_si256(u[i], u[i + 4], 0x20));
        _mm256_storeu_si256(o + i + 4, _mm256_permute2x128_si256(u[i], u[i + 4], 0x31));
    }
}

/* Rows s[0..7] of 8 words transposed into t[0..7]: t[i] holds word i of s[0], ..., s[7] (the AVX2
 * Q8_0 GEMM's packing: row r's fp16 scales of 8 blocks in, each block's 8 rows' scales out). */
static inline AVX2 void transpose8x8_epi16(const __m128i s[8], __m128i t[8])
{
    __m128i a[8], b[8];
    for (int r = 0; r < 8; r += 2) {
        a[r] = _mm_unpacklo_epi16(s[r], s[r + 1]);
        a[r + 1] = _mm_unpackhi_epi16(s[r], s[r + 1]);
    }
    for (int h = 0; h < 8; h += 4) /* b[h + i] holds words 2i, 2i + 1 and 2i + 4, 2i + 5 of rows h..h+3 */
        for (int i = 0; i < 2; i++) {
            b[h + 2 * i] = _mm_unpacklo_epi32(a[h + i], a[h + i + 2]);
            b[h + 2 * i + 1] = _mm_unpackhi_epi32(a[h + i], a[h + i + 2]);
        }
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm_unpacklo_epi64(b[i], b[i + 4]);
        t[2 * i + 1] = _mm_unpackhi_epi64(b[i], b[i + 4]);
    }
}

/* The first `live` (<= 16) of the 16 row sums of two 8-lane accumulators into dst: the integer GEMMs'
 * tiles of 2 x 8 weight rows, whose last tile of a matrix may hold fewer real rows. */
static inline AVX2 void store_rows16(float *dst, __m256 lo, __m256 hi, int live)
{
    float out[16];
    _mm256_storeu_ps(out, lo);
    _mm256_storeu_ps(out + 8, hi);
    memcpy(dst, out, (size_t)live * sizeof(float));
}

/* The fp16 scales d of 8 consecutive blocks (`stride` bytes apart, d first) as floats: packed
 * four to a 64-bit word with scalar loads and shifts, so the vector unit sees two moves and one
 * conversion instead of eight. */
static inline AVX2 __m256 scales8(const void *blocks, size_t stride)
{
    const uint8_t *p = blocks;
    uint64_t w[2] = { 0, 0 };
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        uint16_t h;
        memcpy(&h, p + (size_t)k * stride, sizeof h);
        w[k / 4] |= (uint64_t)h << (16 * (k % 4));
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)w[1], (long long)w[0]));
}

#endif
