/* AVX2/F16C activation quantizers (from_float_fast): the same bytes as the reference ones in
 * fp16.c, quants.c and quants_k.c, including their rounding rules. */
#include <string.h>

#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "simd.h"

void AVX2 llm_from_float_f16_avx2(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        h[i] = llm_fp32_to_fp16(src[i]);
}

/* 8 floats -> 8 bf16 in the low 16 bits of each 32-bit lane (nearest even, NaN quietened). */
static inline AVX2 __m256i bf16_lanes(__m256 x)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
    r = _mm256_srli_epi32(r, 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, q, nan);
}

void AVX2 llm_from_float_bf16_avx2(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_lanes(_mm256_loadu_ps(src + i));
        __m256i b = bf16_lanes(_mm256_loadu_ps(src + i + 8));
        /* packus interleaves 128-bit lanes: a0-3 b0-3 a4-7 b4-7; restore the order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
        _mm256_storeu_si256((__m256i *)(h + i), p);
    }
    for (; i < n; i++)
        h[i] = llm_fp32_to_bf16(src[i]);
}

/* Round half away from zero, like roundf (exact: |v| < 2^23 here). */
static inline AVX2 __m256 round_away(__m256 v)
{
    __m256 a = abs_ps(v);
    __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 up = _mm256_cmp_ps(_mm256_sub_ps(a, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    t = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
    return _mm256_or_ps(t, _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
}

/* Four vectors of 8 int32 (-128..127) -> 32 int8 in element order. */
static inline AVX2 __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i v = _mm256_packs_epi16(ab, cd);
    /* packs work within 128-bit lanes; the dwords end up in order 0 4 1 5 2 6 3 7 */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element Q8 block: returns d (unrounded); sum of the quants in *sum. */
static inline AVX2 float q8_block(const float *x, int8_t *qs, int *sum)
{
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, abs_ps(v[k]));
    }
    float d = hmax_ps(amax) / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id))));
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    *sum = hsum_epi32(s);
    _mm256_storeu_si256((__m256i *)qs, pack_i8(q[0], q[1], q[2], q[3]));
    return d;
}

void AVX2 llm_from_float_q8_0_avx2(const float *src, void *dst, int64_t n)
{
    struct block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK; i++) {
        int sum;
        b[i].d = llm_fp32_to_fp16(q8_block(src + i * QK, b[i].qs, &sum));
    }
}

void AVX2 llm_from_float_q8_1_avx2(const float *src, void *dst, int64_t n)
{
    struct block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++) {
        int sum;
        float d = q8_block(src + i * QK, b[i].qs, &sum);
        b[i].d = llm_fp32_to_fp16(d);
        b[i].s = llm_fp32_to_fp16((float)sum * d);
    }
}

void AVX2 llm_from_float_q8_K_avx2(const float *src, void *dst, int64_t n)
{
    struct block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, b++, src += QK_K) {
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8)
            amax = _mm256_max_ps(amax, abs_ps(_mm256_loadu_ps(src + j)));
        float a = hmax_ps(amax);
        if (a == 0.0f) {
            memset(b, 0, sizeof *b);
            continue;
        }
        /* the signed extreme is the first element of largest magnitude, as in the reference */
        float max = 0.0f;
        for (int j = 0; j < QK_K; j += 8) {
            int m = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(src + j)),
                                                     _mm256_set1_ps(a), _CMP_EQ_OQ));
            if (m) {
                max = src[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127);
        for (int j = 0; j < QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + j + 8 * k), vs);
                v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(v), lim);
            }
            _mm256_storeu_si256((__m256i *)(b->qs + j), pack_i8(q[0], q[1], q[2], q[3]));
        }
        for (int k = 0; k < QK_K / 16; k++) {
            /* sum 16 bytes: sign-extend to int16 and add pairwise */
            __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b->qs + 16 * k)));
            b->bsums[k] = (int16_t)hsum_epi32(_mm256_madd_epi16(w, _mm256_set1_epi16(1)));
        }
        b->d = 1.0f / iscale;
    }
}
