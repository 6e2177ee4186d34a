/* AVX2 vec_dot4 of Q4_0 / Q5_0 / Q8_0 weights against Q8_0 activations (decode's matrix-vector product),
 * on the file's rows and on the groups repacked at load (repack.h). Q8_0: one activation block is
 * loaded once for four weight rows, each row in its own accumulator (the loop: dot4_q8_0.h). Q4_0
 * and Q5_0: the four rows of a block in one register (nibbles_block4 below). */
#include <stdint.h>

#include "dot4_q8_0.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "ops/types/repack.h"
#include "prefetch.h"
#include "simd.h"

/* int32 lane sums of 32 Q8_0 weight quants at q against activation quants yv: signed x signed
 * through the sign trick (activations never hold -128). */
static inline __attribute__((always_inline)) AVX2 __m256i q8_0_sum(const char *q, __m256i yv)
{
    const __m256i v = loadu256(q);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yv, v)),
                             _mm256_set1_epi16(1));
}

/* Block b of the four Q8_0 rows; d[r] points at row r's combined scale of that block. */
static inline __attribute__((always_inline)) AVX2 void block4(enum llm_type t, size_t ws, const char *const *w,
                                                             const struct block_q8_0 *yb, int64_t b,
                                                             const float *const *d, __m256 *acc)
{
    (void)t;
    const __m256i yv = loadu256(yb[b].qs);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(d[r]),
                                 _mm256_cvtepi32_ps(q8_0_sum(w[r] + b * ws + sizeof(uint16_t), yv)), acc[r]);
}

/* ---- Q4_0 and Q5_0: a block of four rows in one register ------------------------------------ */

/* The 8 bytes at p in every 64-bit lane, loaded straight into the register (a copy through an
 * int64_t on the stack first made the compiler store 16 bytes and reload their halves). */
static inline __attribute__((always_inline)) AVX2 __m256i broadcast8(const int8_t *p)
{
    return _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)p));
}

/* Bytes 0..7 of the four rows' 16 nibble bytes in v0 (row r at bytes 8r..8r+7), bytes 8..15 in v1:
 * repack.h's two pieces, or the file's rows shuffled so. Product k (k = 0..3: v0's low nibbles,
 * v1's, v0's high, v1's) holds elements 8k..8k+7 of each row; Q5_0 sets 0x10 over an element's
 * nibble where its fifth bit is (fifth[k], NULL for Q4_0). Unsigned values (0..15, 0..31) against
 * the activation quants broadcast 8 bytes at a time (y[k]: bytes 8k..8k+7 of the activation block
 * in every 64-bit lane; maddubs; four pair sums of at most 2·31·128
 * add in int16), widened once (madd), leave row r's sums in int32 lanes 2r (elements j with
 * j & 4 == 0) and 2r + 1 (the others). Subtracting off, the values' zero (8, 16) times Σ of the
 * activation quants over each lane's elements (lane_offsets), makes them exact; one FMA by
 * d = [d0 d0 d1 d1 d2 d2 d3 d3] (a row's combined scale in both of its lanes) adds the block to
 * acc. A row's result is its two lanes' sum after its last block (sum_lanes): the kernels of both
 * layouts give each row these floats. */
static inline __attribute__((always_inline)) AVX2 __m256 nibbles_block4(__m256i v0, __m256i v1, const __m256i *fifth,
                                                                       const __m256i *y, __m256i off, __m256 d,
                                                                       __m256 acc)
{
    const __m256i low = _mm256_set1_epi8(0x0f);
    __m256i q[4] = { _mm256_and_si256(v0, low), _mm256_and_si256(v1, low),
                     _mm256_and_si256(_mm256_srli_epi16(v0, 4), low), _mm256_and_si256(_mm256_srli_epi16(v1, 4), low) };
    __m256i sk[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        sk[k] = _mm256_maddubs_epi16(fifth ? _mm256_or_si256(q[k], fifth[k]) : q[k], y[k]);
    __m256i sum = _mm256_madd_epi16(_mm256_add_epi16(_mm256_add_epi16(sk[0], sk[1]), _mm256_add_epi16(sk[2], sk[3])),
                                    _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(sum, off)), acc);
}

