/* FLASH_ATTN's prefill path on AVX2: attention_tile.c's tile (query rows × the heads of one GQA
 * group share every converted K and V block) with 16 ymm registers instead of 32 zmm. A step of 16
 * cells is two blocks of 8 K rows, each transposed, so a score vector is hd broadcast FMAs (8 cells
 * each), 3 rows at a time, summed in the row path's order (score_rows); the output 6 rows × 16 dims
 * at a time (12 accumulators, 2 V vectors, 1 broadcast). Each row's sums run in an order fixed by
 * its cell positions alone (per score the row path's, live cells in order per output), so a row's
 * result does not depend on which rows share its tile or on the thread count, and with a quantized
 * V (converted, then summed cell by cell on both paths) it equals the row path's bit for bit. */
#include <math.h>
#include <string.h>

#include "attention_tile.h"
#include "ops/isa/simd.h"

#define FORCE_INLINE __attribute__((always_inline))

#define SCORE_ROWS 3 /* rows scored together: 6 accumulators of a lane's partial sums, K vectors shared */
#define ACC_ROWS 6   /* rows whose 16 output dims stay in registers (12 accumulators) */

/* ---- pass 1: scores ---------------------------------------------------------------------- */

/* kt[d·16 + 8·b + c] = element d of the K row of cell j0 + c (zeros past n_kv). */
static AVX2 void pack_k_block(const struct tile *t, int64_t j0, int b)
{
    const bool f16 = t->k_f16;
    int64_t st = t->k_st;
    const char *base = t->k + j0 * st;
    if (t->k_deq) { /* the block's rows as F32, then read as an F32 K */
        for (int64_t c = 0; c < 8 && j0 + c < t->n_kv; c++)
            t->k_deq(base + c * st, t->kq + c * t->hd, t->hd);
        base = (const char *)t->kq, st = t->hd * (int64_t)sizeof(float);
    }
    for (int64_t d0 = 0; d0 < t->hd; d0 += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const char *row = base + c * st;
            if (j0 + c >= t->n_kv)
                r[c] = _mm256_setzero_ps();
            else if (f16)
                r[c] = load_f16x8((const uint16_t *)row + d0);
            else
                r[c] = _mm256_loadu_ps((const float *)row + d0);
        }
        transpose8x8_ps(r);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            _mm256_storeu_ps(t->kt + (d0 + i) * 16 + 8 * b, r[i]);
    }
}

/* The mask of row r for cells j0..j0+7 (-inf past n_kv). */
static inline AVX2 __m256 mask8(const struct tile *t, int64_t r, int64_t j0)
{
    const char *mr = t->mrow[r];
    if (j0 + 8 <= t->n_kv) {
        if (!mr)
            return _mm256_setzero_ps();
        if (t->m->nb[0] == sizeof(float))
            return _mm256_loadu_ps((const float *)mr + j0);
    }
    float v[8];
    for (int c = 0; c < 8; c++)
        v[c] = j0 + c >= t->n_kv ? -INFINITY : mr ? *(const float *)(mr + (j0 + c) * (int64_t)t->m->nb[0]) : 0.0f;
    return _mm256_loadu_ps(v);
}

static inline AVX2 __m256 is_ninf(__m256 x)
{
    return _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
}

/* Scores of rows r0..r0+n-1 for the 16 packed cells at j0, summed in the order of the row path's
 * dot product (attention.c, dot8): lane l of dims l, l + 8, l + 16, ... in order, then
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); so a row's scores, and with them its weights,
 * are the same bits whether its query row was prefilled in a tile or decoded alone, and a
 * micro-batched prompt gives the logits of one batch. n is a constant after inlining. Masked cells
 * get -inf (a blend, not an add: the K row of a masked cell may hold anything, NaN included). */
