/* FLASH_ATTN: softmax(scale·q·kᵀ + mask)·v without a score matrix in the graph. A unit of work is
 * one query row and the query heads sharing one KV head (a GQA group), so the group's K and V rows
 * come from memory once, not once per head. Three passes over this thread's scratch: the scores
 * (8 cells at a time) and their max; e^(score - max) and the sum (the exp SOFT_MAX uses); then
 * Σ w·v over the V rows of the cells with a non-zero weight. Only the cells between the first and
 * the last one some mask row of the query row leaves visible are scanned (found once per row), and
 * blocks of 8 cells that every head masks with -inf are skipped: most of a padded KV window.
 * Head dims of 8 (tiny models such as stories260K) have a path of their own, attention_hd8.c
 * (AVX-512) and attention_hd8_avx2.c, and so has prefill (attention_tile.c on AVX-512, attention_tile_avx2.c on AVX2: a
 * unit is then a tile of query rows, whose rows share each K and V block). A quantized (or BF16) K or V, a quantized KV cache, is read block
 * by block: each K row is dequantized into the 8-row scratch as its cells are scored, and the V rows
 * of the live cells ATTN_V_CELLS at a time, so no copy of the cache is ever made. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_paths.h"
#include "cpu_features.h"
#include "kernels.h"
#include "ops/isa/simd.h"
#include "ops/types/types.h"

static int64_t round8(int64_t n)
{
    return (n + 7) & ~(int64_t)7;
}

/* Floats of scratch one thread needs (a multiple of 16, so each thread's part stays 64-byte apart). */
static int64_t scratch_floats(const struct llm_tensor *dst, int64_t group)
{
    const struct llm_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    int64_t hd8 = round8(q->ne[0]);
    /* scores of max(group, 4) heads: the head-dim-8 path runs 4 heads of several groups at once */
    int64_t n = (group > 4 ? group : 4) * round16(k->ne[1]) + group * (hd8 + 8 + 1 + v->ne[0]) + 9 * hd8 +
                round8(k->ne[1]);
    n += attn_kv_converted(v) ? ATTN_V_CELLS * v->ne[0] : 0;
    n = (n + 15) & ~(int64_t)15;
    int64_t tile = attn_tile_fits(q, k, v, false) ? attn_tile_scratch_floats(q->ne[0], v->ne[0], k->ne[1], attn_kv_converted(k)) : 0;
    return tile > n ? tile : n;
}

/* Heads of the unit with their own mask row (1 when the mask is shared). */
static int64_t n_masks(const struct attn_unit *u)
{
    return u->m && u->m->ne[2] > 1 ? u->nh : 1;
}

static float max8(const float *x)
{
    float m = x[0];
    for (int c = 1; c < 8; c++)
        m = x[c] > m ? x[c] : m;
    return m;
}

/* First cell of mask row mr (n cells, byte stride st) that is not -inf, n when none; scalar. */
static int64_t first_visible(const char *mr, int64_t n, int64_t st)
{
    int64_t j = 0;
    while (j < n && *(const float *)(mr + j * st) == -INFINITY)
        j++;
    return j;
}

/* One past the last cell of mask row mr that is not -inf, 0 when none; scalar. */
static int64_t end_visible(const char *mr, int64_t n, int64_t st)
{
    int64_t j = n;
    while (j > 0 && *(const float *)(mr + (j - 1) * st) == -INFINITY)
        j--;
    return j;
}

static AVX2 int64_t first_visible_avx2(const float *mr, int64_t n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        unsigned vis = ~(unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(mr + j), ninf, _CMP_EQ_OQ)) & 0xff;
        if (vis)
            return j + __builtin_ctz(vis);
    }
    return j + first_visible((const char *)(mr + j), n - j, sizeof(float));
}

