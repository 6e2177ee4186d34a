/* Per-token latency statistics: nearest-rank percentiles, TTFT and inter-token latency (see latency.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "latency.h"

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void latency_sort_ns(uint64_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_u64);
}

/* Nearest rank: the value at 1-based rank ceil(p/100 * n) of the sorted list, at least rank 1.
 * p * n is computed before dividing so that integral ranks (p 90 of n 100) stay exact. */
uint64_t latency_percentile_ns(const uint64_t *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    double rank = ceil(p * (double)n / 100.0);
    size_t r = rank < 1.0 ? 1 : rank > (double)n ? n : (size_t)rank;
    return sorted[r - 1];
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* Mean over rows of the sum of each row's first k entries. */
static double mean_lead_ms(const uint64_t *ns, size_t n_rows, size_t stride, size_t k)
{
    double sum = 0.0;
    for (size_t r = 0; r < n_rows; r++)
        for (size_t i = 0; i < k && i < stride; i++)
            sum += (double)ns[r * stride + i];
    return sum / (double)n_rows / 1e6;
}

int latency_summarize(const uint64_t *ns, size_t n_rows, size_t stride, size_t ttft_entries, size_t itl_from,
                      struct latency_summary *out)
{
    memset(out, 0, sizeof *out);
    if (n_rows == 0)
        return 0;
    out->has_ttft = ttft_entries > 0;
    if (out->has_ttft)
        out->ttft_ms = mean_lead_ms(ns, n_rows, stride, ttft_entries);
    const size_t per_row = itl_from < stride ? stride - itl_from : 0, n = per_row * n_rows;
    if (n == 0)
        return 0;
    uint64_t *v = malloc(n * sizeof *v);
    if (!v) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    for (size_t r = 0; r < n_rows; r++)
        memcpy(v + r * per_row, ns + r * stride + itl_from, per_row * sizeof *v);
    latency_sort_ns(v, n);
    out->n_itl = n;
    out->itl_p50_ms = ms(latency_percentile_ns(v, n, 50));
    out->itl_p90_ms = ms(latency_percentile_ns(v, n, 90));
    out->itl_p99_ms = ms(latency_percentile_ns(v, n, 99));
    out->itl_max_ms = ms(v[n - 1]);
    free(v);
    return 0;
}
