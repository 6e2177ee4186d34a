/* AVX2/FMA/F16C dot products (twins of vec_dot.c). Integer work per block, one float FMA per
 * block into 8-lane accumulators; lane sums are exact in float (< 2^24) before scaling. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "prefetch.h"
#include "simd.h"

/* ---- plain types ---------------------------------------------------------------------------- */

static inline AVX2 __m256 load_bf16(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* 8 elements of a row of type t (a constant after inlining) as floats, and one element. */
static inline __attribute__((always_inline)) AVX2 __m256 load8(enum llm_type t, const void *p, int64_t i)
{
    return t == LLM_TYPE_F16    ? load_f16x8((const uint16_t *)p + i)
           : t == LLM_TYPE_BF16 ? load_bf16((const uint16_t *)p + i)
                                : _mm256_loadu_ps((const float *)p + i);
}

static inline __attribute__((always_inline)) AVX2 float load1(enum llm_type t, const void *p, int64_t i)
{
    return t == LLM_TYPE_F16    ? fp16_avx2(((const uint16_t *)p)[i])
           : t == LLM_TYPE_BF16 ? llm_bf16_to_fp32(((const uint16_t *)p)[i])
                                : ((const float *)p)[i];
}

/* dot of two rows of the same plain type: 4 accumulators of 8 lanes, then 8 at a time, then the
 * tail element by element. */
static inline __attribute__((always_inline)) AVX2 float dot_plain(enum llm_type t, int64_t n, const void *a,
                                                                 const void *b)
{
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps() };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load8(t, a, i + 8 * k), load8(t, b, i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(load8(t, a, i), load8(t, b, i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++)
        sum += load1(t, a, i) * load1(t, b, i);
    return sum;
}

/* Sums of four 8-lane accumulators, one per lane of the result. */
static inline AVX2 __m128 hsum4_ps(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* s[r] = dot(w[r], x) for four rows of one plain type: x is loaded once for the four rows and the
 * four lane sums share one reduction, which is what a row of 64 floats (a tiny model's matrix-vector
 * product) spends most of its time on. Two accumulators per row hide the FMA latency. Each row's
 * sum depends on that row alone, so a row gives the same float in any of the four places. */
static inline __attribute__((always_inline)) AVX2 void dot4_plain(enum llm_type t, int64_t n, float *s,
                                                                 const void *const *w, const void *x)
{
    /* named accumulators: arrays of vectors end up on the stack at -O2 */
    const void *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 x0 = load8(t, x, i), x1 = load8(t, x, i + 8);
        a0 = _mm256_fmadd_ps(load8(t, w0, i), x0, a0);
        a1 = _mm256_fmadd_ps(load8(t, w1, i), x0, a1);
        a2 = _mm256_fmadd_ps(load8(t, w2, i), x0, a2);
        a3 = _mm256_fmadd_ps(load8(t, w3, i), x0, a3);
        b0 = _mm256_fmadd_ps(load8(t, w0, i + 8), x1, b0);
        b1 = _mm256_fmadd_ps(load8(t, w1, i + 8), x1, b1);
        b2 = _mm256_fmadd_ps(load8(t, w2, i + 8), x1, b2);
        b3 = _mm256_fmadd_ps(load8(t, w3, i + 8), x1, b3);
    }
    if (i + 8 <= n) {
        __m256 x0 = load8(t, x, i);
        a0 = _mm256_fmadd_ps(load8(t, w0, i), x0, a0);
        a1 = _mm256_fmadd_ps(load8(t, w1, i), x0, a1);
        a2 = _mm256_fmadd_ps(load8(t, w2, i), x0, a2);
        a3 = _mm256_fmadd_ps(load8(t, w3, i), x0, a3);
        i += 8;
    }
    float out[4];
    _mm_storeu_ps(out, hsum4_ps(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1), _mm256_add_ps(a2, b2),
                                _mm256_add_ps(a3, b3)));
    for (; i < n; i++) {
        float xi = load1(t, x, i);
        out[0] += load1(t, w0, i) * xi;
        out[1] += load1(t, w1, i) * xi;
        out[2] += load1(t, w2, i) * xi;
        out[3] += load1(t, w3, i) * xi;
    }
    memcpy(s, out, sizeof out);
}

void AVX2 llm_vec_dot4_f32_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_plain(LLM_TYPE_F32, n, s, w, x);
}

