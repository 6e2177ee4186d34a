/* FLASH_ATTN for head dims of 8 on AVX-512 (tiny models such as stories260K, where a decode call
 * is well under a microsecond): 16 cells per block, K transposed so each score is 8 FMAs, and the
 * heads of several KV heads run together so their dependency chains overlap; the batching of heads
 * here serves the AVX2 kernels too (attention_hd8_avx2.c). attention.c deals the units out and
 * keeps the general paths. */
#include <math.h>
#include <string.h>

#include "attention_paths.h"
#include "ops/isa/simd.h"

/* what the kernels below are built from: inlined, so loops over constants unroll into registers */
#define FORCE_INLINE __attribute__((always_inline))

/* Rows a and b of 8 values as one vector, a in lanes 0-7 and b in 8-15. */
static inline FORCE_INLINE AVX512 __m512 row_pair(const char *a, const char *b, bool f16)
{
    if (f16) {
        __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                            _mm_loadu_si128((const __m128i *)b), 1);
        return _mm512_cvtph_ps(h);
    }
    __m512d lo = _mm512_castpd256_pd512(_mm256_loadu_pd((const double *)a));
    return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_loadu_pd((const double *)b), 1));
}

/* The 16 rows of a block (byte stride st) as 8 pairs: rows (c, c + 4) in p[c] and (c + 8, c + 12) in
 * p[4 + c], c < 4, the pairing transpose16x8 turns into cells in order. */
static inline FORCE_INLINE AVX512 void load_block(const char *r, int64_t st, bool f16, __m512 p[8])
{
    /* rows as 4 bases + 0..3 strides, which x86 addressing takes (and few registers hold), not 16 */
    const char *a = r, *b = r + 4 * st, *c = r + 8 * st, *d = r + 12 * st;
    const int64_t st3 = 3 * st;
    p[0] = row_pair(a, b, f16);
    p[1] = row_pair(a + st, b + st, f16);
    p[2] = row_pair(a + 2 * st, b + 2 * st, f16);
    p[3] = row_pair(a + st3, b + st3, f16);
    p[4] = row_pair(c, d, f16);
    p[5] = row_pair(c + st, d + st, f16);
    p[6] = row_pair(c + 2 * st, d + 2 * st, f16);
    p[7] = row_pair(c + st3, d + st3, f16);
}

__attribute__((noinline)) const char *attn_tail_rows(const char *r, int64_t st, size_t row, int64_t rows, int block,
                                                    char *buf)
{
    memset(buf, 0, (size_t)block * row);
    for (int64_t c = 0; c < rows; c++)
        memcpy(buf + c * row, r + c * st, row);
    return buf;
}

/* The 16 rows of the block at cell j0 of a KV head (row 0 at base, byte stride st) as load_block's
 * pairs, through attn_tail_rows for the last block of the view. */
static inline FORCE_INLINE AVX512 void load_rows(const char *base, int64_t st, bool f16, int64_t j0, int64_t n_kv, char *buf,
                                       __m512 p[8])
{
    const char *r = base + j0 * st;
    /* opaque to the optimizer: else GCC keeps each of the 16 row addresses as an induction variable
     * of the block loop, more than there are registers */
    __asm__("" : "+r"(r));
    if (j0 + 16 > n_kv) {
        size_t row = f16 ? 8 * sizeof(uint16_t) : 8 * sizeof(float);
        r = attn_tail_rows(r, st, row, n_kv - j0, 16, buf);
        st = (int64_t)row;
    }
    if (f16)
        load_block(r, st, true, p);
    else
        load_block(r, st, false, p);
}

/* Element i of a q row with byte stride st. */
static inline float q_at(const char *qr, int64_t st, int i)
{
    return *(const float *)(qr + i * st);
}

/* Cell a of pair p[c] from load_block (cell a + 4 is the other half). */
static inline int pair_cell(int c)
{
    return c < 4 ? c : c + 4;
}

/* The weights of pair c, each over the 8 lanes of its row: an in-lane broadcast (cheaper than a
 * full permute) of wl = w's 128-bit lanes (0, 0, 1, 1), cells 0-7, or wh = (2, 2, 3, 3), cells
 * 8-15. c must be a constant. */