static AVX2 int64_t end_visible_avx2(const float *mr, int64_t n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    int64_t j = n;
    for (; j >= 64; j -= 64) { /* the masked tail of a padded window, 64 cells a step */
        __m256 all = _mm256_cmp_ps(_mm256_loadu_ps(mr + j - 8), ninf, _CMP_EQ_OQ);
        for (int c = 2; c <= 8; c++)
            all = _mm256_and_ps(all, _mm256_cmp_ps(_mm256_loadu_ps(mr + j - 8 * c), ninf, _CMP_EQ_OQ));
        if (_mm256_movemask_ps(all) != 0xff)
            break;
    }
    for (; j >= 8; j -= 8) {
        unsigned vis = ~(unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(mr + j - 8), ninf, _CMP_EQ_OQ)) & 0xff;
        if (vis)
            return j - 8 + 32 - __builtin_clz(vis);
    }
    return end_visible((const char *)mr, j, sizeof(float));
}

/* [r_lo, r_hi): the cells that some mask row of query row iq, of any head, leaves visible (all
 * cells without a mask; empty when none is). Taken over every head, not just the unit's, so each
 * head scans the same blocks whichever unit (and so thread count) it falls in; a padded window's
 * masked tail, most of its cells, is then never scanned. Once per query row and thread. */
static void visible_range(struct attn_unit *u, bool avx2)
{
    if (u->r_iq == u->iq)
        return;
    const struct llm_tensor *m = u->m;
    int64_t n = u->n_kv, lo = m ? n : 0, hi = m ? 0 : n, st = m ? (int64_t)m->nb[0] : 0;
    for (int64_t h = 0; m && h < m->ne[2] && lo > 0; h++) {
        const char *mr = tensor_at(m, 0, u->iq, h, 0);
        int64_t a = avx2 && st == sizeof(float) ? first_visible_avx2((const float *)mr, lo) : first_visible(mr, lo, st);
        lo = a < lo ? a : lo;
    }
    for (int64_t h = 0; m && h < m->ne[2] && hi < n; h++) {
        const char *mr = tensor_at(m, 0, u->iq, h, 0) + hi * st;
        int64_t b = hi + (avx2 && st == sizeof(float) ? end_visible_avx2((const float *)mr, n - hi)
                                                      : end_visible(mr, n - hi, st));
        hi = b > hi ? b : hi;
    }
    u->r_iq = u->iq;
    u->r_lo = lo < hi ? lo : 0;
    u->r_hi = lo < hi ? hi : 0;
}

/* ---- AVX2 path: K and V rows with unit stride ------------------------------------------------ */

static inline AVX2 __m256 is_ninf(__m256 x)
{
    return _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
}

/* The lane sums of a[0..7], in that order. */
static inline AVX2 __m256 hsum8x8(const __m256 a[8])
{
    __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3); /* a0..a3 | a4..a7, per 128 */
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* dot(q, r[c]) for 8 rows of hd8 (a multiple of 8) values, F16 when f16 (a constant after
 * inlining) else F32. */
static inline __attribute__((always_inline)) AVX2 __m256 dot8(const float *q, const void *const r[8],
                                                              int64_t hd8, bool f16)
{
    __m256 a[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++)
        a[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < hd8; i += 8) {
        __m256 x = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            __m256 k = f16 ? load_f16x8((const uint16_t *)r[c] + i) : _mm256_loadu_ps((const float *)r[c] + i);
            a[c] = _mm256_fmadd_ps(x, k, a[c]);
        }
    }
    return hsum8x8(a);
}

/* Points r[c] at the K rows of cells j0..j0+7, hd8 values each: the rows themselves when hd is a
 * multiple of 8 and K is F32/F16, else zero-padded F32 copies (converted ones for a quantized or
 * BF16 K) in u->kb; past n_kv, zeros. True when r is F16. */
