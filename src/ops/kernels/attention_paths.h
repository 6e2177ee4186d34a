/* What the attention paths share (attention.c, the head-dim-8 path attention_hd8.c and the prefill
 * tiles attention_tile.c): the unit of work, its row helpers and the paths' entry points. Internal to src/ops. */
#ifndef LLM_OPS_ATTENTION_PATHS_H
#define LLM_OPS_ATTENTION_PATHS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "ops/isa/simd.h"
#include "ops/types/types.h"

/* Query row iq, heads [h0, h0 + nh) of KV head hk, with this thread's scratch. */
struct attn_unit {
    const struct llm_tensor *dst, *q, *k, *v, *m;
    int64_t iq, hk, h0, nh;
    int64_t hd, hd8, hd_v, n_kv, n_kv8, n_kv16;
    float *qs;       /* nh rows of hd8: q·scale, zero-padded */
    float *s;        /* nh rows of n_kv8 (n_kv16 on the head-dim-8 path): scores, then weights */
    float *mx;       /* nh × 8: lanes of each head's running max score */
    float *inv;      /* nh: 1 / Σ weights (0 when the head may attend to nothing) */
    float *acc;      /* nh rows of hd_v: Σ w·v */
    float *kb;       /* 8 rows of hd8: K rows as F32, zero-padded to hd8 (when hd is not or K is converted) */
    float *vq;       /* ATTN_V_CELLS rows of hd_v: converted V rows (a quantized or BF16 V only) */
    llm_to_float_fn k_deq, v_deq; /* converters of a quantized or BF16 K and V, else NULL */
    float *zero;     /* hd8 zeros: stands in for rows past n_kv */
    int32_t *live;   /* n_kv8: the cells pass 3 reads (AVX2 path) */
    int64_t lo, hi;  /* cells [lo, hi) hold every cell some head may attend to */
    int64_t r_iq;    /* query row whose visible range [r_lo, r_hi) is known (-1: none yet) */
    int64_t r_lo, r_hi;
};

/* Live cells whose V rows a quantized V has dequantized at a time: rows of a few KiB, in L1. */
#define ATTN_V_CELLS 16

static inline int64_t round16(int64_t n)
{
    return (n + 15) & ~(int64_t)15;
}

/* out[0..hd) = row (iq, head) of q times scale, then zeros up to pad. */
static inline void load_q_row(const struct llm_tensor *q, int64_t iq, int64_t head, float scale, int64_t hd,
                              int64_t pad, float *out)
{
    const char *qr = tensor_at(q, 0, iq, head, 0);
    for (int64_t i = 0; i < hd; i++)
        out[i] = *(const float *)(qr + i * (int64_t)q->nb[0]) * scale;
    for (int64_t i = hd; i < pad; i++)
        out[i] = 0.0f;
}

/* dst row (head, iq) = acc[0..hd_v) · inv. */
static inline void store_out_row(const struct llm_tensor *dst, int64_t head, int64_t iq, const float *acc, float inv)
{
    char *z = tensor_at(dst, 0, head, iq, 0);
    for (int64_t i = 0; i < dst->ne[0]; i++)
        *(float *)(z + i * (int64_t)dst->nb[0]) = acc[i] * inv;
}

/* The mask row of the unit's head g (NULL without a mask). */
static inline const char *mask_row(const struct attn_unit *u, int64_t g)
{
    const struct llm_tensor *m = u->m;
    return m ? tensor_at(m, 0, u->iq, m->ne[2] == 1 ? 0 : (u->h0 + g) % m->ne[2], 0) : NULL; /* no division */
}

/* Mask of cells j0..j0+7 of mask row mr of m (NULL: no mask), -inf past n_kv. */
static inline AVX2 __m256 attn_mask8(const struct llm_tensor *m, const char *mr, int64_t j0, int64_t n_kv)
{
    if (j0 + 8 <= n_kv) {
        if (!mr)
            return _mm256_setzero_ps();
        if (m->nb[0] == sizeof(float))
            return _mm256_loadu_ps((const float *)mr + j0);
    }
    float t[8];
    for (int c = 0; c < 8; c++)
        t[c] = j0 + c >= n_kv ? -INFINITY : mr ? *(const float *)(mr + (j0 + c) * (int64_t)m->nb[0]) : 0.0f;
    return _mm256_loadu_ps(t);
}

