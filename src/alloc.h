/* Graph allocator: gives every computing node of a graph memory in one arena, reusing a block once
 * its last reader has run (liveness). Blocks are packed in node order, and for a graph whose peak
 * reaches 8 MiB also largest block first; the lower peak is kept. Allocation is a pure function of
 * the graph's node list, so the same graph shape gets the same addresses every time, as long as
 * the arena is not regrown (reserve it once with the largest graph): decode graph replay depends
 * on this. Leaves (weights, inputs, caches) must already have data. Views get their root's data +
 * offset. Outputs (LLM_TENSOR_OUTPUT) are never freed within the graph. A node whose op computes in
 * place (op_table.h) takes over its first source's block where it is that block's last reader and
 * the two are laid out alike. */
#ifndef LLM_ALLOC_H
#define LLM_ALLOC_H

#include <stddef.h>

#include "backend.h"
#include "error.h"
#include "graph.h"

struct llm_allocator;

/* An allocator whose arena is one buffer of backend's memory (NULL: host memory); nodes get their
 * data and buffer in it, views their source's. */
struct llm_allocator *llm_allocator_new(struct llm_backend *backend);
void llm_allocator_free(struct llm_allocator *a);

/* Make the arena at least as large as g needs (without assigning g's data). */
int llm_allocator_reserve(struct llm_allocator *a, const struct llm_graph *g, struct llm_error *err);

/* Assign data to every node of g; grows the arena when g needs more than reserved (which moves
 * every address: callers caching graphs must check llm_allocator_generation()). */
int llm_allocator_alloc_graph(struct llm_allocator *a, struct llm_graph *g, struct llm_error *err);

/* Bumped each time the arena is (re)allocated. */
unsigned llm_allocator_generation(const struct llm_allocator *a);
size_t llm_allocator_size(const struct llm_allocator *a);

#endif
