/* AVX2 integer GEMM (llm_gemm_fn) of Q8_0 weights against Q8_0 activations, with 8 weight rows in
 * the 8 lanes of a register, as gemm_q4_0_avx2.c does for Q4_0: nothing is summed across lanes and
 * each loaded weight register serves several activation rows.
 *
 * Each block of weight rows (gemm_block_rows) is first packed into scratch, 8 rows at a time and
 * block by block: the 8 scales as floats, then the signed quants with the 4-byte groups of the 8
 * rows side by side (one 256-bit load holds elements 4j..4j+3 of all 8 rows). Signed times signed
 * goes through maddubs(|w|, sign(x, w)) against the 4 activation bytes broadcast to every lane:
 * its pair sums reach 2·128·127, so two of them cannot add in int16 and each is widened by a madd
 * before the int32 adds of a block. One float FMA by d_w·d_x per 8 rows and block. A register tile
 * is 2 x 8 weight rows by RN activation rows: 4 rather than Q4_0's 3, a few per cent faster on one
 * thread and a whole number of tiles in the chat-sized batches of 16 and 64 rows
 * (bench/results/gemm_int8.md).
 *
 * The rows come either from the file's layout (rows wstride bytes apart) or, for a matrix repacked
 * at load (repack.h), straight from its groups of four rows: two groups fill the 8 lanes, so the
 * repacked copy is never unpacked. A row's sums take the same operations in any lane, so both give
 * the same floats, whatever the tile, the split over threads or the layout. */
#include <string.h>

#include "gemm.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "ops/types/repack.h"
#include "simd.h"

#define RN 4
#define ROWS 8

/* 8 rows of one block, packed: scales, then q[j][r][0..3] = elements 4j..4j+3 of row r */
struct pack {
    float d[ROWS];
    int8_t q[QK / 4][ROWS][4];
};

/* Rows [row0, row0 + rows) of a matrix into scratch, groups of 8 rows block by block. */
typedef void (*pack_fn)(int64_t nb, int64_t row0, int64_t rows, const char *w, size_t wstride, struct pack *out);

/* One block of 8 rows: row r's fp16 scale at scale[r], its 32 quants at quants[r]. */
static inline AVX2 void pack_block(const char *const scale[ROWS], const char *const quants[ROWS], struct pack *p)
{
    uint16_t h[ROWS];
    __m256i v[ROWS];
    for (int r = 0; r < ROWS; r++) {
        memcpy(&h[r], scale[r], sizeof h[r]);
        v[r] = loadu256(quants[r]);
    }
    _mm256_store_ps(p->d, load_f16x8(h));
    transpose8x8_epi32(v, p->q);
}

/* The file's rows, wstride bytes apart; the last group repeats the last row. */
static AVX2 void pack_rows(int64_t nb, int64_t row0, int64_t rows, const char *w, size_t wstride, struct pack *out)
{
    w += (size_t)row0 * wstride;
    for (int64_t g = 0; g < (rows + ROWS - 1) / ROWS; g++)
        for (int64_t b = 0; b < nb; b++) {
            const char *scale[ROWS], *quants[ROWS];
            for (int r = 0; r < ROWS; r++) {
                const int64_t m = g * ROWS + r < rows ? g * ROWS + r : rows - 1;
                scale[r] = w + (size_t)m * wstride + (size_t)b * sizeof(struct block_q8_0);
                quants[r] = scale[r] + offsetof(struct block_q8_0, qs);
            }
            pack_block(scale, quants, out + g * nb + b);
        }
}

/* A repacked matrix's groups of LLM_REPACK_ROWS rows (row0 a multiple of it), wstride bytes apart;
 * two groups a lane group, the last one alone when it has no partner (its lanes 4-7 repeat 0-3).
 * It walks the groups chunk by chunk (repack.h): a row's scales of a chunk's blocks are side by
 * side, so one load takes each. */
