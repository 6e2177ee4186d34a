/* Core IR: element types and their geometry, tensors (ne/nb, op, sources, views) and the op enum.
 * A tensor is ne[4] elements per dimension (ne[0] contiguous) and nb[4] bytes per step, so a
 * kernel that honours nb runs unchanged on views, permutations and padded rows. */
#ifndef LLM_TENSOR_H
#define LLM_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Element types; the values are the ggml/GGUF type ids, so a GGUF type field maps directly. */
enum llm_type {
    LLM_TYPE_F32 = 0,
    LLM_TYPE_F16 = 1,
    LLM_TYPE_Q4_0 = 2,
    LLM_TYPE_Q4_1 = 3,
    LLM_TYPE_Q5_0 = 6,
    LLM_TYPE_Q5_1 = 7,
    LLM_TYPE_Q8_0 = 8,
    LLM_TYPE_Q8_1 = 9,
    LLM_TYPE_Q2_K = 10,
    LLM_TYPE_Q3_K = 11,
    LLM_TYPE_Q4_K = 12,
    LLM_TYPE_Q5_K = 13,
    LLM_TYPE_Q6_K = 14,
    LLM_TYPE_Q8_K = 15,
    LLM_TYPE_IQ2_XXS = 16,
    LLM_TYPE_IQ2_XS = 17,
    LLM_TYPE_IQ3_XXS = 18,
    LLM_TYPE_IQ1_S = 19,
    LLM_TYPE_IQ4_NL = 20,
    LLM_TYPE_IQ3_S = 21,
    LLM_TYPE_IQ2_S = 22,
    LLM_TYPE_IQ4_XS = 23,
    LLM_TYPE_I8 = 24,
    LLM_TYPE_I16 = 25,
    LLM_TYPE_I32 = 26,
    LLM_TYPE_I64 = 27,
    LLM_TYPE_F64 = 28,
    LLM_TYPE_IQ1_M = 29,
    LLM_TYPE_BF16 = 30,
    LLM_TYPE_TQ1_0 = 34,
    LLM_TYPE_TQ2_0 = 35,
    LLM_TYPE_MXFP4 = 39,
    LLM_TYPE_COUNT = 40, /* ids >= this (or retired ids) are unknown */
};

/* Geometry of an element type: one row per known id in src/type_info.c. Kernels (dequantize,
 * quantize, dot products) are src/ops's business: llm_type_traits() in ops/types.h. */
struct llm_type_info {
    const char *name;   /* "F32", "Q4_K", ... as llama.cpp prints it */
    int64_t blck_size;  /* elements per block (1 for plain types)     */
    size_t type_size;   /* bytes per block                            */
    bool is_quantized;
};

/* Geometry of type t, or NULL when t is not a known type id (retired or out of range). */
const struct llm_type_info *llm_type_info(int t);

/* Type from its name ("q8_0" or "Q8_0"); returns -1 when unknown. */
int llm_type_from_name(const char *name);

/* Name of type t ("Q8_0"), or "?" when t is not a known type id. */
const char *llm_type_name(enum llm_type t);

/* Bytes of a row of ne0 elements (ne0 must be a multiple of the block size). */
size_t llm_row_size(enum llm_type t, int64_t ne0);

#define LLM_MAX_DIMS 4
#define LLM_MAX_SRC 4
#define LLM_MAX_OP_PARAMS 16
#define LLM_MAX_NAME 64

/* Operations. Each has a row in the op table, src/ops/cpu/op_table.c (checked at compile time).
 * Shapes use ggml order [ne0, ne1, ne2, ne3]; dst is the node itself. Float op_params are stored
 * bitwise in the int32 slots (see llm_get_op_f32 / llm_set_op_f32). */