static inline FORCE_INLINE AVX2 void score_rows(const struct tile *t, int64_t r0, int n, int64_t j0)
{
    __m256 p[8][SCORE_ROWS][2];
    const float *qr[SCORE_ROWS], *kt = t->kt;
    const int64_t hd = t->hd;
#pragma GCC unroll 3
    for (int i = 0; i < n; i++)
        qr[i] = t->qs + (r0 + i) * hd;
    for (int l = 0; l < 8; l++) {
        __m256 a[SCORE_ROWS][2];
#pragma GCC unroll 3
        for (int i = 0; i < n; i++)
            a[i][0] = a[i][1] = _mm256_setzero_ps();
        for (int64_t d = l; d < hd; d += 8) {
            const __m256 k0 = _mm256_loadu_ps(kt + d * 16), k1 = _mm256_loadu_ps(kt + d * 16 + 8);
#pragma GCC unroll 3
            for (int i = 0; i < n; i++) {
                const __m256 x = _mm256_broadcast_ss(qr[i] + d);
                a[i][0] = _mm256_fmadd_ps(x, k0, a[i][0]);
                a[i][1] = _mm256_fmadd_ps(x, k1, a[i][1]);
            }
        }
#pragma GCC unroll 3
        for (int i = 0; i < n; i++)
            p[l][i][0] = a[i][0], p[l][i][1] = a[i][1];
    }
#pragma GCC unroll 3
    for (int i = 0; i < n; i++)
#pragma GCC unroll 2
        for (int b = 0; b < 2; b++) {
            const __m256 lo = _mm256_add_ps(_mm256_add_ps(p[0][i][b], p[1][i][b]), _mm256_add_ps(p[2][i][b], p[3][i][b]));
            const __m256 hi = _mm256_add_ps(_mm256_add_ps(p[4][i][b], p[5][i][b]), _mm256_add_ps(p[6][i][b], p[7][i][b]));
            const __m256 mv = mask8(t, r0 + i, j0 + 8 * b);
            const __m256 sc = _mm256_blendv_ps(_mm256_add_ps(_mm256_add_ps(lo, hi), mv), _mm256_set1_ps(-INFINITY),
                                               is_ninf(mv));
            float *mx = t->mx + (r0 + i) * 16 + 8 * b;
            _mm256_storeu_ps(t->s + (r0 + i) * t->n16 + j0 + 8 * b, sc);
            _mm256_storeu_ps(mx, _mm256_max_ps(_mm256_loadu_ps(mx), sc));
        }
}

static AVX2 void score_rows_any(const struct tile *t, int64_t r0, int n, int64_t j0)
{
    switch (n) {
    case 1: score_rows(t, r0, 1, j0); break;
    case 2: score_rows(t, r0, 2, j0); break;
    default: score_rows(t, r0, SCORE_ROWS, j0); break;
    }
}

/* Does some row of the tile see a cell of the 16 at j0? */
static AVX2 bool step_visible(const struct tile *t, int64_t j0)
{
    for (int64_t r = 0; r < t->rows; r++)
        if (_mm256_movemask_ps(_mm256_and_ps(is_ninf(mask8(t, r, j0)), is_ninf(mask8(t, r, j0 + 8)))) != 0xff)
            return true;
    return false;
}

static AVX2 void scores(const struct tile *t)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int64_t r = 0; r < t->rows; r++) {
        _mm256_storeu_ps(t->mx + r * 16, ninf);
        _mm256_storeu_ps(t->mx + r * 16 + 8, ninf);
    }
    for (int64_t j0 = t->lo; j0 < t->hi; j0 += 16) {
        if (!step_visible(t, j0)) { /* masked for every row (a hole): weight 0, V rows never read */
            for (int64_t r = 0; r < t->rows; r++) {
                _mm256_storeu_ps(t->s + r * t->n16 + j0, ninf);
                _mm256_storeu_ps(t->s + r * t->n16 + j0 + 8, ninf);
            }
            continue;
        }
        pack_k_block(t, j0, 0);
        pack_k_block(t, j0 + 8, 1);
        for (int64_t r0 = 0; r0 < t->rows; r0 += SCORE_ROWS)
            score_rows_any(t, r0, t->rows - r0 < SCORE_ROWS ? (int)(t->rows - r0) : SCORE_ROWS, j0);
    }
}

/* ---- pass 3: Σ w·v ----------------------------------------------------------------------- */

/* The cells some row weights, in order; returns their count. Only their V rows are read: the
 * others are masked (or underflowed) and may hold anything, NaN included. */
