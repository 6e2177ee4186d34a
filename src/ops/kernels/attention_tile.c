/* FLASH_ATTN's prefill path on AVX-512: a tile of consecutive query rows and the heads of one GQA
 * group (up to TILE_ROWS "rows", a row being one query row of one head) share every K and V block,
 * so each block is converted to F32 once for all of them, not once per head and query row as the
 * row-at-a-time path does. K blocks of 16 cells are transposed, so a score vector is hd broadcast
 * FMAs (16 cells each); V rows stay as they are and an output row is one broadcast FMA per cell and
 * 16 dims. The passes are attention.c's: scores and each row's max; e^(s - max) and its sum;
 * Σ w·v over the cells some row of the tile weights. Each row's sums run in an order fixed by
 * its cell positions alone, so a row's result does not depend on which rows share its tile. A
 * quantized K has the 16 rows of a block dequantized before the transpose, a quantized V its live
 * rows as they are converted: the cache is read block by block, never copied whole. The tile's
 * set-up, its weights pass and its output (plain C) serve the AVX2 tile too (attention_tile_avx2.c). */
#include <math.h>
#include <string.h>

#include "attention_tile.h"
#include "ops/isa/simd.h"

#define FORCE_INLINE __attribute__((always_inline))

#define SCORE_ROWS 8 /* rows whose scores of two 16-cell blocks stay in registers (16 accumulators) */
#define ACC_ROWS 6   /* rows whose 64 output dims stay in registers (24 accumulators) */

bool attn_tile_fits(const struct llm_tensor *q, const struct llm_tensor *k, const struct llm_tensor *v, bool avx512)
{
    int64_t group = q->ne[2] / k->ne[2];
    /* whole registers of K dims (transposed) and of V dims (an output chunk) */
    int64_t k_step = avx512 ? 16 : 8, v_step = avx512 ? 64 : 16;
    return q->ne[0] % k_step == 0 && v->ne[0] % v_step == 0 && group <= TILE_ROWS && q->ne[1] > 1;
}

int64_t attn_tile_queries(int64_t group)
{
    return TILE_ROWS / group;
}

/* Points t's scratch parts into base (NULL: only measures); returns the floats they take, each part
 * a multiple of 16 floats, so all stay 64-byte aligned. */
static int64_t layout(struct tile *t, float *base)
{
    float *p = base;
    int64_t used = 0;
#define PART(field, type, n)                                                  \
    do {                                                                      \
        t->field = (type *)(p ? p + used : NULL);                             \
        used += (n);                                                          \
    } while (0)
    PART(qs, float, TILE_ROWS * t->hd);
    PART(s, float, TILE_ROWS * t->n16);
    PART(mx, float, TILE_ROWS * 16);
    PART(inv, float, round16(TILE_ROWS));
    PART(acc, float, TILE_ROWS * t->hd_v);
    PART(kt, float, t->hd * 32);
    PART(kq, float, t->k_quant ? 16 * t->hd : 0);
    PART(vb, float, TILE_V_CELLS * t->hd_v);
    PART(live, int32_t, t->n16);
#undef PART
    return used;
}

int64_t attn_tile_scratch_floats(int64_t hd, int64_t hd_v, int64_t n_kv, bool k_quant)
{
    struct tile t = { .hd = hd, .hd_v = hd_v, .n16 = round16(n_kv), .k_quant = k_quant };
    return layout(&t, NULL);
}

/* Pass 2, the same on every ISA: each row's scores over [lo, hi) to e^(s - max), and 1 / Σ. */
static void weights(const struct tile *t)
{
    for (int64_t r = 0; r < t->rows; r++) {
        float *w = t->s + r * t->n16, max = -INFINITY;
        for (int c = 0; c < 16; c++)
            max = t->mx[r * 16 + c] > max ? t->mx[r * 16 + c] : max;
        if (max == -INFINITY) { /* this row may attend to nothing: zeros */
            memset(w + t->lo, 0, (size_t)(t->hi - t->lo) * sizeof(float));
            t->inv[r] = 0.0f;
        } else {
            t->inv[r] = 1.0f / cpu_exp_sub_sum(t->hi - t->lo, w + t->lo, max);
        }
    }
}

