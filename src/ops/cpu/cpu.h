/* CPU kernels for every op of enum llm_op, as called by the cpu backend's thread pool.
 *
 * Every thread of the pool calls llm_cpu_compute() for the same node with its own ith (0..nth-1);
 * a kernel splits its work by rows/chunks so that the union over threads is the whole node.
 * Kernels honour nb (views, permutations, padded rows). A kernel that needs a phase before the
 * main work (e.g. converting activations to the weights' vec_dot_type) does it in parallel and
 * then calls p->barrier(p->pool). The caller puts one barrier between nodes. */
#ifndef LLM_CPU_H
#define LLM_CPU_H

#include <stdbool.h>
#include <stddef.h>

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

/* True when the cpu kernels can run this node (op and types). */
bool llm_cpu_supports(const struct llm_tensor *node);
/* True when weights of this type can be used by the kernels (they can be dequantized). */
bool llm_cpu_supports_type(enum llm_type type);

/* Is node big enough to repay splitting it over threads (a barrier round trip)? Smaller nodes run
 * on one thread while the others go ahead. */
bool llm_cpu_worth_splitting(const struct llm_tensor *node);

/* Scratch bytes node needs when run by n_threads threads (0 for most ops). */
size_t llm_cpu_work_size(const struct llm_tensor *node, int n_threads);

/* At least llm_cpu_work_size of node and of the same node with fewer src1 rows (fewer tokens in
 * the batch), on any CPU: what a backend reserves for a graph and every smaller batch of it. */
size_t llm_cpu_work_size_bound(const struct llm_tensor *node, int n_threads);

/* True when a MUL_MAT node runs as dequantize + cblas_sgemm (F32 activations, batched) rather
 * than as per-row dot products on activations converted to the weights' vec_dot_type. */
bool llm_cpu_mul_mat_uses_blas(const struct llm_tensor *node);

/* True when a MUL_MAT node runs as an integer GEMM (the weight type's gemm kernel, types.h) on
 * activations converted to the weights' vec_dot_type: Q8_0 / Q4_0 weights, batched. */
bool llm_cpu_mul_mat_uses_gemm(const struct llm_tensor *node);

/* Run this thread's share of node. No-op for NONE/VIEW/RESHAPE/PERMUTE/TRANSPOSE. */
void llm_cpu_compute(const struct llm_cpu_params *p, struct llm_tensor *node);

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

/* Plan node (llm_cpu_supports(node) must hold). */
void llm_cpu_plan(const struct llm_tensor *node, struct llm_cpu_plan *plan);

/* llm_cpu_compute with the plan llm_cpu_plan made for a node of the same op, types and shapes
 * (addresses may differ): the same floats, without deciding again. */
void llm_cpu_compute_planned(const struct llm_cpu_params *p, struct llm_tensor *node, const struct llm_cpu_plan *plan);

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