static inline FORCE_INLINE AVX512 __m512 pair_weights(__m512 wl, __m512 wh, int c)
{
    __m512 w = c < 4 ? wl : wh;
    switch (c & 3) { /* literal immediates: at -O1 (the sanitizer build) c is not folded */
    case 0: return _mm512_permute_ps(w, 0x00);
    case 1: return _mm512_permute_ps(w, 0x55);
    case 2: return _mm512_permute_ps(w, 0xaa);
    default: return _mm512_permute_ps(w, 0xff);
    }
}

/* Pass 3 of one head over a block's V row pairs p: acc[c % 4] += w·p[c], each accumulator holding
 * two rows' sums. */
static inline FORCE_INLINE AVX512 void accum_pairs_hd8(const __m512 p[8], __m512 w, __m512 acc[4])
{
    __m512 wl = _mm512_shuffle_f32x4(w, w, _MM_SHUFFLE(1, 1, 0, 0));
    __m512 wh = _mm512_shuffle_f32x4(w, w, _MM_SHUFFLE(3, 3, 2, 2));
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++)
        acc[c & 3] = _mm512_fmadd_ps(pair_weights(wl, wh, c), p[c], acc[c & 3]);
}

/* Zeros the rows of the cells of a block not in keep: a masked cell's V row may hold anything, NaN
 * included, which its weight 0 would not cancel. */
static inline FORCE_INLINE AVX512 void zero_masked_pairs(__m512 p[8], __mmask16 keep)
{
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        unsigned a = keep >> pair_cell(c) & 1, b = keep >> (pair_cell(c) + 4) & 1;
        p[c] = _mm512_maskz_mov_ps((__mmask16)((a ? 0x00ffu : 0) | (b ? 0xff00u : 0)), p[c]);
    }
}

/* p from load_block to t[d] = element d of the 16 rows, in cell order: 4x4 transposes within
 * 128-bit lanes, then one lane shuffle per output. Cheaper than a horizontal sum per score, and
 * shared by the heads of a GQA group. */
