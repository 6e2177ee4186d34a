/* Where a backend's time goes, op by op. Per phase (prefill: graphs whose batch has more than one
 * token; decode: one token) and per op key (the op; MUL_MAT split by its weight type): how many
 * nodes ran, their total µs, the bytes they read and the FLOPs they did. The context sets the phase
 * of each graph before computing it; the backend adds one record per node it executes (on the npu,
 * from the device worker that runs the kernel, and also the host's per-op costs); tools read it once
 * the backend is synchronized. A NULL profile is a no-op. */
#ifndef LLM_PROFILE_H
#define LLM_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

enum llm_phase { LLM_PHASE_PREFILL, LLM_PHASE_DECODE, LLM_PHASE_COUNT };

struct llm_profile_entry {
    uint64_t count;
    double us;     /* wall time of the nodes, on the thread that runs or leads them */
    double bytes;  /* bytes read: every source (GET_ROWS: the rows taken; SET_ROWS: the new rows) */
    double flops;  /* 2·K·M·N for MUL_MAT, the attention's products for FLASH_ATTN, else elements */
};

/* Host work a backend does beside its kernels, under a name of its own (the npu: executor builds,
 * launches, cache matching, replays; the cpu: its threads' waits at barriers, summed over threads),
 * per phase. */
struct llm_profile_host {
    const char *name; /* static */
    double us[LLM_PHASE_COUNT];
};
#define LLM_PROFILE_MAX_HOST 8

struct llm_profile {
    enum llm_phase phase;                 /* of the graph being computed (set by the context)  */
    struct llm_profile_entry op[LLM_PHASE_COUNT][LLM_OP_COUNT][LLM_TYPE_COUNT];
    uint64_t graphs[LLM_PHASE_COUNT];     /* graph computes                                    */
    uint64_t tokens[LLM_PHASE_COUNT];     /* tokens those graphs evaluated                     */
    double graph_us[LLM_PHASE_COUNT];     /* their wall time, submission to synchronize        */
    struct llm_profile_host host[LLM_PROFILE_MAX_HOST]; /* in the order first recorded */
    int n_host;
};

/* Add us of host work called name to the current phase (a name past LLM_PROFILE_MAX_HOST is not
 * kept: the backends' names are few and fixed). */
void llm_profile_host(struct llm_profile *p, const char *name, double us);
/* The host work called name in phase ph so far; 0 when none. */
double llm_profile_host_us(const struct llm_profile *p, enum llm_phase ph, const char *name);

/* Add one executed node to the current phase. */
void llm_profile_node(struct llm_profile *p, const struct llm_tensor *node, double us);
/* The entry of node's op key in phase ph. */
struct llm_profile_entry *llm_profile_entry_of(struct llm_profile *p, enum llm_phase ph,
                                               const struct llm_tensor *node);
/* Bytes node reads (all sources) and FLOPs it does, as llm_profile_node counts them. */
double llm_node_bytes_read(const struct llm_tensor *node);
double llm_node_flops(const struct llm_tensor *node);

const char *llm_phase_name(enum llm_phase ph);

struct llm_trace;

/* A backend executed node on track tid from t0 (an llm_now_us reading) to now: record it in prof
 * (for the first worker of a node only: lead = true) and as a span of trace named after the node
 * with its op, types and shapes; either may be NULL. */
void llm_observe_node(struct llm_profile *prof, struct llm_trace *trace, int tid, bool lead,
                      const struct llm_tensor *node, double t0);

#endif
