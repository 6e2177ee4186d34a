/* Internal to src/ops: the fast kernels cpu.c dispatches to, and small helpers they share.
 * Each fast kernel runs thread ith's share of one node (see cpu.h); its scalar twin is in cpu_ref.h. */
#ifndef LLM_OPS_KERNELS_H
#define LLM_OPS_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/types/types.h"
#include "params.h"

/* Address of element (i0, i1, i2, i3) of t, honouring nb. */
static inline void *tensor_at(const struct llm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (char *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] +
           i3 * (int64_t)t->nb[3];
}

static inline bool tensor_is_f32(const struct llm_tensor *t)
{
    return t && t->type == LLM_TYPE_F32;
}

static inline bool same_shape(const struct llm_tensor *a, const struct llm_tensor *b)
{
    for (int d = 0; d < LLM_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d])
            return false;
    return true;
}

/* Rows [*r0, *r1) of nrows that thread ith of nth handles (contiguous, sizes differ by at most 1). */
static inline void thread_rows(int64_t nrows, int ith, int nth, int64_t *r0, int64_t *r1)
{
    *r0 = nrows * ith / nth;
    *r1 = nrows * (ith + 1) / nth;
}

/* Waits for every thread of the pool (no-op for a single thread). */
static inline void pool_barrier(const struct llm_cpu_params *p)
{
    if (p->nth > 1)
        p->barrier(p->pool);
}

/* Unpack a flat row index into (i1, i2, i3) of t. */
static inline void row_index(const struct llm_tensor *t, int64_t r, int64_t *i1, int64_t *i2, int64_t *i3)
{
    *i1 = r % t->ne[1];
    *i2 = r / t->ne[1] % t->ne[2];
    *i3 = r / (t->ne[1] * t->ne[2]);
}

/* One element of a plain float type (F32/F16/BF16) as float, and back. */
static inline float load_float(enum llm_type t, const void *p)
{
    switch (t) {
    case LLM_TYPE_F16:
        return llm_fp16_to_fp32(*(const uint16_t *)p);
    case LLM_TYPE_BF16:
        return llm_bf16_to_fp32(*(const uint16_t *)p);
    default:
        return *(const float *)p;
    }
}

static inline void store_float(enum llm_type t, void *p, float v)
{
    switch (t) {
    case LLM_TYPE_F16:
        *(uint16_t *)p = llm_fp32_to_fp16(v);
        break;
    case LLM_TYPE_BF16:
        *(uint16_t *)p = llm_fp32_to_bf16(v);
        break;
    default:
        *(float *)p = v;
    }
}

/* Elements correspond by their flat index in row-major order (ne0 fastest), so the two shapes may
 * differ (a reshape on the way). Work is split over src0 rows; a src0 row maps onto one or more
 * runs of dst rows. */
static inline void flat_coords(const struct llm_tensor *t, int64_t f, int64_t c[4])
{
    for (int d = 0; d < 4; d++) {
        c[d] = f % t->ne[d];
        f /= t->ne[d];
    }
}

/* A node of op on dst's memory and shape (or other's) with sources s0, s1: what an unfused op saw. */
static inline struct llm_tensor as_op(const struct llm_tensor *mem, enum llm_op op, const struct llm_tensor *s0,
                               const struct llm_tensor *s1)
{
    struct llm_tensor t = *mem;
    t.op = op;
    t.src[0] = (struct llm_tensor *)s0;
    t.src[1] = (struct llm_tensor *)s1;
    t.src[2] = t.src[3] = NULL;
    return t;
}

/* A K or V of FLASH_ATTN that the kernels convert to F32 as they read it (quantized, BF16), rather
 * than read in place (F32, F16). */
static inline bool attn_kv_converted(const struct llm_tensor *t)
{
    return t->type != LLM_TYPE_F32 && t->type != LLM_TYPE_F16;
}

/* z[i] = e^(z[i] - max) for i < n (AVX2 when the CPU has it); returns their sum. max is finite;
 * -inf entries give 0. Shared by SOFT_MAX and FLASH_ATTN. */
float cpu_exp_sub_sum(int64_t n, float *z, float max);