static inline FORCE_INLINE AVX512 void transpose16x8(const __m512 p[8], __m512 t[8])
{
    __m512 c[8];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512 *r = p + 4 * h;
        __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(r[0], r[1]));
        __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(r[0], r[1]));
        __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(r[2], r[3]));
        __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(r[2], r[3]));
        c[4 * h + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        c[4 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        c[4 * h + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        c[4 * h + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    /* c[d] holds element d (lanes 0, 2) and d + 4 (lanes 1, 3) of cells 0-7, c[4 + d] of 8-15 */
#pragma GCC unroll 4
    for (int d = 0; d < 4; d++) {
        t[d] = _mm512_shuffle_f32x4(c[d], c[4 + d], _MM_SHUFFLE(2, 0, 2, 0));
        t[d + 4] = _mm512_shuffle_f32x4(c[d], c[4 + d], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Mask of cells j0..j0+15 in row mr (NULL: no mask), -inf past n_kv. */
static inline AVX512 __m512 mask16(const float *mr, int64_t j0, int64_t n_kv)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __mmask16 in = n_kv - j0 >= 16 ? 0xffff : (__mmask16)((1u << (n_kv - j0)) - 1);
    return mr ? _mm512_mask_loadu_ps(ninf, in, mr + j0) : _mm512_mask_mov_ps(ninf, in, _mm512_setzero_ps());
}

/* n heads (1 or 4) of one query row, m at a time sharing a KV head (n and m constants after
 * inlining, so the per-head state stays in registers), with head dims of 8 and one mask row for all
 * (or none), 16 cells per block. Heads of several KV heads go together so that their dependency
 * chains (max, exp, sums) overlap: a small head alone leaves the core waiting. Three passes over
 * the visible blocks:
 * 1. scores (-inf where masked): the K rows transposed once per block and KV head, then 8 FMAs per
 *    head, the scale applied with the mask (q is read as it is);
 * 2. the weights e^(s - max) in place and their lane sums, in a loop of its own so the long exp
 *    chains of different blocks overlap;
 * 3. Σ w·v, the V rows converted (and masked cells zeroed) once per block and KV head.
 * Lane c of a head's sums holds the cells ≡ c (mod 16) and fully masked blocks add nothing, so its
 * result does not depend on the heads it is batched with: batches differ with the thread count. */
static inline FORCE_INLINE AVX512 void heads_hd8(const struct attn_unit *u, const struct hd8_head *hs, int n, int m)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
    const bool kf16 = u->k->type == LLM_TYPE_F16, vf16 = u->v->type == LLM_TYPE_F16;
    const int64_t n_kv = u->n_kv, j_lo = u->r_lo & ~(int64_t)15, j_hi = u->r_hi, ss = u->n_kv16;
    const int64_t qst = (int64_t)u->q->nb[0], kst = (int64_t)u->k->nb[1], vst = (int64_t)u->v->nb[1];
    const __m512 scale = _mm512_set1_ps(llm_get_op_f32(u->dst, 0));
    const float *mr = (const float *)mask_row(u, 0);
    float *s0 = u->s;
    _Alignas(64) char buf[16 * 8 * sizeof(float)];
    __m512 mx[4], sum[4], acc[4][4];
#pragma GCC unroll 4
    for (int g = 0; g < n; g++)
        mx[g] = ninf;
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += 16) {
        __m512 mv = mask16(mr, j0, n_kv);
        __mmask16 dead = _mm512_cmp_ps_mask(mv, ninf, _CMP_EQ_OQ);
        if (dead == 0xffff) { /* a hole in the window: -inf scores (weight 0) */
#pragma GCC unroll 4
            for (int g = 0; g < n; g++)
                _mm512_storeu_ps(s0 + g * ss + j0, ninf);
            continue;
        }
        __m512 t[8];
#pragma GCC unroll 4
        for (int g = 0; g < n; g++) {
            if (g % m == 0) {
                __m512 p[8];
                load_rows(hs[g].k, kst, kf16, j0, n_kv, buf, p);
                transpose16x8(p, t);
            }
            const char *qr = hs[g].q;
            __m512 d[4]; /* four short FMA chains, not one long one */
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                d[i] = _mm512_fmadd_ps(t[i + 4], _mm512_set1_ps(q_at(qr, qst, i + 4)),
                                       _mm512_mul_ps(t[i], _mm512_set1_ps(q_at(qr, qst, i))));
            __m512 sc = _mm512_fmadd_ps(_mm512_add_ps(_mm512_add_ps(d[0], d[1]), _mm512_add_ps(d[2], d[3])), scale, mv);
            /* masked cells -inf, not score + -inf: K there may hold anything, NaN included */
            sc = _mm512_mask_mov_ps(sc, dead, ninf);
            _mm512_storeu_ps(s0 + g * ss + j0, sc);
            mx[g] = _mm512_max_ps(mx[g], sc);
        }
    }

    /* a head whose max is -inf sees nothing: it keeps weight 0 everywhere (e^(-inf - -inf) is NaN) */
    __m512 vmax[4];
#pragma GCC unroll 4
    for (int g = 0; g < n; g++) {
        float mxg = _mm512_reduce_max_ps(mx[g]);
        vmax[g] = _mm512_set1_ps(mxg == -INFINITY ? INFINITY : mxg);
        sum[g] = acc[g][0] = acc[g][1] = acc[g][2] = acc[g][3] = zero;
    }
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += 16)
#pragma GCC unroll 4
        for (int g = 0; g < n; g++) {
            float *s = s0 + g * ss + j0;
            __m512 w = exp16(_mm512_sub_ps(_mm512_loadu_ps(s), vmax[g])); /* 0 where masked */
            _mm512_storeu_ps(s, w);
            sum[g] = _mm512_add_ps(sum[g], w);
        }

    for (int64_t j0 = j_lo; j0 < j_hi; j0 += 16) {
        __mmask16 keep = _mm512_cmp_ps_mask(mask16(mr, j0, n_kv), ninf, _CMP_NEQ_UQ);
        if (!keep)
            continue;
#pragma GCC unroll 4
        for (int g0 = 0; g0 < n; g0 += m) {
            __m512 p[8];
            load_rows(hs[g0].v, vst, vf16, j0, n_kv, buf, p);
            if (keep != 0xffff)
                zero_masked_pairs(p, keep);
#pragma GCC unroll 4
            for (int g = g0; g < g0 + m; g++)
                accum_pairs_hd8(p, _mm512_loadu_ps(s0 + g * ss + j0), acc[g]);
        }
    }

#pragma GCC unroll 4
    for (int g = 0; g < n; g++) {
        float tot = _mm512_reduce_add_ps(sum[g]); /* 0 when the head sees nothing: zeros out */
        __m512 a = _mm512_add_ps(_mm512_add_ps(acc[g][0], acc[g][1]), _mm512_add_ps(acc[g][2], acc[g][3]));
        __m256 o = _mm256_mul_ps(_mm256_add_ps(_mm512_castps512_ps256(a),
                                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))),
                                 _mm256_set1_ps(tot > 0.0f ? 1.0f / tot : 0.0f));
        attn_store_hd8(hs[g].out, (int64_t)u->dst->nb[0], o);
    }
}

