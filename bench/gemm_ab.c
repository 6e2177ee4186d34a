/* llm-gemm-ab: prefill's MUL_MAT of Q4_0 or Q8_0 weights on the integer GEMM kernel that the CPU's
 * dispatch chose (types.h gemm) against dequantize + OpenBLAS sgemm (the BLAS path of matmul.c),
 * at qwen2-0.5B's shapes and batches of 16, 64 and 512 rows. Each thread takes its share of the
 * weight rows as matmul.c does; the two are alternated call by call in one process, so a shared
 * machine's slow seconds hit both alike. Prints the medians and the median ratio per shape.
 *   usage: llm-gemm-ab [TYPE (q4_0|q8_0, default q4_0)] [THREADS (2)] [ROUNDS (15)] */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "ops/kernels/blas.h"
#include "ops/kernels/kernels.h"
#include "ops/types/types.h"
#include "threadpool.h"

#define MAX_THREADS 64

static const int64_t shapes[][2] = { { 896, 896 }, { 896, 4864 }, { 4864, 896 } }; /* K, M */
static const int64_t batches[] = { 16, 64, 512 };

struct job {
    enum llm_type t;
    bool gemm;
    int64_t K, M, N;
    const char *w, *x; /* weights, the activations as Q8_0 rows */
    const float *xf;   /* the activations as floats, for sgemm */
    float *dst;
    void *scratch[MAX_THREADS];
};

static void run(int ith, int nth, void *arg)
{
    const struct job *j = arg;
    const size_t ws = llm_row_size(j->t, j->K), xs = llm_row_size(LLM_TYPE_Q8_0, j->K);
    int64_t r0, r1;
    thread_rows(j->M, ith, nth, &r0, &r1);
    if (r1 <= r0)
        return;
    if (j->gemm) {
        llm_type_traits(j->t)->gemm(j->K, r1 - r0, j->N, j->w + (size_t)r0 * ws, ws, j->x, xs, j->dst + r0,
                                    (size_t)j->M, j->scratch[ith]);
        return;
    }
    float *rows = j->scratch[ith];
    for (int64_t r = r0; r < r1; r++)
        llm_type_traits(j->t)->to_float_fast(j->w + (size_t)r * ws, rows + (r - r0) * j->K, j->K);
    llm_blas_sgemm_nt((int)j->N, (int)(r1 - r0), (int)j->K, j->xf, (int)j->K, rows, (int)j->K, j->dst + r0, (int)j->M);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double timed(struct llm_threadpool *pool, struct job *j, bool gemm)
{
    j->gemm = gemm;
    double t0 = llm_now_us();
    llm_threadpool_run(pool, run, j);
    return (llm_now_us() - t0) / 1e3;
}

/* One shape: rounds of both, alternating which goes first; prints a table row. */
static void shape(struct llm_threadpool *pool, enum llm_type t, int nth, int rounds, int64_t K, int64_t M, int64_t N)
{
    const size_t ws = llm_row_size(t, K), xs = llm_row_size(LLM_TYPE_Q8_0, K);
    char *w = malloc(ws * (size_t)M), *x = malloc(xs * (size_t)N);
    float *xf = malloc((size_t)(K * N) * sizeof(float)), *row = malloc((size_t)K * sizeof(float));
    struct job j = { .t = t, .K = K, .M = M, .N = N, .w = w, .x = x, .xf = xf,
                     .dst = malloc((size_t)(M * N) * sizeof(float)) };
    for (int64_t r = 0; r < M; r++) {
        for (int64_t i = 0; i < K; i++)
            row[i] = (float)((r * 31 + i * 17) % 97) / 97.0f - 0.5f;
        llm_type_traits(t)->from_float(row, w + (size_t)r * ws, K);
    }
    for (int64_t i = 0; i < K * N; i++)
        xf[i] = (float)((i * 13) % 89) / 89.0f - 0.5f;
    for (int64_t n = 0; n < N; n++)
        llm_type_traits(LLM_TYPE_Q8_0)->from_float(xf + n * K, x + (size_t)n * xs, K);
    /* each thread's scratch serves either: the kernel's own, or its share of dequantized rows */
    size_t rows_bytes = (size_t)((M + nth - 1) / nth * K) * sizeof(float), kern = llm_gemm_scratch_size(K, N);
    for (int i = 0; i < nth; i++)
        j.scratch[i] = malloc(kern > rows_bytes ? kern : rows_bytes);
    double *a = malloc(sizeof(double) * (size_t)rounds), *b = malloc(sizeof(double) * (size_t)rounds),
           *ratio = malloc(sizeof(double) * (size_t)rounds);
    timed(pool, &j, true), timed(pool, &j, false); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        if (r % 2) {
            b[r] = timed(pool, &j, false), a[r] = timed(pool, &j, true);
        } else {
            a[r] = timed(pool, &j, true), b[r] = timed(pool, &j, false);
        }
        ratio[r] = b[r] / a[r];
    }
    qsort(a, (size_t)rounds, sizeof *a, cmp), qsort(b, (size_t)rounds, sizeof *b, cmp);
    qsort(ratio, (size_t)rounds, sizeof *ratio, cmp);
    printf("| %s | %lld x %lld | %lld | %.3f | %.3f | %.2f |\n", llm_type_name(t), (long long)K, (long long)M,
           (long long)N, a[rounds / 2], b[rounds / 2], ratio[rounds / 2]);
    fflush(stdout);
    for (int i = 0; i < nth; i++)
        free(j.scratch[i]);
    free(w), free(x), free(xf), free(row), free(j.dst), free(a), free(b), free(ratio);
}

int main(int argc, char **argv)
{
    const char *tname = argc > 1 ? argv[1] : "q4_0";
    const int nth = argc > 2 ? atoi(argv[2]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 15;
    const int t = llm_type_from_name(tname);
    if ((t != LLM_TYPE_Q4_0 && t != LLM_TYPE_Q8_0) || nth < 1 || nth > MAX_THREADS || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "llm: error: usage: llm-gemm-ab [q4_0|q8_0] [THREADS 1-%d] [ROUNDS 1-1000]\n", MAX_THREADS);
        return 1;
    }
    if (!llm_type_traits((enum llm_type)t)->gemm || !llm_blas_available()) {
        fprintf(stderr, "llm: error: no %s GEMM kernel on this CPU, or no OpenBLAS\n", tname);
        return 1;
    }
    struct llm_threadpool *pool = llm_threadpool_new(nth);
    printf("%s, %d threads, %d rounds, ms (medians); ratio: the median of sgemm / GEMM per round\n\n", tname, nth,
           rounds);
    printf("| type | K x M | N | GEMM | dequantize + sgemm | ratio |\n|---|---|---:|---:|---:|---:|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t n = 0; n < sizeof batches / sizeof batches[0]; n++)
            shape(pool, (enum llm_type)t, nth, rounds, shapes[s][0], shapes[s][1], batches[n]);
    llm_threadpool_free(pool);
    return 0;
}
