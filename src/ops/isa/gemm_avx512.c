/* AVX-512 VNNI integer GEMM (llm_gemm_fn) of Q8_0 / Q4_0 weights against Q8_0 activations.
 *
 * Each block of weight rows (gemm_block_rows) is first repacked into scratch, 16 rows at a time
 * and block by block: the 16 scales as floats, then the quants as unsigned bytes w + 128 with the
 * 4-byte groups of the 16 rows side by side, so one 512-bit load holds bytes 4j..4j+3 of all 16
 * rows. vpdpbusd of that against the 4 activation bytes broadcast to every lane adds one more
 * group to 16 row sums at once; 8 of them finish a block of 32, started from -128·Σx (the offset
 * of the unsigned weights, from the activation block sums computed once per call), exact in int32.
 * One float FMA by d_w·d_x per 16 rows and block. A register tile is 2 x 16 weight rows by RN
 * activation rows: each weight load serves RN activations, each broadcast 32 rows. */
#include <string.h>

#include "gemm.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "simd.h"

#define RN 4

/* 16 rows of one block, repacked: scales, then q[j][r][0..3] = bytes 4j..4j+3 of row r, + 128 */
struct pack {
    float d[16];
    uint8_t q[QK / 4][16][4];
};

/* Block b of a weight row as 32 bytes w + 128. */
static inline __attribute__((always_inline)) AVX512 __m256i unsigned_quants(enum llm_type t, const void *row,
                                                                           int64_t b)
{
    if (t == LLM_TYPE_Q4_0) /* (q - 8) + 128 */
        return _mm256_add_epi8(nibbles32_u(((const struct block_q4_0 *)row)[b].qs), _mm256_set1_epi8(120));
    return _mm256_xor_si256(loadu256(((const struct block_q8_0 *)row)[b].qs), _mm256_set1_epi8((char)0x80));
}

/* rows [0, rows) of w into groups of 16 (the last group repeats the last row). */
static inline __attribute__((always_inline)) AVX512 void repack(enum llm_type t, int64_t nb, int64_t rows,
                                                               const char *w, size_t wstride, struct pack *out)
{
    const size_t bsize = t == LLM_TYPE_Q4_0 ? sizeof(struct block_q4_0) : sizeof(struct block_q8_0);
    /* row r's 8 dwords go to dword r of each of the 8 groups: a transpose of 16 x 8 dwords */
    const __m512i idx = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120);
    for (int64_t g = 0; g < (rows + 15) / 16; g++)
        for (int64_t b = 0; b < nb; b++) {
            struct pack *p = out + g * nb + b;
            uint32_t q[16][8];
            for (int r = 0; r < 16; r++) {
                int64_t m = g * 16 + r < rows ? g * 16 + r : rows - 1;
                const char *row = w + (size_t)m * wstride;
                uint16_t h;
                memcpy(&h, row + b * bsize, sizeof h);
                p->d[r] = fp16_avx2(h);
                _mm256_storeu_si256((__m256i *)q[r], unsigned_quants(t, row, b));
            }
            for (int j = 0; j < QK / 4; j++)
                _mm512_storeu_si512(p->q[j], _mm512_i32gather_epi32(_mm512_add_epi32(idx, _mm512_set1_epi32(j)),
                                                                     (const void *)q, 4));
        }
}

/* xs[n * nb + b] = -128 · Σ quants of block b of activation row n. */
static AVX512 void offsets(int64_t nb, int64_t N, const char *x, size_t xstride, int32_t *xs)
{
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t n = 0; n < N; n++) {
        const struct block_q8_0 *row = (const struct block_q8_0 *)(x + (size_t)n * xstride);
        for (int64_t b = 0; b < nb; b++)
            xs[n * nb + b] = -128 * hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, loadu256(row[b].qs)));
    }
}

/* 32 weight rows (two groups) times RN activation rows; dst columns of rows past `live` are not
 * written. */
