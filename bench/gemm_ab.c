/* llm-gemm-ab: prefill's MUL_MAT of Q4_0, Q5_0 or Q8_0 weights on each path matmul.c can take, at
 * qwen2-0.5B's shapes and batches of 8 to 512 rows: the integer GEMM kernel the CPU's dispatch
 * chose (types.h gemm), the same on the matrix repacked at load (gemm_packed, where the type has
 * one), the float GEMM (gemm_f32, where the type has one), the dot path (vec_dot4 per four rows
 * and activation row) and dequantize + OpenBLAS sgemm (the BLAS path). Each thread takes its share
 * of the weight rows as matmul.c does; the paths are alternated call by call in one process (the
 * order rotating per round), so a shared machine's slow seconds hit all alike. Prints the medians
 * and, per path, the median ratio of its time to the integer GEMM's.
 *   usage: llm-gemm-ab [TYPE (q4_0|q5_0|q8_0, default q4_0)] [THREADS (2)] [ROUNDS (15)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ops/kernels/blas.h"
#include "ops/kernels/kernels.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"
#include "threadpool.h"

#define MAX_THREADS 64

static const int64_t shapes[][2] = { { 896, 896 }, { 896, 4864 }, { 4864, 896 } }; /* K, M */
static const int64_t batches[] = { 8, 16, 32, 64, 512 };

enum path { GEMM, GEMM_PACKED, FLOAT_GEMM, DOT, SGEMM, N_PATHS };
static const char *const path_names[N_PATHS] = { "GEMM", "GEMM repacked", "float GEMM", "dot", "dequantize + sgemm" };

struct job {
    enum llm_type t;
    enum path path;
    int64_t K, M, N;
    const char *w, *packed, *x; /* weights (file rows, repacked), the activations as Q8_0 rows */
    const float *xf;            /* the activations as floats, for the float GEMM and sgemm */
    float *dst;
    void *scratch[MAX_THREADS];
};

/* The dot path of rows [r0, r1): four rows against each activation row (the last four repeat). */
static void dot_rows(const struct job *j, int64_t r0, int64_t r1)
{
    const size_t ws = llm_row_size(j->t, j->K), xs = llm_row_size(LLM_TYPE_Q8_0, j->K);
    const struct llm_type_traits *tt = llm_type_traits(j->t);
    for (int64_t m = r0; m < r1; m += 4) {
        const void *rows[4];
        for (int r = 0; r < 4; r++)
            rows[r] = j->w + (size_t)(m + r < r1 ? m + r : r1 - 1) * ws;
        for (int64_t n = 0; n < j->N; n++) {
            float out[4];
            tt->vec_dot4(j->K, out, rows, j->x + (size_t)n * xs);
            memcpy(j->dst + n * j->M + m, out, (size_t)(r1 - m < 4 ? r1 - m : 4) * sizeof(float));
        }
    }
}

