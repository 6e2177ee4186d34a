/* FLASH_ATTN for head dims of 8 on AVX2 (tiny models such as stories260K, where a decode call is a
 * microsecond or two): the AVX-512 kernel's plan (attention_hd8.c) on 8 cells per block. K is
 * transposed once per block and KV head, so a head's 8 scores are 8 FMAs; each V row is
 * multiplied by its cell's weight broadcast, the heads of a batch interleaved so their FMA chains
 * overlap. */
#include <math.h>

#include "attention_paths.h"
#include "ops/isa/simd.h"

#define FORCE_INLINE __attribute__((always_inline))

/* The 8 rows of 8 values from r (byte stride st), F16 or F32, as vectors. */
static inline FORCE_INLINE AVX2 void load_rows8(const char *r, int64_t st, bool f16, __m256 p[8])
{
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++)
        p[c] = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + c * st)))
                   : _mm256_loadu_ps((const float *)(r + c * st));
}

/* The rows of the block at cell j0 of a KV head (row 0 at base, byte stride st); the last block
 * of a view that is not a multiple of 8 comes from a copy in buf followed by zero rows, so nothing
 * past the view is read. */
static inline FORCE_INLINE AVX2 void block_rows(const char *base, int64_t st, bool f16, int64_t j0, int64_t n_kv,
                                               char *buf, __m256 p[8])
{
    const char *r = base + j0 * st;
    if (j0 + 8 > n_kv) {
        const size_t row = f16 ? 8 * sizeof(uint16_t) : 8 * sizeof(float);
        r = attn_tail_rows(r, st, row, n_kv - j0, 8, buf);
        st = (int64_t)row;
    }
    if (f16)
        load_rows8(r, st, true, p);
    else
        load_rows8(r, st, false, p);
}

/* n heads (1 or 4) of one query row, m at a time sharing a KV head (constants after inlining), with
 * head dims of 8 and one mask row for all (or none), 8 cells per block, in the three passes of the
 * AVX-512 kernel: scores (-inf where masked) and maxima; weights e^(s - max) in place and their
 * sums; Σ w·v with masked cells' V rows zeroed (a weight of 0 would not cancel a NaN). Lane c of a
 * head's sums holds the cells ≡ c (mod 8), and its V rows go to two accumulators by the cell's
 * parity, so a head's result does not depend on the heads it is batched with. */
static inline FORCE_INLINE AVX2 void heads_hd8_avx2(const struct attn_unit *u, const struct hd8_head *hs, int n, int m)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY), zero = _mm256_setzero_ps();
    const bool kf16 = u->k->type == LLM_TYPE_F16, vf16 = u->v->type == LLM_TYPE_F16;
    const int64_t n_kv = u->n_kv, j_lo = u->r_lo & ~(int64_t)7, j_hi = u->r_hi, ss = u->n_kv16;
    const int64_t qst = (int64_t)u->q->nb[0], kst = (int64_t)u->k->nb[1], vst = (int64_t)u->v->nb[1];
    const __m256 scale = _mm256_set1_ps(llm_get_op_f32(u->dst, 0));
    const char *mr = mask_row(u, 0);
    float *s0 = u->s;
    _Alignas(32) char buf[8 * 8 * sizeof(float)];
    __m256 mx[4], sum[4], acc[4][2], q[4][8];
