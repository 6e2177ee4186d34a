/* AVX2 vec_dot4 of Q4_0 / Q5_0 / Q8_0 weights against Q8_0 activations (decode's matrix-vector product),
 * on the file's rows and on the groups repacked at load (repack.h). Q5_0 and Q8_0: one activation
 * block is loaded once for four weight rows, each row in its own accumulator (the loop:
 * dot4_q8_0.h). Q4_0: the four rows of a block in one register (q4_0_block4 below). */
#include <stdint.h>

#include "dot4_q8_0.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "ops/types/repack.h"
#include "prefetch.h"
#include "simd.h"

/* int32 lane sums of one block's bytes after its fp16 d (Q8_0 quants, Q5_0's qh then quants, as the
 * file stores them) against activation quants yv; off is maddubs(16, yv) (Q5_0, whose quants are
 * stored +16), shared by the four rows. */
static inline __attribute__((always_inline)) AVX2 __m256i quant_sum(enum llm_type t, const uint8_t *qs, __m256i yv,
                                                                   __m256i off)
{
    const __m256i ones = _mm256_set1_epi16(1);
    if (t == LLM_TYPE_Q5_0) {
        __m256i q = _mm256_or_si256(nibbles32_u(qs + 4), fifth_bits(qs));
        return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), off), ones);
    }
    /* signed x signed through the sign trick (activations never hold -128) */
    __m256i q = loadu256(qs);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q)), ones);
}

/* int32 lane sums of one weight block of type t (see quant_sum). */
static inline __attribute__((always_inline)) AVX2 __m256i block_sum(enum llm_type t, const char *wb, __m256i yv,
                                                                   __m256i off)
{
    return quant_sum(t, (const uint8_t *)wb + sizeof(uint16_t), yv, off);
}

/* Block b of the four rows; d[r] points at row r's combined scale of that block. */
static inline __attribute__((always_inline)) AVX2 void block4(enum llm_type t, size_t ws, const char *const *w,
                                                             const struct block_q8_0 *yb, int64_t b,
                                                             const float *const *d, __m256 *acc)
{
    __m256i yv = loadu256(yb[b].qs);
    __m256i off = _mm256_maddubs_epi16(_mm256_set1_epi8(16), yv);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(d[r]), _mm256_cvtepi32_ps(block_sum(t, w[r] + b * ws, yv, off)),
                                 acc[r]);
}

/* ---- Q4_0: a block of four rows in one register -------------------------------------------- */

/* The 8 bytes at p in every 64-bit lane, loaded straight into the register (a copy through an
 * int64_t on the stack first made the compiler store 16 bytes and reload their halves). */
static inline __attribute__((always_inline)) AVX2 __m256i broadcast8(const int8_t *p)
{
    return _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)p));
}

/* Bytes 0..7 of the four rows' 16 quant bytes in v0 (row r at bytes 8r..8r+7), bytes 8..15 in v1:
 * repack.h's two pieces, or the file's rows shuffled so. Unsigned nibbles (0..15) against the
 * activation quants broadcast 8 bytes at a time (maddubs; four pair sums of at most 2·15·128 add
 * in int16), widened once (madd), leave row r's sums in int32 lanes 2r (elements j with j & 4 == 0)
 * and 2r + 1 (the others). Subtracting off, 8·Σ of the activation quants over each lane's elements
 * (lane_offsets), makes them exact; one FMA by d = [d0 d0 d1 d1 d2 d2 d3 d3] (a row's combined
 * scale in both of its lanes) adds the block to acc. A row's result is its two lanes' sum after
 * its last block (sum_lanes): both kernels below give each row these floats. */