static AVX2 void pack_groups(int64_t nb, int64_t row0, int64_t rows, const char *w, size_t wstride,
                             struct pack *out)
{
    _Static_assert(ROWS == 2 * LLM_REPACK_ROWS, "two repacked groups fill the lanes");
    _Static_assert(LLM_REPACK_CHUNK == ROWS, "a chunk's scales of a row are one 16-byte load");
    const int64_t groups = (rows + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS;
    w += (size_t)(row0 / LLM_REPACK_ROWS) * wstride;
    for (int64_t g = 0; g < groups; g += 2, out += nb) {
        const char *lo = w + (size_t)g * wstride, *hi = g + 1 < groups ? lo + wstride : lo;
        for (int64_t c = 0; c < nb; c += LLM_REPACK_CHUNK) {
            const int64_t nbc = llm_repack_chunk_blocks(LLM_TYPE_Q8_0, nb, c);
            __m128i s[ROWS], d[ROWS];
            for (int r = 0; r < LLM_REPACK_ROWS; r++) { /* a short chunk's loads run on into its quants: lanes unused */
                const size_t so = llm_repack_scale_offset(LLM_TYPE_Q8_0, nb, r, c);
                s[r] = _mm_loadu_si128((const __m128i *)(lo + so));
                s[r + LLM_REPACK_ROWS] = _mm_loadu_si128((const __m128i *)(hi + so));
            }
            transpose8x8_epi16(s, d);
            for (int64_t j = 0; j < nbc; j++) {
                __m256i v[ROWS];
                for (int r = 0; r < LLM_REPACK_ROWS; r++) {
                    const size_t qo = llm_repack_piece_offset(LLM_TYPE_Q8_0, nb, r, c + j, 0);
                    v[r] = loadu256(lo + qo);
                    v[r + LLM_REPACK_ROWS] = loadu256(hi + qo);
                }
                _mm256_store_ps(out[c + j].d, _mm256_cvtph_ps(d[j]));
                transpose8x8_epi32(v, out[c + j].q);
            }
        }
    }
}

/* The scales of the N activation rows' blocks as floats, row after row. */
static AVX2 void activation_scales(int64_t nb, int64_t N, const char *x, size_t xstride, float *xd)
{
    for (int64_t n = 0; n < N; n++) {
        const struct block_q8_0 *row = (const struct block_q8_0 *)(x + (size_t)n * xstride);
        for (int64_t b = 0; b < nb; b++)
            xd[n * nb + b] = fp16_avx2(row[b].d);
    }
}

/* Two groups of 8 weight rows (g1 may repeat g0) times rn <= RN activation rows; dst columns of
 * rows past `live` are not written. */
static inline __attribute__((always_inline)) AVX2 void tile(int rn, int64_t nb, const struct pack *g0,
                                                           const struct pack *g1, const char *const *x,
                                                           const float *const *xd, float *dst, size_t ldd,
                                                           int live)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][RN];
    const struct block_q8_0 *xb[RN]; /* each activation row's block b, advanced block by block */
    #pragma GCC unroll 8
    for (int j = 0; j < rn; j++) {
        acc[0][j] = acc[1][j] = _mm256_setzero_ps();
        xb[j] = (const struct block_q8_0 *)x[j];
    }
    for (int64_t b = 0; b < nb; b++) {
        __m256i s[2][RN];
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++)
            s[0][j] = s[1][j] = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int q = 0; q < QK / 4; q++) {
            const __m256i w0 = _mm256_load_si256((const __m256i *)g0[b].q[q]);
            const __m256i w1 = _mm256_load_si256((const __m256i *)g1[b].q[q]);
            const __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
            #pragma GCC unroll 8
            for (int j = 0; j < rn; j++) {
                int32_t v;
                memcpy(&v, xb[j]->qs + 4 * q, sizeof v);
                const __m256i xv = _mm256_set1_epi32(v);
                s[0][j] = _mm256_add_epi32(s[0][j],
                                           _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(xv, w0)), ones));
                s[1][j] = _mm256_add_epi32(s[1][j],
                                           _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(xv, w1)), ones));
                /* keeps each sum in its register: left alone, gcc regroups the integer adds into
                 * trees whose partial sums spill to the stack (as in gemm_q4_0_avx2.c) */
                __asm__("" : "+x"(s[0][j]), "+x"(s[1][j]));
            }
        }
        const __m256 d0 = _mm256_load_ps(g0[b].d), d1 = _mm256_load_ps(g1[b].d);
        #pragma GCC unroll 8
        for (int j = 0; j < rn; j++) {
            const __m256 dx = _mm256_set1_ps(xd[j][b]);
            acc[0][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[0][j]), _mm256_mul_ps(d0, dx), acc[0][j]);
            acc[1][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[1][j]), _mm256_mul_ps(d1, dx), acc[1][j]);
            xb[j]++;
        }
    }
    for (int j = 0; j < rn; j++)
        store_rows16(dst + (size_t)j * ldd, acc[0][j], acc[1][j], live);
}