/* The loop over groups of four rows inside the kernel (see llm_vec_dot_rows_f32_avx512). */
void AVX2 llm_vec_dot_rows_f32_avx2(int64_t n, int64_t rows, float *s, const void *w, size_t stride, const void *x)
{
    const char *r = w;
    for (int64_t m = 0; m < rows; m += 4, r += 4 * stride, s += 4) {
        const void *four[4] = { r, r + stride, r + 2 * stride, r + 3 * stride };
        dot4_plain(LLM_TYPE_F32, n, s, four, x);
    }
}

void AVX2 llm_vec_dot4_f16_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_plain(LLM_TYPE_F16, n, s, w, x);
}

/* One row with the floats dot4_plain gives it: the same two accumulators fed in the same order,
 * the same reduction tree and tail. Decode of streamed rows reads them one after the other, one
 * sequential stream instead of four (matmul.c), asking for the stream's bytes ahead as it goes
 * (prefetch.h; a prefetch past the matrix's end is harmless: it never faults). */
void AVX2 llm_vec_dot1_f16_avx2(int64_t n, float *s, const void *w, const void *x)
{
    __m256 a = _mm256_setzero_ps(), b = a;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __builtin_prefetch((const char *)w + 2 * i + PREFETCH_IN_STREAM);
        a = _mm256_fmadd_ps(load8(LLM_TYPE_F16, w, i), load8(LLM_TYPE_F16, x, i), a);
        b = _mm256_fmadd_ps(load8(LLM_TYPE_F16, w, i + 8), load8(LLM_TYPE_F16, x, i + 8), b);
        a = _mm256_fmadd_ps(load8(LLM_TYPE_F16, w, i + 16), load8(LLM_TYPE_F16, x, i + 16), a);
        b = _mm256_fmadd_ps(load8(LLM_TYPE_F16, w, i + 24), load8(LLM_TYPE_F16, x, i + 24), b);
    }
    for (; i + 16 <= n; i += 16) {
        a = _mm256_fmadd_ps(load8(LLM_TYPE_F16, w, i), load8(LLM_TYPE_F16, x, i), a);
        b = _mm256_fmadd_ps(load8(LLM_TYPE_F16, w, i + 8), load8(LLM_TYPE_F16, x, i + 8), b);
    }
    if (i + 8 <= n) {
        a = _mm256_fmadd_ps(load8(LLM_TYPE_F16, w, i), load8(LLM_TYPE_F16, x, i), a);
        i += 8;
    }
    const __m256 ab = _mm256_add_ps(a, b);
    float sum = _mm_cvtss_f32(hsum4_ps(ab, ab, ab, ab));
    for (; i < n; i++)
        sum += load1(LLM_TYPE_F16, w, i) * load1(LLM_TYPE_F16, x, i);
    *s = sum;
}

void AVX2 llm_vec_dot4_bf16_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_plain(LLM_TYPE_BF16, n, s, w, x);
}

void AVX2 llm_vec_dot_f32_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_plain(LLM_TYPE_F32, n, x, y);
}

void AVX2 llm_vec_dot_f16_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_plain(LLM_TYPE_F16, n, x, y);
}

void AVX2 llm_vec_dot_bf16_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_plain(LLM_TYPE_BF16, n, x, y);
}

/* ---- integer helpers ------------------------------------------------------------------------- */

