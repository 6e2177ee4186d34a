/* AVX2 integer GEMM (llm_gemm_fn) of Q4_0 weights against Q8_0 activations, with 8 weight rows in
 * the 8 lanes of a register, so nothing is summed across lanes and each unpacked nibble serves many
 * activation rows.
 *
 * Each block of weight rows (gemm_block_rows) is first packed into scratch, 8 rows at a time and
 * block by block: the 8 scales as floats, then the quants as unsigned nibbles 0..15 (one byte
 * each) with the 4-byte groups of the 8 rows side by side, so one 256-bit load holds elements
 * 4j..4j+3 of all 8 rows. maddubs of that (unsigned) against the 4 activation bytes broadcast to
 * every lane (signed) gives pair sums of at most 2·15·128, so the 8 groups of a block add up in
 * int16 without overflow (8 · 3840 < 32768); one madd widens them to Σ q·x per row, and subtracting
 * 8·Σx (the nibbles' offset, from the activation block sums computed once per call) gives the
 * block's exact Σ (q - 8)·x. One float FMA by d_w·d_x per 8 rows and block. A register tile is 2 x 8
 * weight rows by RN activation rows: each weight load serves RN activations, each broadcast 16
 * rows (1.1-1.2x one group of 8 by 4 activations at N = 512, bench/results/gemm_int8.md). */
#include <string.h>

#include "gemm.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "simd.h"

#define RN 3
#define ROWS 8

/* 8 rows of one block, packed: scales, then q[j][r][0..3] = elements 4j..4j+3 of row r, 0..15 */
struct pack {
    float d[ROWS];
    uint8_t q[QK / 4][ROWS][4];
};

/* What a tile needs of an activation block: its scale, and the nibbles' offset 8·Σx. */
struct xblock {
    float d;
    int32_t offset;
};

static AVX2 void activations(int64_t nb, int64_t N, const char *x, size_t xstride, struct xblock *xs)
{
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t n = 0; n < N; n++) {
        const struct block_q8_0 *row = (const struct block_q8_0 *)(x + (size_t)n * xstride);
        for (int64_t b = 0; b < nb; b++) {
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, loadu256(row[b].qs)), ones16);
            xs[n * nb + b] = (struct xblock){ fp16_avx2(row[b].d), 8 * hsum_epi32(s) };
        }
    }
}

/* rows [0, rows) of w into groups of 8 (the last group repeats the last row): per block, a
 * transpose of 8 rows x 8 dwords (simd.h). */
static AVX2 void pack(int64_t nb, int64_t rows, const char *w, size_t wstride, struct pack *out)
{
    for (int64_t g = 0; g < (rows + ROWS - 1) / ROWS; g++)
        for (int64_t b = 0; b < nb; b++) {
            struct pack *p = out + g * nb + b;
            __m256i v[ROWS];
            for (int r = 0; r < ROWS; r++) {
                int64_t m = g * ROWS + r < rows ? g * ROWS + r : rows - 1;
                const struct block_q4_0 *blk = (const struct block_q4_0 *)(w + (size_t)m * wstride) + b;
                p->d[r] = fp16_avx2(blk->d);
                v[r] = nibbles32_u(blk->qs);
            }
            transpose8x8_epi32(v, p->q);
        }
}

/* Two groups of 8 weight rows (g1 may repeat g0) times rn <= RN activation rows; dst columns of
 * rows past `live` are not written. */