/* The tile for each count of activation rows, so a batch's last rows cost no more than they are. */
typedef void (*tile_fn)(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x,
                        const float *const *xd, float *dst, size_t ldd, int live);

#define TILE_N(n)                                                                                              \
    static AVX2 void tile##n(int64_t nb, const struct pack *g0, const struct pack *g1, const char *const *x,   \
                             const float *const *xd, float *dst, size_t ldd, int live)                         \
    {                                                                                                          \
        tile(n, nb, g0, g1, x, xd, dst, ldd, live);                                                            \
    }
TILE_N(1)
TILE_N(2)
TILE_N(3)
TILE_N(4)
#undef TILE_N

static const tile_fn tiles[] = { NULL, tile1, tile2, tile3, tile4 };
_Static_assert(sizeof tiles / sizeof tiles[0] == RN + 1, "a tile for every count of activation rows");

static AVX2 void gemm(pack_fn pack, int64_t k, int64_t M, int64_t N, const char *w, size_t wstride, const char *x,
                      size_t xstride, float *dst, size_t ldd, void *scratch)
{
    const int64_t nb = k / QK, block = gemm_block_rows(k);
    struct pack *packed = (struct pack *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *xd = (float *)(packed + block / ROWS * nb);
    activation_scales(nb, N, x, xstride, xd);
    for (int64_t b0 = 0; b0 < M; b0 += block) {
        const int64_t rows = M - b0 < block ? M - b0 : block, groups = (rows + ROWS - 1) / ROWS;
        pack(nb, b0, rows, w, wstride, packed);
        for (int64_t n0 = 0; n0 < N; n0 += RN) {
            const char *xr[RN];
            const float *xdr[RN];
            const int nn = N - n0 < RN ? (int)(N - n0) : RN;
            for (int j = 0; j < nn; j++) {
                xr[j] = x + (size_t)(n0 + j) * xstride;
                xdr[j] = xd + (n0 + j) * nb;
            }
            for (int64_t g = 0; g < groups; g += 2) {
                const struct pack *g0 = packed + g * nb, *g1 = g + 1 < groups ? g0 + nb : g0;
                const int live = (int)(rows - ROWS * g < 2 * ROWS ? rows - ROWS * g : 2 * ROWS);
                tiles[nn](nb, g0, g1, xr, xdr, dst + (size_t)n0 * ldd + (size_t)(b0 + ROWS * g), ldd, live);
            }
        }
    }
}

void AVX2 llm_gemm_q8_0_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                             size_t xstride, float *dst, size_t ldd, void *scratch)
{
    gemm(pack_rows, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}

void AVX2 llm_gemm_q8_0_packed_avx2(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x,
                                    size_t xstride, float *dst, size_t ldd, void *scratch)
{
    gemm(pack_groups, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
}