/* 8 int32 lanes, each the sum of 4 products of signed bytes (y must not hold -128). */
static inline AVX2 __m256i dot_i8(__m256i x, __m256i y)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* Same for unsigned x (0..127) times signed y. */
static inline AVX2 __m256i dot_u8(__m256i x, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

/* 16 packed nibbles -> 32 bytes 0..15: low nibbles first (elements 0..15), then high ones. */
static inline AVX2 __m256i nibbles32(const uint8_t *qs)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* Block k's combined scale of 8, in all lanes (the index vector is loop-invariant). */
static inline AVX2 __m256 lane(__m256 d8, int k)
{
    return _mm256_permutevar8x32_ps(d8, _mm256_set1_epi32(k));
}

/* ---- legacy blocks --------------------------------------------------------------------------- */

/* One weight block against one Q8_0 block as 8 int32 partial sums. */
typedef __m256i (*q8_0_block_fn)(const void *x, const struct block_q8_0 *y);

static inline AVX2 __m256i dot_q8_0_block(const void *x, const struct block_q8_0 *y)
{
    return dot_i8(loadu256(((const struct block_q8_0 *)x)->qs), loadu256(y->qs));
}

/* One Q4_0 x Q8_0 block: sum (q - 8) * y = sum q * y - 8 * sum y, both products in int16 pairs
 * (|.| <= 2 * 15 * 127) so no sign fix-ups are needed. */
static inline AVX2 __m256i dot_q4_0_block(const void *x, const struct block_q8_0 *y)
{
    __m256i yv = loadu256(y->qs);
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles32_u(((const struct block_q4_0 *)x)->qs), yv),
                                 _mm256_maddubs_epi16(_mm256_set1_epi8(8), yv));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* One Q5_0 x Q8_0 block, like dot_q4_0_block with quants 0..31 - 16. */
static inline AVX2 __m256i dot_q5_0_block(const void *x, const struct block_q8_0 *y)
{
    const struct block_q5_0 *b = x;
    __m256i yv = loadu256(y->qs);
    __m256i q = _mm256_or_si256(nibbles32_u(b->qs), fifth_bits(b->qh));
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), _mm256_maddubs_epi16(_mm256_set1_epi8(16), yv));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* Σ over the blocks of a row whose blocks (xsize bytes, fp16 d first) are dotted with Q8_0 ones
 * by blk: 8 blocks per step with their scales converted as one vector, 4 accumulators. Always
 * inlined, so blk is a direct call in each kernel. */
static inline __attribute__((always_inline)) AVX2 float dot_rows_q8_0(int64_t n, const void *x, size_t xsize,
                                                                     const struct block_q8_0 *yb,
                                                                     q8_0_block_fn blk)
{
    const char *xb = x;
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps() };
    int64_t nb = n / QK, i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m256 d = _mm256_mul_ps(scales8(xb + i * xsize, xsize), scales8(yb + i, sizeof *yb));
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++)
            acc[k % 4] = _mm256_fmadd_ps(lane(d, k), _mm256_cvtepi32_ps(blk(xb + (i + k) * xsize, yb + i + k)),
                                         acc[k % 4]);
    }
    for (; i < nb; i++) {
        uint16_t dx;
        memcpy(&dx, xb + i * xsize, sizeof dx);
        float d = fp16_avx2(dx) * fp16_avx2(yb[i].d);
        acc[0] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(blk(xb + i * xsize, yb + i)), acc[0]);
    }
    return hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void AVX2 llm_vec_dot_q8_0_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_rows_q8_0(n, x, sizeof(struct block_q8_0), y, dot_q8_0_block);
}

void AVX2 llm_vec_dot_q4_0_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_rows_q8_0(n, x, sizeof(struct block_q4_0), y, dot_q4_0_block);
}

void AVX2 llm_vec_dot_q5_0_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_rows_q8_0(n, x, sizeof(struct block_q5_0), y, dot_q5_0_block);
}

/* Q4_1 / Q5_1 against Q8_1: unsigned quants, d·dy·Σq·y plus m·(dy·Σy) from the activation's s. */
static inline AVX2 __m256i q4_1_quants(const void *x)
{
    return nibbles32(((const struct block_q4_1 *)x)->qs);
}

static inline AVX2 __m256i q5_1_quants(const void *x)
{
    const struct block_q5_1 *b = x;
    return _mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh));
}

/* Both blocks start with fp16 d and m. */
static inline __attribute__((always_inline)) AVX2 float dot_rows_q8_1(int64_t n, const void *x, size_t xsize,
                                                                     const struct block_q8_1 *yb,
                                                                     __m256i (*quants)(const void *))
{
    const char *xb = x;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        uint16_t dm[2];
        memcpy(dm, xb + i * xsize, sizeof dm);
        __m256i p = dot_u8(quants(xb + i * xsize), loadu256(yb[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16_avx2(dm[0]) * fp16_avx2(yb[i].d)), _mm256_cvtepi32_ps(p), acc);
        mins += fp16_avx2(dm[1]) * fp16_avx2(yb[i].s);
    }
    return hsum_ps(acc) + mins;
}

