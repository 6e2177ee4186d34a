/* Running one graph across several backends as the scheduler splits it (scheduler.h): every node
 * gets memory in the arena of the backend whose memory it lives in, every split input a fixed copy
 * in the arena of the split's backend (so the same graph shape gets the same addresses and an npu
 * split stays capturable), and each run copies the inputs of a split in just before the split's
 * backend computes it. Backends are in priority order; the last one is the cpu.
 *
 * Lifetimes: a tensor another backend's split copies stays alive in its own arena until the last
 * split of its backend that runs before that copy; the copies live from their split's start until
 * their last reader. */
#ifndef LLM_SPLIT_EXEC_H
#define LLM_SPLIT_EXEC_H

#include "alloc.h"
#include "backend.h"
#include "scheduler.h"

struct llm_split_exec {
    struct llm_backend *backends[LLM_SCHED_MAX_BACKENDS];
    struct llm_allocator *alloc[LLM_SCHED_MAX_BACKENDS];
    int n_backends;
    struct llm_sched plan;
    struct llm_tensor *copies;   /* one per split input, in plan.inputs order */
    int n_copies;
    struct llm_graph *sub;       /* per split, its nodes as a graph for its backend */
};

/* Arenas for n backends (the cpu last); 0 or an error. */
int llm_split_exec_init(struct llm_split_exec *x, struct llm_backend **backends, int n, struct llm_error *err);
void llm_split_exec_release(struct llm_split_exec *x);

/* Schedule g with q, give each split input its copy (rewiring the split's nodes to read it) and
 * place every node and copy in its backend's arena; g stays rewired until x prepares another
 * graph. reserve_only: only grow the arenas and the backends' internal buffers (workspaces, tables)
 * for g and every smaller batch of it; g is left as it was, with no data assigned. */
int llm_split_exec_prepare(struct llm_split_exec *x, struct llm_graph *g, const struct llm_sched_query *q,
                           bool reserve_only, struct llm_error *err);

/* Run the prepared graph: each split's input copies, then its nodes on its backend; returns when
 * every backend is done. */
int llm_split_exec_run(struct llm_split_exec *x, struct llm_error *err);

/* Changes whenever an arena was (re)allocated: graphs prepared before then must be prepared again. */
unsigned llm_split_exec_generation(const struct llm_split_exec *x);

#endif