static AVX2 bool k_block(const struct attn_unit *u, int64_t j0, const void *r[8])
{
    const struct llm_tensor *k = u->k;
    bool f16 = k->type == LLM_TYPE_F16, direct = u->hd == u->hd8;
    const char *k0 = tensor_at(k, 0, j0, u->hk, 0);
    for (int c = 0; c < 8; c++) {
        if (j0 + c >= u->n_kv) {
            r[c] = u->zero; /* zero bits: 0 as F32 and as F16 */
            continue;
        }
        const char *kr = k0 + c * k->nb[1];
        if (u->k_deq) {
            float *d = u->kb + c * u->hd8;
            u->k_deq(kr, d, u->hd);
            for (int64_t i = u->hd; i < u->hd8; i++)
                d[i] = 0.0f;
            r[c] = d;
            continue;
        }
        if (direct) {
            r[c] = kr;
            continue;
        }
        float *d = u->kb + c * u->hd8;
        for (int64_t i = 0; i < u->hd8; i++)
            d[i] = i >= u->hd ? 0.0f : f16 ? fp16_avx2(((const uint16_t *)kr)[i]) : ((const float *)kr)[i];
        r[c] = d;
    }
    return f16 && direct;
}

/* Pass 1: scores (-inf where masked) and running maxima, 8 cells at a time. */
static AVX2 void scores_avx2(struct attn_unit *u)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int64_t g = 0; g < u->nh; g++)
        _mm256_storeu_ps(u->mx + 8 * g, ninf);
    u->lo = u->n_kv, u->hi = 0;
    int64_t nm = n_masks(u);
    const char *mr0 = mask_row(u, 0);
    for (int64_t j0 = u->r_lo & ~(int64_t)7; j0 < u->r_hi; j0 += 8) {
        __m256 mv0 = attn_mask8(u->m, mr0, j0, u->n_kv);
        bool skip = _mm256_movemask_ps(is_ninf(mv0)) == 0xff;
        for (int64_t g = 1; g < nm && skip; g++)
            skip = _mm256_movemask_ps(is_ninf(attn_mask8(u->m, mask_row(u, g), j0, u->n_kv))) == 0xff;
        if (skip)
            continue;
        /* masked blocks between live ones get -inf scores (weight 0); the others lie outside
         * [lo, hi), which no later pass reads (a padded window's tail is most of the cells) */
        for (int64_t j = u->hi; j < j0; j += 8)
            for (int64_t g = 0; g < u->nh; g++)
                _mm256_storeu_ps(u->s + g * u->n_kv8 + j, ninf);
        u->lo = u->lo < j0 ? u->lo : j0;
        u->hi = j0 + 8 < u->n_kv ? j0 + 8 : u->n_kv;
        const void *r[8];
        bool f16 = k_block(u, j0, r);
        for (int64_t g = 0; g < u->nh; g++) {
            __m256 mv = nm == 1 || g == 0 ? mv0 : attn_mask8(u->m, mask_row(u, g), j0, u->n_kv);
            /* blend, not add: a masked cell may hold anything, NaN included */
            const float *qs = u->qs + g * u->hd8;
            __m256 d = f16 ? dot8(qs, r, u->hd8, true) : dot8(qs, r, u->hd8, false);
            __m256 sc = _mm256_blendv_ps(_mm256_add_ps(d, mv), ninf, is_ninf(mv));
            _mm256_storeu_ps(u->s + g * u->n_kv8 + j0, sc);
            _mm256_storeu_ps(u->mx + 8 * g, _mm256_max_ps(_mm256_loadu_ps(u->mx + 8 * g), sc));
        }
    }
}

/* The cells some head gives a non-zero weight into u->live, in order; returns their count. Pass 3
 * reads only these rows: the others are masked (or underflowed) and may hold anything, even NaN,
 * which a zero weight would not cancel. */
