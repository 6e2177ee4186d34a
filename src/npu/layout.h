/* LayoutAlignToNPU (src/npu/README.md): every node of an npu graph gets a row
 * layout, ALIGN (rows padded to a multiple of 16 elements, the cube unit's fractal width) or NALIGN
 * (dense), and a CHANNEL_NORM node (pad or unpad) goes on each edge whose ends disagree.
 *
 * Modes, the Ascend layout rules mapped onto our ops:
 *   ALIGN only   MUL_MAT, MUL_MAT_ADD (gemm); RMS_NORM and the fused norms, SOFT_MAX (reductions);
 *                CONT (a transpose made real); a pad (CHANNEL_NORM into ALIGN)
 *   per operand  FLASH_ATTN: its K and V are read ALIGN (the cache rows the cube unit streams), its
 *                Q read and its result written dense (NALIGN: a decode step's few query rows are
 *                loaded once per call, and a reshape reads the result)
 *   NALIGN only  graph inputs (leaves flagged INPUT) and outputs (nodes flagged OUTPUT: the host
 *                reads them dense); RESHAPE and views of nodes (their strides were built on dense
 *                rows); an unpad; a BOTH node whose output has odd rank; a fused node's second
 *                result (LLM_OP_FUSED: the fusing node writes it dense)
 *   its memory's SET_ROWS and CPY (scatters) write another tensor's memory, the KV cache: ALIGN
 *                where its rows are padded (the npu's cache, LLM_NPU_LAYOUT_ALIGN on), else NALIGN.
 *                Like a CHANNEL_NORM they copy into their destination's strides, so what they read
 *                never conflicts
 *   BOTH         the rest (element-wise: ADD, MUL, SCALE, SILU, SWIGLU, ROPE, GET_ROWS). A BOTH node
 *                follows its parent; when its parents disagree, the first in topological order wins
 *                (leaves come before every node); a broadcasting ADD or MUL follows its full-size
 *                input (src0). Leaves are what their rows are: padded ones (weights uploaded
 *                padded) serve either, dense ones are NALIGN; views of leaves likewise.
 * Rank is ggml's: the number of dims up to the last one with more than one element ([8,1,1,1] is 1,
 * [8,4,3,1] is 3). Seed 002's Cx layouts need 2 or 4 dims, so an odd-rank output is NALIGN unless
 * the op is ALIGN only: its kernel cannot run on dense rows, so ALIGN wins and the odd-rank result is
 * unpadded where a reader needs it dense.
 *
 * Two passes in node order, linear in nodes and edges: the first resolves every mode, the second
 * places the CHANNEL_NORMs. */
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
    size_t padding_bytes; /* device bytes the layout costs: rows padded in place, the pads and padded
                             twins the pass adds, and the padding of the weights ALIGN nodes read  */
    size_t probes;        /* hash slots the pass looked at: linear in nodes and edges (a test bound) */
};

/* What the device enforces (LLM_NPU_LAYOUT_ALIGN on): source j of node must come in ALIGN rows. The
 * gemms read both operands (MUL_MAT, MUL_MAT_ADD), the norms and the softmax the rows they reduce
 * (RMS_NORM, RMS_NORM_MUL, SOFT_MAX src0; ADD_RMS_NORM both addends), FLASH_ATTN the cache rows it
 * reads (K, V), SET_ROWS the cache rows it writes (src0). CONT is ALIGN for the pass, but it reads
 * element by element and its result is the pass's to pad, so there is nothing to enforce. */
bool npu_layout_reads_aligned(const struct llm_tensor *node, int j);

/* Are t's rows ALIGN for an enforcing reader: a row stride of a multiple of NPU_ALIGN_ELEMS
 * elements? Quantized rows (whole blocks), a single row (no stride to pad) and a transposed view
 * (nb[0] not one element: read element by element, with no rows to pad) count as ALIGN. */
bool npu_layout_rows_aligned(const struct llm_tensor *t);

/* The layout rule of node's op alone: ALIGN, NALIGN or BOTH (before inputs, outputs and rank). */
enum npu_layout npu_layout_rule(const struct llm_tensor *node);

/* Resolve the layouts of g's nodes [first, end) (one backend's split; modes[i] for g->nodes[first + i],
 * the caller's array of end - first) and report. With rewrite, also rewrite the split in g:
 *   - a NALIGN source (an input, another split's node, a NALIGN node) read as an ALIGN operand (by
 *     an ALIGN node, or as FLASH_ATTN's K or V) whose rows the two layouts lay out differently goes
 *     through a pad, one per source, placed before its first such reader;
 *   - an ALIGN node computing into memory of its own keeps its result padded (llm_pad_rows: its
 *     strides, so the allocator sizes it); when someone reads it dense (a NALIGN node, a view, whose
 *     strides were built dense, the host, another split) it becomes the unpad of a padded twin that
 *     computes, which its ALIGN readers read: every reader keeps its tensor, outputs and views stay
 *     dense;
 *   - no CHANNEL_NORM where the layouts coincide (rows a multiple of NPU_ALIGN_ELEMS, one row,
 *     quantized rows), so the report counts conflicts only there too.
 * The added tensors live in g->pass_ctx (freed with g). Rewriting a rewritten split adds nothing.
 * Returns the number of nodes added (the split now ends at end + that), or -1 when out of memory
 * (g is then unusable). */
int npu_layout_align(struct llm_graph *g, int first, int end, bool rewrite, enum npu_layout *modes,
                     struct npu_layout_report *r);

#endif
