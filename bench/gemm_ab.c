/* llm-gemm-ab: prefill's MUL_MAT of Q4_0, Q5_0 or Q8_0 weights on each way the cpu backend could run it,
 * at qwen2-0.5B's shapes and batches of 8 to 512 rows: the integer GEMM kernel that the CPU's
 * dispatch chose (types.h gemm), its twin reading the matrix repacked at load (gemm_packed, where
 * the type has one), the dot path on the repacked rows (vec_dot_packed, where the CPU repacks the
 * type), the float GEMM (gemm_f32, where the type has one), the old AVX2 Q8_0 tiles (gemm_avx2.c),
 * and dequantize + OpenBLAS sgemm (the BLAS path of
 * matmul.c). Each thread takes its share of the weight rows as matmul.c does; the
 * variants are alternated call by call in one process (the order turning each round), so a shared
 * machine's slow seconds hit all alike. Prints the medians and, per variant, the median ratio of
 * its time to the first's per round (above 1: slower than the dispatched GEMM).
 *   usage: llm-gemm-ab [TYPE (q4_0|q5_0|q8_0, default q4_0)] [THREADS (2)] [ROUNDS (15)] */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "cpu_features.h"
#include "ops/kernels/blas.h"
#include "ops/kernels/kernels.h"
#include "ops/types/quants.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"
#include "threadpool.h"

#define MAX_THREADS 64
#define MAX_VARIANTS 5
#define DOT_ROWS 16 /* weight rows per step against each activation row, as matmul.c's PACKED_BATCH_ROWS */

static const int64_t shapes[][2] = { { 896, 896 }, { 896, 128 }, { 896, 4864 }, { 4864, 896 } }; /* K, M */
static const int64_t batches[] = { 8, 16, 32, 64, 128, 512 };

enum how { GEMM, GEMM_PACKED, DOT_PACKED, FLOAT_GEMM, SGEMM };

struct variant {
    const char *name;
    enum how how;
    llm_gemm_fn gemm; /* GEMM, GEMM_PACKED, FLOAT_GEMM */
};

struct job {
    enum llm_type t;
    const struct variant *v;
    int64_t K, M, N;
    const char *w, *wp, *x; /* weights, their repacked copy, the activations as Q8_0 rows */
    const char *xk;         /* the activation rows as the repacked kernel reads them (llm_repack_x) */
    size_t xks;             /* their stride */
    const float *xf;        /* the activations as floats, for the float GEMM and sgemm */
    float *dst;
    void *scratch[MAX_THREADS];
};

