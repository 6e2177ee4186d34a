/* Core IR: element types, tensors (ne/nb, op, sources, views) and the op enum.
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

#define LLM_MAX_DIMS 4
#define LLM_MAX_SRC 4
#define LLM_MAX_OP_PARAMS 16
#define LLM_MAX_NAME 64

/* Operations. Keep in the same order as the name table in tensor.c (checked at compile time). */
enum llm_op {
    LLM_OP_NONE = 0, /* leaf: weight, input or preallocated buffer          */
    LLM_OP_GET_ROWS, /* dst[:, i] = src0[:, src1[i]] (src1 I32 row ids)      */
    LLM_OP_SET_ROWS, /* src0 rows written into dst (a view of src2) at src1  */
    LLM_OP_ADD,      /* dst = src0 + src1 (src1 broadcast over rows)          */
    LLM_OP_MUL,      /* dst = src0 * src1 (src1 broadcast over rows)          */
    LLM_OP_SCALE,    /* dst = src0 * f (op_params[0] float)                   */
    LLM_OP_RMS_NORM, /* dst = src0 / sqrt(mean(src0^2) + eps), eps in params */
    LLM_OP_MUL_MAT,  /* dst[i,j] = dot(src0 row i, src1 row j)                */
    LLM_OP_ROPE,     /* src0 rotated by positions src1 (I32), opt freqs src2 */
    LLM_OP_SOFT_MAX, /* softmax(src0 * scale + mask src1) along ne[0]         */
    LLM_OP_FLASH_ATTN, /* q src0, k src1, v src2, mask src3; scale in params */
    LLM_OP_SWIGLU,   /* dst = silu(src0) * src1                               */
    LLM_OP_SILU,     /* dst = silu(src0)                                      */
    LLM_OP_CPY,      /* copy src0 into src1's memory with src1's type         */
    LLM_OP_CONT,     /* contiguous copy of src0                               */
    LLM_OP_VIEW,     /* no computation: strided window on view_src            */
    LLM_OP_RESHAPE,
    LLM_OP_PERMUTE,
    LLM_OP_TRANSPOSE,
    LLM_OP_CHANNEL_NORM, /* npu layout change: pad/unpad rows to 16 elements  */
    LLM_OP_COUNT
};

enum llm_tensor_flag {
    LLM_TENSOR_INPUT = 1u << 0,  /* written by the host before each compute   */
    LLM_TENSOR_OUTPUT = 1u << 1, /* read by the host after compute; kept live  */
    LLM_TENSOR_WEIGHT = 1u << 2, /* model parameter, data points into the file */
};

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
    char name[LLM_MAX_NAME];
    uint32_t flags;                    /* enum llm_tensor_flag bits                  */
    int backend;                       /* index of the backend that runs this node   */
};

const char *llm_op_name(enum llm_op op);

#endif
