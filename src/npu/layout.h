/* LayoutAlignToNPU (src/npu/README.md): every node of an npu graph gets a row
 * layout, ALIGN (rows padded to a multiple of 16 elements, the cube unit's fractal width) or NALIGN
 * (dense), and a CHANNEL_NORM node (pad or unpad) goes on each edge whose ends disagree.
 *
 * Modes, the Ascend layout rules mapped onto our ops:
 *   ALIGN only   MUL_MAT, MUL_MAT_ADD (gemm); RMS_NORM and the fused norms, SOFT_MAX, FLASH_ATTN
 *                (reductions); CONT (a transpose made real); SET_ROWS (a scatter)
 *   NALIGN only  graph inputs (leaves flagged INPUT) and outputs (nodes flagged OUTPUT: the host
 *                reads them dense); RESHAPE (it re-reads memory as dense rows); a BOTH node whose
 *                output has odd rank
 *   BOTH         the rest (element-wise: ADD, MUL, SCALE, SILU, SWIGLU, ROPE, GET_ROWS, CPY; views).
 *                A BOTH node follows its parent; when its parents disagree, the first in topological
 *                order wins (leaves come before every node); a broadcasting ADD or MUL follows its
 *                full-size input (src0).
 * Rank is ggml's: the number of dims up to the last one with more than one element ([8,1,1,1] is 1,
 * [8,4,3,1] is 3). Seed 002's Cx layouts need 2 or 4 dims, so an odd-rank output is NALIGN unless
 * the op is ALIGN only: its kernel cannot run on dense rows, so ALIGN wins and the odd-rank result is
 * unpadded where a reader needs it dense. Weights and caches (other leaves) take the layout their
 * reader wants (uploaded that way), so they never conflict. An ALIGN output is followed by an unpad.
 *
 * One pass in node order resolves every mode and finds the conflicting edges: linear in nodes and
 * edges. A producer feeds all its readers of the other mode through one CHANNEL_NORM. */
#ifndef LLM_NPU_LAYOUT_H
#define LLM_NPU_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "graph.h"

enum npu_layout { NPU_LAYOUT_ALIGN, NPU_LAYOUT_NALIGN, NPU_LAYOUT_BOTH };

/* Rows of ALIGN tensors are padded to this many elements. */
#define NPU_ALIGN_ELEMS 16

struct npu_layout_report {
    int inserted;         /* CHANNEL_NORM nodes the pass needs                                    */
    int naive;            /* what a pass resolving BOTH to NALIGN would need: one per edge between
                             a fixed-mode producer and a consumer of the other mode               */
    size_t padding_bytes; /* bytes the ALIGN tensors (nodes and the weights they read) gain      */
    size_t probes;        /* hash slots the pass looked at: linear in nodes and edges (a test bound) */
};

/* What the device enforces (LLM_NPU_LAYOUT_ALIGN on): source j of node must come in ALIGN rows. The
 * gemms read both operands (MUL_MAT, MUL_MAT_ADD), the norms and the softmax the rows they reduce
 * (RMS_NORM, RMS_NORM_MUL, SOFT_MAX src0; ADD_RMS_NORM both addends). The other ALIGN-only ops
 * (FLASH_ATTN, CONT, SET_ROWS) are not enforced yet (src/npu/README.md says why). */
bool npu_layout_reads_aligned(const struct llm_tensor *node, int j);

/* Are t's rows ALIGN for an enforcing reader: a row stride of a multiple of NPU_ALIGN_ELEMS
 * elements? Quantized rows (whole blocks), a single row (no stride to pad) and a transposed view
 * (nb[0] not one element: read element by element, with no rows to pad) count as ALIGN. */
bool npu_layout_rows_aligned(const struct llm_tensor *t);

/* The layout rule of node's op alone: ALIGN, NALIGN or BOTH (before inputs, outputs and rank). */
enum npu_layout npu_layout_rule(const struct llm_tensor *node);

/* Resolve g's layouts (modes[i] for g->nodes[i], the caller's array of g->n_nodes) and report.
 * With ctx, also insert the CHANNEL_NORM nodes: each reader of the other mode is rewired to it, and
 * g's node list is rebuilt with each one right after its producer (g->nodes is reallocated; an
 * output that needs unpadding stays the node the host reads, its CHANNEL_NORM then feeding only
 * readers). Returns 0, or -1 when out of memory (then g is unchanged). */
int npu_layout_align(struct llm_graph *g, struct llm_ctx *ctx, enum npu_layout *modes, struct npu_layout_report *r);

#endif