static AVX512 void tile(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x,
                        const int32_t *const *xs, float *dst, size_t ldd, int nn, int live)
{
    __m512 acc[2][RN];
    #pragma GCC unroll 8
    for (int j = 0; j < RN; j++)
        acc[0][j] = acc[1][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i s[2][RN];
        const struct block_q8_0 *xb[RN];
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            xb[j] = (const struct block_q8_0 *)x[j] + b;
            s[0][j] = s[1][j] = _mm512_set1_epi32(xs[j][b]);
        }
        #pragma GCC unroll 8
        for (int q = 0; q < QK / 4; q++) {
            __m512i w0 = _mm512_loadu_si512(g0[b].q[q]), w1 = _mm512_loadu_si512(g1[b].q[q]);
            #pragma GCC unroll 8
            for (int j = 0; j < RN; j++) {
                int32_t v;
                memcpy(&v, xb[j]->qs + 4 * q, sizeof v);
                __m512i xv = _mm512_set1_epi32(v);
                s[0][j] = _mm512_dpbusd_epi32(s[0][j], w0, xv);
                s[1][j] = _mm512_dpbusd_epi32(s[1][j], w1, xv);
            }
        }
        __m512 d0 = _mm512_loadu_ps(g0[b].d), d1 = _mm512_loadu_ps(g1[b].d);
        #pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            __m512 dx = _mm512_set1_ps(fp16_avx2(xb[j]->d));
            acc[0][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[0][j]), _mm512_mul_ps(d0, dx), acc[0][j]);
            acc[1][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[1][j]), _mm512_mul_ps(d1, dx), acc[1][j]);
        }
    }
    __mmask16 m0 = live >= 16 ? 0xffff : (__mmask16)((1u << live) - 1);
    __mmask16 m1 = live >= 32 ? 0xffff : live <= 16 ? 0 : (__mmask16)((1u << (live - 16)) - 1);
    #pragma GCC unroll 8
    for (int j = 0; j < nn; j++) {
        _mm512_mask_storeu_ps(dst + (size_t)j * ldd, m0, acc[0][j]);
        _mm512_mask_storeu_ps(dst + (size_t)j * ldd + 16, m1, acc[1][j]);
    }
}

static inline __attribute__((always_inline)) AVX512 void gemm(enum llm_type t, int64_t k, int64_t M, int64_t N,
                                                             const char *w, size_t wstride, const char *x,
                                                             size_t xstride, float *dst, size_t ldd, void *scratch)
{
    const int64_t nb = k / QK, block = gemm_block_rows(k);
    struct pack *packed = (struct pack *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    int32_t *xs = (int32_t *)(packed + block / 16 * nb);
    offsets(nb, N, x, xstride, xs);
    for (int64_t b0 = 0; b0 < M; b0 += block) {
        int64_t rows = M - b0 < block ? M - b0 : block;
        repack(t, nb, rows, w + (size_t)b0 * wstride, wstride, packed);
        int64_t groups = (rows + 15) / 16;
        for (int64_t n0 = 0; n0 < N; n0 += RN) {
            const char *xr[RN];
            const int32_t *xsr[RN];
            int nn = N - n0 < RN ? (int)(N - n0) : RN;
            for (int j = 0; j < RN; j++) {
                int64_t n = n0 + (j < nn ? j : nn - 1);
                xr[j] = x + (size_t)n * xstride;
                xsr[j] = xs + n * nb;
            }
            for (int64_t g = 0; g < groups; g += 2) {
                const struct pack *g0 = packed + g * nb, *g1 = g + 1 < groups ? g0 + nb : g0;
                tile(nb, g0, g1, xr, xsr, dst + (size_t)n0 * ldd + (size_t)(b0 + 16 * g), ldd, nn,
                     (int)(rows - 16 * g < 32 ? rows - 16 * g : 32));
            }
        }
    }
}

void AVX512 llm_gemm_q8_0_avx512(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                          size_t xstride, float *dst, size_t ldd, void *scratch)
{
    gemm(LLM_TYPE_Q8_0, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}

void AVX512 llm_gemm_q4_0_avx512(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                          size_t xstride, float *dst, size_t ldd, void *scratch)
{
    gemm(LLM_TYPE_Q4_0, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}