void AVX2 llm_vec_dot_q4_1_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_rows_q8_1(n, x, sizeof(struct block_q4_1), y, q4_1_quants);
}

void AVX2 llm_vec_dot_q5_1_avx2(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_rows_q8_1(n, x, sizeof(struct block_q5_1), y, q5_1_quants);
}

/* ---- K-quants against Q8_K ------------------------------------------------------------------- */

/* madd multiplier for a 32-byte product vector covering 16-element sub-blocks 2g and 2g+1 of one
 * half: lanes 0-7 get scale 2g, lanes 8-15 scale 2g+1, picked from the 8 int16 scales of that
 * half, which s8 holds in both 128-bit lanes. */
static inline AVX2 __m256i pick_pair(__m256i s8, int g)
{
    short lo = (short)(4 * g | (4 * g + 1) << 8), hi = (short)((4 * g + 2) | (4 * g + 3) << 8);
    return _mm256_shuffle_epi8(s8, _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi)));
}

/* Scale j of 8 int16 scales held in both 128-bit lanes of s8, in all 16 lanes. */
static inline AVX2 __m256i pick_one(__m256i s8, int j)
{
    return _mm256_shuffle_epi8(s8, _mm256_set1_epi16((short)(2 * j | (2 * j + 1) << 8)));
}

/* 16 int16 scales (one per 16-element sub-block) -> the 8 of half h in both 128-bit lanes. */
static inline AVX2 __m256i half_scales(__m256i s16, int h)
{
    return h ? _mm256_permute2x128_si256(s16, s16, 0x11)
             : _mm256_permute2x128_si256(s16, s16, 0x00);
}

/* mins[k] * bsums[k] over the 16 sub-blocks (16 int16 lanes each), as 8 float partial sums: kept
 * in a vector accumulator, with no horizontal sum per super-block. */
static inline AVX2 __m256 min_terms(const void *bsums, __m256i mins)
{
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(loadu256(bsums), mins));
}

void AVX2 llm_vec_dot_q2_K_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q2_K *xb = x;
    const struct block_q8_K *yb = y;
    const __m256i three = _mm256_set1_epi8(3);
    const __m128i low = _mm_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        /* scale byte k: low nibble scale, high nibble min of sub-block k */
        __m128i sm = _mm_loadu_si128((const __m128i *)xb[i].scales);
        __m256i sc = _mm256_cvtepu8_epi16(_mm_and_si128(sm, low));
        __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), low));
        const int8_t *q8 = yb[i].qs;
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int half = 0; half < 2; half++) {
            __m256i q = loadu256(xb[i].qs + 32 * half), s8 = half_scales(sc, half);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++, q8 += 32) {
                __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * g), three);
                __m256i p = _mm256_maddubs_epi16(v, loadu256(q8));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pick_pair(s8, g)));
            }
        }
        float dy = yb[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * fp16_avx2(xb[i].d)), _mm256_cvtepi32_ps(sumi),
                              acc);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(dy * fp16_avx2(xb[i].dmin)),
                               min_terms(yb[i].bsums, mn), accm);
    }
    *s = hsum_ps(_mm256_sub_ps(acc, accm));
}

/* The 16 Q3_K scales (see q3_K_scales) as int16, four at a time: low nibbles of s[0..7] then their
 * high nibbles, top two bits from s[8..11] at shifts 0, 2, 4, 6. */
