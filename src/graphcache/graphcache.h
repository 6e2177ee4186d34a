/* ACL graph mode, backend-independent part (src/graphcache/README.md): node
 * property records and matching, the LRU of captured graphs, and the policy switches read from the
 * environment. It knows nothing of models or of the npu: a captured graph is an opaque pointer that
 * the cache hands back to its owner's destroy callback when it is evicted or the cache is freed. */
#ifndef LLM_GRAPHCACHE_H
#define LLM_GRAPHCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "graph.h"

/* ---- property records ---------------------------------------------------------------------- */

/* What one node looked like when its graph was captured. Absent sources are recorded as address
 * NULL, type LLM_TYPE_COUNT, ne/nb zero. */
struct llm_node_src_props {
    const void *data;
    int type;
    int64_t ne[LLM_MAX_DIMS];
    size_t nb[LLM_MAX_DIMS];
};

struct llm_node_props {
    const void *data;
    int op;
    int type;
    int64_t ne[LLM_MAX_DIMS];
    size_t nb[LLM_MAX_DIMS];
    struct llm_node_src_props src[LLM_MAX_SRC];
    int32_t op_params[LLM_MAX_OP_PARAMS];
};

/* Record of every node of g (in order). */
struct llm_graph_props {
    int n_nodes;
    struct llm_node_props *nodes;
};

/* Fill p from g; returns false when out of memory (p is then empty). */
bool llm_graph_props_record(struct llm_graph_props *p, const struct llm_graph *g);
void llm_graph_props_clear(struct llm_graph_props *p);

/* Does g match the record? Equal node count and, node by node: data address (not for VIEW nodes),
 * op, type, ne, nb; for each source slot: present in both or absent in both, then address (not
 * when the node is a VIEW), type, ne, nb; all op_params. */
bool llm_graph_props_match(const struct llm_graph_props *p, const struct llm_graph *g);

/* ---- LRU of captured graphs ------------------------------------------------------------------ */

struct llm_graph_entry {
    struct llm_graph_props props;
    void *graph; /* captured instance; NULL until the owner stores it after capture */
};

typedef void (*llm_graph_destroy_fn)(void *graph, void *user);

struct llm_graph_lru;

/* capacity >= 1 (values below are taken as 1). destroy is called on each non-NULL graph evicted,
 * and on the remaining ones by llm_graph_lru_free. NULL when out of memory. */
struct llm_graph_lru *llm_graph_lru_new(int capacity, llm_graph_destroy_fn destroy, void *user);
void llm_graph_lru_free(struct llm_graph_lru *c);

/* Scan front (most recent) to back; the first entry matching g moves to the front and is
 * returned. NULL on a miss (the order is then unchanged). */
struct llm_graph_entry *llm_graph_lru_find(struct llm_graph_lru *c, const struct llm_graph *g);

/* A new entry recording g, pushed at the front; when the cache is full the back entry is removed
 * first and its graph destroyed (an eviction). NULL when out of memory (cache unchanged). */
struct llm_graph_entry *llm_graph_lru_push(struct llm_graph_lru *c, const struct llm_graph *g);

int llm_graph_lru_size(const struct llm_graph_lru *c);
int llm_graph_lru_capacity(const struct llm_graph_lru *c);
uint64_t llm_graph_lru_evictions(const struct llm_graph_lru *c);
/* The i-th entry from the front (0 = most recently used), NULL when out of range. */
struct llm_graph_entry *llm_graph_lru_at(struct llm_graph_lru *c, int i);

/* ---- policy ------------------------------------------------------------------------------------ */

/* GGML_CANN_* booleans: true iff the value, lower-cased byte by byte (no trimming), is one of on, 1,
 * yes, y, enable, true. NULL (unset) is false. */
bool llm_env_bool(const char *value);
/* getenv(name) parsed by llm_env_bool; dflt when the variable is unset. */
bool llm_env_flag(const char *name, bool dflt);

#define LLM_GRAPH_CACHE_DEFAULT_CAPACITY 12

/* GGML_CANN_GRAPH_CACHE_CAPACITY's value: NULL (unset) -> 12; a decimal integer >= 1 (leading
 * whitespace allowed, nothing after the digits) -> itself; anything else (< 1, not a number,
 * trailing junk, out of range) -> 1 with one warning line through llm_log. */
int llm_graph_cache_capacity(const char *value);

/* Query length of g's attention: src[0]->ne[1] of the first FLASH_ATTN node, else of the first
 * SOFT_MAX node; 1 when g has neither. A graph is a prefill graph when this is > 1. */
int64_t llm_graph_query_len(const struct llm_graph *g);

#endif