/* zero·Σ of activation block y's quants over the elements of an even lane (low half) and of an odd
 * lane (high half) of nibbles_block4, as one int64. */
static inline __attribute__((always_inline)) AVX2 int64_t lane_offsets(const struct block_q8_0 *y, int zero)
{
    __m256i four = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8((char)zero), loadu256(y->qs)),
                                     _mm256_set1_epi16(1));
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

/* 0x10 where the byte's bit is set in v, else 0 (bit: each byte's bit to test). */
static inline __attribute__((always_inline)) AVX2 __m256i bits_to_0x10(__m256i v, __m256i bit)
{
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

/* The four products' fifth bits (nibbles_block4) from the file's qh of the four rows, h = the four
 * little-endian words side by side in each 128-bit half: byte k of row r's word holds the bits of
 * elements 8k..8k+7, so product k spreads byte 4r + k over bytes 8r..8r+7 and tests bit j in byte
 * 8r + j. */
static inline __attribute__((always_inline)) AVX2 void fifth_bits_file(__m128i h, __m256i fifth[4])
{
    const __m256i both = _mm256_broadcastsi128_si256(h), bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const long long rep = 0x0101010101010101ll;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        fifth[k] = bits_to_0x10(_mm256_shuffle_epi8(both, _mm256_set_epi64x((12 + k) * rep, (8 + k) * rep, (4 + k) * rep,
                                                                          k * rep)),
                                bit);
}

/* The same from a repacked group's qh (repack.h, llm_repack_q5_0_qh): byte m of row r's word holds
 * the bits of elements 8k + m (bit k) and 8k + m + 4 (bit 4 + k), so one shuffle spreads bytes
 * 4r..4r+3 twice over bytes 8r..8r+7 for all four products, and product k tests bit k in the
 * first four bytes of each row, bit 4 + k in the others. */
static inline __attribute__((always_inline)) AVX2 void fifth_bits_packed(__m128i h, __m256i fifth[4])
{
    const __m256i spread = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(h),
                                               _mm256_set_epi64x(0x0f0e0d0c0f0e0d0cll, 0x0b0a09080b0a0908ll,
                                                                 0x0706050407060504ll, 0x0302010003020100ll));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        fifth[k] = bits_to_0x10(spread, _mm256_set1_epi64x((long long)(0x1010101001010101ull << k)));
}

/* 32-bit words at the four rows' offset `at` side by side, inserted from memory (four stores to
 * a stack array and one wide load of it would wait for the stores to retire). */
static inline __attribute__((always_inline)) AVX2 __m128i words4(const char *const *rows, size_t at)
{
    int32_t v[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        memcpy(&v[r], rows[r] + at, sizeof v[r]);
    return _mm_setr_epi32(v[0], v[1], v[2], v[3]);
}

/* Q4_0 / Q5_0 rows as the file stores them: per block, the four rows' nibbles shuffled into
 * nibbles_block4's v0 / v1, their fp16 d side by side, and (Q5_0) their qh spread by
 * fifth_bits_file. */
static inline __attribute__((always_inline)) AVX2 void nibbles_dot4_file(bool q5, int64_t n, float *s,
                                                                        const void *const *w, const void *x)
{
    const char *const *rows = (const char *const *)w;
    const size_t bs = q5 ? sizeof(struct block_q5_0) : sizeof(struct block_q4_0);
    const size_t qs = q5 ? offsetof(struct block_q5_0, qs) : offsetof(struct block_q4_0, qs);
    const struct block_q8_0 *yb = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++) {
        const size_t at = (size_t)b * bs;
        __m128i q[4];
#pragma GCC unroll 4 /* else gcc -O2 keeps the loop and q[] on the stack */
        for (int r = 0; r < 4; r++)
            q[r] = _mm_loadu_si128((const __m128i *)(rows[r] + at + qs));
        const __m256i v0 = _mm256_set_m128i(_mm_unpacklo_epi64(q[2], q[3]), _mm_unpacklo_epi64(q[0], q[1]));
        const __m256i v1 = _mm256_set_m128i(_mm_unpackhi_epi64(q[2], q[3]), _mm_unpackhi_epi64(q[0], q[1]));
        __m256i fifth[4];
        if (q5)
            fifth_bits_file(words4(rows, at + offsetof(struct block_q5_0, qh)), fifth);
        /* the d of rows 0-3 as the low 16 bits of each word, packed to halves 0-3 */
        const __m128i d = _mm_shuffle_epi8(words4(rows, at), _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1,
                                                                            -1, -1, -1, -1));
        const __m256i y[4] = { broadcast8(yb[b].qs), broadcast8(yb[b].qs + 8), broadcast8(yb[b].qs + 16),
                               broadcast8(yb[b].qs + 24) };
        acc = nibbles_block4(v0, v1, q5 ? fifth : NULL, y,
                             _mm256_set1_epi64x(lane_offsets(&yb[b], q5 ? 16 : 8)),
                             scales_x4(d, fp16_avx2(yb[b].d)), acc);
    }
    sum_lanes(acc, s);
}