static inline AVX2 __m256i q3_scales(const uint8_t *s)
{
    uint32_t a[3];
    memcpy(a, s, sizeof a);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    __m128i v = _mm_setr_epi32((int)((a[0] & m4) | (a[2] & m2) << 4),
                               (int)((a[1] & m4) | ((a[2] >> 2) & m2) << 4),
                               (int)(((a[0] >> 4) & m4) | ((a[2] >> 4) & m2) << 4),
                               (int)(((a[1] >> 4) & m4) | ((a[2] >> 6) & m2) << 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(v), _mm256_set1_epi16(32));
}

void AVX2 llm_vec_dot_q3_K_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q3_K *xb = x;
    const struct block_q8_K *yb = y;
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sc = q3_scales(xb[i].scales);
        __m256i hm = loadu256(xb[i].hmask);
        const int8_t *q8 = yb[i].qs;
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int half = 0; half < 2; half++) {
            __m256i q = loadu256(xb[i].qs + 32 * half), s8 = half_scales(sc, half);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++, q8 += 32) {
                __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * g), three);
                /* values whose hmask bit is clear are offset by -4 */
                __m256i bit = _mm256_set1_epi8((char)(1 << (4 * half + g)));
                __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit),
                                                  _mm256_setzero_si256());
                v = _mm256_sub_epi8(v, _mm256_and_si256(clear, four));
                __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v),
                                                 _mm256_sign_epi8(loadu256(q8), v));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pick_pair(s8, g)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(yb[i].d * fp16_avx2(xb[i].d)),
                              _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* A row's eight 6-bit scales and mins as bytes v = (scales 0-3, 4-7, mins 0-3, 4-7) widened: the
 * scales to 16 bits in both 128-bit lanes (sc, for pick_one), each min twice (mn16, for min_terms). */
static inline AVX2 void k4_widen(__m128i v, __m256i *sc, __m256i *mn16)
{
    *sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(v));
    __m128i twice = _mm_shuffle_epi8(v, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
                                                      14, 14, 15, 15));
    *mn16 = _mm256_cvtepu8_epi16(twice);
}

/* Q4_K/Q5_K packed 6-bit scales and mins (see k4_scale_min) of up to four rows, given as the 32-bit
 * words a0, a1, a2 of their 12 scale bytes (lane r: row r), unpacked four at a time: v[r] = row r's
 * bytes as k4_widen takes them. */
static inline __attribute__((always_inline)) AVX2 void k4_unpack(__m128i a0, __m128i a1, __m128i a2, __m128i v[4])
{
    const __m128i m3f = _mm_set1_epi8(0x3f), m0f = _mm_set1_epi8(0x0f), m03 = _mm_set1_epi8(0x03);
    const __m128i sc_lo = _mm_and_si128(a0, m3f), mn_lo = _mm_and_si128(a1, m3f);
    const __m128i sc_hi = _mm_or_si128(_mm_and_si128(a2, m0f),
                                       _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(a0, 6), m03), 4));
    const __m128i mn_hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(a2, 4), m0f),
                                       _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(a1, 6), m03), 4));
    const __m128i p0 = _mm_unpacklo_epi32(sc_lo, sc_hi), p1 = _mm_unpacklo_epi32(mn_lo, mn_hi);
    const __m128i p2 = _mm_unpackhi_epi32(sc_lo, sc_hi), p3 = _mm_unpackhi_epi32(mn_lo, mn_hi);
    v[0] = _mm_unpacklo_epi64(p0, p1);
    v[1] = _mm_unpackhi_epi64(p0, p1);
    v[2] = _mm_unpacklo_epi64(p2, p3);
    v[3] = _mm_unpackhi_epi64(p2, p3);
}

/* One row's scales and mins (its 12 scale bytes at s, inside a block that has 4 more bytes after
 * them), widened: the 8 scales as int16 in both 128-bit lanes, the 8 mins spread to the 16 bsums
 * (each twice). */
static inline AVX2 void k4_scales(const uint8_t *s, __m256i *sc, __m256i *mn16)
{
    const __m128i a = _mm_loadu_si128((const __m128i *)s); /* words 0-2 in lane 0 of a, a >> 32, a >> 64 */
    __m128i v[4];
    k4_unpack(a, _mm_srli_si128(a, 4), _mm_srli_si128(a, 8), v);
    k4_widen(v[0], sc, mn16);
}

/* Integer part of one Q4_K (qh NULL) or Q5_K super-block against Q8_K: the two share their layout
 * but for Q5_K's fifth bit (bits 2c, 2c+1 of each qh byte belong to chunk c). Always inlined, so
 * the qh test folds away in each kernel. */
static inline __attribute__((always_inline)) AVX2 __m256i k45_sumi(const uint8_t *qs, const uint8_t *qh,
                                                                  const int8_t *q8, __m256i sc)
{
    const __m256i low = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    __m256i hb = qh ? loadu256(qh) : _mm256_setzero_si256();
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++, q8 += 64) {
        __m256i q = loadu256(qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, low);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hb, 4), b4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hb, 3), b4));
            hb = _mm256_srli_epi16(hb, 2);
        }
        __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, loadu256(q8)), pick_one(sc, 2 * c));
        __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, loadu256(q8 + 32)), pick_one(sc, 2 * c + 1));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
    }
    return sumi;
}