enum llm_op {
    LLM_OP_NONE = 0,   /* leaf: weight, input or preallocated buffer                               */
    LLM_OP_GET_ROWS,   /* src0 [ne0, rows] any type, src1 I32 ids [n] -> dst F32 [ne0, n]; ids may be
                          [n, b2, b3]: dst [ne0, n, b2, b3] row (i,j,k) = src0 row ids[i,j,k] of
                          src0 matrix (j,k) (broadcast over src0 dims 2/3)                          */
    LLM_OP_SET_ROWS,   /* src0 dst buffer [ne0, rows] (float or quantized), src1 F32 [ne0, n], src2 I32 row ids
                          [n]: row i of src1 -> row ids[i] of src0; dst is a view of src0            */
    LLM_OP_ADD,        /* src0 + src1, src1 broadcast (each src1 ne[i] divides src0 ne[i])           */
    LLM_OP_MUL,        /* src0 * src1, broadcast like ADD                                            */
    LLM_OP_SCALE,      /* src0 * p[0] (float)                                                        */
    LLM_OP_RMS_NORM,   /* row-wise src0 / sqrt(mean(src0^2) + p[0] eps (float))                     */
    LLM_OP_MUL_MAT,    /* src0 [K, M, a, b] (weights, any type), src1 [K, N, c, d] F32 -> dst F32
                          [M, N, c, d]; dst[m,n] = dot(src0 row m, src1 row n); src0 broadcast over
                          dims 2/3 (c % a == 0, d % b == 0)                                          */
    LLM_OP_ROPE,       /* src0 [hd, heads, n] F32, src1 I32 positions [n], src2 optional F32 freq
                          factors [n_dims/2]; p[1] n_dims, p[2] mode (0 NORMAL, 2 NEOX), p[3] n_ctx,
                          p[4] n_ctx_orig, floats p[5] freq_base, p[6] freq_scale, p[7] ext_factor,
                          p[8] attn_factor, p[9] beta_fast, p[10] beta_slow                          */
    LLM_OP_SOFT_MAX,   /* src0 [n_kv, n_q, heads] F32, src1 optional F32 mask [n_kv, >=n_q] added
                          after scaling (broadcast over dims 2/3); p[0] scale (float); a row that is
                          all -inf gives zeros                                                      */
    LLM_OP_FLASH_ATTN, /* q src0 [hd, n_q, heads] F32, k src1 [hd, n_kv, heads_kv], v src2 [hd_v,
                          n_kv, heads_kv] (F32/F16, or quantized in whole blocks: a quantized KV
                          cache), mask src3 F32 [n_kv, >=n_q] or NULL; p[0] scale.
                          dst F32 [hd_v, heads, n_q]. Query length is src0->ne[1]; GQA when
                          heads_kv divides heads                                                     */
    LLM_OP_SWIGLU,     /* silu(src0) * src1                                                          */
    LLM_OP_SILU,       /* silu(src0)                                                                 */
    LLM_OP_CPY,        /* src0 converted into src1's memory and type; dst is a view of src1.
                          Elements pair up in row-major order (same count, shapes may differ)       */
    LLM_OP_CONT,       /* contiguous copy of src0 (same type; dst shape may differ, as CPY)          */
    LLM_OP_VIEW,       /* no computation: strided window on view_src                                 */
    LLM_OP_RESHAPE,    /* no computation                                                             */
    LLM_OP_PERMUTE,    /* no computation                                                             */
    LLM_OP_TRANSPOSE,  /* no computation                                                             */
    LLM_OP_CHANNEL_NORM, /* npu layout change: rows padded to / unpadded from 16 elements            */
    /* Fused ops: made by the npu's fusion pass (src/npu/fusion.h), and MUL_MAT_SWIGLU by the model
       builder for batches. Each computes the floats of the ops it replaces, bit for bit.           */
    LLM_OP_FUSED,      /* no computation here: a later fused node writes this node's memory          */
    LLM_OP_ADD_RMS_NORM, /* src0 + src1 (same shape) written into src2's memory, then RMS_NORM of that
                          (p[0] eps) into dst, times src3 (broadcast like MUL) when src3 is given     */
    LLM_OP_RMS_NORM_MUL, /* RMS_NORM of src0 (p[0] eps) times src1, broadcast like MUL                */
    LLM_OP_MUL_MAT_ADD,  /* MUL_MAT of src0, src1 plus src2, broadcast like ADD (a bias)              */
    LLM_OP_ROPE_QK,    /* two ROPEs of one layer in one launch, sharing one table: ROPE of src0 with
                          positions src1 into dst, and of src2 (same positions) into src3's memory
                          (the absorbed second ROPE, same shape as src2); ROPE's op params, no freq
                          factors (the four source slots are taken)                                 */
    LLM_OP_MUL_MAT_SWIGLU, /* SWIGLU of MUL_MAT(src0, src1) and MUL_MAT(src2, src1): 2-D weights of one
                          shape, src1 [K, N] -> dst [M, N]; the FFN's gate and up products without
                          both in memory at once (src/ops/kernels/mul_mat_swiglu.c)                  */
    LLM_OP_COUNT
};

