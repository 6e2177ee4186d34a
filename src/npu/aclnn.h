/* aclnn-style two-phase op launches on the emulated NPU, running the src/ops kernels on the
 * stream's device workers.
 *
 * Phase 1, *GetWorkspaceSize, is host work and builds an executor: it validates the node (op,
 * types, shapes, strides; every tensor it reads or writes must lie in device memory), picks the
 * kernel and how many workers run it, copies the tensor descriptors the kernel will read and
 * sizes the workspace. Phase 2, aclnnLaunch, takes a workspace of at least that size and enqueues
 * the kernel (recorded instead when the stream captures); it consumes the executor.
 *
 * ROPE is two kernels, as on Ascend: aclnnRopeCache computes the cos/sin table of a ROPE node from
 * its positions into a device buffer, aclnnRotaryPositionEmbedding rotates with that table. Both
 * take a ROPE_QK node too (one table; the rotation does both halves). */
#ifndef LLM_NPU_ACLNN_H
#define LLM_NPU_ACLNN_H

#include <stdbool.h>
#include <stdint.h>

#include "acl.h"
#include "tensor.h"

typedef struct aclOpExecutor aclOpExecutor;

/* Any op the cpu kernels run, except ROPE and ROPE_QK. n_workers: the stream's worker count (for
 * scratch). aligned_rows (LLM_NPU_LAYOUT_ALIGN): refuse, naming the node and the input, a source
 * an ALIGN kernel reads whose rows are not padded to 16 elements (layout.h), as a cube unit needs
 * its fractal format. */
aclError aclnnComputeGetWorkspaceSize(const struct llm_tensor *node, int n_workers, bool aligned_rows,
                                      uint64_t *workspace_size, aclOpExecutor **executor);
/* table: llm_rope_table_floats(rope) floats of device memory. */
aclError aclnnRopeCacheGetWorkspaceSize(const struct llm_tensor *rope, float *table, uint64_t *workspace_size,
                                        aclOpExecutor **executor);
aclError aclnnRotaryPositionEmbeddingGetWorkspaceSize(const struct llm_tensor *rope, const float *table,
                                                      uint64_t *workspace_size, aclOpExecutor **executor);

/* Enqueue the executor's kernel on stream with workspace (≥ the size phase 1 gave, device memory
 * or NULL when 0). Frees the executor, also on failure. */
aclError aclnnLaunch(void *workspace, uint64_t workspace_size, aclOpExecutor *executor, aclrtStream stream);

/* Frees an executor that will not be launched. */
void aclnnDestroyExecutor(aclOpExecutor *executor);

struct llm_profile;
struct llm_trace;

/* Emulator extension (a profiler's hook): the kernel records its run in prof and trace (see
 * src/profile.h), from the device worker that runs it; NULL = off. */
void aclnnSetObservers(aclOpExecutor *executor, struct llm_profile *prof, struct llm_trace *trace);

#endif