/* The batches with code of their own: 4 heads of 2 KV heads (e.g. stories260K's decode on 1 or 2
 * threads) or of one, and a head alone (the rest, MHA included). */
static AVX512 __attribute__((noinline)) void heads_hd8_4x2(const struct attn_unit *u, const struct hd8_head *h)
{
    heads_hd8(u, h, 4, 2);
}

static AVX512 __attribute__((noinline)) void heads_hd8_4x4(const struct attn_unit *u, const struct hd8_head *h)
{
    heads_hd8(u, h, 4, 4);
}

static AVX512 __attribute__((noinline)) void heads_hd8_1(const struct attn_unit *u, const struct hd8_head *h)
{
    heads_hd8(u, h, 1, 1);
}

const struct hd8_kernels attn_hd8_avx512 = { heads_hd8_4x4, heads_hd8_4x2, heads_hd8_1 };

/* Runs the first heads of hs (*np of them, all of one query row) on kernels k: 4 at a time while
 * the next 4 are 4 or 2 + 2 heads of a KV head, else one; when flush, all of them. Returns in *np
 * the count left, moved to the front. */
static void run_hd8(const struct attn_unit *u, const struct hd8_kernels *k, struct hd8_head *hs, int *np, bool flush)
{
    int n = *np, i = 0;
    while (n - i >= 4 || (flush && i < n)) {
        const struct hd8_head *h = hs + i;
        if (n - i >= 4 && h[1].k == h[0].k && h[3].k == h[2].k) {
            if (h[2].k == h[0].k)
                k->heads_4x4(u, h);
            else
                k->heads_4x2(u, h);
            i += 4;
        } else {
            k->heads_1(u, h);
            i++;
        }
    }
    memmove(hs, hs + i, (size_t)(n - i) * sizeof *hs);
    *np = n - i;
}

void attn_hd8_flush(const struct attn_unit *u, const struct hd8_kernels *k, struct hd8_head *hs, int *np)
{
    run_hd8(u, k, hs, np, true);
}

/* Adds the unit's heads to the batch hs (room for 4), running it through run_hd8 when full; the
 * heads still pending wait for the next unit of the same query row. */
void attn_hd8_add(struct attn_unit *u, const struct hd8_kernels *k, struct hd8_head *hs, int *np)
{
    for (int64_t g = 0; g < u->nh; g++) {
        int64_t h = u->h0 + g;
        hs[*np] = (struct hd8_head){ .q = tensor_at(u->q, 0, u->iq, h, 0),
                                     .k = tensor_at(u->k, 0, 0, u->hk, 0),
                                     .v = tensor_at(u->v, 0, 0, u->hk, 0),
                                     .out = tensor_at(u->dst, 0, h, u->iq, 0) };
        if (++*np == 4)
            run_hd8(u, k, hs, np, false);
    }
}