/* One head of a batch on the head-dim-8 path. */
struct hd8_head {
    const char *q;   /* its q row */
    const char *k;   /* row 0 of its KV head in K and V */
    const char *v;
    char *out;       /* its dst row */
};

/* The rows of a block of `block` cells at r (byte stride st, row bytes each) of which only the
 * first `rows` precede the end of the view, copied into buf followed by zero rows: the last block
 * of a window may not read past the view. Returns buf. Out of line: once per window at most. */
const char *attn_tail_rows(const char *r, int64_t st, size_t row, int64_t rows, int block, char *buf);

/* A head's 8 results o into its dst row out (element stride ost bytes). */
static inline AVX2 void attn_store_hd8(char *out, int64_t ost, __m256 o)
{
    if (ost == sizeof(float)) {
        _mm256_storeu_ps((float *)out, o);
        return;
    }
    float r[8];
    _mm256_storeu_ps(r, o);
    for (int i = 0; i < 8; i++)
        *(float *)(out + i * ost) = r[i];
}

/* The kernels of one instruction set for the head-dim-8 path: a batch of 4 heads of one KV head,
 * of two, and one head alone (attention_hd8.c: AVX-512, 16 cells per block; attention_hd8_avx2.c:
 * AVX2, 8). */
typedef void (*hd8_heads_fn)(const struct attn_unit *u, const struct hd8_head *h);
struct hd8_kernels {
    hd8_heads_fn heads_4x4, heads_4x2, heads_1;
};
extern const struct hd8_kernels attn_hd8_avx512, attn_hd8_avx2;

/* The head-dim-8 path (hd 8, hd_v 8, one mask row shared by the heads or none): adds the unit's
 * heads (visible range already set) to the batch hs (room for 4, *np pending), running batches on
 * kernels k as they fill; heads of one query row only: flush with attn_hd8_flush before the next. */
void attn_hd8_add(struct attn_unit *u, const struct hd8_kernels *k, struct hd8_head *hs, int *np);
void attn_hd8_flush(const struct attn_unit *u, const struct hd8_kernels *k, struct hd8_head *hs, int *np);

/* The prefill path (attention_tile.c on AVX-512, attention_tile_avx2.c on AVX2; K and V rows with
 * unit stride): query rows in tiles of attn_tile_queries(group) (fixed for a shape, whatever the
 * thread count or ISA), each tile with up to TILE_ROWS rows of one query row and one head. */
#define TILE_ROWS 32

/* Whether the shape suits the AVX-512 tile (avx512) or the AVX2 one: more than one query row, GQA
 * groups of at most TILE_ROWS heads, hd a multiple of 16 and hd_v of 64 (AVX-512) or hd of 8 and
 * hd_v of 16 (AVX2; every shape the AVX-512 tile takes). K and V may be quantized: their blocks are
 * dequantized as they are read. */
bool attn_tile_fits(const struct llm_tensor *q, const struct llm_tensor *k, const struct llm_tensor *v, bool avx512);
int64_t attn_tile_queries(int64_t group);
int64_t attn_tile_scratch_floats(int64_t hd, int64_t hd_v, int64_t n_kv, bool k_quant);

/* Query rows [u->iq, u->iq + nq), heads [u->h0, u->h0 + u->nh) of KV head u->hk, over cells
 * [lo, hi) (the union of the rows' visible ranges, every head's mask included; empty when lo >=
 * hi), with scratch of attn_tile_scratch_floats floats (64-byte aligned). The two ISAs' sums run
 * in different orders: their results agree to rounding, not bit for bit. */
void attn_tile_run(const struct attn_unit *u, int64_t nq, int64_t lo, int64_t hi, float *scratch);
void attn_tile_run_avx2(const struct attn_unit *u, int64_t nq, int64_t lo, int64_t hi, float *scratch);

#endif
