/* Weights repacked at load for decode: a matrix of Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K rows in groups of
 * LLM_REPACK_ROWS rows, each group one contiguous run that a matrix-vector product streams front
 * to back.
 *
 * Layout of a group (rows 4g .. 4g+3 of K elements, nb blocks a row), chunk after chunk of blocks
 * (Q8_0: up to 8 blocks, the last chunk holds what remains; Q4_0, Q5_0, Q4_K, Q6_K: one block):
 * first the chunk's scales row by row (row r's scale bytes of the chunk's blocks side by side, so
 * one load converts a row's 8 fp16 scales), then its quants block by block, the four rows' quants
 * of a block in pieces: the four rows' first pieces side by side, then their second ones, and so
 * on. Q4_0 cuts a row's 16 quant bytes into two pieces of 8 (one 256-bit load holds bytes 0..7 of
 * all four rows, the lanes its kernel sums in); Q5_0 has its 4 bytes of fifth bits (qh, their bits
 * reordered by llm_repack_q5_0_qh) as a first piece, then its 16 nibble bytes as Q4_0's two; the other types keep a row's quants as one piece.
 * A block's scales are its fp16 d (Q4_0, Q5_0, Q8_0), its d, dmin and 12 scale bytes (Q4_K) or its
 * 16 scales and d (Q6_K); its quants are its other bytes in the order the file stores them (Q5_0:
 * qh then qs; Q6_K: ql then qh), which the pieces take in turn.
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

#include "blocks.h"
#include "types.h"

/* Blocks per chunk of Q8_0: one load converts a row's 8 scales. */
#define LLM_REPACK_CHUNK 8
/* Bytes of a row's piece of a block's nibbles in Q4_0 and Q5_0 (half of its 16). */
#define LLM_REPACK_NIBBLE_PIECE 8

/* Blocks per chunk of a repacked type t, and those of the chunk starting at block c of nb. */
static inline int64_t llm_repack_chunk(enum llm_type t)
{
    return t == LLM_TYPE_Q8_0 ? LLM_REPACK_CHUNK : 1;
}

static inline int64_t llm_repack_chunk_blocks(enum llm_type t, int64_t nb, int64_t c)
{
    return nb - c < llm_repack_chunk(t) ? nb - c : llm_repack_chunk(t);
}

/* The pieces of a row's q quant bytes of a block in type t's groups: how many, and piece i's first
 * quant byte and its length. Piece i of row r sits LLM_REPACK_ROWS * start + r * length bytes into
 * the block's quants. */
static inline int llm_repack_pieces(enum llm_type t)
{
    return t == LLM_TYPE_Q5_0 ? 3 : t == LLM_TYPE_Q4_0 ? 2 : 1;
}

static inline size_t llm_repack_piece_start(enum llm_type t, int i)
{
    if (t == LLM_TYPE_Q5_0) /* qh, then the nibbles as Q4_0's */
        return i == 0 ? 0 : 4 + (size_t)(i - 1) * LLM_REPACK_NIBBLE_PIECE;
    return t == LLM_TYPE_Q4_0 ? (size_t)i * LLM_REPACK_NIBBLE_PIECE : 0;
}

static inline size_t llm_repack_piece_length(enum llm_type t, size_t q, int i)
{
    if (t == LLM_TYPE_Q5_0)
        return i == 0 ? 4 : LLM_REPACK_NIBBLE_PIECE;
    return t == LLM_TYPE_Q4_0 ? LLM_REPACK_NIBBLE_PIECE : q;
}

/* A Q5_0 block's qh (bit e: the fifth bit of element e) in the bit order of its repacked piece,
 * and back (the same swap): byte m holds the bits of elements 8k + m at bit k and 8k + m + 4 at
 * bit 4 + k (k = 0..3), so the decode kernel spreads the four rows' qh with one shuffle. Bit
 * 8k + 4h + m moves to 8m + 4h + k: two swaps of the bit index's bits (0 with 3, 1 with 4). */
static inline uint32_t llm_repack_q5_0_qh(uint32_t qh)
{
    uint32_t t = ((qh >> 7) ^ qh) & 0x00aa00aau; /* index bits 0 <-> 3: positions 7 apart */
    qh ^= t ^ (t << 7);
    t = ((qh >> 14) ^ qh) & 0x0000ccccu; /* index bits 1 <-> 4: 14 apart */
    return qh ^ t ^ (t << 14);
}

/* Where block b (of nb a row) of row r < LLM_REPACK_ROWS sits in a group of a 32-element type t
 * (Q4_0, Q5_0, Q8_0, whose blocks start with their fp16 scale): the byte offsets of that scale and
 * of piece i of the block's other bytes (its quants) from the group's start. For kernels that read
 * the groups in place, such as the integer GEMMs' packing, so a repacked matrix is never unpacked. */
/* Their block sizes: inline, so that a kernel's calls with a constant type fold to a few adds and
 * shifts (through llm_type_info, a call each, they had cost a small batch's GEMM a third of its
 * time: bench/results/gemm_int8.md). */
static inline size_t llm_repack_block_bytes(enum llm_type t)
{
    return t == LLM_TYPE_Q8_0 ? sizeof(struct block_q8_0)
           : t == LLM_TYPE_Q5_0 ? sizeof(struct block_q5_0)
                                : sizeof(struct block_q4_0);
}

static inline size_t llm_repack_scale_offset(enum llm_type t, int64_t nb, int r, int64_t b)
{
    const size_t bs = llm_repack_block_bytes(t);
    const int64_t c = b / llm_repack_chunk(t) * llm_repack_chunk(t), nbc = llm_repack_chunk_blocks(t, nb, c);
    return (size_t)c * LLM_REPACK_ROWS * bs + (size_t)(r * nbc + b - c) * sizeof(uint16_t);
}

static inline size_t llm_repack_piece_offset(enum llm_type t, int64_t nb, int r, int64_t b, int i)
{
    const size_t bs = llm_repack_block_bytes(t);
    const int64_t c = b / llm_repack_chunk(t) * llm_repack_chunk(t), nbc = llm_repack_chunk_blocks(t, nb, c);
    const size_t q = bs - sizeof(uint16_t);
    return (size_t)c * LLM_REPACK_ROWS * bs + (size_t)(LLM_REPACK_ROWS * nbc) * sizeof(uint16_t) +
           (size_t)((b - c) * LLM_REPACK_ROWS) * q + LLM_REPACK_ROWS * llm_repack_piece_start(t, i) +
           (size_t)r * llm_repack_piece_length(t, q, i);
}

/* The fast kernel of repacked rows of type t on this CPU (its traits' vec_dot_packed), or NULL:
 * then t is not repacked here. */
llm_vec_dot_packed_fn llm_repack_kernel(enum llm_type t);

/* The activation row a type-t packed kernel reads, made from x, a row of n elements of t's
 * vec_dot_type: x itself, or the form of it the kernel takes (types.h, pack_x) written to out,
 * which holds llm_repack_x_size(t, n) bytes from a 64-byte boundary. That size is 0 when x serves
 * as it is, else a multiple of 64, so forms of rows placed one after another each start on a line.
 * Made once per activation row, and read by the kernel for every group of rows. */
size_t llm_repack_x_size(enum llm_type t, int64_t n);
const void *llm_repack_x(enum llm_type t, int64_t n, const void *x, void *out);

/* The oracle of the fast kernels: each row unpacked and dotted with the type's vec_dot_ref (x the
 * vec_dot_type row, not the kernel's form of it). */
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
