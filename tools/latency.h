/* Per-token latency statistics for llm-bench --token-times and llm-run -v.
 *
 * Contract: the input is rows of per-token wall times in ns (one row per repetition, `stride`
 * entries each); nothing is modified. Percentiles use the nearest-rank method: the p-th percentile
 * of n sorted values is the value at 1-based rank ceil(p/100 * n) (rank 1 for p = 0), so it is
 * always one of the measured values. TTFT is the mean over rows of the sum of each row's first
 * `ttft_entries` entries. Only latency_summarize() allocates (a sorted copy); it returns -1 if
 * that fails, with *out zeroed. */
#ifndef LLM_TOOLS_LATENCY_H
#define LLM_TOOLS_LATENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct latency_summary {
    bool has_ttft;   /* ttft_entries > 0 and at least one row                        */
    double ttft_ms;  /* time to first token: mean over rows                           */
    size_t n_itl;    /* inter-token intervals the percentiles cover (0: none, all 0)  */
    double itl_p50_ms, itl_p90_ms, itl_p99_ms, itl_max_ms;
};

/* Nearest-rank p-th percentile (0 <= p <= 100) of n ascending values; 0 when n is 0. */
uint64_t latency_percentile_ns(const uint64_t *sorted, size_t n, double p);

/* Sort n values ascending in place. */
void latency_sort_ns(uint64_t *v, size_t n);

/* Summary of n_rows rows of stride entries: TTFT from each row's first ttft_entries entries (none
 * when 0), inter-token latency percentiles over entries [itl_from, stride) of every row. */
int latency_summarize(const uint64_t *ns, size_t n_rows, size_t stride, size_t ttft_entries, size_t itl_from,
                      struct latency_summary *out);

#endif
