/* The repacked decode layout of Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K matrices (repack.h): packing,
 * unpacking and the oracle. */
#include "repack.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "types.h"

/* Where a block's scales sit in the file's block (its other bytes, before and after them, are its
 * quants). How many blocks a chunk holds is llm_repack_chunk's: Q8_0's fast kernel converts the
 * fp16 scales of 8 blocks of a row at once, Q4_0's and Q5_0's take a block of their four rows at a
 * time; a K-quant block of 256 elements is a chunk of its own. */
struct layout {
    enum llm_type type;
    size_t scale_off, scale_len;
};

static const struct layout layouts[] = {
    { LLM_TYPE_Q4_0, 0, sizeof(uint16_t) },
    { LLM_TYPE_Q5_0, 0, sizeof(uint16_t) },
    { LLM_TYPE_Q8_0, 0, sizeof(uint16_t) },
    { LLM_TYPE_Q4_K, 0, offsetof(struct block_q4_K, qs) },                                   /* d, dmin, scales */
    { LLM_TYPE_Q6_K, offsetof(struct block_q6_K, scales), sizeof(struct block_q6_K) - offsetof(struct block_q6_K, scales) },
};

#define MAX_CHUNK_BYTES (8 * sizeof(struct block_q8_0)) /* the largest chunk of any layout above */
_Static_assert(sizeof(struct block_q6_K) <= MAX_CHUNK_BYTES, "a Q6_K chunk fits the buffer");

static const struct layout *layout_of(enum llm_type t)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].type == t)
            return &layouts[i];
    return NULL;
}

bool llm_repack_type_ok(enum llm_type t)
{
    return layout_of(t) != NULL;
}

llm_vec_dot_packed_fn llm_repack_kernel(enum llm_type t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return tt ? tt->vec_dot_packed : NULL;
}

size_t llm_repack_x_size(enum llm_type t, int64_t n)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return tt && tt->pack_x ? (tt->pack_x(n, NULL, NULL) + 63) / 64 * 64 : 0;
}

const void *llm_repack_x(enum llm_type t, int64_t n, const void *x, void *out)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    if (!tt || !tt->pack_x)
        return x;
    tt->pack_x(n, x, out);
    return out;
}

size_t llm_repack_group_size(enum llm_type t, int64_t K)
{
    return LLM_REPACK_ROWS * llm_row_size(t, K);
}

