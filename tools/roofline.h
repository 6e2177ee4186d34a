/* The machine's limits for llm-bench --roofline: memory read bandwidth and FP32 FMA peak, measured
 * in the same run as the benchmark (machines are shared and noisy, so recorded figures go stale). */
#ifndef LLM_TOOLS_ROOFLINE_H
#define LLM_TOOLS_ROOFLINE_H

#include <stddef.h>

struct roofline {
    double read_gbs;       /* read bandwidth, 1e9 bytes/s, bw_threads threads over bw_bytes   */
    int bw_threads;
    size_t bw_bytes;
    double fma_gflops_1;   /* FP32 FMA peak of one thread, 1e9 FLOP/s (an FMA counts 2)      */
    double fma_gflops_n;   /* ... of n_cores threads                                          */
    int n_cores;
    const char *kernel;    /* "avx512", "avx2" or "scalar": the FMA kernel that measured it, the
                              widest the inference kernels may use (LLM_CPU_ISA caps both; the
                              read bandwidth is measured with the CPU's widest loads regardless) */
};

/* Measure: a best-of-several streaming read of bw_bytes (split over bw_threads threads, buffer
 * touched first) and an FMA loop with independent accumulators on 1 and n_cores threads. Takes
 * about two seconds. Returns -1 when the buffer or a thread cannot be had (r untouched). */
int roofline_measure(struct roofline *r, int bw_threads, size_t bw_bytes, int n_cores);

/* FMA peak available to n threads: the one-thread figure times n, capped by the n_cores figure. */
double roofline_peak_gflops(const struct roofline *r, int n_threads);

#endif
