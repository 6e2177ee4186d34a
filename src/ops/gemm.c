/* Blocking and tile walk shared by the integer GEMM kernels (gemm.h), and their scratch size. */
#include "gemm.h"

#include "blocks.h"
#include "types.h"

#define BLOCK_BYTES (256 << 10)
#define REPACK_BLOCK_BYTES (16 * 4 + 16 * QK) /* 16 rows' scales and quants of one block (gemm_avx512.c) */

int64_t gemm_block_rows(int64_t k)
{
    int64_t rows = BLOCK_BYTES / k / GEMM_ROW_ALIGN * GEMM_ROW_ALIGN;
    return rows < GEMM_ROW_ALIGN ? GEMM_ROW_ALIGN : rows;
}

/* One block of weight rows repacked 16 rows at a time, and the sums of each activation block. */
size_t llm_gemm_scratch_size(int64_t k, int64_t N)
{
    size_t nb = (size_t)(k / QK);
    return 64 + (size_t)gemm_block_rows(k) / 16 * nb * REPACK_BLOCK_BYTES + (size_t)N * nb * sizeof(int32_t);
}

void llm_gemm_tiles(gemm_tile_fn tile, int rm, int rn, int64_t k, int64_t M, int64_t N, const void *w,
                    size_t wstride, const void *x, size_t xstride, float *dst, size_t ldd)
{
    const int64_t block = gemm_block_rows(k);
    const char *xb = x;
    for (int64_t b0 = 0; b0 < M; b0 += block) {
        const char *wb = (const char *)w + (size_t)b0 * wstride;
        int64_t rows = M - b0 < block ? M - b0 : block;
        for (int64_t n0 = 0; n0 < N; n0 += rn) {
            const void *xr[GEMM_MAX_RN];
            int nn = N - n0 < rn ? (int)(N - n0) : rn;
            for (int j = 0; j < rn; j++)
                xr[j] = xb + (size_t)(n0 + (j < nn ? j : nn - 1)) * xstride;
            for (int64_t m0 = 0; m0 < rows; m0 += rm) {
                const void *wr[GEMM_MAX_RN];
                float out[GEMM_MAX_RN * GEMM_MAX_RN];
                int mm = rows - m0 < rm ? (int)(rows - m0) : rm;
                for (int i = 0; i < rm; i++)
                    wr[i] = wb + (size_t)(m0 + (i < mm ? i : mm - 1)) * wstride;
                tile(k / QK, wr, xr, out);
                for (int j = 0; j < nn; j++)
                    for (int i = 0; i < mm; i++)
                        dst[(size_t)(n0 + j) * ldd + (size_t)(b0 + m0 + i)] = out[i * rn + j];
            }
        }
    }
}