size_t llm_repack_size(enum llm_type t, int64_t K, int64_t M)
{
    return (size_t)((M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS) * llm_repack_group_size(t, K);
}

/* memcpy of n bytes, with the sizes the layouts above copy as constants so that each becomes a few
 * moves in place of a library call: repacking at load copies every weight block by block. */
static inline void copy_bytes(char *dst, const char *src, size_t n)
{
    switch (n) {
#define COPY_CASE(k) case k: memcpy(dst, src, k); break;
        COPY_CASE(2) COPY_CASE(4) COPY_CASE(8) COPY_CASE(16) COPY_CASE(18) COPY_CASE(20) COPY_CASE(32) COPY_CASE(128) COPY_CASE(192)
#undef COPY_CASE
    default:
        memcpy(dst, src, n);
    }
}

/* Where row r's piece i of block k sits in a chunk's quants (repack.h). */
static inline size_t piece_at(enum llm_type t, size_t q, int64_t k, int r, int i)
{
    return (size_t)k * LLM_REPACK_ROWS * q + LLM_REPACK_ROWS * llm_repack_piece_start(t, i) +
           (size_t)r * llm_repack_piece_length(t, q, i);
}

/* Copies piece i of a block's quants between the file's order and the group's: Q5_0's qh piece
 * changes its bit order (llm_repack_q5_0_qh, its own inverse), the others are copied as they are. */
static inline void copy_piece(enum llm_type t, int i, char *dst, const char *src, size_t n)
{
    if (t == LLM_TYPE_Q5_0 && i == 0) {
        uint32_t qh;
        memcpy(&qh, src, sizeof qh);
        qh = llm_repack_q5_0_qh(qh);
        memcpy(dst, &qh, sizeof qh);
    } else
        copy_bytes(dst, src, n);
}

/* Block k's q quant bytes at blk of row r into a chunk's quants, piece by piece; and back. */
static inline void put_quants(const struct layout *L, size_t q, char *quants, int64_t k, int r, const char *blk)
{
    for (int i = 0; i < llm_repack_pieces(L->type); i++)
        copy_piece(L->type, i, quants + piece_at(L->type, q, k, r, i), blk + llm_repack_piece_start(L->type, i),
                   llm_repack_piece_length(L->type, q, i));
}

static inline void get_quants(const struct layout *L, size_t q, const char *quants, int64_t k, int r, char *blk)
{
    for (int i = 0; i < llm_repack_pieces(L->type); i++)
        copy_piece(L->type, i, blk + llm_repack_piece_start(L->type, i), quants + piece_at(L->type, q, k, r, i),
                   llm_repack_piece_length(L->type, q, i));
}

void llm_repack_groups(enum llm_type t, int64_t K, int64_t M, const void *src, size_t stride, int64_t g0,
                       int64_t g1, void *dst)
{
    const struct layout *L = layout_of(t);
    const size_t bs = llm_type_info(t)->type_size, sl = L->scale_len, q = bs - sl, so = L->scale_off;
    /* in every layout the scales are at one end of the block, so its quants are one run */
    const size_t qo = so == 0 ? sl : 0;
    _Static_assert(sizeof(struct block_q6_K) == offsetof(struct block_q6_K, scales) + 16 + 2, "Q6_K: scales, d last");
    const int64_t nb = K / llm_type_info(t)->blck_size;
    char *out = (char *)dst + (size_t)g0 * llm_repack_group_size(t, K);
    static const char zero[sizeof(struct block_q6_K)];
    for (int64_t g = g0; g < g1; g++)
        for (int64_t c = 0; c < nb; c += llm_repack_chunk(t)) {
            const int64_t nbc = llm_repack_chunk_blocks(t, nb, c);
            char *quants = out + (size_t)(LLM_REPACK_ROWS * nbc) * sl;
            for (int r = 0; r < LLM_REPACK_ROWS; r++) {
                const int64_t m = g * LLM_REPACK_ROWS + r;
                /* the rows past M of the last group are zero blocks: scale 0, they add nothing */
                const char *row = m < M ? (const char *)src + (size_t)m * stride + (size_t)c * bs : NULL;
                for (int64_t k = 0; k < nbc; k++) {
                    const char *blk = row ? row + (size_t)k * bs : zero;
                    copy_bytes(out + (size_t)(r * nbc + k) * sl, blk + so, sl);
                    put_quants(L, q, quants, k, r, blk + qo);
                }
            }
            out = quants + (size_t)(LLM_REPACK_ROWS * nbc) * q;
        }
}

/* Row r's nbc blocks of the chunk at in (a group's chunk of nbc blocks a row), as the file stores
 * them, into out: the inverse of llm_repack_groups' copies, with the sizes constants to copy_bytes,
 * since the GEMMs and the sgemm path of prefill unpack every weight they read. */
static void unpack_chunk(const struct layout *L, const char *in, int64_t nbc, int r, char *out)
{
    const size_t bs = llm_type_info(L->type)->type_size, sl = L->scale_len, q = bs - sl, so = L->scale_off;
    const size_t qo = so == 0 ? sl : 0; /* as in llm_repack_groups */
    const char *quants = in + (size_t)(LLM_REPACK_ROWS * nbc) * sl;
    for (int64_t k = 0; k < nbc; k++) {
        copy_bytes(out + (size_t)k * bs + so, in + (size_t)(r * nbc + k) * sl, sl);
        get_quants(L, q, quants, k, r, out + (size_t)k * bs + qo);
    }
}

void llm_repack_unpack(enum llm_type t, int64_t K, const void *w, int64_t m0, int64_t m1, void *dst, size_t stride)
{
    const struct layout *L = layout_of(t);
    const size_t bs = llm_type_info(t)->type_size;
    const int64_t nb = K / llm_type_info(t)->blck_size;
    for (int64_t g = m0 / LLM_REPACK_ROWS; g * LLM_REPACK_ROWS < m1; g++) {
        const char *in = (const char *)w + (size_t)g * llm_repack_group_size(t, K);
        for (int64_t c = 0; c < nb; c += llm_repack_chunk(t)) {
            const int64_t nbc = llm_repack_chunk_blocks(t, nb, c);
            for (int r = 0; r < LLM_REPACK_ROWS; r++) {
                const int64_t m = g * LLM_REPACK_ROWS + r;
                if (m >= m0 && m < m1)
                    unpack_chunk(L, in, nbc, r, (char *)dst + (size_t)(m - m0) * stride + (size_t)c * bs);
            }
            in += (size_t)(LLM_REPACK_ROWS * nbc) * bs;
        }
    }
}

void llm_repack_row_to_float(enum llm_type t, int64_t K, const void *w, int64_t m, float *dst)
{
    const struct layout *L = layout_of(t);
    const size_t bs = llm_type_info(t)->type_size;
    const int64_t bk = llm_type_info(t)->blck_size, nb = K / bk;
    const char *in = (const char *)w + (size_t)(m / LLM_REPACK_ROWS) * llm_repack_group_size(t, K);
    char blocks[MAX_CHUNK_BYTES];
    llm_to_float_fn to_float = llm_type_traits(t)->to_float_fast;
    for (int64_t c = 0; c < nb; c += llm_repack_chunk(t)) {
        const int64_t nbc = llm_repack_chunk_blocks(t, nb, c);
        unpack_chunk(L, in, nbc, (int)(m % LLM_REPACK_ROWS), blocks);
        to_float(blocks, dst + c * bk, nbc * bk);
        in += (size_t)(LLM_REPACK_ROWS * nbc) * bs;
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