static AVX2 int64_t live_cells(const struct tile *t)
{
    int64_t n = 0;
    for (int64_t j0 = t->lo; j0 < t->hi; j0 += 8) {
        __m256 nz = _mm256_setzero_ps();
        for (int64_t r = 0; r < t->rows; r++)
            nz = _mm256_or_ps(nz, _mm256_cmp_ps(_mm256_loadu_ps(t->s + r * t->n16 + j0), _mm256_setzero_ps(), _CMP_NEQ_UQ));
        for (unsigned bits = (unsigned)_mm256_movemask_ps(nz); bits; bits &= bits - 1)
            t->live[n++] = (int32_t)(j0 + __builtin_ctz(bits));
    }
    return n;
}

/* vb[c] = the V row of live cell c0 + c as F32, c < n. */
static AVX2 void convert_v(const struct tile *t, int64_t c0, int64_t n)
{
    const bool f16 = t->v_f16;
    for (int64_t c = 0; c < n; c++) {
        const char *row = t->v + t->live[c0 + c] * t->v_st;
        float *d = t->vb + c * t->hd_v;
        if (t->v_deq) {
            t->v_deq(row, d, t->hd_v);
            continue;
        }
        for (int64_t i = 0; i < t->hd_v; i += 8)
            _mm256_storeu_ps(d + i, f16 ? load_f16x8((const uint16_t *)row + i) : _mm256_loadu_ps((const float *)row + i));
    }
}

/* acc[r][i..i+15] += Σ w[r][cell]·vb[cell][i..i+15] over the n converted cells from c0, rows
 * r0..r0+nr-1; nr is a constant after inlining (2·nr accumulators in registers). */
static inline FORCE_INLINE AVX2 void accum_rows(const struct tile *t, int64_t r0, int nr, int64_t i, int64_t c0,
                                                int64_t n)
{
    __m256 a[ACC_ROWS][2];
    const float *wr[ACC_ROWS], *vb = t->vb + i;
    const int32_t *live = t->live + c0;
    const int64_t hd_v = t->hd_v;
#pragma GCC unroll 6
    for (int r = 0; r < nr; r++) {
        wr[r] = t->s + (r0 + r) * t->n16;
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++)
            a[r][v] = _mm256_loadu_ps(t->acc + (r0 + r) * hd_v + i + 8 * v);
    }
    for (int64_t c = 0; c < n; c++) {
        const float *vr = vb + c * hd_v;
        const __m256 v0 = _mm256_loadu_ps(vr), v1 = _mm256_loadu_ps(vr + 8);
        const int64_t j = live[c];
#pragma GCC unroll 6
        for (int r = 0; r < nr; r++) {
            const __m256 w = _mm256_broadcast_ss(wr[r] + j);
            a[r][0] = _mm256_fmadd_ps(w, v0, a[r][0]);
            a[r][1] = _mm256_fmadd_ps(w, v1, a[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++)
            _mm256_storeu_ps(t->acc + (r0 + r) * t->hd_v + i + 8 * v, a[r][v]);
}

static AVX2 void accum_rows_any(const struct tile *t, int64_t r0, int nr, int64_t i, int64_t c0, int64_t n)
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

static AVX2 void accumulate(const struct tile *t)
{
    memset(t->acc, 0, (size_t)(t->rows * t->hd_v) * sizeof(float));
    const int64_t n_live = live_cells(t);
    for (int64_t c0 = 0; c0 < n_live; c0 += TILE_V_CELLS) {
        const int64_t n = n_live - c0 < TILE_V_CELLS ? n_live - c0 : TILE_V_CELLS;
        convert_v(t, c0, n);
        for (int64_t i = 0; i < t->hd_v; i += 16)
            for (int64_t r0 = 0; r0 < t->rows; r0 += ACC_ROWS)
                accum_rows_any(t, r0, t->rows - r0 < ACC_ROWS ? (int)(t->rows - r0) : ACC_ROWS, i, c0, n);
    }
}

/* ---- the tile ------------------------------------------------------------------------------ */

void attn_tile_run_avx2(const struct attn_unit *u, int64_t nq, int64_t lo, int64_t hi, float *scratch)
{
    tile_run(u, nq, lo, hi, scratch, scores, accumulate);
}