#pragma GCC unroll 4
    for (int g = 0; g < n; g++) {
        mx[g] = ninf;
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            q[g][i] = _mm256_set1_ps(*(const float *)(hs[g].q + i * qst));
    }
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += 8) {
        __m256 mv = attn_mask8(u->m, mr, j0, n_kv), dead = _mm256_cmp_ps(mv, ninf, _CMP_EQ_OQ);
        if (_mm256_movemask_ps(dead) == 0xff) { /* a hole in the window: -inf scores (weight 0) */
#pragma GCC unroll 4
            for (int g = 0; g < n; g++)
                _mm256_storeu_ps(s0 + g * ss + j0, ninf);
            continue;
        }
        __m256 t[8];
#pragma GCC unroll 4
        for (int g = 0; g < n; g++) {
            if (g % m == 0) {
                block_rows(hs[g].k, kst, kf16, j0, n_kv, buf, t);
                transpose8x8_ps(t); /* t[d] = element d of the 8 cells' K rows */
            }
            __m256 d[4]; /* four short FMA chains, not one long one */
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                d[i] = _mm256_fmadd_ps(t[i + 4], q[g][i + 4], _mm256_mul_ps(t[i], q[g][i]));
            __m256 sc = _mm256_fmadd_ps(_mm256_add_ps(_mm256_add_ps(d[0], d[1]), _mm256_add_ps(d[2], d[3])), scale, mv);
            /* masked cells -inf, not score + -inf: K there may hold anything, NaN included */
            sc = _mm256_blendv_ps(sc, ninf, dead);
            _mm256_storeu_ps(s0 + g * ss + j0, sc);
            mx[g] = _mm256_max_ps(mx[g], sc);
        }
    }

    /* a head whose max is -inf sees nothing: it keeps weight 0 everywhere (e^(-inf - -inf) is NaN) */
    __m256 vmax[4];
#pragma GCC unroll 4
    for (int g = 0; g < n; g++) {
        float mxg = hmax_ps(mx[g]);
        vmax[g] = _mm256_set1_ps(mxg == -INFINITY ? INFINITY : mxg);
        sum[g] = acc[g][0] = acc[g][1] = zero;
    }
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += 8)
#pragma GCC unroll 4
        for (int g = 0; g < n; g++) {
            float *s = s0 + g * ss + j0;
            __m256 w = exp8(_mm256_sub_ps(_mm256_loadu_ps(s), vmax[g])); /* 0 where masked */
            _mm256_storeu_ps(s, w);
            sum[g] = _mm256_add_ps(sum[g], w);
        }

    for (int64_t j0 = j_lo; j0 < j_hi; j0 += 8) {
        const __m256 mv = attn_mask8(u->m, mr, j0, n_kv);
        const unsigned keep = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(mv, ninf, _CMP_NEQ_UQ));
        if (!keep)
            continue;
#pragma GCC unroll 4
        for (int g0 = 0; g0 < n; g0 += m) {
            __m256 p[8];
            block_rows(hs[g0].v, vst, vf16, j0, n_kv, buf, p);
            if (keep != 0xff)
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++)
                    p[c] = keep >> c & 1 ? p[c] : zero;
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++)
#pragma GCC unroll 4
                for (int g = g0; g < g0 + m; g++)
                    acc[g][c & 1] = _mm256_fmadd_ps(_mm256_broadcast_ss(s0 + g * ss + j0 + c), p[c], acc[g][c & 1]);
        }
    }

#pragma GCC unroll 4
    for (int g = 0; g < n; g++) {
        float tot = hsum_ps(sum[g]); /* 0 when the head sees nothing: zeros out */
        __m256 o = _mm256_mul_ps(_mm256_add_ps(acc[g][0], acc[g][1]), _mm256_set1_ps(tot > 0.0f ? 1.0f / tot : 0.0f));
        attn_store_hd8(hs[g].out, (int64_t)u->dst->nb[0], o);
    }
}

/* The batches with code of their own, as on AVX-512: 4 heads of 2 KV heads or of one, a head alone. */
static AVX2 __attribute__((noinline)) void heads_4x2(const struct attn_unit *u, const struct hd8_head *h)
{
    heads_hd8_avx2(u, h, 4, 2);
}

static AVX2 __attribute__((noinline)) void heads_4x4(const struct attn_unit *u, const struct hd8_head *h)
{
    heads_hd8_avx2(u, h, 4, 4);
}

static AVX2 __attribute__((noinline)) void heads_1(const struct attn_unit *u, const struct hd8_head *h)
{
    heads_hd8_avx2(u, h, 1, 1);
}

const struct hd8_kernels attn_hd8_avx2 = { heads_4x4, heads_4x2, heads_1 };