static AVX2 int64_t live_cells(const struct attn_unit *u)
{
    int64_t n = 0;
    for (int64_t j0 = u->lo; j0 < u->hi; j0 += 8) { /* lo is a multiple of 8 on this path */
        __m256 nz = _mm256_setzero_ps();
        for (int64_t g = 0; g < u->nh; g++) {
            __m256 w = _mm256_loadu_ps(u->s + g * u->n_kv8 + j0);
            nz = _mm256_or_ps(nz, _mm256_cmp_ps(w, _mm256_setzero_ps(), _CMP_NEQ_UQ));
        }
        unsigned bits = (unsigned)_mm256_movemask_ps(nz);
        if (bits == 0xff && j0 + 8 <= u->hi) { /* the common case: all 8 */
            __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)j0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            _mm256_storeu_si256((__m256i *)(u->live + n), idx);
            n += 8;
            continue;
        }
        for (; bits; bits &= bits - 1) {
            int64_t j = j0 + __builtin_ctz(bits);
            if (j < u->hi) /* past hi the scores were not turned into weights */
                u->live[n++] = (int32_t)j;
        }
    }
    return n;
}

/* a[g] += w[g][j]·(elements [i, i + 8) of V row j) for g < n. */
static inline __attribute__((always_inline)) AVX2 void accum_row(const struct attn_unit *u, const char *base,
                                                                 const float *const w[4], __m256 a[4],
                                                                 int64_t j, int64_t i, int n, bool f16)
{
    const char *vr = base + j * (int64_t)u->v->nb[1];
    __m256 x = f16 ? load_f16x8((const uint16_t *)vr + i) : _mm256_loadu_ps((const float *)vr + i);
#pragma GCC unroll 4
    for (int g = 0; g < n; g++)
        a[g] = _mm256_fmadd_ps(_mm256_set1_ps(w[g][j]), x, a[g]);
}

/* Pass 3 for V elements [i, i + 8), live cells [t0, t1), heads g0..g0+n-1: acc += Σ w·v. n (<= 4)
 * and f16 are constants after inlining, so the accumulators live in registers: two sets, for
 * even and odd cells, to overlap the FMA latency. */
static inline __attribute__((always_inline)) AVX2 void accum_chunk(const struct attn_unit *u, int64_t i,
                                                                   int64_t t0, int64_t t1, int64_t g0, int n,
                                                                   bool f16)
{
    const float *w[4];
    __m256 a[4], b[4];
#pragma GCC unroll 4
    for (int g = 0; g < n; g++) {
        w[g] = u->s + (g0 + g) * u->n_kv8;
        a[g] = _mm256_loadu_ps(u->acc + (g0 + g) * u->hd_v + i);
        b[g] = _mm256_setzero_ps();
    }
    const char *base = tensor_at(u->v, 0, 0, u->hk, 0);
    int64_t t = t0;
    for (; t + 2 <= t1; t += 2) {
        accum_row(u, base, w, a, u->live[t], i, n, f16);
        accum_row(u, base, w, b, u->live[t + 1], i, n, f16);
    }
    if (t < t1)
        accum_row(u, base, w, a, u->live[t], i, n, f16);
#pragma GCC unroll 4
    for (int g = 0; g < n; g++)
        _mm256_storeu_ps(u->acc + (g0 + g) * u->hd_v + i, _mm256_add_ps(a[g], b[g]));
}

static AVX2 void accum_chunk_any(const struct attn_unit *u, int64_t i, int64_t t0, int64_t t1, int64_t g0,
                                 int n, bool f16)
{
    switch (n * 2 + f16) {
    case 2: accum_chunk(u, i, t0, t1, g0, 1, false); break;
    case 3: accum_chunk(u, i, t0, t1, g0, 1, true); break;
    case 4: accum_chunk(u, i, t0, t1, g0, 2, false); break;
    case 5: accum_chunk(u, i, t0, t1, g0, 2, true); break;
    case 6: accum_chunk(u, i, t0, t1, g0, 3, false); break;
    case 7: accum_chunk(u, i, t0, t1, g0, 3, true); break;
    case 8: accum_chunk(u, i, t0, t1, g0, 4, false); break;
    default: accum_chunk(u, i, t0, t1, g0, 4, true); break;
    }
}