static inline __attribute__((always_inline)) AVX2 void tile(int rn, int64_t nb, const struct pack *g0,
                                                           const struct pack *g1, const char *const *x,
                                                           const struct xblock *const *xs, float *dst,
                                                           size_t ldd, int live)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][RN];
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++)
        acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i s[2][RN];
        const struct block_q8_0 *xb[RN];
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) {
            xb[j] = (const struct block_q8_0 *)x[j] + b;
            s[0][j] = s[1][j] = _mm256_setzero_si256();
        }
        #pragma GCC unroll 8
        for (int q = 0; q < QK / 4; q++) {
            __m256i w0 = _mm256_load_si256((const __m256i *)g0[b].q[q]);
            __m256i w1 = _mm256_load_si256((const __m256i *)g1[b].q[q]);
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++) {
                int32_t v;
                memcpy(&v, xb[j]->qs + 4 * q, sizeof v);
                __m256i xv = _mm256_set1_epi32(v);
                s[0][j] = _mm256_add_epi16(s[0][j], _mm256_maddubs_epi16(w0, xv));
                s[1][j] = _mm256_add_epi16(s[1][j], _mm256_maddubs_epi16(w1, xv));
                /* keeps each sum in its register: left alone, gcc regroups the integer adds into
                 * trees whose partial sums spill to the stack */
                __asm__("" : "+x"(s[0][j]), "+x"(s[1][j]));
            }
        }
        __m256 d0 = _mm256_load_ps(g0[b].d), d1 = _mm256_load_ps(g1[b].d);
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) {
            __m256i offset = _mm256_set1_epi32(xs[j][b].offset);
            __m256 dx = _mm256_set1_ps(xs[j][b].d);
            __m256i sum0 = _mm256_sub_epi32(_mm256_madd_epi16(s[0][j], ones), offset);
            __m256i sum1 = _mm256_sub_epi32(_mm256_madd_epi16(s[1][j], ones), offset);
            acc[0][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum0), _mm256_mul_ps(d0, dx), acc[0][j]);
            acc[1][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum1), _mm256_mul_ps(d1, dx), acc[1][j]);
        }
    }
    for (int j = 0; j < rn; j++) {
        float out[2 * ROWS];
        _mm256_storeu_ps(out, acc[0][j]);
        _mm256_storeu_ps(out + ROWS, acc[1][j]);
        memcpy(dst + (size_t)j * ldd, out, (size_t)live * sizeof(float));
    }
}

/* The tile for each count of activation rows, so a batch's last rows cost no more than they are. */
static AVX2 void tile1(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x,
                       const struct xblock *const *xs, float *dst, size_t ldd, int live)
{
    tile(1, nb, g0, g1, x, xs, dst, ldd, live);
}

static AVX2 void tile2(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x,
                       const struct xblock *const *xs, float *dst, size_t ldd, int live)
{
    tile(2, nb, g0, g1, x, xs, dst, ldd, live);
}

static AVX2 void tile3(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x,
                       const struct xblock *const *xs, float *dst, size_t ldd, int live)
{
    tile(RN, nb, g0, g1, x, xs, dst, ldd, live);
}

void AVX2 llm_gemm_q4_0_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                             size_t xstride, float *dst, size_t ldd, void *scratch)
{
    const int64_t nb = k / QK, block = gemm_block_rows(k);
    struct pack *packed = (struct pack *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    struct xblock *xs = (struct xblock *)(packed + block / ROWS * nb);
    activations(nb, N, x, xstride, xs);
    for (int64_t b0 = 0; b0 < M; b0 += block) {
        int64_t rows = M - b0 < block ? M - b0 : block;
        pack(nb, rows, (const char *)w + (size_t)b0 * wstride, wstride, packed);
        const int64_t groups = (rows + ROWS - 1) / ROWS;
        for (int64_t n0 = 0; n0 < N; n0 += RN) {
            const char *xr[RN];
            const struct xblock *xsr[RN];
            const int nn = N - n0 < RN ? (int)(N - n0) : RN;
            for (int j = 0; j < nn; j++) {
                xr[j] = (const char *)x + (size_t)(n0 + j) * xstride;
                xsr[j] = xs + (n0 + j) * nb;
            }
            for (int64_t g = 0; g < groups; g += 2) {
                const struct pack *g0 = packed + g * nb, *g1 = g + 1 < groups ? g0 + nb : g0;
                float *out = dst + (size_t)n0 * ldd + (size_t)(b0 + ROWS * g);
                const int live = (int)(rows - ROWS * g < 2 * ROWS ? rows - ROWS * g : 2 * ROWS);
                (nn == RN ? tile3 : nn == 2 ? tile2 : tile1)(nb, g0, g1, xr, xsr, out, ldd, live);
            }
        }
    }
}
