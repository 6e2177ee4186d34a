/* The per-op profile of a run (src/profile.h) as the tools show it: a table per phase (prefill,
 * decode) with, per op key, the count per token, total and mean µs, the share of the phase's op
 * time, and the achieved GB/s (bytes read) and GFLOP/s beside the machine's limits when a roofline
 * was measured; for the npu also the host's costs per token. And the same as one JSON object, the
 * `profile` field of llm-bench's records, so scripts can diff two runs. */
#ifndef LLM_TOOLS_PROFILE_PRINT_H
#define LLM_TOOLS_PROFILE_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "profile.h"
#include "roofline.h"

/* Tables on out, each line prefixed with prefix ("llm-run: "); roof may be NULL (no limits column);
 * n_threads: the threads the FMA peak applies to. The backend's host work, when it recorded any, on a
 * line of its own. */
void profile_print_table(FILE *out, const char *prefix, const struct llm_profile *p, const char *backend,
                         const struct roofline *roof, int n_threads);

/* {"decode":{"tokens":N,"graph_us":..,"host":{"build_us":..,...},"ops":{"MUL_MAT Q8_0":{"count":..,"us":..,
 * "bytes":..,"flops":..},...}},"prefill":{...}} into a malloc'ed string; NULL when out of memory. */
char *profile_json(const struct llm_profile *p);

#endif