/* Pass 3 for a converted V: the V rows of ATTN_V_CELLS live cells dequantized into u->vq, then per
 * head 32 elements at a time in four registers over them (the last hd_v % 32 one by one). */
static AVX2 void accum_quant_avx2(struct attn_unit *u)
{
    const int64_t n_live = live_cells(u), hd_v = u->hd_v;
    for (int64_t t0 = 0; t0 < n_live; t0 += ATTN_V_CELLS) {
        const int64_t n = n_live - t0 < ATTN_V_CELLS ? n_live - t0 : ATTN_V_CELLS;
        for (int64_t c = 0; c < n; c++)
            u->v_deq(tensor_at(u->v, 0, u->live[t0 + c], u->hk, 0), u->vq + c * hd_v, hd_v);
        for (int64_t g = 0; g < u->nh; g++) {
            const float *w = u->s + g * u->n_kv8;
            float *acc = u->acc + g * hd_v;
            int64_t i = 0;
            for (; i + 32 <= hd_v; i += 32) {
                __m256 a[4];
                for (int k = 0; k < 4; k++)
                    a[k] = _mm256_loadu_ps(acc + i + 8 * k);
                for (int64_t c = 0; c < n; c++) {
                    const __m256 wv = _mm256_set1_ps(w[u->live[t0 + c]]);
                    const float *vr = u->vq + c * hd_v + i;
                    for (int k = 0; k < 4; k++)
                        a[k] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(vr + 8 * k), a[k]);
                }
                for (int k = 0; k < 4; k++)
                    _mm256_storeu_ps(acc + i + 8 * k, a[k]);
            }
            for (int64_t c = 0; i < hd_v && c < n; c++)
                for (int64_t e = i; e < hd_v; e++)
                    acc[e] += w[u->live[t0 + c]] * u->vq[c * hd_v + e];
        }
    }
}

/* Pass 3: live cells in tiles of 64, so the tile's V rows stay in L1 while every 8-wide chunk of
 * them is read; up to 4 heads per sweep. Elements past the last full chunk one by one. */
static AVX2 void accum_avx2(struct attn_unit *u)
{
    if (u->v_deq) {
        accum_quant_avx2(u);
        return;
    }
    bool f16 = u->v->type == LLM_TYPE_F16;
    int64_t n8 = u->hd_v & ~(int64_t)7, n_live = live_cells(u);
    for (int64_t t0 = 0; t0 < n_live; t0 += 64) {
        int64_t t1 = t0 + 64 < n_live ? t0 + 64 : n_live;
        for (int64_t i = 0; i < n8; i += 8)
            for (int64_t g0 = 0; g0 < u->nh; g0 += 4)
                accum_chunk_any(u, i, t0, t1, g0, u->nh - g0 < 4 ? (int)(u->nh - g0) : 4, f16);
    }
    for (int64_t g = 0; g < u->nh && n8 < u->hd_v; g++) {
        const float *w = u->s + g * u->n_kv8;
        for (int64_t t = 0; t < n_live; t++) {
            const char *vr = tensor_at(u->v, 0, u->live[t], u->hk, 0);
            for (int64_t i = n8; i < u->hd_v; i++)
                u->acc[g * u->hd_v + i] +=
                    w[u->live[t]] * (f16 ? fp16_avx2(((const uint16_t *)vr)[i]) : ((const float *)vr)[i]);
        }
    }
}

/* ---- AVX-512 path for head dims of 8: K and V rows of 8 values with unit stride --------------- */

/* ---- scalar path: any strides, any CPU ------------------------------------------------------- */