static inline __attribute__((always_inline)) AVX2 __m256 q4_0_block4(__m256i v0, __m256i v1, const int8_t *yq,
                                                                    __m256i off, __m256 d, __m256 acc)
{
    const __m256i low = _mm256_set1_epi8(0x0f);
    __m256i s0 = _mm256_maddubs_epi16(_mm256_and_si256(v0, low), broadcast8(yq));
    __m256i s1 = _mm256_maddubs_epi16(_mm256_and_si256(v1, low), broadcast8(yq + 8));
    __m256i s2 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v0, 4), low), broadcast8(yq + 16));
    __m256i s3 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v1, 4), low), broadcast8(yq + 24));
    __m256i sum = _mm256_madd_epi16(_mm256_add_epi16(_mm256_add_epi16(s0, s1), _mm256_add_epi16(s2, s3)),
                                    _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(sum, off)), acc);
}

/* 8·Σ of activation block y's quants over the elements of an even lane (low half) and of an odd
 * lane (high half) of q4_0_block4, as one int64. */
static inline __attribute__((always_inline)) AVX2 int64_t lane_offsets(const struct block_q8_0 *y)
{
    __m256i four = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), loadu256(y->qs)), _mm256_set1_epi16(1));
    __m128i half = _mm_add_epi32(_mm256_castsi256_si128(four), _mm256_extracti128_si256(four, 1));
    return _mm_cvtsi128_si64(_mm_add_epi32(half, _mm_unpackhi_epi64(half, half)));
}

/* The combined scales [d0 d0 d1 d1 d2 d2 d3 d3] from the four rows' fp16 d (h[0..3]) and the
 * activation block's scale dy. */
static inline __attribute__((always_inline)) AVX2 __m256 scales_x4(__m128i h, float dy)
{
    return _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi16(h, h)), _mm256_set1_ps(dy));
}

static inline AVX2 void sum_lanes(__m256 acc, float *s)
{
    float lane[8];
    _mm256_storeu_ps(lane, acc);
    for (int r = 0; r < 4; r++)
        s[r] = lane[2 * r] + lane[2 * r + 1];
}

void AVX2 llm_vec_dot4_q4_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    const struct block_q4_0 *const *rows = (const struct block_q4_0 *const *)w;
    const struct block_q8_0 *yb = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++) {
        __m128i q[4];
        for (int r = 0; r < 4; r++)
            q[r] = _mm_loadu_si128((const __m128i *)rows[r][b].qs);
        __m256i v0 = _mm256_set_m128i(_mm_unpacklo_epi64(q[2], q[3]), _mm_unpacklo_epi64(q[0], q[1]));
        __m256i v1 = _mm256_set_m128i(_mm_unpackhi_epi64(q[2], q[3]), _mm_unpackhi_epi64(q[0], q[1]));
        uint16_t h[4];
        for (int r = 0; r < 4; r++)
            memcpy(&h[r], &rows[r][b].d, sizeof h[r]);
        acc = q4_0_block4(v0, v1, yb[b].qs, _mm256_set1_epi64x(lane_offsets(&yb[b])),
                          scales_x4(_mm_loadl_epi64((const __m128i *)h), fp16_avx2(yb[b].d)), acc);
    }
    sum_lanes(acc, s);
}

void AVX2 llm_vec_dot4_q5_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q5_0, n, s, w, x, scales8, block4);
}

void AVX2 llm_vec_dot4_q8_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q8_0, n, s, w, x, scales8, block4);
}

/* ---- repacked rows (repack.h) ------------------------------------------------------------- */

/* Groups of four Q5_0 / Q8_0 rows in the repacked layout, streamed front to back: per chunk of up
 * to 8 blocks, the rows' scales, then each block's four quant runs. Each row's combined scales, accumulator and
 * order of blocks are those of dot4_q8_0, so every row's sum keeps the bits vec_dot4 gives it. */