enum llm_tensor_flag {
    LLM_TENSOR_INPUT = 1u << 0,  /* written by the host before each compute   */
    LLM_TENSOR_OUTPUT = 1u << 1, /* read by the host after compute; kept live  */
    LLM_TENSOR_WEIGHT = 1u << 2, /* model parameter, data points into the file */
    LLM_TENSOR_REPACKED = 1u << 3, /* weight matrix in the decode layout of src/ops/types/repack.h */
};

/* Rows per group of that layout: the four accumulators of the AVX2 four-row dot kernels, whose sums
 * the repacked kernels reproduce (bench/results/kernel_choices.md explains why it holds on every
 * AVX2 CPU). A repacked matrix takes its rows rounded up to a whole group (llm_nbytes). */
#define LLM_REPACK_ROWS 4

struct llm_buffer;

struct llm_tensor {
    enum llm_type type;
    int64_t ne[LLM_MAX_DIMS];          /* elements per dim, ne[0] contiguous        */
    size_t nb[LLM_MAX_DIMS];           /* bytes per step in each dim                */
    enum llm_op op;
    int32_t op_params[LLM_MAX_OP_PARAMS]; /* int32 slots, floats stored bitwise      */
    struct llm_tensor *src[LLM_MAX_SRC];
    struct llm_tensor *view_src;       /* tensor whose memory this views, or NULL    */
    size_t view_offs;                  /* byte offset into view_src's data           */
    void *data;                        /* set by the allocator or the model loader   */
    struct llm_buffer *buffer;         /* what data lives in (backend.h); NULL: plain host
                                          memory (the mapped file, the host's inputs) */
    char name[LLM_MAX_NAME];
    uint32_t flags;                    /* enum llm_tensor_flag bits                  */
    int backend;                       /* the scheduler's choice: index of the backend
                                          that runs this node (scheduler.h)          */
};

const char *llm_op_name(enum llm_op op);

static inline float llm_get_op_f32(const struct llm_tensor *t, int i)
{
    union { int32_t i; float f; } u = { .i = t->op_params[i] };
    return u.f;
}

static inline void llm_set_op_f32(struct llm_tensor *t, int i, float f)
{
    union { int32_t i; float f; } u = { .f = f };
    t->op_params[i] = u.i;
}

/* Elements in all dims. */
/* Bytes spanned by t's elements given its strides (for allocation); of a repacked matrix, its whole
 * groups, the last one padded with zero rows. */
size_t llm_nbytes(const struct llm_tensor *t);

static inline int64_t llm_nelements(const struct llm_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Rows (elements / ne0). */
static inline int64_t llm_nrows(const struct llm_tensor *t)
{
    return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Are t's elements packed in order, each row right after the one before? */
static inline bool llm_is_contiguous(const struct llm_tensor *t)
{
    size_t next = llm_type_info(t->type)->type_size;
    if (t->nb[0] != next)
        return false;
    next = llm_row_size(t->type, t->ne[0]);
    for (int d = 1; d < LLM_MAX_DIMS; next *= (size_t)t->ne[d], d++)
        if (t->ne[d] > 1 && t->nb[d] != next)
            return false;
    return true;
}

#endif
