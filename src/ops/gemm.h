/* Internal to src/ops: what the integer GEMM kernels (llm_gemm_fn, types.h) of each instruction
 * set share: the blocking of weight rows for L2, and the walk over register tiles. */
#ifndef LLM_OPS_GEMM_H
#define LLM_OPS_GEMM_H

#include <stddef.h>
#include <stdint.h>

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

#endif
