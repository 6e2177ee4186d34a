/* What a cpu kernel is called with, and what the kernels tell their callers: the thread's share
 * and scratch (struct llm_cpu_params), the plan of a MUL_MAT node, the path a MUL_MAT takes, and the
 * RoPE table cache. The cpu backend's dispatch (ops/cpu/cpu.h) and the npu's launchers build on it. */
#ifndef LLM_OPS_KERNEL_PARAMS_H
#define LLM_OPS_KERNEL_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

struct llm_rope_cache; /* sin/cos table shared by the ROPE nodes of one graph (see rope.c) */

struct llm_cpu_params {
    int ith, nth;
    void *wdata;           /* scratch shared by all threads, llm_cpu_work_size() bytes */
    size_t wsize;
    void (*barrier)(void *pool);
    void *pool;
    struct llm_rope_cache *rope; /* owned by the backend, reset per graph compute */
};

struct llm_type_traits;

/* What node's kernel is, decided from its op, shapes and types alone (an aclnn executor's "picks
 * the kernel" in GetWorkspaceSize): made once per launch, or once per capture and reused by every
 * replay. It holds no pointer into the node or its sources (a launch copies them), only their
 * geometry and the kernels' static traits. Only MUL_MAT has choices to make today. */
struct llm_mm_shape {
    int64_t K, M, N, r2, r3;               /* sizes; src1 batches per weight matrix in dims 2, 3 */
    const struct llm_type_traits *wt, *vt; /* weight type, its vec_dot_type */
    bool convert;                          /* src1 is converted to vec_dot_type first */
};

struct llm_cpu_plan {
    int mm_path;             /* MUL_MAT: dot, BLAS, integer GEMM or float GEMM (matmul.c) */
    struct llm_mm_shape mm;  /* MUL_MAT: what its kernels read besides the tensors */
};

/* True when a MUL_MAT node runs as dequantize + cblas_sgemm (F32 activations, batched) rather
 * than as per-row dot products on activations converted to the weights' vec_dot_type. */
bool llm_cpu_mul_mat_uses_blas(const struct llm_tensor *node);

/* True when a MUL_MAT node runs as a GEMM: the integer one (the weight type's gemm kernel, types.h)
 * on activations converted to the weights' vec_dot_type (Q8_0 / Q4_0 / Q5_0 weights, batched), or
 * the float one (gemm_f32) on the F32 activations. */
bool llm_cpu_mul_mat_uses_gemm(const struct llm_tensor *node);

/* True when it runs as the integer GEMM (Q5_0 has both: which one depends on the batch and CPU). */
bool llm_cpu_mul_mat_uses_int_gemm(const struct llm_tensor *node);

/* Weight rows that a thread took from the back of another thread's share since the process started
 * (matmul.c's shares: decode's matrix-vector products and the GEMM paths): how unevenly the threads
 * ran. */
int64_t llm_cpu_mul_mat_stolen_rows(void);

/* Rope cache lifetime: the backend creates one, reserves its tables for the largest ROPE node
 * (false when out of memory), resets it before each graph (positions may have changed), frees it at
 * the end. A node whose table would not fit runs uncached: nothing grows while a graph runs. */
struct llm_rope_cache *llm_rope_cache_new(void);
bool llm_rope_cache_reserve(struct llm_rope_cache *c, const struct llm_tensor *rope);
void llm_rope_cache_reset(struct llm_rope_cache *c);
void llm_rope_cache_free(struct llm_rope_cache *c);

/* ROPE in two steps, for backends that keep the cos/sin table themselves (the npu): the table of a
 * ROPE node is llm_rope_table_floats(node) floats, (cos, sin) × attn_factor per position and pair,
 * filled from the positions (src[1]) by fill_table (threads split positions); apply rotates with
 * it (table NULL: angles computed per row). Both are thread-ith shares like llm_cpu_compute. A
 * ROPE_QK node takes them too: one table (its two halves share positions and parameters), and
 * apply rotates both halves. */
size_t llm_rope_table_floats(const struct llm_tensor *rope);
/* ROPE_QK's halves as the ROPE nodes they replace: part 0 src0 into dst, part 1 src2 into src3. */
struct llm_tensor llm_rope_qk_part(const struct llm_tensor *rope_qk, int part);
void llm_cpu_rope_fill_table(const struct llm_cpu_params *p, const struct llm_tensor *rope, float *table);
void llm_cpu_rope_apply(const struct llm_cpu_params *p, struct llm_tensor *rope, const float *table);

#endif