static void run(int ith, int nth, void *arg)
{
    const struct job *j = arg;
    const struct llm_type_traits *tt = llm_type_traits(j->t);
    const size_t ws = llm_row_size(j->t, j->K), xs = llm_row_size(LLM_TYPE_Q8_0, j->K);
    int64_t r0, r1;
    if (j->path == GEMM_PACKED) { /* whole groups, as gemm_share */
        const size_t gs = llm_repack_group_size(j->t, j->K);
        thread_rows((j->M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, ith, nth, &r0, &r1);
        const int64_t m0 = r0 * LLM_REPACK_ROWS, m1 = r1 * LLM_REPACK_ROWS < j->M ? r1 * LLM_REPACK_ROWS : j->M;
        if (m0 < m1)
            tt->gemm_packed(j->K, m1 - m0, j->N, j->packed + (size_t)r0 * gs, gs, j->x, xs, j->dst + m0, (size_t)j->M,
                            j->scratch[ith]);
        return;
    }
    thread_rows(j->M, ith, nth, &r0, &r1);
    if (r1 <= r0)
        return;
    switch (j->path) {
    case GEMM:
        tt->gemm(j->K, r1 - r0, j->N, j->w + (size_t)r0 * ws, ws, j->x, xs, j->dst + r0, (size_t)j->M, j->scratch[ith]);
        break;
    case FLOAT_GEMM:
        tt->gemm_f32(j->K, r1 - r0, j->N, j->w + (size_t)r0 * ws, ws, j->xf, (size_t)j->K * sizeof(float), j->dst + r0,
                     (size_t)j->M, j->scratch[ith]);
        break;
    case DOT:
        dot_rows(j, r0, r1);
        break;
    default: {
        float *rows = j->scratch[ith];
        for (int64_t r = r0; r < r1; r++)
            tt->to_float_fast(j->w + (size_t)r * ws, rows + (r - r0) * j->K, j->K);
        llm_blas_sgemm_nt((int)j->N, (int)(r1 - r0), (int)j->K, j->xf, (int)j->K, rows, (int)j->K, j->dst + r0,
                          (int)j->M);
    }
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double timed(struct llm_threadpool *pool, struct job *j, enum path path)
{
    j->path = path;
    double t0 = llm_now_us();
    llm_threadpool_run(pool, run, j);
    return (llm_now_us() - t0) / 1e3;
}

/* Which paths the type has on this CPU. */
static bool has_path(enum llm_type t, enum path p)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return p == GEMM || (p == GEMM_PACKED && tt->gemm_packed) || (p == FLOAT_GEMM && tt->gemm_f32) ||
           (p == DOT && tt->vec_dot4) || (p == SGEMM && llm_blas_available());
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

/* One shape: rounds of every path, the order rotating; prints a table row. */
static void shape(struct llm_threadpool *pool, enum llm_type t, int nth, int rounds, int64_t K, int64_t M, int64_t N)
{
    const size_t ws = llm_row_size(t, K), xs = llm_row_size(LLM_TYPE_Q8_0, K);
    char *w = malloc(ws * (size_t)M), *x = malloc(xs * (size_t)N), *packed = malloc(llm_repack_size(t, K, M));
    float *xf = malloc((size_t)(K * N) * sizeof(float)), *row = malloc((size_t)K * sizeof(float));
    struct job j = { .t = t, .K = K, .M = M, .N = N, .w = w, .packed = packed, .x = x, .xf = xf,
                     .dst = malloc((size_t)(M * N) * sizeof(float)) };
    for (int64_t r = 0; r < M; r++) {
        for (int64_t i = 0; i < K; i++)
            row[i] = (float)((r * 31 + i * 17) % 97) / 97.0f - 0.5f;
        llm_type_traits(t)->from_float(row, w + (size_t)r * ws, K);
    }
    if (llm_repack_type_ok(t))
        llm_repack_groups(t, K, M, w, ws, 0, (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, packed);
    for (int64_t i = 0; i < K * N; i++)
        xf[i] = (float)((i * 13) % 89) / 89.0f - 0.5f;
    for (int64_t n = 0; n < N; n++)
        llm_type_traits(LLM_TYPE_Q8_0)->from_float(xf + n * K, x + (size_t)n * xs, K);
    /* each thread's scratch serves any path: a kernel's own, or its share of dequantized rows */
    size_t most = (size_t)((M + nth - 1) / nth * K) * sizeof(float);
    most = llm_gemm_scratch_size(K, N) > most ? llm_gemm_scratch_size(K, N) : most;
    most = llm_gemm_f32_scratch_size(K) > most ? llm_gemm_f32_scratch_size(K) : most;
    for (int i = 0; i < nth; i++)
        j.scratch[i] = malloc(most);
    enum path paths[N_PATHS];
    int np = 0;
    for (int p = 0; p < N_PATHS; p++)
        if (has_path(t, (enum path)p))
            paths[np++] = (enum path)p;
    double *ms = malloc(sizeof(double) * (size_t)(rounds * N_PATHS)), *ratio = malloc(sizeof(double) * (size_t)rounds),
           *sorted = malloc(sizeof(double) * (size_t)rounds);
    for (int i = 0; i < np; i++)
        timed(pool, &j, paths[i]); /* warm-up */
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < np; i++) {
            const int p = (i + r) % np;
            ms[p * rounds + r] = timed(pool, &j, paths[p]);
        }
    printf("| %s | %lld x %lld | %lld |", llm_type_name(t), (long long)K, (long long)M, (long long)N);
    for (int p = 0; p < N_PATHS; p++) {
        int i = 0;
        while (i < np && paths[i] != (enum path)p)
            i++;
        if (i == np) {
            printf(" |");
            continue;
        }
        for (int r = 0; r < rounds; r++) {
            ratio[r] = ms[i * rounds + r] / ms[r]; /* paths[0] is GEMM */
            sorted[r] = ms[i * rounds + r];
        }
        const double rt = median(ratio, rounds);
        printf(" %.3f", median(sorted, rounds));
        printf(p == GEMM ? " |" : " (%.2f) |", rt);
    }
    printf("\n");
    fflush(stdout);
    for (int i = 0; i < nth; i++)
        free(j.scratch[i]);
    free(w), free(x), free(packed), free(xf), free(row), free(j.dst), free(ms), free(ratio), free(sorted);
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
    if (!llm_type_traits((enum llm_type)t)->gemm) {
        fprintf(stderr, "llm: error: no %s GEMM kernel on this CPU\n", tname);
        return 1;
    }
    struct llm_threadpool *pool = llm_threadpool_new(nth);
    printf("%s, %d threads, %d rounds, ms (medians); in brackets the median of path / GEMM per round\n\n", tname,
           nth, rounds);
    printf("| type | K x M | N |");
    for (int p = 0; p < N_PATHS; p++)
        printf(" %s |", path_names[p]);
    printf("\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t n = 0; n < sizeof batches / sizeof batches[0]; n++)
            shape(pool, (enum llm_type)t, nth, rounds, shapes[s][0], shapes[s][1], batches[n]);
    llm_threadpool_free(pool);
    return 0;
}