/* acc += d·sumi and accm += dmin·(mins · bsums) for one super-block, d and dmin the row's scales
 * times the activation block's. */
static inline AVX2 void k45_accumulate(__m256 *acc, __m256 *accm, float d, float dmin, const void *bsums,
                                       __m256i sumi, __m256i mn)
{
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), *acc);
    *accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), min_terms(bsums, mn), *accm);
}

void AVX2 llm_vec_dot_q4_K_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q4_K *xb = x;
    const struct block_q8_K *yb = y;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sc, mn;
        k4_scales(xb[i].scales, &sc, &mn);
        __m256i sumi = k45_sumi(xb[i].qs, NULL, yb[i].qs, sc);
        k45_accumulate(&acc, &accm, yb[i].d * fp16_avx2(xb[i].d), yb[i].d * fp16_avx2(xb[i].dmin), yb[i].bsums, sumi,
                       mn);
    }
    *s = hsum_ps(_mm256_sub_ps(acc, accm));
}

void AVX2 llm_vec_dot_q5_K_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q5_K *xb = x;
    const struct block_q8_K *yb = y;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sc, mn;
        k4_scales(xb[i].scales, &sc, &mn);
        __m256i sumi = k45_sumi(xb[i].qs, xb[i].qh, yb[i].qs, sc);
        k45_accumulate(&acc, &accm, yb[i].d * fp16_avx2(xb[i].d), yb[i].d * fp16_avx2(xb[i].dmin), yb[i].bsums, sumi,
                       mn);
    }
    *s = hsum_ps(_mm256_sub_ps(acc, accm));
}

/* Integer part of one Q6_K super-block (ql, qh and its 16 scales) against Q8_K block y, the +32 of
 * the stored quants taken off. */
static inline __attribute__((always_inline)) AVX2 __m256i q6_K_sumi(const uint8_t *ql, const uint8_t *qh,
                                                                   const int8_t *scales,
                                                                   const struct block_q8_K *y)
{
    const __m256i low = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)scales));
    const int8_t *q8 = y->qs;
    /* quants are stored +32: subtract 32 * sum_k sc[k] * bsums[k] at the end */
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int half = 0; half < 2; half++, q8 += 128) {
        __m256i l0 = loadu256(ql + 64 * half), l1 = loadu256(ql + 64 * half + 32);
        __m256i h = loadu256(qh + 32 * half);
        __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(l0, low), _mm256_and_si256(_mm256_slli_epi16(h, 4), top)),
            _mm256_or_si256(_mm256_and_si256(l1, low), _mm256_and_si256(_mm256_slli_epi16(h, 2), top)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low), _mm256_and_si256(h, top)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low),
                            _mm256_and_si256(_mm256_srli_epi16(h, 2), top)),
        };
        __m256i s8 = half_scales(sc, half);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i p = _mm256_maddubs_epi16(q[g], loadu256(q8 + 32 * g));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pick_pair(s8, g)));
        }
    }
    __m256i bias = _mm256_madd_epi16(loadu256(y->bsums), sc);
    return _mm256_sub_epi32(sumi, _mm256_slli_epi32(bias, 5));
}

