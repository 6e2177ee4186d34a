/* Weights repacked at load for decode: a matrix of Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K rows in groups of
 * LLM_REPACK_ROWS rows, each group one contiguous run that a matrix-vector product streams front
 * to back.
 *
 * Layout of a group (rows 4g .. 4g+3 of K elements, nb blocks a row), chunk after chunk of blocks
 * (Q5_0 / Q8_0: up to 8 blocks, the last chunk holds what remains; Q4_0, Q4_K, Q6_K: one block):
 * first the chunk's scales row by row (row r's scale bytes of the chunk's blocks side by side, so
 * one load converts a row's 8 fp16 scales), then its quants block by block, the four rows' quants
 * of a block one after the other, in pieces: Q4_0 stores a row's 16 quant bytes as two pieces of 8,
 * the four rows' first pieces, then their second ones (one 256-bit load holds bytes 0..7 of all
 * four rows, the lanes its kernel sums in); the other types keep a row's quants as one piece. A
 * block's scales are its fp16 d (Q4_0, Q5_0, Q8_0), its d, dmin and 12 scale bytes (Q4_K) or its
 * 16 scales and d (Q6_K); its quants are its other bytes in the order the file stores them (Q5_0:
 * qh then qs; Q6_K: ql then qh).
 * A group takes the bytes of its four rows in the file; the last group of a matrix whose row count
 * is not a multiple of 4 is padded with rows of zeros (scale 0: they add nothing).
 *
 * A repacked tensor keeps its type, ne and nominal nb and carries LLM_TENSOR_REPACKED: readers that
 * want the file's rows (the GEMMs of prefill, GET_ROWS, device uploads) take them through
 * llm_repack_unpack / llm_repack_row_to_float. */
#ifndef LLM_OPS_REPACK_H
#define LLM_OPS_REPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* Blocks per chunk of Q5_0 / Q8_0: one load converts a row's 8 scales. */
#define LLM_REPACK_CHUNK 8
/* Bytes of a Q4_0 row's piece of a block's quants (half of them). */
#define LLM_REPACK_Q4_0_PIECE 8

/* Blocks per chunk of a repacked type t, and those of the chunk starting at block c of nb. */
static inline int64_t llm_repack_chunk(enum llm_type t)
{
    return t == LLM_TYPE_Q5_0 || t == LLM_TYPE_Q8_0 ? LLM_REPACK_CHUNK : 1;
}

static inline int64_t llm_repack_chunk_blocks(enum llm_type t, int64_t nb, int64_t c)
{
    return nb - c < llm_repack_chunk(t) ? nb - c : llm_repack_chunk(t);
}

/* Bytes of a row's piece of a block's q quant bytes in type t's groups: LLM_REPACK_Q4_0_PIECE, or
 * q (one piece). */
static inline size_t llm_repack_piece(enum llm_type t, size_t q)
{
    return t == LLM_TYPE_Q4_0 ? LLM_REPACK_Q4_0_PIECE : q;
}

/* Where block b (of nb a row) of row r < LLM_REPACK_ROWS sits in a group of a 32-element type t
 * (Q4_0, Q5_0, Q8_0, whose blocks start with their fp16 scale): the byte offsets of that scale and
 * of the first piece of the block's other bytes (its quants) from the group's start; piece i is
 * i * LLM_REPACK_ROWS * llm_repack_piece(t, q) bytes after the first (q: the block's quant bytes).
 * For kernels that read the groups in place, such as the integer GEMMs' packing, so a repacked
 * matrix is never unpacked. */
static inline size_t llm_repack_scale_offset(enum llm_type t, int64_t nb, int r, int64_t b)
{
    const size_t bs = llm_type_info(t)->type_size;
    const int64_t c = b / llm_repack_chunk(t) * llm_repack_chunk(t), nbc = llm_repack_chunk_blocks(t, nb, c);
    return (size_t)c * LLM_REPACK_ROWS * bs + (size_t)(r * nbc + b - c) * sizeof(uint16_t);
}

static inline size_t llm_repack_quants_offset(enum llm_type t, int64_t nb, int r, int64_t b)
{
    const size_t bs = llm_type_info(t)->type_size;
    const int64_t c = b / llm_repack_chunk(t) * llm_repack_chunk(t), nbc = llm_repack_chunk_blocks(t, nb, c);
    const size_t q = bs - sizeof(uint16_t);
    return (size_t)c * LLM_REPACK_ROWS * bs + (size_t)(LLM_REPACK_ROWS * nbc) * sizeof(uint16_t) +
           (size_t)((b - c) * LLM_REPACK_ROWS) * q + (size_t)r * llm_repack_piece(t, q);
}

/* The fast kernel of repacked rows of type t on this CPU (its traits' vec_dot_packed), or NULL:
 * then t is not repacked here. */
llm_vec_dot_packed_fn llm_repack_kernel(enum llm_type t);

/* The oracle of the fast kernels: each row unpacked and dotted with the type's vec_dot_ref. */
void llm_vec_dot_packed_ref(enum llm_type t, int64_t n, int64_t groups, float *s, const void *w, const void *x);

/* Can a type-t matrix be repacked (a type with a layout here; K a multiple of its block size)? */
bool llm_repack_type_ok(enum llm_type t);

/* Bytes of one group of rows of K elements, and of a whole repacked matrix of M rows. */
size_t llm_repack_group_size(enum llm_type t, int64_t K);
size_t llm_repack_size(enum llm_type t, int64_t K, int64_t M);

/* Repack rows [4 * g0, min(4 * g1, M)) of a matrix of M rows (file rows `stride` bytes apart from
 * src, row 0 first) into groups g0 .. g1-1 of dst (the whole repacked matrix). */
void llm_repack_groups(enum llm_type t, int64_t K, int64_t M, const void *src, size_t stride, int64_t g0,
                       int64_t g1, void *dst);

/* Rows [m0, m1) of the repacked matrix w, as the file stores them, into dst (rows stride bytes apart). */
void llm_repack_unpack(enum llm_type t, int64_t K, const void *w, int64_t m0, int64_t m1, void *dst, size_t stride);

/* Row m of the repacked matrix w dequantized (the floats to_float_fast gives the file's row). */
void llm_repack_row_to_float(enum llm_type t, int64_t K, const void *w, int64_t m, float *dst);

#endif
