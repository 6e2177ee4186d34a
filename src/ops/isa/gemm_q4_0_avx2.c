/* AVX2 integer GEMMs (llm_gemm_fn) of Q4_0 and Q5_0 weights against Q8_0 activations, with 8
 * weight rows in the 8 lanes of a register, so nothing is summed across lanes and each unpacked
 * quant serves many activation rows. One body serves both types; what differs is a `struct kind`
 * of constants.
 *
 * Each block of weight rows (gemm_block_rows) is first packed into scratch, 8 rows at a time and
 * block by block: the 8 scales as floats, then the quants as unsigned values (Q4_0: the nibble,
 * 0..15; Q5_0: the nibble plus the fifth bit, 0..31), one byte each, with the 4-byte groups of the
 * 8 rows side by side, so one 256-bit load holds elements 4j..4j+3 of all 8 rows. The pack reads
 * either the file's rows or a matrix repacked at load (repack.h), two of its groups of 4 rows
 * making the 8 lanes, so a repacked matrix is never unpacked for these kernels.
 *
 * maddubs of a packed load (unsigned) against the 4 activation bytes broadcast to every lane
 * (signed) gives pair sums of at most 2·15·128 (Q4_0) or 2·31·128 (Q5_0), so int16 holds the sums
 * of 8 groups (Q4_0: 8 · 3840 < 32768, a whole block) or 4 (Q5_0: 4 · 7936 < 32768) before one
 * madd widens them to int32 (the flush interval); subtracting offset·Σx (the unsigned values'
 * zero, 8 or 16, times the activation block's sum, computed once per call) gives the block's exact
 * Σ (q - offset)·x. One float FMA by d_w·d_x per 8 rows and block. A register tile is 2 x 8 weight
 * rows by up to RN activation rows: each weight load serves RN activations, each broadcast 16
 * rows (1.1-1.2x one group of 8 by 4 activations at N = 512, bench/results/gemm_int8.md). */
#include <string.h>

#include "gemm.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "ops/types/repack.h"
#include "simd.h"

#define RN 3
#define ROWS 8
#define GROUPS (QK / 4) /* 4-byte groups of a block */

/* 8 rows of one block, packed: scales, then q[j][r][0..3] = elements 4j..4j+3 of row r */
struct pack {
    float d[ROWS];
    uint8_t q[GROUPS][ROWS][4];
};

/* What a tile needs of an activation block: its scale, and the weights' offset times Σx. */
struct xblock {
    float d;
    int32_t offset;
};

/* What the types and the two sources differ in when packing; constants of each entry point's code
 * (the tiles differ in their flush interval alone: TILES below). */
struct kind {
    enum llm_type type; /* Q4_0, or Q5_0: the fifth bits (the quants' first 4 bytes, qh) over the nibbles */
    size_t bytes;  /* a block's bytes in the file */
    int offset;    /* the unsigned values' zero */
    bool repacked; /* weights in the repacked groups of repack.h (wstride: a group's bytes) */
};

static const struct kind q4_0 = { LLM_TYPE_Q4_0, sizeof(struct block_q4_0), 8, false };
static const struct kind q5_0 = { LLM_TYPE_Q5_0, sizeof(struct block_q5_0), 16, false };

static AVX2 void activations(int offset, int64_t nb, int64_t N, const char *x, size_t xstride, struct xblock *xs)
{
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t n = 0; n < N; n++) {
        const struct block_q8_0 *row = (const struct block_q8_0 *)(x + (size_t)n * xstride);
        for (int64_t b = 0; b < nb; b++) {
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, loadu256(row[b].qs)), ones16);
            xs[n * nb + b] = (struct xblock){ fp16_avx2(row[b].d), offset * hsum_epi32(s) };
        }
    }
}

/* Where a block's parts are: its fp16 scale, Q5_0's qh, and the two halves of its 16 nibble bytes
 * (in the file one run; in repacked groups pieces apart, repack.h). */
struct block_at {
    const char *scale, *qh, *lo, *hi;
};

