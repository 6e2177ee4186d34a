/* The repacked decode layout of Q4_0 / Q5_0 / Q8_0 matrices (repack.h): packing, unpacking and the oracle. */
#include "repack.h"

#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "types.h"

#define CHUNK_BLOCKS 8 /* blocks per chunk: the fast kernels convert 8 scales of a row at once */
#define SCALE_BYTES 2  /* the fp16 d that starts a Q4_0 / Q5_0 / Q8_0 block */

bool llm_repack_type_ok(enum llm_type t)
{
    return t == LLM_TYPE_Q4_0 || t == LLM_TYPE_Q5_0 || t == LLM_TYPE_Q8_0;
}

llm_vec_dot_packed_fn llm_repack_kernel(enum llm_type t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return tt ? tt->vec_dot_packed : NULL;
}

static size_t quant_bytes(enum llm_type t)
{
    return llm_type_info(t)->type_size - SCALE_BYTES;
}

size_t llm_repack_group_size(enum llm_type t, int64_t K)
{
    return LLM_REPACK_ROWS * llm_row_size(t, K);
}

size_t llm_repack_size(enum llm_type t, int64_t K, int64_t M)
{
    return (size_t)((M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS) * llm_repack_group_size(t, K);
}

/* Offsets within its group of block b's scale and quants of row r. */
static void block_place(enum llm_type t, int64_t K, int64_t b, int r, size_t *scale, size_t *quants)
{
    const size_t q = quant_bytes(t);
    const int64_t nb = K / QK, c = b / CHUNK_BLOCKS * CHUNK_BLOCKS, k = b - c;
    const int64_t nbc = nb - c < CHUNK_BLOCKS ? nb - c : CHUNK_BLOCKS;
    const size_t base = (size_t)c * LLM_REPACK_ROWS * (SCALE_BYTES + q);
    *scale = base + (size_t)(r * nbc + k) * SCALE_BYTES;
    *quants = base + (size_t)(LLM_REPACK_ROWS * nbc) * SCALE_BYTES + (size_t)(k * LLM_REPACK_ROWS + r) * q;
}

void llm_repack_groups(enum llm_type t, int64_t K, int64_t M, const void *src, size_t stride, int64_t g0,
                       int64_t g1, void *dst)
{
    const size_t bs = llm_type_info(t)->type_size, q = bs - SCALE_BYTES;
    const int64_t nb = K / QK;
    char *out = (char *)dst + (size_t)g0 * llm_repack_group_size(t, K);
    for (int64_t g = g0; g < g1; g++) {
        const char *rows[LLM_REPACK_ROWS];
        for (int r = 0; r < LLM_REPACK_ROWS; r++) {
            const int64_t m = g * LLM_REPACK_ROWS + r;
            rows[r] = m < M ? (const char *)src + (size_t)m * stride : NULL;
        }
        for (int64_t c = 0; c < nb; c += CHUNK_BLOCKS) {
            const int64_t nbc = nb - c < CHUNK_BLOCKS ? nb - c : CHUNK_BLOCKS;
            char *quants = out + (size_t)(LLM_REPACK_ROWS * nbc) * SCALE_BYTES;
            for (int r = 0; r < LLM_REPACK_ROWS; r++)
                for (int64_t k = 0; k < nbc; k++) {
                    const char *blk = rows[r] ? rows[r] + (size_t)(c + k) * bs : NULL;
                    char *sd = out + (size_t)(r * nbc + k) * SCALE_BYTES, *qd = quants + (size_t)(k * LLM_REPACK_ROWS + r) * q;
                    if (blk) {
                        memcpy(sd, blk, SCALE_BYTES);
                        memcpy(qd, blk + SCALE_BYTES, q);
                    } else { /* the rows past M of the last group */
                        memset(sd, 0, SCALE_BYTES);
                        memset(qd, 0, q);
                    }
                }
            out = quants + (size_t)(LLM_REPACK_ROWS * nbc) * q;
        }
    }
}

/* Blocks [b0, b1) of row m of w, as the file stores them, into dst. */
static void unpack_blocks(enum llm_type t, int64_t K, const void *w, int64_t m, int64_t b0, int64_t b1, char *dst)
{
    const size_t bs = llm_type_info(t)->type_size;
    const char *group = (const char *)w + (size_t)(m / LLM_REPACK_ROWS) * llm_repack_group_size(t, K);
    for (int64_t b = b0; b < b1; b++) {
        size_t so, qo;
        block_place(t, K, b, (int)(m % LLM_REPACK_ROWS), &so, &qo);
        memcpy(dst + (size_t)(b - b0) * bs, group + so, SCALE_BYTES);
        memcpy(dst + (size_t)(b - b0) * bs + SCALE_BYTES, group + qo, bs - SCALE_BYTES);
    }
}

void llm_repack_unpack(enum llm_type t, int64_t K, const void *w, int64_t m0, int64_t m1, void *dst, size_t stride)
{
    for (int64_t m = m0; m < m1; m++)
        unpack_blocks(t, K, w, m, 0, K / QK, (char *)dst + (size_t)(m - m0) * stride);
}

void llm_repack_row_to_float(enum llm_type t, int64_t K, const void *w, int64_t m, float *dst)
{
    char blocks[CHUNK_BLOCKS * sizeof(struct block_q8_0)]; /* the largest block of a repacked type */
    llm_to_float_fn to_float = llm_type_traits(t)->to_float_fast;
    for (int64_t b0 = 0; b0 < K / QK; b0 += CHUNK_BLOCKS) {
        const int64_t b1 = b0 + CHUNK_BLOCKS < K / QK ? b0 + CHUNK_BLOCKS : K / QK;
        unpack_blocks(t, K, w, m, b0, b1, blocks);
        to_float(blocks, dst + b0 * QK, (b1 - b0) * QK);
    }
}

void llm_vec_dot_packed_ref(enum llm_type t, int64_t n, int64_t groups, float *s, const void *w, const void *x)
{
    char *row = malloc(llm_row_size(t, n));
    if (!row)
        abort(); /* a test oracle: nothing to return the error to */
    for (int64_t m = 0; m < groups * LLM_REPACK_ROWS; m++) {
        llm_repack_unpack(t, n, w, m, m + 1, row, 0);
        llm_type_traits(t)->vec_dot_ref(n, &s[m], row, x);
    }
    free(row);
}
