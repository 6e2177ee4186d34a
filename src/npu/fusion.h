/* Operator fusion, the npu's graph pass before launch and capture (GGML_CANN_OPERATOR_FUSION,
 * default off as upstream): runs of nodes become one fused node (tensor.h), one launch instead of
 * several, with the same floats:
 *   MUL_MAT + ADD of a bias weight          -> MUL_MAT_ADD   (qwen2's q, k, v)
 *   RMS_NORM + MUL                          -> RMS_NORM_MUL  (a norm and its weight)
 *   ADD (no broadcast) + RMS_NORM[_MUL]     -> ADD_RMS_NORM  (the residual add and the next norm)
 *   ROPE + ROPE of the same positions       -> ROPE_QK       (a layer's q and k, one table)
 * The pass rewrites the later node in place (its op and sources) and turns the nodes it absorbs into
 * LLM_OP_FUSED: no kernel, but they keep their memory, so an ADD's sum, which later nodes read, is
 * written by the fused node into it. It runs before the graph allocator, so the fused node's result
 * gets memory apart from everything it reads, and it fuses only a node with the computing node right
 * before it, read by nothing else unless its memory is kept (the ADD's sum). The ROPE pair is the
 * exception: its two nodes are apart, so the nodes between them are reordered (fusion.c says how and
 * when it is safe). Linear in the graph. */
#ifndef LLM_NPU_FUSION_H
#define LLM_NPU_FUSION_H

#include "graph.h"

struct npu_fusion_counts {
    int mul_mat_add, rms_norm_mul, add_rms_norm, rope_qk; /* fused nodes made, by kind */
};

/* Fuse what the rules allow among g->nodes[first, end) (one split: all on one backend); nodes
 * outside the range count as readers. Every fused node is one the cpu kernels run. Returns the
 * number of nodes absorbed (launches saved), or -1 when out of memory (g is then unchanged). */
int npu_fuse(struct llm_graph *g, int first, int end, struct npu_fusion_counts *counts);

#endif
