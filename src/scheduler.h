/* The backend scheduler: one graph over several backends, in the passes of llama.cpp's. It assigns
 * every node to one of n backends, ordered by priority (0 highest, e.g. the npu; the last one is the
 * cpu, which by contract runs every op), then cuts the node list into splits wherever the backend
 * changes, listing for each split the tensors it reads from memory of another backend: those are
 * copied in before the split runs. It knows nothing of models or of any backend's insides: the
 * caller says where a leaf's memory lives and whether a backend runs a node. Linear in the number
 * of nodes and sources.
 *
 * Assignment (tensor->backend, -1 = not yet):
 *   1. leaves: the backend of their memory (graph inputs: the cpu); a node that writes into
 *      preallocated memory (SET_ROWS, CPY into the KV cache) goes there, and one that reads a weight
 *      or other preallocated memory goes there when that backend runs it (else it falls back below,
 *      reading a copy); op offload: one that would so go to the cpu for a weight in host memory
 *      goes instead to the highest-priority backend that runs it when it has at least
 *      op_offload_min_batch rows (not GET_ROWS), reading a copy of the weight;
 *   2. a non-cpu assignment spreads to unassigned neighbours that backend runs, down the node list
 *      then up; a cpu node stops the spread;
 *   3. an unassigned node goes to the backend, among those that run it, holding most of its
 *      sources (ties: higher priority);
 *   4. views (and any node still unassigned) follow the memory they view; the rest go to the cpu.
 * Splits: views join the split they are in; a computing node opens a new split when its backend
 * differs from the current split's (set by the split's first computing node). */
#ifndef LLM_SCHEDULER_H
#define LLM_SCHEDULER_H

#include <stdbool.h>

#include "error.h"
#include "graph.h"

#define LLM_SCHED_MAX_BACKENDS 8

struct llm_sched_query {
    int n_backends; /* 1..LLM_SCHED_MAX_BACKENDS; backend n_backends - 1 is the cpu */
    /* The backend whose memory holds leaf (weights, KV cache), or -1 for a graph input, which the
     * host writes (it counts as the cpu's). */
    int (*leaf_backend)(void *user, const struct llm_tensor *leaf);
    /* Can backend b run node (its op, types and shapes)? Never asked for the cpu. */
    bool (*supports)(void *user, int b, const struct llm_tensor *node);
    void *user;
    /* Op offload (llama.cpp's GGML_OP_OFFLOAD_MIN_BATCH, -nopo 0): a batch of at least this many
     * rows (the node's ne[1]) reading a weight in the cpu's memory runs on a device, the weight
     * copied in each run, where the copy costs less than the cpu computing it; 0 or less: off. */
    int op_offload_min_batch;
};

struct llm_sched_split {
    int backend;
    int first, end;             /* the graph's nodes [first, end) */
    int first_input, n_inputs;  /* its inputs: llm_sched.inputs[first_input .. + n_inputs) */
};

struct llm_sched {
    struct llm_sched_split *splits;
    int n_splits, cap_splits;
    struct llm_tensor **inputs; /* per split, the tensors it reads from another backend's memory */
    int n_inputs, cap_inputs;
    /* seen-set of one split's inputs: open addressing on the tensor's address, stamped by split */
    const struct llm_tensor **seen;
    int *seen_split;
    int cap_seen;
};

/* Passes 1..last_pass (1-4) of the assignment; writes tensor->backend of g's leaves and nodes. */
void llm_sched_assign(struct llm_graph *g, const struct llm_sched_query *q, int last_pass);

/* The backend whose memory holds t's data once g has run: a view's is its source's. */
int llm_sched_memory_backend(const struct llm_tensor *t);

/* Assign (all passes) and split g. s is reused across calls; zero it before the first. Fails when a
 * node writes memory of a backend that cannot run it. */
int llm_sched_plan(struct llm_sched *s, struct llm_graph *g, const struct llm_sched_query *q,
                   struct llm_error *err);

/* Frees what s holds (not s itself). */
void llm_sched_release(struct llm_sched *s);

#endif