static void scores_scalar(struct attn_unit *u)
{
    const struct llm_tensor *k = u->k, *m = u->m;
    for (int64_t i = 0; i < 8 * u->nh; i++)
        u->mx[i] = -INFINITY;
    u->lo = u->n_kv, u->hi = 0;
    int64_t nm = n_masks(u);
    const char *mr0 = mask_row(u, 0);
    for (int64_t j = u->r_lo; j < u->r_hi; j++) {
        const char *kr = tensor_at(k, 0, j, u->hk, 0);
        enum llm_type kt = k->type;
        int64_t ks = (int64_t)k->nb[0];
        if (u->k_deq) { /* converted once per cell, read below as F32 */
            u->k_deq(kr, u->kb, u->hd);
            kr = (const char *)u->kb, kt = LLM_TYPE_F32, ks = sizeof(float);
        }
        for (int64_t g = 0; g < u->nh; g++) {
            const char *mr = nm == 1 ? mr0 : mask_row(u, g);
            float mv = mr ? *(const float *)(mr + j * (int64_t)m->nb[0]) : 0.0f, sc = -INFINITY;
            if (mv != -INFINITY) {
                const float *qs = u->qs + g * u->hd8;
                sc = mv;
                for (int64_t i = 0; i < u->hd; i++)
                    sc += qs[i] * load_float(kt, kr + i * ks);
                u->lo = u->lo < j ? u->lo : j;
                u->hi = j + 1;
            }
            u->s[g * u->n_kv8 + j] = sc;
            u->mx[8 * g] = sc > u->mx[8 * g] ? sc : u->mx[8 * g];
        }
    }
}

/* A converted V: each row with a non-zero weight dequantized once, then added to every head. */
static void accum_quant_scalar(struct attn_unit *u)
{
    for (int64_t j = u->lo; j < u->hi; j++) {
        bool live = false;
        for (int64_t g = 0; g < u->nh && !live; g++)
            live = u->s[g * u->n_kv8 + j] != 0.0f;
        if (!live)
            continue;
        u->v_deq(tensor_at(u->v, 0, j, u->hk, 0), u->vq, u->hd_v);
        for (int64_t g = 0; g < u->nh; g++) {
            const float w = u->s[g * u->n_kv8 + j];
            float *acc = u->acc + g * u->hd_v;
            for (int64_t i = 0; w != 0.0f && i < u->hd_v; i++)
                acc[i] += w * u->vq[i];
        }
    }
}

static void accum_scalar(struct attn_unit *u)
{
    const struct llm_tensor *v = u->v;
    if (u->v_deq) {
        accum_quant_scalar(u);
        return;
    }
    for (int64_t g = 0; g < u->nh; g++) {
        const float *w = u->s + g * u->n_kv8;
        float *acc = u->acc + g * u->hd_v;
        for (int64_t j = u->lo; j < u->hi; j++) {
            if (w[j] == 0.0f)
                continue;
            const char *vr = tensor_at(v, 0, j, u->hk, 0);
            for (int64_t i = 0; i < u->hd_v; i++)
                acc[i] += w[j] * load_float(v->type, vr + i * (int64_t)v->nb[0]);
        }
    }
}

/* ---- the kernel --------------------------------------------------------------------------- */

size_t cpu_flash_attn_work_size(const struct llm_tensor *dst, int nth)
{
    return (size_t)nth * (size_t)scratch_floats(dst, dst->src[0]->ne[2] / dst->src[1]->ne[2]) * sizeof(float);
}

/* Pass 2: scores to weights e^(s - max) over [lo, hi) and 1/Σ per head. */
static void weights(struct attn_unit *u)
{
    if (u->lo >= u->hi)
        u->lo = u->hi = 0;
    for (int64_t g = 0; g < u->nh; g++) {
        float *w = u->s + g * u->n_kv8, max = max8(u->mx + 8 * g);
        if (max == -INFINITY) { /* this head may attend to nothing: zeros */
            for (int64_t j = u->lo; j < u->hi; j++)
                w[j] = 0.0f;
            u->inv[g] = 0.0f;
        } else {
            u->inv[g] = 1.0f / cpu_exp_sub_sum(u->hi - u->lo, w + u->lo, max);
        }
    }
}

