/* Internal to src/ops: what the GEMM kernels (llm_gemm_fn, types.h) of each instruction set share:
 * for the integer ones the blocking of weight rows for L2 and the walk over register tiles, for the
 * float ones (F16 / BF16 and the other types without an integer GEMM, against F32 activations) the
 * packing and blocking walk. */
#ifndef LLM_OPS_GEMM_H
#define LLM_OPS_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#define GEMM_MAX_RN 4
#define GEMM_ROW_ALIGN 32 /* weight rows per block are a multiple of this */

/* Weight rows per block of rows of k elements: a block (~256 KiB as int8) stays in L2 while every
 * activation row passes by it. */
int64_t gemm_block_rows(int64_t k);

/* out[i * rn + j] = dot(w[i], x[j]) for i < rm, j < rn, over nb blocks of 32; rm and rn are the
 * kernel's own, fixed. */
typedef void (*gemm_tile_fn)(int64_t nb, const void *const *w, const void *const *x, float *out);

/* The llm_gemm_fn contract (without scratch) with tiles of rm x rn (<= GEMM_MAX_RN): per block of
 * weight rows, activation rows in the outer loop, so a tile's rows stay in L1 while the block's
 * rows pass. Edge tiles repeat their last row and store only the real products. */
void llm_gemm_tiles(gemm_tile_fn tile, int rm, int rn, int64_t k, int64_t M, int64_t N, const void *w,
                    size_t wstride, const void *x, size_t xstride, float *dst, size_t ldd);

/* ---- float GEMM: gemm_f16_avx2.c, gemm_f16_avx512.c -------------------------------------------- */

#define FGEMM_MAX_NR 8
#define FGEMM_KC 512 /* k per block at most: nr activation rows x kc floats (16 KiB) stay in L1 */

/* Weight rows [0, rows) of a block (wstride bytes apart), elements k0 .. k0 + kc - 1, as floats in
 * panels of `lanes` rows: panel p is kc groups of lanes floats, out[(p * kc + k) * lanes + r] =
 * w[p * lanes + r][k0 + k]; rows past `rows` repeat the last one. */
typedef void (*fgemm_pack_fn)(enum llm_type t, int64_t k0, int64_t kc, int64_t rows, const char *w,
                              size_t wstride, float *out);

/* dst[n * ldd + m] (n < nn, m < live <= nv * lanes, nv <= the kernel's rv) = Σ over kc of
 * panels[m][k] · x[n][k], started from zero when first, else from dst; x holds nr row pointers (those
 * past nn repeat a live one). Every product takes the same operations whatever its place in the tile. */
typedef void (*fgemm_tile_fn)(int64_t kc, int nv, const float *panels, const float *const *x, float *dst,
                              size_t ldd, int nn, int live, bool first);

/* A register tile of rv panels of lanes weight rows by nr (<= FGEMM_MAX_NR) activation rows. */
struct fgemm_kernel {
    int lanes, rv, nr;
    fgemm_pack_fn pack;
    fgemm_tile_fn tile;
};

/* The llm_gemm_fn contract with F32 activation rows: k in blocks (the same for any M and N, so the
 * order of every sum depends on k and the weight type alone), weight rows in blocks packed into
 * scratch for L2, the activation rows nr at a time against every panel of a block. */
void llm_fgemm(const struct fgemm_kernel *kern, enum llm_type t, int64_t k, int64_t M, int64_t N, const void *w,
               size_t wstride, const float *x, size_t xstride, float *dst, size_t ldd, void *scratch);

#endif
