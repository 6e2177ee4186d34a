/* Memory read bandwidth and FP32 FMA peak of this machine (see roofline.h). */
#include "roofline.h"

#include "clock.h"
#include "cpu_features.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FMA_ITERS 40000000L /* ~0.1 s per run at 2 FMA/cycle, 12 chains of 8 lanes */
#define FMA_CHAINS 12       /* independent accumulators: latency 4 x 2 ports needs >= 8 */
#define TRIALS 3
#define READ_PASSES 5

static volatile uint64_t sink; /* keeps the measured loops from being optimised away */

/* The widest FMA kernel the inference kernels may use (LLM_CPU_ISA caps both alike, so a fraction
 * of peak compares kernels of one width), and its lanes. */
static int fma_lanes(void)
{
    return llm_cpu_has_avx512() ? 16 : llm_cpu_has_avx2() ? 8 : 1;
}

__attribute__((target("avx2,fma"))) static uint64_t read_avx2(const uint8_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    return (uint64_t)_mm256_extract_epi64(s, 0) + (uint64_t)_mm256_extract_epi64(s, 3);
}

static uint64_t read_scalar(const uint8_t *p, size_t n)
{
    const uint64_t *q = (const uint64_t *)p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) {
        a0 += q[i];
        a1 += q[i + 1];
        a2 += q[i + 2];
        a3 += q[i + 3];
    }
    return a0 + a1 + a2 + a3;
}

/* FLOPs done: iters * FMA_CHAINS * 8 lanes * 2. */
__attribute__((target("avx2,fma"))) static float fma_avx2(long iters)
{
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
    __m256 x[FMA_CHAINS];
    for (int k = 0; k < FMA_CHAINS; k++)
        x[k] = _mm256_set1_ps((float)k * 0.01f);
    for (long i = 0; i < iters; i++) {
        /* written out so that every chain stays in its own register */
        x[0] = _mm256_fmadd_ps(x[0], a, b);
        x[1] = _mm256_fmadd_ps(x[1], a, b);
        x[2] = _mm256_fmadd_ps(x[2], a, b);
        x[3] = _mm256_fmadd_ps(x[3], a, b);
        x[4] = _mm256_fmadd_ps(x[4], a, b);
        x[5] = _mm256_fmadd_ps(x[5], a, b);
        x[6] = _mm256_fmadd_ps(x[6], a, b);
        x[7] = _mm256_fmadd_ps(x[7], a, b);
        x[8] = _mm256_fmadd_ps(x[8], a, b);
        x[9] = _mm256_fmadd_ps(x[9], a, b);
        x[10] = _mm256_fmadd_ps(x[10], a, b);
        x[11] = _mm256_fmadd_ps(x[11], a, b);
    }
    __m256 s = x[0];
    for (int k = 1; k < FMA_CHAINS; k++)
        s = _mm256_add_ps(s, x[k]);
    return _mm256_cvtss_f32(s);
}

/* The same with 16 lanes, on CPUs with AVX-512: the machine's peak is what its widest FMA
 * reaches (OpenBLAS's sgemm uses AVX-512 where it exists). */
__attribute__((target("avx512f"))) static float fma_avx512(long iters)
{
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
    __m512 x[FMA_CHAINS];
    for (int k = 0; k < FMA_CHAINS; k++)
        x[k] = _mm512_set1_ps((float)k * 0.01f);
    for (long i = 0; i < iters; i++) {
        x[0] = _mm512_fmadd_ps(x[0], a, b);
        x[1] = _mm512_fmadd_ps(x[1], a, b);
        x[2] = _mm512_fmadd_ps(x[2], a, b);
        x[3] = _mm512_fmadd_ps(x[3], a, b);
        x[4] = _mm512_fmadd_ps(x[4], a, b);
        x[5] = _mm512_fmadd_ps(x[5], a, b);
        x[6] = _mm512_fmadd_ps(x[6], a, b);
        x[7] = _mm512_fmadd_ps(x[7], a, b);
        x[8] = _mm512_fmadd_ps(x[8], a, b);
        x[9] = _mm512_fmadd_ps(x[9], a, b);
        x[10] = _mm512_fmadd_ps(x[10], a, b);
        x[11] = _mm512_fmadd_ps(x[11], a, b);
    }
    __m512 s = x[0];
    for (int k = 1; k < FMA_CHAINS; k++)
        s = _mm512_add_ps(s, x[k]);
    return _mm512_reduce_add_ps(s);
}