void AVX2 llm_vec_dot_q6_K_avx2(int64_t n, float *s, const void *x, const void *y)
{
    const struct block_q6_K *xb = x;
    const struct block_q8_K *yb = y;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sumi = q6_K_sumi(xb[i].ql, xb[i].qh, xb[i].scales, &yb[i]);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(yb[i].d * fp16_avx2(xb[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* ---- repacked rows (repack.h) ------------------------------------------------------------- */

/* The four 16-byte heads (d, dmin, 12 scale bytes) of a repacked Q4_K super-block, decoded together:
 * dd[2r], dd[2r + 1] = the activation's d times row r's d and dmin (k45_accumulate's d and
 * dmin), v[r] = row r's scale and min bytes (k4_unpack). One transpose of the heads' 32-bit words
 * replaces four rows' unpacking and half-float conversions (bench/results/decode.md). */
static inline AVX2 void k4_heads4(const uint8_t *heads, float yd, float dd[8], __m128i v[4])
{
    const __m128i *h = (const __m128i *)heads;
    const __m128i h0 = _mm_loadu_si128(h), h1 = _mm_loadu_si128(h + 1), h2 = _mm_loadu_si128(h + 2),
                  h3 = _mm_loadu_si128(h + 3);
    const __m128i u0 = _mm_unpacklo_epi32(h0, h1), u1 = _mm_unpacklo_epi32(h2, h3);
    const __m128i u2 = _mm_unpackhi_epi32(h0, h1), u3 = _mm_unpackhi_epi32(h2, h3);
    /* word w of the four rows: 0 = d | dmin << 16, 1-3 = the scale bytes' words a0-a2 */
    const __m128i dm = _mm_unpacklo_epi64(u0, u1);
    k4_unpack(_mm_unpackhi_epi64(u0, u1), _mm_unpacklo_epi64(u2, u3), _mm_unpackhi_epi64(u2, u3), v);
    _mm256_storeu_ps(dd, _mm256_mul_ps(_mm256_set1_ps(yd), _mm256_cvtph_ps(dm)));
}

/* Groups of four Q4_K / Q6_K rows in the repacked layout, streamed front to back: per super-block
 * the four rows' scale bytes, then their four quant runs. Each row is summed exactly as the one-row
 * kernels above sum it (same accumulators, same order), so it keeps their bits; the activation
 * block stays in L1 for the four rows. */
void AVX2 llm_vec_dot_packed_q4_K_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    enum { HEAD = offsetof(struct block_q4_K, qs), QS = sizeof(struct block_q4_K) - HEAD };
    _Static_assert(HEAD == 16 && offsetof(struct block_q4_K, dmin) == 2 &&
                       offsetof(struct block_q4_K, scales) == 4,
                   "k4_heads4 reads a head as four 32-bit words");
    const struct block_q8_K *yb = x;
    const uint8_t *p = w;
    for (int64_t g = 0; g < groups; g++) {
        __m256 acc[4], accm[4];
        for (int r = 0; r < 4; r++)
            acc[r] = accm[r] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / QK_K; i++, p += 4 * sizeof(struct block_q4_K)) {
            prefetch_ahead(p, 4 * sizeof(struct block_q4_K), PREFETCH_AHEAD_QUANT);
            float dd[8];
            __m128i v[4];
            k4_heads4(p, yb[i].d, dd, v);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                __m256i sc, mn;
                k4_widen(v[r], &sc, &mn);
                __m256i sumi = k45_sumi(p + 4 * HEAD + r * QS, NULL, yb[i].qs, sc);
                k45_accumulate(&acc[r], &accm[r], dd[2 * r], dd[2 * r + 1], yb[i].bsums, sumi, mn);
            }
        }
        for (int r = 0; r < 4; r++)
            s[4 * g + r] = hsum_ps(_mm256_sub_ps(acc[r], accm[r]));
    }
}

void AVX2 llm_vec_dot_packed_q6_K_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    enum { HEAD = sizeof(struct block_q6_K) - offsetof(struct block_q6_K, scales), QS = offsetof(struct block_q6_K, scales) };
    const struct block_q8_K *yb = x;
    const uint8_t *p = w;
    for (int64_t g = 0; g < groups; g++) {
        __m256 acc[4];
        for (int r = 0; r < 4; r++)
            acc[r] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / QK_K; i++, p += 4 * sizeof(struct block_q6_K)) {
            prefetch_ahead(p, 4 * sizeof(struct block_q6_K), PREFETCH_AHEAD_QUANT);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const uint8_t *head = p + r * HEAD, *qs = p + 4 * HEAD + r * QS;
                uint16_t d;
                memcpy(&d, head + offsetof(struct block_q6_K, d) - QS, sizeof d);
                __m256i sumi = q6_K_sumi(qs, qs + offsetof(struct block_q6_K, qh), (const int8_t *)head, &yb[i]);
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(yb[i].d * fp16_avx2(d)), _mm256_cvtepi32_ps(sumi), acc[r]);
            }
        }
        for (int r = 0; r < 4; r++)
            s[4 * g + r] = hsum_ps(acc[r]);
    }
}