void tile_run(const struct attn_unit *u, int64_t nq, int64_t lo, int64_t hi, float *scratch, tile_pass_fn scores,
              tile_pass_fn accumulate)
{
    const struct llm_tensor *q = u->q, *k = u->k, *v = u->v;
    struct tile t;
    t.m = u->m;
    t.hd = u->hd, t.hd_v = u->hd_v, t.n_kv = u->n_kv, t.n16 = round16(u->n_kv), t.rows = nq * u->nh;
    t.lo = lo & ~(int64_t)15, t.hi = round16(hi);
    t.k = tensor_at(k, 0, 0, u->hk, 0), t.v = tensor_at(v, 0, 0, u->hk, 0);
    t.k_st = (int64_t)k->nb[1], t.v_st = (int64_t)v->nb[1];
    t.k_f16 = k->type == LLM_TYPE_F16, t.v_f16 = v->type == LLM_TYPE_F16;
    t.k_deq = u->k_deq, t.v_deq = u->v_deq, t.k_quant = u->k_deq != NULL;
    layout(&t, scratch);

    const float scale = llm_get_op_f32(u->dst, 0);
    for (int64_t iq = 0; iq < nq; iq++)
        for (int64_t g = 0; g < u->nh; g++) {
            const int64_t r = iq * u->nh + g, h = u->h0 + g;
            load_q_row(q, u->iq + iq, h, scale, t.hd, t.hd, t.qs + r * t.hd);
            t.mrow[r] = t.m ? tensor_at(t.m, 0, u->iq + iq, t.m->ne[2] == 1 ? 0 : h % t.m->ne[2], 0) : NULL;
        }
    if (t.lo < t.hi) {
        scores(&t);
        weights(&t);
        accumulate(&t);
    } else {
        memset(t.inv, 0, (size_t)t.rows * sizeof(float));
        memset(t.acc, 0, (size_t)(t.rows * t.hd_v) * sizeof(float));
    }
    for (int64_t iq = 0; iq < nq; iq++)
        for (int64_t g = 0; g < u->nh; g++)
            store_out_row(u->dst, u->h0 + g, u->iq + iq, t.acc + (iq * u->nh + g) * t.hd_v, t.inv[iq * u->nh + g]);
}

/* ---- pass 1: scores ---------------------------------------------------------------------- */

/* r[0..15] (16 rows of 16 floats) transposed in place: 4x4 transposes within 128-bit lanes, then
 * two lane shuffles per output. */
static inline FORCE_INLINE AVX512 void transpose16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    /* r[4i + c]: rows 4i..4i+3, element c of each 128-bit lane (elements c, 4 + c, 8 + c, 12 + c) */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), u1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        __m512 u2 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd), u3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_f32x4(u0, u1, 0x88);
        t[8 + c] = _mm512_shuffle_f32x4(u0, u1, 0xdd);
        t[4 + c] = _mm512_shuffle_f32x4(u2, u3, 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(u2, u3, 0xdd);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = t[i];
}

/* kt[d·32 + 16·b + c] = element d of the K row of cell j0 + c (zeros past n_kv). */
static AVX512 void pack_k_block(const struct tile *t, int64_t j0, int b)
{
    const bool f16 = t->k_f16;
    int64_t st = t->k_st;
    const char *base = t->k + j0 * st;
    if (t->k_deq) { /* the block's rows as F32 (zeros past n_kv), then read as an F32 K */
        for (int64_t c = 0; c < 16; c++)
            if (j0 + c < t->n_kv)
                t->k_deq(base + c * st, t->kq + c * t->hd, t->hd);
            else
                memset(t->kq + c * t->hd, 0, (size_t)t->hd * sizeof(float));
        base = (const char *)t->kq, st = t->hd * (int64_t)sizeof(float);
    }
    for (int64_t d0 = 0; d0 < t->hd; d0 += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++) {
            const char *row = base + c * st;
            if (j0 + c >= t->n_kv)
                r[c] = _mm512_setzero_ps();
            else if (f16)
                r[c] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d0)));
            else
                r[c] = _mm512_loadu_ps((const float *)row + d0);
        }
        transpose16(r);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            _mm512_storeu_ps(t->kt + (d0 + i) * 32 + 16 * b, r[i]);
    }
}

/* The mask of row r for cells j0..j0+15 (-inf past n_kv). */
static inline AVX512 __m512 mask16(const struct tile *t, int64_t r, int64_t j0)
{
    const char *mr = t->mrow[r];
    if (j0 + 16 <= t->n_kv) {
        if (!mr)
            return _mm512_setzero_ps();
        if (t->m->nb[0] == sizeof(float))
            return _mm512_loadu_ps((const float *)mr + j0);
    }
    float v[16];
    for (int c = 0; c < 16; c++)
        v[c] = j0 + c >= t->n_kv ? -INFINITY : mr ? *(const float *)(mr + (j0 + c) * (int64_t)t->m->nb[0]) : 0.0f;
    return _mm512_loadu_ps(v);
}