static void run(int ith, int nth, void *arg)
{
    const struct job *j = arg;
    const size_t ws = llm_row_size(j->t, j->K), xs = llm_row_size(LLM_TYPE_Q8_0, j->K);
    int64_t r0, r1;
    if (j->v->how == GEMM_PACKED) { /* whole groups per thread, as matmul.c gemm_share */
        const size_t gs = llm_repack_group_size(j->t, j->K);
        thread_rows((j->M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, ith, nth, &r0, &r1);
        const int64_t m0 = r0 * LLM_REPACK_ROWS, m1 = r1 * LLM_REPACK_ROWS < j->M ? r1 * LLM_REPACK_ROWS : j->M;
        if (m1 > m0)
            j->v->gemm(j->K, m1 - m0, j->N, j->wp + (size_t)r0 * gs, gs, j->x, xs, j->dst + m0, (size_t)j->M,
                       j->scratch[ith]);
        return;
    }
    if (j->v->how == DOT_PACKED) { /* the dot path on repacked rows (M a multiple of DOT_ROWS here) */
        const size_t gs = llm_repack_group_size(j->t, j->K);
        thread_rows(j->M / DOT_ROWS, ith, nth, &r0, &r1);
        for (int64_t c = r0; c < r1; c++)
            for (int64_t n = 0; n < j->N; n++)
                llm_type_traits(j->t)->vec_dot_packed(j->K, DOT_ROWS / LLM_REPACK_ROWS,
                                                      j->dst + n * j->M + c * DOT_ROWS,
                                                      j->wp + (size_t)(c * DOT_ROWS / LLM_REPACK_ROWS) * gs,
                                                      j->xk + (size_t)n * j->xks);
        return;
    }
    thread_rows(j->M, ith, nth, &r0, &r1);
    if (r1 <= r0)
        return;
    if (j->v->how == GEMM) {
        j->v->gemm(j->K, r1 - r0, j->N, j->w + (size_t)r0 * ws, ws, j->x, xs, j->dst + r0, (size_t)j->M,
                   j->scratch[ith]);
        return;
    }
    if (j->v->how == FLOAT_GEMM) {
        j->v->gemm(j->K, r1 - r0, j->N, j->w + (size_t)r0 * ws, ws, j->xf, (size_t)j->K * sizeof(float), j->dst + r0,
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

static double timed(struct llm_threadpool *pool, struct job *j, const struct variant *v)
{
    j->v = v;
    double t0 = llm_now_us();
    llm_threadpool_run(pool, run, j);
    return (llm_now_us() - t0) / 1e3;
}

static double median(double *a, int n)
{
    qsort(a, (size_t)n, sizeof *a, cmp);
    return a[n / 2];
}

/* One shape: rounds of every variant, the order turning by one each round; prints a table row. */
static void shape(struct llm_threadpool *pool, enum llm_type t, const struct variant *vs, int nv, int nth,
                  int rounds, int64_t K, int64_t M, int64_t N)
{
    const size_t ws = llm_row_size(t, K), xs = llm_row_size(LLM_TYPE_Q8_0, K);
    char *w = malloc(ws * (size_t)M), *x = malloc(xs * (size_t)N), *wp = malloc(llm_repack_size(t, K, M));
    float *xf = malloc((size_t)(K * N) * sizeof(float)), *row = malloc((size_t)K * sizeof(float));
    struct job j = { .t = t, .K = K, .M = M, .N = N, .w = w, .wp = wp, .x = x, .xf = xf,
                     .dst = malloc((size_t)(M * N) * sizeof(float)) };
    for (int64_t r = 0; r < M; r++) {
        for (int64_t i = 0; i < K; i++)
            row[i] = (float)((r * 31 + i * 17) % 97) / 97.0f - 0.5f;
        llm_type_traits(t)->from_float(row, w + (size_t)r * ws, K);
    }
    llm_repack_groups(t, K, M, w, ws, 0, (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, wp);
    for (int64_t i = 0; i < K * N; i++)
        xf[i] = (float)((i * 13) % 89) / 89.0f - 0.5f;
    for (int64_t n = 0; n < N; n++)
        llm_type_traits(LLM_TYPE_Q8_0)->from_float(xf + n * K, x + (size_t)n * xs, K);
    /* made once, as matmul.c does once per matrix */
    const size_t form = llm_repack_x_size(t, K);
    char *xk = form ? aligned_alloc(64, form * (size_t)N) : NULL;
    j.xk = form ? xk : x, j.xks = form ? form : xs;
    for (int64_t n = 0; form && n < N; n++)
        llm_repack_x(t, K, x + (size_t)n * xs, xk + (size_t)n * form);
    /* each thread's scratch serves any: a kernel's own, or its share of dequantized rows */
    size_t most = (size_t)((M + nth - 1) / nth * K) * sizeof(float);
    most = llm_gemm_scratch_size(K, N) > most ? llm_gemm_scratch_size(K, N) : most;
    most = llm_gemm_f32_scratch_size(K) > most ? llm_gemm_f32_scratch_size(K) : most;
    for (int i = 0; i < nth; i++)
        j.scratch[i] = malloc(most);
    double *ms[MAX_VARIANTS], *ratio[MAX_VARIANTS];
    for (int v = 0; v < nv; v++) {
        ms[v] = malloc(sizeof(double) * (size_t)rounds), ratio[v] = malloc(sizeof(double) * (size_t)rounds);
        timed(pool, &j, &vs[v]); /* warm-up */
    }
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < nv; i++) {
            const int v = (r + i) % nv;
            ms[v][r] = timed(pool, &j, &vs[v]);
        }
        for (int v = 0; v < nv; v++)
            ratio[v][r] = ms[v][r] / ms[0][r];
    }
    printf("| %s | %lld x %lld | %lld |", llm_type_name(t), (long long)K, (long long)M, (long long)N);
    for (int v = 0; v < nv; v++)
        printf(" %.3f |", median(ms[v], rounds));
    for (int v = 1; v < nv; v++)
        printf(" %.2f |", median(ratio[v], rounds));
    printf("\n");
    fflush(stdout);
    for (int v = 0; v < nv; v++)
        free(ms[v]), free(ratio[v]);
    for (int i = 0; i < nth; i++)
        free(j.scratch[i]);
    free(w), free(wp), free(x), free(xk), free(xf), free(row), free(j.dst);
}

int main(int argc, char **argv)
{
    const char *tname = argc > 1 ? argv[1] : "q4_0";
    const int nth = argc > 2 ? atoi(argv[2]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 15;
    const int t = llm_type_from_name(tname);
    if ((t != LLM_TYPE_Q4_0 && t != LLM_TYPE_Q5_0 && t != LLM_TYPE_Q8_0) || nth < 1 || nth > MAX_THREADS ||
        rounds < 1 || rounds > 1000) {
        fprintf(stderr, "llm: error: usage: llm-gemm-ab [q4_0|q5_0|q8_0] [THREADS 1-%d] [ROUNDS 1-1000]\n",
                MAX_THREADS);
        return 1;
    }
    if (!llm_type_traits((enum llm_type)t)->gemm || !llm_blas_available()) {
        fprintf(stderr, "llm: error: no %s GEMM kernel on this CPU, or no OpenBLAS\n", tname);
        return 1;
    }
    const struct llm_type_traits *tt = llm_type_traits((enum llm_type)t);
    struct variant vs[MAX_VARIANTS] = { { "GEMM", GEMM, tt->gemm } };
    int nv = 1;
    if (tt->gemm_packed)
        vs[nv++] = (struct variant){ "GEMM on repacked groups", GEMM_PACKED, tt->gemm_packed };
    if (tt->vec_dot_packed)
        vs[nv++] = (struct variant){ "dot on repacked rows", DOT_PACKED, NULL };
    if (tt->gemm_f32)
        vs[nv++] = (struct variant){ "float GEMM", FLOAT_GEMM, tt->gemm_f32 };
    if (t == LLM_TYPE_Q8_0 && llm_cpu_has_avx2())
        vs[nv++] = (struct variant){ "old AVX2 tiles", GEMM, llm_gemm_q8_0_tiles_avx2 };
    vs[nv++] = (struct variant){ "dequantize + sgemm", SGEMM, NULL };
    struct llm_threadpool *pool = llm_threadpool_new(nth);
    printf("%s, %d threads, %d rounds, ms (medians); ratios: the median of each variant's time / GEMM's per round\n\n",
           tname, nth, rounds);
    printf("| type | K x M | N |");
    for (int v = 0; v < nv; v++)
        printf(" %s |", vs[v].name);
    for (int v = 1; v < nv; v++)
        printf(" %s / GEMM |", vs[v].name);
    printf("\n|---|---|---:|");
    for (int v = 1; v < 2 * nv; v++)
        printf("---:|");
    printf("\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t n = 0; n < sizeof batches / sizeof batches[0]; n++)
            shape(pool, (enum llm_type)t, vs, nv, nth, rounds, shapes[s][0], shapes[s][1], batches[n]);
    llm_threadpool_free(pool);
    return 0;
}