enum attn_path { PATH_SCALAR, PATH_AVX2, PATH_HD8_AVX512, PATH_HD8_AVX2, PATH_TILE_AVX512, PATH_TILE_AVX2 };
static const char *const path_names[] = { "scalar",       "avx2 rows",    "avx512 hd8",
                                          "avx2 hd8",     "avx512 tiles", "avx2 tiles" };

static void attend(struct attn_unit *u, enum attn_path path)
{
    const struct llm_tensor *q = u->q, *dst = u->dst;
    float scale = llm_get_op_f32(dst, 0);
    visible_range(u, path != PATH_SCALAR);
    for (int64_t g = 0; g < u->nh; g++)
        load_q_row(q, u->iq, u->h0 + g, scale, u->hd, u->hd8, u->qs + g * u->hd8);
    memset(u->acc, 0, (size_t)(u->nh * u->hd_v) * sizeof(float));

    if (path == PATH_AVX2)
        scores_avx2(u);
    else
        scores_scalar(u);
    weights(u);
    if (path == PATH_AVX2)
        accum_avx2(u);
    else
        accum_scalar(u);

    for (int64_t g = 0; g < u->nh; g++)
        store_out_row(dst, u->h0 + g, u->iq, u->acc + g * u->hd_v, u->inv[g]);
}

/* [*lo, *hi): the union of the visible ranges of query rows [u->iq, u->iq + nq). */
static void tile_range(struct attn_unit *u, int64_t nq, int64_t *lo, int64_t *hi)
{
    const int64_t iq = u->iq;
    *lo = u->n_kv, *hi = 0;
    for (int64_t i = 0; i < nq; i++) {
        u->iq = iq + i;
        visible_range(u, true);
        if (u->r_lo < u->r_hi) {
            *lo = u->r_lo < *lo ? u->r_lo : *lo;
            *hi = u->r_hi > *hi ? u->r_hi : *hi;
        }
    }
    u->iq = iq;
}

static bool unit_rows(const struct llm_tensor *t)
{
    return t->nb[0] == llm_type_info(t->type)->type_size;
}

/* The widest path this CPU has for dst's shape and strides: SIMD paths read K and V rows of unit
 * stride; the head-dim-8 and the tile paths take only their shapes (the AVX-512 tile before the AVX2
 * one where both fit). */
static enum attn_path choose_path(const struct llm_tensor *dst)
{
    const struct llm_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    if (!llm_cpu_has_avx2() || !unit_rows(k) || !unit_rows(v))
        return PATH_SCALAR;
    if (q->ne[0] == 8 && v->ne[0] == 8 && (!m || (m->ne[2] == 1 && m->nb[0] == sizeof(float))) &&
        !attn_kv_converted(k) && !attn_kv_converted(v))
        return llm_cpu_has_avx512() ? PATH_HD8_AVX512 : PATH_HD8_AVX2;
    if (attn_tile_fits(q, k, v, true) && llm_cpu_has_avx512())
        return PATH_TILE_AVX512;
    if (attn_tile_fits(q, k, v, false))
        return PATH_TILE_AVX2;
    return PATH_AVX2;
}

const char *cpu_flash_attn_path(const struct llm_tensor *dst)
{
    return path_names[choose_path(dst)];
}

/* Parts each GQA group is cut into: 1 unless whole groups would leave threads idle or unevenly
 * loaded (e.g. one token, fewer KV heads than threads), then enough for about 4 units per thread. */
static int64_t group_parts(int64_t groups, int64_t group, int nth)
{
    if (nth == 1 || groups % nth == 0)
        return 1;
    int64_t want = (4 * nth + groups - 1) / groups;
    return want < group ? want : group;
}