static inline __attribute__((always_inline)) AVX2 void dot_packed(enum llm_type t, int64_t n, int64_t groups,
                                                                 float *s, const void *w, const void *x)
{
    const size_t qb = (t == LLM_TYPE_Q5_0 ? sizeof(struct block_q5_0) : sizeof(struct block_q8_0)) - sizeof(uint16_t);
    const struct block_q8_0 *yb = x;
    const int64_t nb = n / QK;
    const char *p = w;
    for (int64_t g = 0; g < groups; g++) {
        __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
        for (int64_t c = 0; c < nb; c += 8) {
            const int64_t nbc = nb - c < 8 ? nb - c : 8;
            const char *qs = p + 4 * nbc * 2;
            prefetch_ahead(p, (size_t)(4 * nbc) * (2 + qb), PREFETCH_AHEAD_QUANT);
            float d[4][8];
            if (nbc == 8) {
                __m256 dy = scales8(yb + c, sizeof *yb);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    _mm256_storeu_ps(d[r], _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + r * 16))), dy));
            } else {
                for (int r = 0; r < 4; r++)
                    for (int64_t k = 0; k < nbc; k++) {
                        uint16_t h;
                        memcpy(&h, p + (r * nbc + k) * 2, sizeof h);
                        d[r][k] = fp16_avx2(h) * fp16_avx2(yb[c + k].d);
                    }
            }
#pragma GCC unroll 8
            for (int64_t k = 0; k < nbc; k++) {
                const char *q = qs + (size_t)k * 4 * qb;
                __m256i yv = loadu256(yb[c + k].qs);
                __m256i off = _mm256_maddubs_epi16(_mm256_set1_epi8(16), yv);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[r][k]),
                                             _mm256_cvtepi32_ps(quant_sum(t, (const uint8_t *)q + r * qb, yv, off)),
                                             acc[r]);
            }
            p += 4 * nbc * (2 + qb);
        }
        for (int r = 0; r < 4; r++)
            s[4 * g + r] = hsum_ps(acc[r]);
    }
}

/* Activation blocks whose lane offsets and float scales the packed kernel keeps at once (6 KiB of
 * stack; a longer row takes them window by window, for every group). */
#define OFFSET_WINDOW 512

/* Groups of Q4_0 rows repacked with LLM_REPACK_Q4_0_PIECE (repack.h: per block, the four rows'
 * scales, then v0 and v1 of q4_0_block4), streamed front to back. */
void AVX2 llm_vec_dot_packed_q4_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    _Static_assert(LLM_REPACK_Q4_0_PIECE == 8 && LLM_REPACK_ROWS == 4, "a piece of the four rows is one register");
    const size_t block = LLM_REPACK_ROWS * sizeof(struct block_q4_0), step = 8 * block;
    const struct block_q8_0 *yb = x;
    const int64_t nb = n / QK;
    const char *p = w;
    int64_t off[OFFSET_WINDOW];
    float dy[OFFSET_WINDOW];
    for (int64_t g = 0; g < groups; g++) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t w0 = 0; w0 < nb; w0 += OFFSET_WINDOW) {
            const int64_t wn = nb - w0 < OFFSET_WINDOW ? nb - w0 : OFFSET_WINDOW;
            if (g == 0 || nb > OFFSET_WINDOW)
                for (int64_t b = 0; b < wn; b++) {
                    off[b] = lane_offsets(&yb[w0 + b]);
                    dy[b] = fp16_avx2(yb[w0 + b].d);
                }
            for (int64_t b = 0; b < wn; b++, p += block) {
                if (b % 8 == 0)
                    prefetch_ahead(p, step, PREFETCH_AHEAD_QUANT);
                acc = q4_0_block4(loadu256(p + 4 * sizeof(uint16_t)), loadu256(p + 4 * sizeof(uint16_t) + 32),
                                  yb[w0 + b].qs, _mm256_set1_epi64x(off[b]),
                                  scales_x4(_mm_loadl_epi64((const __m128i *)p), dy[b]), acc);
            }
        }
        sum_lanes(acc, s + 4 * g);
    }
}

void AVX2 llm_vec_dot_packed_q5_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    dot_packed(LLM_TYPE_Q5_0, n, groups, s, w, x);
}

void AVX2 llm_vec_dot_packed_q8_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    dot_packed(LLM_TYPE_Q8_0, n, groups, s, w, x);
}
