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

#include "ops/kernels/params.h"
#include "tensor.h"

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

/* Run this thread's share of node. No-op for NONE/VIEW/RESHAPE/PERMUTE/TRANSPOSE. */
void llm_cpu_compute(const struct llm_cpu_params *p, struct llm_tensor *node);

/* Plan node (llm_cpu_supports(node) must hold). */
void llm_cpu_plan(const struct llm_tensor *node, struct llm_cpu_plan *plan);

/* llm_cpu_compute with the plan llm_cpu_plan made for a node of the same op, types and shapes
 * (addresses may differ): the same floats, without deciding again. */
void llm_cpu_compute_planned(const struct llm_cpu_params *p, struct llm_tensor *node, const struct llm_cpu_plan *plan);

#endif
