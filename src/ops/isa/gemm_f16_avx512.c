/* AVX-512 float GEMM (llm_fgemm, gemm.h) of F16 / BF16 weights against F32 activations.
 *
 * Packing: 16 elements of 16 weight rows are converted (F16 by vcvtph2ps, BF16 by a shift) and
 * transposed in registers, 64 shuffles per 256 weights, once per call. The register tile
 * (fgemm_tile.h) is 3 panels of 16 rows by 8 activation rows: 24 accumulators, and per k 3 loads,
 * 8 broadcasts and 24 FMAs, the loads from L1/L2 at a fraction of what the two FMA pipes consume. */
#include "ops/types/quants.h"
#include "simd.h"

/* the first n lanes (none when n <= 0) */
static inline AVX512 __mmask16 lane_mask(int live)
{
    return live >= 16 ? (__mmask16)0xffff : live <= 0 ? 0 : (__mmask16)((1u << live) - 1);
}

#define FT_TARGET AVX512
#define FT_LANES 16
#define FT_RV 3
#define FT_NR 8
#define FT_VEC __m512
#define FT_MASK __mmask16
#define FT_MASK_OF(n) lane_mask(n)
#define FT_ZERO() _mm512_setzero_ps()
#define FT_LOAD(p) _mm512_load_ps(p)
#define FT_SET1(x) _mm512_set1_ps(x)
#define FT_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FT_LOADU(p) _mm512_loadu_ps(p)
#define FT_STOREU(p, v) _mm512_storeu_ps(p, v)
#define FT_MASKLOAD(m, p) _mm512_maskz_loadu_ps(m, p)
#define FT_MASKSTORE(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define FT_UNPACKLO(a, b) _mm512_unpacklo_ps(a, b)
#define FT_UNPACKHI(a, b) _mm512_unpackhi_ps(a, b)
#define FT_SHUFFLE(a, b, imm) _mm512_shuffle_ps(a, b, imm)
#define FT_KERNEL llm_gemm_f32_avx512
#include "fgemm_tile.h"

/* out[c * 16 + i] = r[i][c] for c < live: after transpose_quads, a 4 x 4 transpose of 128-bit
 * lanes gathers the four row groups. */
static inline AVX512 void transpose_store(const __m512 *r, float *out, int live)
{
    __m512 s[16];
    transpose_quads(r, s);
    for (int j = 0; j < 4; j++) {
        __m512 u0 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0x44), u1 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0xee);
        __m512 u2 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0x44);
        __m512 u3 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0xee);
        const __m512 c[4] = { _mm512_shuffle_f32x4(u0, u2, 0x88), _mm512_shuffle_f32x4(u0, u2, 0xdd),
                              _mm512_shuffle_f32x4(u1, u3, 0x88), _mm512_shuffle_f32x4(u1, u3, 0xdd) };
        for (int l = 0; l < 4; l++)
            if (4 * l + j < live)
                _mm512_store_ps(out + (4 * l + j) * 16, c[l]);
    }
}

static inline __attribute__((always_inline)) AVX512 __m512 load_row(enum llm_type t, const char *p, int live)
{
    __m256i h = _mm256_maskz_loadu_epi16(lane_mask(live), p);
    if (t == LLM_TYPE_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