/* A block's scale as a float into *d, and its 32 values unsigned, element j in byte j. */
static inline __attribute__((always_inline)) AVX2 __m256i block_values(struct kind kd, struct block_at at, float *d)
{
    uint16_t h;
    memcpy(&h, at.scale, sizeof h);
    *d = fp16_avx2(h);
    __m256i v = nibbles32_x(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)at.lo),
                                               _mm_loadl_epi64((const __m128i *)at.hi)));
    if (kd.type != LLM_TYPE_Q5_0)
        return v;
    uint32_t qh;
    memcpy(&qh, at.qh, sizeof qh);
    if (kd.repacked) /* back to the file's bit order */
        qh = llm_repack_q5_0_qh(qh);
    return _mm256_or_si256(v, fifth_bits((const uint8_t *)&qh));
}

/* Byte offsets of block b's parts (struct block_at's order): from the row's start in the file, from
 * the group's start for its row r when repacked (repack.h's accessors, inline arithmetic here). */
static inline __attribute__((always_inline)) void block_parts(struct kind kd, int64_t nb, int r, int64_t b,
                                                             size_t at[4])
{
    if (!kd.repacked) {
        const size_t blk = (size_t)b * kd.bytes, qs = blk + sizeof(uint16_t) + (kd.type == LLM_TYPE_Q5_0 ? 4 : 0);
        at[0] = blk, at[1] = blk + sizeof(uint16_t), at[2] = qs, at[3] = qs + 8;
        return;
    }
    const int nibbles = kd.type == LLM_TYPE_Q5_0; /* the nibbles' first piece: after qh */
    at[0] = llm_repack_scale_offset(kd.type, nb, r, b);
    for (int i = 0; i < 3; i++)
        at[1 + i] = llm_repack_piece_offset(kd.type, nb, r, b, i == 0 ? 0 : nibbles + i - 1);
}

/* rows [0, rows) of w into groups of 8: per block, a transpose of 8 rows x 8 dwords (simd.h).
 * Row r's block b is at base[r]: file rows from their own start (the last group repeats the last
 * row), repacked ones from their group of 4, where the accessors of repack.h find it (a group past
 * the rows repeats the one before; its zero padding rows are stored). Lanes past the rows are
 * never stored. */
static inline __attribute__((always_inline)) AVX2 void pack(struct kind kd, int64_t nb, int64_t rows, const char *w,
                                                           size_t wstride, struct pack *out)
{
    for (int64_t g = 0; g < (rows + ROWS - 1) / ROWS; g++) {
        const char *base[ROWS];
        for (int r = 0; r < ROWS; r++) {
            const int64_t m = g * ROWS + r < rows ? g * ROWS + r : rows - 1;
            base[r] = w + (size_t)(kd.repacked ? m / LLM_REPACK_ROWS : m) * wstride;
        }
        for (int64_t b = 0; b < nb; b++) {
            struct pack *p = out + g * nb + b;
            __m256i v[ROWS];
            for (int r = 0; r < ROWS; r++) {
                size_t at[4];
                block_parts(kd, nb, r % LLM_REPACK_ROWS, b, at);
                const struct block_at parts = { base[r] + at[0], base[r] + at[1], base[r] + at[2], base[r] + at[3] };
                v[r] = block_values(kd, parts, &p->d[r]);
            }
            transpose8x8_epi32(v, p->q);
        }
    }
}

/* Two groups of 8 weight rows (g1 may repeat g0) times rn <= RN activation rows, int16 sums
 * widened every `flush` groups; dst columns of rows past `live` are not written. */
static inline __attribute__((always_inline)) AVX2 void tile(int flush, int rn, int64_t nb, const struct pack *g0,
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
        __m256i s[2][RN], sum[2][RN];
        const struct block_q8_0 *xb[RN];
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) {
            xb[j] = (const struct block_q8_0 *)x[j] + b;
            s[0][j] = s[1][j] = _mm256_setzero_si256();
        }
        #pragma GCC unroll 8
        for (int q = 0; q < GROUPS; q++) {
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
            if ((q + 1) % flush)
                continue;
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++)
                for (int h = 0; h < 2; h++) {
                    __m256i wide = _mm256_madd_epi16(s[h][j], ones);
                    sum[h][j] = q + 1 == flush ? wide : _mm256_add_epi32(sum[h][j], wide);
                    s[h][j] = _mm256_setzero_si256();
                }
        }
        __m256 d0 = _mm256_load_ps(g0[b].d), d1 = _mm256_load_ps(g1[b].d);
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) {
            __m256i offset = _mm256_set1_epi32(xs[j][b].offset);
            __m256 dx = _mm256_set1_ps(xs[j][b].d);
            __m256i sum0 = _mm256_sub_epi32(sum[0][j], offset), sum1 = _mm256_sub_epi32(sum[1][j], offset);
            acc[0][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum0), _mm256_mul_ps(d0, dx), acc[0][j]);
            acc[1][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum1), _mm256_mul_ps(d1, dx), acc[1][j]);
        }
    }
    for (int j = 0; j < rn; j++)
        store_rows16(dst + (size_t)j * ldd, acc[0][j], acc[1][j], live);
}

