/* Building compute graphs: a context hands out tensor structs (no data) from a fixed pool; op
 * constructors fill shape, strides, op, op_params and sources; llm_graph_build() orders the nodes
 * by a depth-first visit from the outputs (sources before their users). Data pointers are set
 * later by the graph allocator (intermediates), the model (weights) or the caller (inputs). */
#ifndef LLM_GRAPH_H
#define LLM_GRAPH_H

#include "tensor.h"

struct llm_ctx;

/* A context that can hold up to max_tensors tensors. NULL on allocation failure. */
struct llm_ctx *llm_ctx_new(int max_tensors);
void llm_ctx_free(struct llm_ctx *ctx);
/* Forget every tensor (the pool is reused by the next graph). */
void llm_ctx_reset(struct llm_ctx *ctx);
/* True once a constructor ran out of tensors; the graph built since the last reset is unusable. */
bool llm_ctx_overflowed(const struct llm_ctx *ctx);

/* What the first constructor since the last reset found wrong with the shapes it was given
 * ("ADD: src1 does not broadcast over src0"), or NULL; the graph is then unusable. */
const char *llm_ctx_error(const struct llm_ctx *ctx);

/* A contiguous tensor of type and shape (unused dims = 1); data NULL. */
struct llm_tensor *llm_new_tensor(struct llm_ctx *ctx, enum llm_type type, int n_dims,
                                  const int64_t *ne);
struct llm_tensor *llm_new_tensor_1d(struct llm_ctx *ctx, enum llm_type type, int64_t ne0);
struct llm_tensor *llm_new_tensor_2d(struct llm_ctx *ctx, enum llm_type type, int64_t ne0,
                                     int64_t ne1);
void llm_set_name(struct llm_tensor *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Views: no computation; data = view_src->data + offset once the source has data. */
struct llm_tensor *llm_view_1d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, size_t offs);
struct llm_tensor *llm_view_2d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1,
                               size_t nb1, size_t offs);
struct llm_tensor *llm_view_3d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1,
                               int64_t ne2, size_t nb1, size_t nb2, size_t offs);
/* Reshape of a contiguous tensor. */
struct llm_tensor *llm_reshape_2d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1);
struct llm_tensor *llm_reshape_3d(struct llm_ctx *ctx, struct llm_tensor *a, int64_t ne0, int64_t ne1,
                                  int64_t ne2);
/* Permute dims: axis i of a becomes axis perm[i] of the result. */
struct llm_tensor *llm_permute(struct llm_ctx *ctx, struct llm_tensor *a, int p0, int p1, int p2, int p3);
struct llm_tensor *llm_transpose(struct llm_ctx *ctx, struct llm_tensor *a);

/* Ops; shapes and semantics are documented at enum llm_op in tensor.h. */
struct llm_tensor *llm_get_rows(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *ids);
struct llm_tensor *llm_set_rows(struct llm_ctx *ctx, struct llm_tensor *dst, struct llm_tensor *rows,
                                struct llm_tensor *ids);
struct llm_tensor *llm_add(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *b);
struct llm_tensor *llm_mul(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *b);
struct llm_tensor *llm_scale(struct llm_ctx *ctx, struct llm_tensor *a, float s);
struct llm_tensor *llm_rms_norm(struct llm_ctx *ctx, struct llm_tensor *a, float eps);
struct llm_tensor *llm_mul_mat(struct llm_ctx *ctx, struct llm_tensor *w, struct llm_tensor *x);
/* llm_swiglu(llm_mul_mat(w_gate, x), llm_mul_mat(w_up, x)) in one node, bit for bit (tensor.h). */
struct llm_tensor *llm_mul_mat_swiglu(struct llm_ctx *ctx, struct llm_tensor *w_gate, struct llm_tensor *w_up,
                                      struct llm_tensor *x);
struct llm_tensor *llm_rope(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *pos,
                            struct llm_tensor *freq_factors, int n_dims, int mode, int n_ctx_orig,
                            float freq_base, float freq_scale);
struct llm_tensor *llm_soft_max(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *mask,
                                float scale);
struct llm_tensor *llm_flash_attn(struct llm_ctx *ctx, struct llm_tensor *q, struct llm_tensor *k,
                                  struct llm_tensor *v, struct llm_tensor *mask, float scale);
struct llm_tensor *llm_swiglu(struct llm_ctx *ctx, struct llm_tensor *gate, struct llm_tensor *up);
struct llm_tensor *llm_silu(struct llm_ctx *ctx, struct llm_tensor *a);
struct llm_tensor *llm_cpy(struct llm_ctx *ctx, struct llm_tensor *a, struct llm_tensor *dst);
struct llm_tensor *llm_cont(struct llm_ctx *ctx, struct llm_tensor *a);
/* Give t (a tensor of whole elements, dense strides) rows padded to a multiple of `multiple`
 * elements: nb[1] and the strides above it grow, ne stays. False (t unchanged) when its rows already
 * are a multiple, or its type is a block type (quantized rows never need it). */
bool llm_pad_rows(struct llm_tensor *t, int64_t multiple);
/* The npu layout pass's conversion: a copy of a with rows padded to a multiple of pad_to elements
 * (pad_to > 0) or dense (pad_to 0: unpad); p[0] = 1 for a pad. */
struct llm_tensor *llm_channel_norm(struct llm_ctx *ctx, struct llm_tensor *a, int64_t pad_to);

/* True for ops that compute nothing (NONE, VIEW, RESHAPE, PERMUTE, TRANSPOSE): op_table.h. */
bool llm_op_is_noop(enum llm_op op);
/* The tensor that owns the memory t lives in (follows view_src to the root). */
struct llm_tensor *llm_view_root(struct llm_tensor *t);

/* Ordered nodes of a graph (computing and no-op nodes), sources before users, and the leaves
 * (tensors with op NONE: weights, inputs, caches). */
struct llm_graph {
    struct llm_tensor **nodes;
    int n_nodes;
    struct llm_tensor **leafs;
    int n_leafs;
    int cap;
    struct llm_ctx *pass_ctx; /* tensors a backend's graph pass added (src/npu/layout.h); freed with g */
};

/* Visit from outputs[0..n-1]; each output gets LLM_TENSOR_OUTPUT. Returns NULL when out of
 * memory. Free with llm_graph_free. */
struct llm_graph *llm_graph_build(struct llm_tensor **outputs, int n_outputs);
void llm_graph_free(struct llm_graph *g);

#endif
