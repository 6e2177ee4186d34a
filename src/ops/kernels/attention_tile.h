/* What the prefill tiles share (attention_tile.c on AVX-512, attention_tile_avx2.c on AVX2): the
 * tile's state and scratch, set up and stored by plain C; only the three passes are per ISA. Both
 * walk cells in steps of 16 ([lo, hi) multiples of 16), so the scratch layout is one. Internal to
 * src/ops/kernels. */
#ifndef LLM_OPS_ATTENTION_TILE_H
#define LLM_OPS_ATTENTION_TILE_H

#include "attention_paths.h"

#define TILE_V_CELLS 32 /* live cells whose V rows are converted at a time (8 KiB per 64 dims) */

struct tile {
    const char *k, *v;           /* row 0 of the unit's KV head in K and V */
    int64_t k_st, v_st;          /* their row strides in bytes */
    bool k_f16, v_f16;
    llm_to_float_fn k_deq, v_deq; /* dequantizers of a quantized K and V, else NULL */
    bool k_quant;                 /* K is quantized: scratch for a dequantized block */
    const struct llm_tensor *m;
    int64_t rows, hd, hd_v, n_kv, n16, lo, hi; /* cells [lo, hi): multiples of 16 */
    const char *mrow[TILE_ROWS]; /* each row's mask row (NULL: no mask) */
    float *qs;   /* rows × hd: q·scale */
    float *s;    /* rows × n16: scores, then weights */
    float *mx;   /* rows × 16: lanes of each row's max score */
    float *inv;  /* rows: 1 / Σ weights, 0 when the row may attend to nothing */
    float *acc;  /* rows × hd_v: Σ w·v */
    float *kt;   /* hd × 32: a step of K cells, transposed */
    float *kq;   /* 16 × hd: K rows dequantized (a quantized K only) */
    float *vb;   /* TILE_V_CELLS × hd_v: V rows of live cells as F32 */
    int32_t *live;
};

/* An ISA's passes: scores (s and mx of every row over [lo, hi)), then, after the shared weights
 * pass (s to e^(s - max), inv), Σ w·v into acc. */
typedef void (*tile_pass_fn)(const struct tile *t);

/* attn_tile_run with the given passes: sets the tile up (q·scale, mask rows), runs them when some
 * cell is visible, and writes each row's acc·inv (zeros for rows that may attend to nothing). */
void tile_run(const struct attn_unit *u, int64_t nq, int64_t lo, int64_t hi, float *scratch, tile_pass_fn scores,
              tile_pass_fn accumulate);

#endif
