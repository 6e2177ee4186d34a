/* AVX2 float GEMM (llm_fgemm, gemm.h) of F16 / BF16 weights against F32 activations.
 *
 * Packing: 8 elements of 8 weight rows are converted to floats and transposed in registers (an
 * 8 x 8 transpose: unpack, shuffle, cross-lane permute), once per call. The register tile
 * (fgemm_tile.h) is 3 panels of 8 rows by 4 activation rows: 12 accumulators, 3 loads and 4
 * broadcasts per 12 FMAs, within the 16 vector registers. */
#include "ops/types/quants.h"
#include "simd.h"

/* lanes below n set, for maskload / maskstore */
static inline AVX2 __m256i lane_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define FT_TARGET AVX2
#define FT_LANES 8
#define FT_RV 3
#define FT_NR 4
#define FT_VEC __m256
#define FT_MASK __m256i
#define FT_MASK_OF(n) lane_mask(n)
#define FT_ZERO() _mm256_setzero_ps()
#define FT_LOAD(p) _mm256_load_ps(p)
#define FT_SET1(x) _mm256_set1_ps(x)
#define FT_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FT_LOADU(p) _mm256_loadu_ps(p)
#define FT_STOREU(p, v) _mm256_storeu_ps(p, v)
#define FT_MASKLOAD(m, p) _mm256_maskload_ps(p, m)
#define FT_MASKSTORE(p, m, v) _mm256_maskstore_ps(p, m, v)
#define FT_UNPACKLO(a, b) _mm256_unpacklo_ps(a, b)
#define FT_UNPACKHI(a, b) _mm256_unpackhi_ps(a, b)
#define FT_SHUFFLE(a, b, imm) _mm256_shuffle_ps(a, b, imm)
#define FT_KERNEL llm_gemm_f32_avx2
#include "fgemm_tile.h"

static inline __attribute__((always_inline)) AVX2 __m256 load_row(enum llm_type t, const char *p, int live)
{
    uint16_t h[8] = { 0 };
    if (live < 8)
        memcpy(h, p, (size_t)live * sizeof h[0]);
    __m128i v = _mm_loadu_si128((const __m128i *)(live < 8 ? (const char *)h : p));
    if (t == LLM_TYPE_F16)
        return _mm256_cvtph_ps(v);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

/* out[c * 8 + i] = r[i][c] for c < live: after transpose_quads, rows 0-3 and 4-7 of each element
 * are in the two 128-bit lanes of two vectors. */
static inline AVX2 void transpose_store(const __m256 *r, float *out, int live)
{
    __m256 s[8];
    transpose_quads(r, s);
    for (int c = 0; c < 4; c++) {
        if (c < live)
            _mm256_store_ps(out + c * 8, _mm256_permute2f128_ps(s[c], s[4 + c], 0x20));
        if (c + 4 < live)
            _mm256_store_ps(out + (c + 4) * 8, _mm256_permute2f128_ps(s[c], s[4 + c], 0x31));
    }
}