typedef void (*tile_fn)(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x,
                        const struct xblock *const *xs, float *dst, size_t ldd, int live);

/* The tiles of a type for each count of activation rows (tiles[rn - 1]), so a batch's last rows
 * cost no more than they are; each its own function, so that its registers are its own. */
#define TILES(name, flush)                                                                              \
    static AVX2 void name##_1(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x, \
                              const struct xblock *const *xs, float *dst, size_t ldd, int live)         \
    {                                                                                                   \
        tile(flush, 1, nb, g0, g1, x, xs, dst, ldd, live);                                              \
    }                                                                                                   \
    static AVX2 void name##_2(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x, \
                              const struct xblock *const *xs, float *dst, size_t ldd, int live)         \
    {                                                                                                   \
        tile(flush, 2, nb, g0, g1, x, xs, dst, ldd, live);                                              \
    }                                                                                                   \
    static AVX2 void name##_3(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x, \
                              const struct xblock *const *xs, float *dst, size_t ldd, int live)         \
    {                                                                                                   \
        tile(flush, 3, nb, g0, g1, x, xs, dst, ldd, live);                                              \
    }                                                                                                   \
    static const tile_fn name[RN] = { name##_1, name##_2, name##_3 };

/* the flush interval: groups whose pair sums int16 holds */
TILES(tiles_q4_0, 8)
TILES(tiles_q5_0, 4)

static inline __attribute__((always_inline)) AVX2 void gemm(struct kind kd, const tile_fn *tiles, int64_t k,
                                                           int64_t M, int64_t N, const void *w, size_t wstride,
                                                           const void *x, size_t xstride, float *dst, size_t ldd,
                                                           void *scratch)
{
    const int64_t nb = k / QK, block = gemm_block_rows(k);
    struct pack *packed = (struct pack *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    struct xblock *xs = (struct xblock *)(packed + block / ROWS * nb);
    activations(kd.offset, nb, N, x, xstride, xs);
    for (int64_t b0 = 0; b0 < M; b0 += block) {
        int64_t rows = M - b0 < block ? M - b0 : block;
        /* a block starts at a group: gemm_block_rows is a multiple of GEMM_ROW_ALIGN */
        const int64_t first = kd.repacked ? b0 / LLM_REPACK_ROWS : b0;
        pack(kd, nb, rows, (const char *)w + (size_t)first * wstride, wstride, packed);
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
                tiles[nn - 1](nb, g0, g1, xr, xsr, out, ldd, live);
            }
        }
    }
}

_Static_assert(GEMM_ROW_ALIGN % ROWS == 0 && ROWS == 2 * LLM_REPACK_ROWS, "a block is whole groups of 8 rows");

void AVX2 llm_gemm_q4_0_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                             size_t xstride, float *dst, size_t ldd, void *scratch)
{
    gemm(q4_0, tiles_q4_0, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}

void AVX2 llm_gemm_q5_0_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                             size_t xstride, float *dst, size_t ldd, void *scratch)
{
    gemm(q5_0, tiles_q5_0, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}

void AVX2 llm_gemm_q4_0_packed_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                                    size_t xstride, float *dst, size_t ldd, void *scratch)
{
    struct kind kd = q4_0;
    kd.repacked = true;
    gemm(kd, tiles_q4_0, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}

void AVX2 llm_gemm_q5_0_packed_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                                    size_t xstride, float *dst, size_t ldd, void *scratch)
{
    struct kind kd = q5_0;
    kd.repacked = true;
    gemm(kd, tiles_q5_0, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}