void cpu_get_rows(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_set_rows(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_cpy(const struct llm_cpu_params *p, struct llm_tensor *dst); /* CPY and CONT */
void cpu_add(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_mul(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_scale(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_silu(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_swiglu(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_rms_norm(const struct llm_cpu_params *p, struct llm_tensor *dst);
/* One row r (flat index over dims 1-3) of ADD, MUL or RMS_NORM into dst, as the whole-node kernels
 * compute it: the fused kernels are built of these, so their floats are the unfused ops' own. */
void cpu_add_row(const struct llm_tensor *dst, int64_t r);
void cpu_mul_row(const struct llm_tensor *dst, int64_t r);
void cpu_rms_norm_row(const struct llm_tensor *dst, int64_t r, float eps);
/* Elements [i0, i0 + len) of a SWIGLU row of row_len contiguous floats (x, y, z at element i0; z
 * may be x), each the float cpu_swiglu gives it. */
void cpu_swiglu_part(int64_t row_len, int64_t i0, int64_t len, float *z, const float *x, const float *y);
/* Fused ops (tensor.h), in fused.c with their reference kernels. */
void cpu_add_rms_norm(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_rms_norm_mul(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_mul_mat_add(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_mul_mat_add_planned(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct llm_cpu_plan *plan);
bool cpu_add_rms_norm_supported(const struct llm_tensor *n);
bool cpu_rms_norm_mul_supported(const struct llm_tensor *n);
bool cpu_mul_mat_add_supported(const struct llm_tensor *n);
void cpu_mul_mat_swiglu(const struct llm_cpu_params *p, struct llm_tensor *dst);
bool cpu_mul_mat_swiglu_supported(const struct llm_tensor *n);
size_t cpu_mul_mat_swiglu_work_size(const struct llm_tensor *dst, int nth);
void cpu_rope_qk(const struct llm_cpu_params *p, struct llm_tensor *dst);
bool cpu_rope_qk_supported(const struct llm_tensor *n);
void cpu_rope(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_soft_max(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_flash_attn(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_mul_mat(const struct llm_cpu_params *p, struct llm_tensor *dst);
void cpu_mul_mat_plan(const struct llm_tensor *dst, struct llm_cpu_plan *plan);
void cpu_mul_mat_planned(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct llm_cpu_plan *plan);
/* One MUL_MAT node's rows computed chunk by chunk by a fused kernel (mul_mat_swiglu.c), each float
 * the one the whole node computes (with the plan made for it), in cpu_mul_mat_rows_work_size bytes
 * of scratch from a line (for this batch and every smaller one):
 *  - cpu_mul_mat_rows_begin: thread p->ith's part of preparing src1 (converted, or in a repacked
 *    kernel's form) and of dealing out the chunks, and its cursor; a barrier after it, before the
 *    other calls. A chunk's results for every src1 row take at most tile_bytes, or
 *    cpu_mul_mat_rows_most rows;
 *  - cpu_mul_mat_rows_next: the thread's next chunk of rows [m0, m1), taken from the other threads'
 *    once its own are done; false when none is left;
 *  - cpu_mul_mat_rows_run: rows [m0, m1) on this thread alone, into out (out_nb1 bytes between src1
 *    rows), of this node or of one with the same types, shapes and src1 (the same scratch serves).
 * Only 2-D weights and src1. */
struct llm_mm_cursor {
    uint64_t *share; /* the share it takes chunks from, from the front while its own */
    bool front;
    int64_t rows;    /* rows per chunk */
    int64_t tile;    /* the BLAS path's next tile */
};
size_t cpu_mul_mat_rows_work_size(const struct llm_tensor *node, int nth);
int64_t cpu_mul_mat_rows_most(const struct llm_tensor *node, int nth, size_t tile_bytes);
void cpu_mul_mat_rows_begin(const struct llm_cpu_params *p, const struct llm_cpu_plan *plan,
                            const struct llm_tensor *node, char *work, size_t tile_bytes, struct llm_mm_cursor *c);
bool cpu_mul_mat_rows_next(const struct llm_cpu_params *p, const struct llm_cpu_plan *plan,
                           const struct llm_tensor *node, char *work, struct llm_mm_cursor *c, int64_t *m0,
                           int64_t *m1);
void cpu_mul_mat_rows_run(const struct llm_cpu_params *p, const struct llm_cpu_plan *plan,
                          const struct llm_tensor *node, char *work, int64_t m0, int64_t m1, float *out,
                          size_t out_nb1);

/* What each op's cpu kernel runs (types, strides), the rows of the op table (op_table.h). */
bool cpu_get_rows_supported(const struct llm_tensor *n);
bool cpu_set_rows_supported(const struct llm_tensor *n);
bool cpu_binary_supported(const struct llm_tensor *n);  /* ADD, MUL */
bool cpu_unary_supported(const struct llm_tensor *n);   /* SCALE, SILU, RMS_NORM */
bool cpu_swiglu_supported(const struct llm_tensor *n);
bool cpu_rope_supported(const struct llm_tensor *n);
bool cpu_soft_max_supported(const struct llm_tensor *n);
bool cpu_flash_attn_supported(const struct llm_tensor *n);
bool cpu_cpy_supported(const struct llm_tensor *n);
bool cpu_cont_supported(const struct llm_tensor *n);

size_t cpu_mul_mat_work_size(const struct llm_tensor *dst, int nth);
size_t cpu_mul_mat_work_size_bound(const struct llm_tensor *dst, int nth);
size_t cpu_flash_attn_work_size(const struct llm_tensor *dst, int nth);
/* The path cpu_flash_attn takes for dst on this CPU (under LLM_CPU_ISA): "scalar", "avx2 rows",
 * "avx512 hd8", "avx512 tiles" or "avx2 tiles" (prefill). For tests and tools. */
const char *cpu_flash_attn_path(const struct llm_tensor *dst);
bool cpu_mul_mat_supports(const struct llm_tensor *dst);

#endif
