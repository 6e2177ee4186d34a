/* Blocking and tile walk shared by the integer GEMM kernels (gemm.h), and their scratch size. */
#include "gemm.h"

#include "ops/types/blocks.h"
#include "ops/types/types.h"

/* Weight rows per block: half the smallest L2 per core among the CPUs the project runs on (512 KiB),
 * so a block stays in L2 on each while every activation row passes by (bench/results/kernel_choices.md). */
#define BLOCK_BYTES (256 << 10)
#define REPACK_BLOCK_BYTES (16 * 4 + 16 * QK) /* 16 rows' scales and quants of one block (gemm_avx512.c) */

int64_t gemm_block_rows(int64_t k)
{
    int64_t rows = BLOCK_BYTES / k / GEMM_ROW_ALIGN * GEMM_ROW_ALIGN;
    return rows < GEMM_ROW_ALIGN ? GEMM_ROW_ALIGN : rows;
}

/* One block of weight rows repacked 16 rows at a time, and per activation block its sum and scale
 * (gemm_q4_0_avx2.c keeps both, 8 bytes; the AVX-512 kernel the sum). */
size_t llm_gemm_scratch_size(int64_t k, int64_t N)
{
    size_t nb = (size_t)(k / QK);
    return 64 + (size_t)gemm_block_rows(k) / 16 * nb * REPACK_BLOCK_BYTES + (size_t)N * nb * 2 * sizeof(int32_t);
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

/* ---- float GEMM ------------------------------------------------------------------------------ */

#define FGEMM_BLOCK_BYTES (256 << 10) /* packed weights of a block of rows, in L2: as BLOCK_BYTES */

/* k per block: k split evenly into blocks of at most FGEMM_KC, rounded up to whole quant blocks of
 * blck elements (FGEMM_KC is a multiple of every block size). */
static int64_t fgemm_kc(int64_t k, int64_t blck)
{
    int64_t blocks = k > FGEMM_KC ? (k + FGEMM_KC - 1) / FGEMM_KC : 1;
    return ((k + blocks - 1) / blocks + blck - 1) / blck * blck;
}

size_t llm_gemm_f32_scratch_size(int64_t k)
{
    (void)k; /* a block never exceeds FGEMM_BLOCK_BYTES: rv * lanes * FGEMM_KC floats is 96 KiB at most */
    return 64 + FGEMM_BLOCK_BYTES;
}

void llm_fgemm(const struct fgemm_kernel *kern, enum llm_type t, int64_t k, int64_t M, int64_t N, const void *w,
               size_t wstride, const float *x, size_t xstride, float *dst, size_t ldd, void *scratch)
{
    float *packed = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const int64_t kc_max = fgemm_kc(k, llm_type_info(t)->blck_size), tile_rows = (int64_t)kern->rv * kern->lanes;
    int64_t block = FGEMM_BLOCK_BYTES / (kc_max * (int64_t)sizeof(float)) / tile_rows * tile_rows;
    block = block < tile_rows ? tile_rows : block;
    for (int64_t b0 = 0; b0 < M; b0 += block) {
        const int64_t rows = M - b0 < block ? M - b0 : block, panels = (rows + kern->lanes - 1) / kern->lanes;
        for (int64_t k0 = 0; k0 == 0 || k0 < k; k0 += kc_max) { /* k = 0 stores zeros */
            const int64_t kc = k - k0 < kc_max ? k - k0 : kc_max;
            kern->pack(t, k0, kc, rows, (const char *)w + (size_t)b0 * wstride, wstride, packed);
            for (int64_t n0 = 0; n0 < N; n0 += kern->nr) {
                const float *xr[FGEMM_MAX_NR];
                const int nn = N - n0 < kern->nr ? (int)(N - n0) : kern->nr;
                for (int j = 0; j < kern->nr; j++)
                    xr[j] = (const float *)((const char *)x + (size_t)(n0 + (j < nn ? j : nn - 1)) * xstride) + k0;
                for (int64_t p = 0; p < panels; p += kern->rv) {
                    const int nv = panels - p < kern->rv ? (int)(panels - p) : kern->rv;
                    const int64_t live = rows - p * kern->lanes;
                    kern->tile(kc, nv, packed + (size_t)(p * kc * kern->lanes), xr,
                               dst + (size_t)n0 * ldd + (size_t)(b0 + p * kern->lanes), ldd, nn,
                               (int)(live < tile_rows ? live : tile_rows), k0 == 0);
                }
            }
        }
    }
}