void cpu_flash_attn(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    int64_t heads_kv = k->ne[2], group = q->ne[2] / heads_kv, n_q = q->ne[1];
    int64_t hd = q->ne[0], hd8 = round8(hd), hd_v = v->ne[0], n_kv = k->ne[1], n_kv8 = round8(n_kv);
    const struct llm_tensor *m = dst->src[3];
    /* field by field: an initializer would zero the rest of the struct first (rep stos, ~30 cycles);
     * lo/hi, iq.. and r_lo/r_hi are set before they are read */
    struct attn_unit u;
    u.dst = dst, u.q = q, u.k = k, u.v = v, u.m = m;
    u.hd = hd, u.hd8 = hd8, u.hd_v = hd_v, u.n_kv = n_kv, u.n_kv8 = n_kv8, u.n_kv16 = round16(n_kv), u.r_iq = -1;
    u.qs = (float *)p->wdata + (size_t)p->ith * (size_t)scratch_floats(dst, group);
    u.s = u.qs + group * hd8;
    u.mx = u.s + (group > 4 ? group : 4) * u.n_kv16;
    u.inv = u.mx + group * 8;
    u.acc = u.inv + group;
    u.kb = u.acc + group * hd_v;
    u.zero = u.kb + 8 * hd8;
    u.live = (int32_t *)(u.zero + hd8);
    u.vq = (float *)(u.live + n_kv8);
    u.k_deq = attn_kv_converted(k) ? llm_type_traits(k->type)->to_float_fast : NULL;
    u.v_deq = attn_kv_converted(v) ? llm_type_traits(v->type)->to_float_fast : NULL;
    memset(u.zero, 0, (size_t)hd8 * sizeof(float));
    const enum attn_path path = choose_path(dst);
    const bool tiled = path == PATH_TILE_AVX512 || path == PATH_TILE_AVX2;
    /* query rows per unit: a tile of them on the prefill paths */
    const int64_t tq = tiled ? attn_tile_queries(group) : 1, n_tiles = (n_q + tq - 1) / tq;

    /* units dealt out round-robin: under a causal mask later queries see more cells, so
     * contiguous ranges would give the last thread most of the work */
    int64_t parts = group_parts(n_tiles * heads_kv, group, p->nth);
    /* unit (iq·heads_kv + hk)·parts + part, iq a tile of query rows, stepped by nth without
     * divisions (a decode call of a tiny model takes well under a microsecond: a few divisions per
     * unit would show) */
    int64_t part = p->ith, hk = 0, iq = 0;
    struct hd8_head hs[4]; /* the head-dim-8 path's batch: heads of one query row */
    const struct hd8_kernels *hd8k = path == PATH_HD8_AVX512 ? &attn_hd8_avx512
                                    : path == PATH_HD8_AVX2 ? &attn_hd8_avx2
                                                            : NULL;
    int np = 0;
    for (;;) {
        for (; part >= parts; part -= parts)
            if (++hk == heads_kv)
                hk = 0, iq++;
        if (np > 0 && (iq >= n_tiles || iq != u.iq))
            attn_hd8_flush(&u, hd8k, hs, &np);
        if (iq >= n_tiles)
            break;
        u.iq = iq * tq;
        u.hk = hk;
        u.h0 = hk * group + (parts == 1 ? 0 : group * part / parts);
        u.nh = parts == 1 ? group : hk * group + group * (part + 1) / parts - u.h0;
        if (hd8k) {
            visible_range(&u, true);
            attn_hd8_add(&u, hd8k, hs, &np);
        } else if (tiled) {
            const int64_t nq = n_q - u.iq < tq ? n_q - u.iq : tq;
            int64_t lo, hi;
            tile_range(&u, nq, &lo, &hi);
            if (path == PATH_TILE_AVX512)
                attn_tile_run(&u, nq, lo, hi, u.qs);
            else
                attn_tile_run_avx2(&u, nq, lo, hi, u.qs);
        } else {
            attend(&u, path);
        }
        part += p->nth;
    }
}