/* Scores of rows r0..r0+n-1 for the nb packed blocks at cell j0; n and nb are constants after
 * inlining, so the 2n accumulators stay in registers. Masked cells get -inf (a blend, not an add:
 * the K row of a masked cell may hold anything, NaN included). */
static inline FORCE_INLINE AVX512 void score_rows(const struct tile *t, int64_t r0, int n, int nb, int64_t j0)
{
    __m512 a[SCORE_ROWS][2];
#pragma GCC unroll 8
    for (int i = 0; i < n; i++)
        a[i][0] = a[i][1] = _mm512_setzero_ps();
    for (int64_t d = 0; d < t->hd; d++) {
        const __m512 k0 = _mm512_loadu_ps(t->kt + d * 32), k1 = _mm512_loadu_ps(t->kt + d * 32 + 16);
#pragma GCC unroll 8
        for (int i = 0; i < n; i++) {
            const __m512 x = _mm512_set1_ps(t->qs[(r0 + i) * t->hd + d]);
            a[i][0] = _mm512_fmadd_ps(x, k0, a[i][0]);
            if (nb == 2)
                a[i][1] = _mm512_fmadd_ps(x, k1, a[i][1]);
        }
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 8
    for (int i = 0; i < n; i++)
        for (int b = 0; b < nb; b++) {
            const __m512 mv = mask16(t, r0 + i, j0 + 16 * b);
            const __m512 sc =
                _mm512_mask_mov_ps(_mm512_add_ps(a[i][b], mv), _mm512_cmp_ps_mask(mv, ninf, _CMP_EQ_OQ), ninf);
            float *mx = t->mx + (r0 + i) * 16;
            _mm512_storeu_ps(t->s + (r0 + i) * t->n16 + j0 + 16 * b, sc);
            _mm512_storeu_ps(mx, _mm512_max_ps(_mm512_loadu_ps(mx), sc));
        }
}

static AVX512 void score_rows_any(const struct tile *t, int64_t r0, int n, int nb, int64_t j0)
{
#define SCORE_CASE(N)                                                                                         \
    case N:                                                                                                   \
        if (nb == 2)                                                                                          \
            score_rows(t, r0, N, 2, j0);                                                                      \
        else                                                                                                  \
            score_rows(t, r0, N, 1, j0);                                                                      \
        break;
    switch (n) {
        SCORE_CASE(1)
        SCORE_CASE(2)
        SCORE_CASE(3)
        SCORE_CASE(4)
        SCORE_CASE(5)
        SCORE_CASE(6)
        SCORE_CASE(7)
    default:
        if (nb == 2)
            score_rows(t, r0, SCORE_ROWS, 2, j0);
        else
            score_rows(t, r0, SCORE_ROWS, 1, j0);
    }
#undef SCORE_CASE
}

/* Does some row of the tile see a cell of the block at j0? */
static AVX512 bool block_visible(const struct tile *t, int64_t j0)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t r = 0; r < t->rows; r++)
        if (_mm512_cmp_ps_mask(mask16(t, r, j0), ninf, _CMP_NEQ_UQ))
            return true;
    return false;
}

static AVX512 void scores(const struct tile *t)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t r = 0; r < t->rows; r++)
        _mm512_storeu_ps(t->mx + r * 16, ninf);
    for (int64_t j0 = t->lo; j0 < t->hi; j0 += 32) {
        int nb = j0 + 16 < t->hi ? 2 : 1;
        bool vis[2] = { block_visible(t, j0), nb == 2 && block_visible(t, j0 + 16) };
        if (!vis[0] && !vis[1]) { /* masked for every row (a hole): weight 0, V rows never read */
            for (int64_t r = 0; r < t->rows; r++)
                for (int b = 0; b < nb; b++)
                    _mm512_storeu_ps(t->s + r * t->n16 + j0 + 16 * b, ninf);
            continue;
        }
        for (int b = 0; b < nb; b++)
            pack_k_block(t, j0 + 16 * b, b);
        for (int64_t r0 = 0; r0 < t->rows; r0 += SCORE_ROWS)
            score_rows_any(t, r0, t->rows - r0 < SCORE_ROWS ? (int)(t->rows - r0) : SCORE_ROWS, nb, j0);
    }
}

/* ---- pass 3: Σ w·v ----------------------------------------------------------------------- */

/* The cells some row weights, in order; returns their count. Only their V rows are read: the
 * others are masked (or underflowed) and may hold anything, NaN included. */