void AVX2 llm_vec_dot4_q4_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    nibbles_dot4_file(false, n, s, w, x);
}

void AVX2 llm_vec_dot4_q5_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    nibbles_dot4_file(true, n, s, w, x);
}

void AVX2 llm_vec_dot4_q8_0_avx2(int64_t n, float *s, const void *const *w, const void *x)
{
    dot4_q8_0(LLM_TYPE_Q8_0, n, s, w, x, scales8, block4);
}

/* ---- repacked rows (repack.h) ------------------------------------------------------------- */

/* One block of the four rows (their 4 x 32 quants at q) into acc, row r scaled by d[r]. */
static inline __attribute__((always_inline)) AVX2 void q8_0_packed_block(const char *q, __m256i yv, const __m256 *d,
                                                                        __m256 *acc)
{
    const size_t qb = sizeof(struct block_q8_0) - sizeof(uint16_t);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        acc[r] = _mm256_fmadd_ps(d[r], _mm256_cvtepi32_ps(q8_0_sum(q + r * qb, yv)), acc[r]);
}

/* Groups of four Q8_0 rows in the repacked layout, streamed front to back: per chunk of up to 8
 * blocks, the rows' scales, then each block's four quant runs. Each row's combined scales,
 * accumulator and order of blocks are those of dot4_q8_0, so every row's sum keeps the bits
 * vec_dot4 gives it. */
void AVX2 llm_vec_dot_packed_q8_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    const size_t qb = sizeof(struct block_q8_0) - sizeof(uint16_t);
    const struct block_q8_0 *yb = x;
    const int64_t nb = n / QK;
    const char *p = w;
    for (int64_t g = 0; g < groups; g++) {
        __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
        int64_t c = 0;
        /* whole chunks of 8 blocks: a fixed trip count keeps the accumulators in registers (a loop
         * to nbc made gcc keep them on the stack, stored after every block) */
        for (; c + 8 <= nb; c += 8, p += 4 * 8 * (2 + qb)) {
            prefetch_ahead(p, (size_t)(4 * 8) * (2 + qb), PREFETCH_AHEAD_QUANT);
            const __m256 dy = scales8(yb + c, sizeof *yb);
            float d8[4][8];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                _mm256_storeu_ps(d8[r], _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + r * 16))), dy));
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                __m256 d[4];
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    d[r] = _mm256_broadcast_ss(&d8[r][k]);
                q8_0_packed_block(p + 4 * 8 * 2 + (size_t)k * 4 * qb, loadu256(yb[c + k].qs), d, acc);
            }
        }
        if (c < nb) { /* the last chunk, of fewer blocks: the same floats, one block at a time */
            const int64_t nbc = nb - c;
            prefetch_ahead(p, (size_t)(4 * nbc) * (2 + qb), PREFETCH_AHEAD_QUANT);
            for (int64_t k = 0; k < nbc; k++) {
                __m256 d[4];
                for (int r = 0; r < 4; r++) {
                    uint16_t h;
                    memcpy(&h, p + (r * nbc + k) * 2, sizeof h);
                    d[r] = _mm256_set1_ps(fp16_avx2(h) * fp16_avx2(yb[c + k].d));
                }
                q8_0_packed_block(p + 4 * nbc * 2 + (size_t)k * 4 * qb, loadu256(yb[c + k].qs), d, acc);
            }
            p += 4 * nbc * (2 + qb);
        }
        for (int r = 0; r < 4; r++)
            s[4 * g + r] = hsum_ps(acc[r]);
    }
}