/* FLOPs done: iters * FMA_CHAINS * 2. */
static float fma_scalar(long iters)
{
    float x[FMA_CHAINS];
    for (int k = 0; k < FMA_CHAINS; k++)
        x[k] = (float)k * 0.01f;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < FMA_CHAINS; k++)
            x[k] = x[k] * 0.999999f + 1e-6f;
    float s = 0;
    for (int k = 0; k < FMA_CHAINS; k++)
        s += x[k];
    return s;
}

enum job_kind { JOB_TOUCH, JOB_READ, JOB_FMA };

struct job {
    enum job_kind kind;
    bool avx2;      /* read kernel */
    int lanes;      /* FMA kernel: 16, 8 or 1 */
    uint8_t *p;
    size_t n;
    long iters;
    uint64_t result;
};

static void *run_job(void *arg)
{
    struct job *j = arg;
    switch (j->kind) {
    case JOB_TOUCH: memset(j->p, 1, j->n); break;
    case JOB_READ: j->result = j->avx2 ? read_avx2(j->p, j->n) : read_scalar(j->p, j->n); break;
    case JOB_FMA:
        j->result = (uint64_t)(j->lanes == 16 ? fma_avx512(j->iters)
                               : j->lanes == 8 ? fma_avx2(j->iters) : fma_scalar(j->iters));
        break;
    }
    return NULL;
}

/* Run n copies of the job (the buffer split in n contiguous parts); wall seconds or -1. */
static double run_parallel(struct job proto, int n)
{
    pthread_t th[64];
    struct job jobs[64];
    if (n < 1 || n > 64)
        return -1;
    size_t part = proto.n / (size_t)n / 128 * 128;
    double t0 = (llm_now_us() / 1e6);
    int started = 0;
    for (int i = 0; i < n; i++) {
        jobs[i] = proto;
        jobs[i].p = proto.p ? proto.p + (size_t)i * part : NULL;
        jobs[i].n = part;
        if (pthread_create(&th[i], NULL, run_job, &jobs[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        sink += jobs[i].result;
    }
    return started == n ? (llm_now_us() / 1e6) - t0 : -1;
}

static double best_of(struct job proto, int n, int trials)
{
    double best = -1;
    for (int t = 0; t < trials; t++) {
        double s = run_parallel(proto, n);
        if (s < 0)
            return -1;
        if (best < 0 || s < best)
            best = s;
    }
    return best;
}

int roofline_measure(struct roofline *r, int bw_threads, size_t bw_bytes, int n_cores)
{
    /* memory bandwidth is the machine's: read with the widest loads it has, whatever LLM_CPU_ISA */
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bw_bytes = bw_bytes / 4096 * 4096;
    uint8_t *buf = aligned_alloc(4096, bw_bytes);
    if (!buf)
        return -1;
    struct job touch = { .kind = JOB_TOUCH, .p = buf, .n = bw_bytes };
    struct job rd = { .kind = JOB_READ, .avx2 = avx2, .p = buf, .n = bw_bytes };
    double t_read = run_parallel(touch, bw_threads) < 0 ? -1 : best_of(rd, bw_threads, READ_PASSES);
    free(buf);
    const int lanes = fma_lanes();
    long iters = lanes > 1 ? FMA_ITERS : FMA_ITERS / 4;
    double flops = (double)iters * FMA_CHAINS * 2 * lanes;
    struct job fma = { .kind = JOB_FMA, .lanes = lanes, .iters = iters };
    double t1 = best_of(fma, 1, TRIALS), tn = best_of(fma, n_cores, TRIALS);
    if (t_read <= 0 || t1 <= 0 || tn <= 0)
        return -1;
    size_t part = bw_bytes / (size_t)bw_threads / 128 * 128;
    *r = (struct roofline){
        .read_gbs = (double)(part * (size_t)bw_threads) / t_read / 1e9, .bw_threads = bw_threads,
        .bw_bytes = bw_bytes, .fma_gflops_1 = flops / t1 / 1e9, .fma_gflops_n = flops * n_cores / tn / 1e9,
        .n_cores = n_cores, .kernel = lanes == 16 ? "avx512" : lanes == 8 ? "avx2" : "scalar",
    };
    return 0;
}

double roofline_peak_gflops(const struct roofline *r, int n_threads)
{
    double v = r->fma_gflops_1 * (n_threads > 0 ? n_threads : 1);
    return v < r->fma_gflops_n ? v : r->fma_gflops_n;
}