static AVX512 int64_t live_cells(const struct tile *t)
{
    int64_t n = 0;
    for (int64_t j0 = t->lo; j0 < t->hi; j0 += 16) {
        __mmask16 nz = 0;
        for (int64_t r = 0; r < t->rows; r++)
            nz |= _mm512_cmp_ps_mask(_mm512_loadu_ps(t->s + r * t->n16 + j0), _mm512_setzero_ps(), _CMP_NEQ_UQ);
        for (unsigned bits = nz; bits; bits &= bits - 1)
            t->live[n++] = (int32_t)(j0 + __builtin_ctz(bits));
    }
    return n;
}

/* vb[c] = the V row of live cell c0 + c as F32, c < n. */
static AVX512 void convert_v(const struct tile *t, int64_t c0, int64_t n)
{
    const bool f16 = t->v_f16;
    for (int64_t c = 0; c < n; c++) {
        const char *row = t->v + t->live[c0 + c] * t->v_st;
        float *d = t->vb + c * t->hd_v;
        if (t->v_deq) {
            t->v_deq(row, d, t->hd_v);
            continue;
        }
        for (int64_t i = 0; i < t->hd_v; i += 16)
            _mm512_storeu_ps(d + i, f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)))
                                        : _mm512_loadu_ps((const float *)row + i));
    }
}

/* acc[r][i..i+63] += Σ w[r][cell]·vb[cell][i..i+63] over the n converted cells from c0, rows
 * r0..r0+nr-1; nr is a constant after inlining (4·nr accumulators in registers). */
static inline FORCE_INLINE AVX512 void accum_rows(const struct tile *t, int64_t r0, int nr, int64_t i, int64_t c0,
                                                  int64_t n)
{
    __m512 a[ACC_ROWS][4];
#pragma GCC unroll 6
    for (int r = 0; r < nr; r++)
        for (int v = 0; v < 4; v++)
            a[r][v] = _mm512_loadu_ps(t->acc + (r0 + r) * t->hd_v + i + 16 * v);
    for (int64_t c = 0; c < n; c++) {
        const float *vr = t->vb + c * t->hd_v + i;
        const __m512 v0 = _mm512_loadu_ps(vr), v1 = _mm512_loadu_ps(vr + 16), v2 = _mm512_loadu_ps(vr + 32),
                     v3 = _mm512_loadu_ps(vr + 48);
        const int64_t j = t->live[c0 + c];
#pragma GCC unroll 6
        for (int r = 0; r < nr; r++) {
            const __m512 w = _mm512_set1_ps(t->s[(r0 + r) * t->n16 + j]);
            a[r][0] = _mm512_fmadd_ps(w, v0, a[r][0]);
            a[r][1] = _mm512_fmadd_ps(w, v1, a[r][1]);
            a[r][2] = _mm512_fmadd_ps(w, v2, a[r][2]);
            a[r][3] = _mm512_fmadd_ps(w, v3, a[r][3]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < nr; r++)
        for (int v = 0; v < 4; v++)
            _mm512_storeu_ps(t->acc + (r0 + r) * t->hd_v + i + 16 * v, a[r][v]);
}

static AVX512 void accum_rows_any(const struct tile *t, int64_t r0, int nr, int64_t i, int64_t c0, int64_t n)
{
    switch (nr) {
    case 1: accum_rows(t, r0, 1, i, c0, n); break;
    case 2: accum_rows(t, r0, 2, i, c0, n); break;
    case 3: accum_rows(t, r0, 3, i, c0, n); break;
    case 4: accum_rows(t, r0, 4, i, c0, n); break;
    case 5: accum_rows(t, r0, 5, i, c0, n); break;
    default: accum_rows(t, r0, ACC_ROWS, i, c0, n); break;
    }
}

static AVX512 void accumulate(const struct tile *t)
{
    memset(t->acc, 0, (size_t)(t->rows * t->hd_v) * sizeof(float));
    const int64_t n_live = live_cells(t);
    for (int64_t c0 = 0; c0 < n_live; c0 += TILE_V_CELLS) {
        const int64_t n = n_live - c0 < TILE_V_CELLS ? n_live - c0 : TILE_V_CELLS;
        convert_v(t, c0, n);
        for (int64_t i = 0; i < t->hd_v; i += 64)
            for (int64_t r0 = 0; r0 < t->rows; r0 += ACC_ROWS)
                accum_rows_any(t, r0, t->rows - r0 < ACC_ROWS ? (int)(t->rows - r0) : ACC_ROWS, i, c0, n);
    }
}

/* ---- the tile ------------------------------------------------------------------------------ */

void attn_tile_run(const struct attn_unit *u, int64_t nq, int64_t lo, int64_t hi, float *scratch)
{
    tile_run(u, nq, lo, hi, scratch, scores, accumulate);
}