/* The activations' form the packed Q4_0 / Q5_0 kernels read (llm_pack_x_fn), made once per row:
 * per block, the four 8-byte quarters of its quants each broadcast to a register (nibbles_block4's
 * four products), then every block's lane offsets (lane_offsets), then every block's float scale.
 * A load of a ready register takes no shuffle, which every group would otherwise repeat
 * (bench/results/decode.md). For nb blocks: where the offsets and the scales start, and the size. */
static size_t nibbles_x_off(int64_t nb)
{
    return (size_t)nb * 4 * sizeof(__m256i);
}

static size_t nibbles_x_dy(int64_t nb)
{
    return nibbles_x_off(nb) + (size_t)nb * sizeof(int64_t);
}

static size_t nibbles_x_size(int64_t nb)
{
    return nibbles_x_dy(nb) + (size_t)nb * sizeof(float);
}

static inline __attribute__((always_inline)) AVX2 size_t pack_nibbles_x(int zero, int64_t n, const void *x,
                                                                        void *out)
{
    const int64_t nb = n / QK;
    if (out) {
        const struct block_q8_0 *yb = x;
        __m256i *quarters = out;
        int64_t *off = (int64_t *)((char *)out + nibbles_x_off(nb));
        float *dy = (float *)((char *)out + nibbles_x_dy(nb));
        for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                _mm256_storeu_si256(&quarters[4 * b + k], broadcast8(yb[b].qs + 8 * k));
            off[b] = lane_offsets(&yb[b], zero);
            dy[b] = fp16_avx2(yb[b].d);
        }
    }
    return nibbles_x_size(nb);
}

size_t AVX2 llm_pack_x_q4_0_avx2(int64_t n, const void *x, void *out)
{
    return pack_nibbles_x(8, n, x, out);
}

size_t AVX2 llm_pack_x_q5_0_avx2(int64_t n, const void *x, void *out)
{
    return pack_nibbles_x(16, n, x, out);
}

/* Groups of Q4_0 or Q5_0 rows (repack.h: per block, the four rows' scales, Q5_0's four qh words,
 * then v0 and v1 of nibbles_block4), streamed front to back, against the activations' form x. */
static inline __attribute__((always_inline)) AVX2 void nibbles_packed(bool q5, int64_t n, int64_t groups, float *s,
                                                                     const void *w, const void *x)
{
    _Static_assert(LLM_REPACK_NIBBLE_PIECE == 8 && LLM_REPACK_ROWS == 4, "a piece of the four rows is one register");
    const size_t block = LLM_REPACK_ROWS * (q5 ? sizeof(struct block_q5_0) : sizeof(struct block_q4_0)), step = 8 * block;
    const size_t qh = LLM_REPACK_ROWS * sizeof(uint16_t), nibbles = qh + (q5 ? LLM_REPACK_ROWS * sizeof(uint32_t) : 0);
    const int64_t nb = n / QK;
    const __m256i *quarters = x;
    const int64_t *off = (const int64_t *)((const char *)x + nibbles_x_off(nb));
    const float *dy = (const float *)((const char *)x + nibbles_x_dy(nb));
    const char *p = w;
    for (int64_t g = 0; g < groups; g++) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++, p += block) {
            if (b % 8 == 0)
                prefetch_ahead(p, step, PREFETCH_AHEAD_QUANT);
            __m256i fifth[4];
            if (q5)
                fifth_bits_packed(_mm_loadu_si128((const __m128i *)(p + qh)), fifth);
            acc = nibbles_block4(loadu256(p + nibbles), loadu256(p + nibbles + 32), q5 ? fifth : NULL,
                                 &quarters[4 * b], _mm256_set1_epi64x(off[b]),
                                 scales_x4(_mm_loadl_epi64((const __m128i *)p), dy[b]), acc);
        }
        sum_lanes(acc, s + 4 * g);
    }
}

void AVX2 llm_vec_dot_packed_q4_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    nibbles_packed(false, n, groups, s, w, x);
}

void AVX2 llm_vec_dot_packed_q5_0_avx2(int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    nibbles_packed(true, n, groups, s, w, x);
}
