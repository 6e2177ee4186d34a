/* llm-repack-ab: decode's matrix-vector products of a qwen2-0.5B-shaped stack (24 layers of q, k, v,
 * o, gate, up, down; ~380 MiB of Q8_0, more than any L3; the K-quants, whose rows must be multiples
 * of 256, take 8 layers of TinyLlama-1.1B's shapes, ~200 MiB of Q4_K) on the file's row layout
 * against the repacked one (src/ops/types/repack.h), alternating layer stack by layer stack in one
 * process, so a shared machine's slow seconds hit both alike. Prints each round's ms and the
 * medians' GB/s.
 *   usage: llm-repack-ab [TYPE (q4_0|q5_0|q8_0|q4_k|q6_k, default q8_0)] [THREADS (2)] [ROUNDS (15)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/cpu/cpu.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"
#include "threadpool.h"

/* a layer's matrices (K, M) and the stack's layer count, of the 32-element types and of the K-quants */
static const struct stack {
    int layers;
    int64_t shapes[7][2];
} stacks[2] = {
    { 24, { { 896, 896 }, { 896, 128 }, { 896, 128 }, { 896, 896 }, { 896, 4864 }, { 896, 4864 }, { 4864, 896 } } },
    { 8, { { 2048, 2048 }, { 2048, 256 }, { 2048, 256 }, { 2048, 2048 }, { 2048, 5632 }, { 2048, 5632 }, { 5632, 2048 } } },
};
#define LAYER_MATS 7

struct mat {
    struct llm_tensor w, x, d;
    void *work;
    size_t wsize;
};

struct job {
    struct mat *m;
    struct llm_threadpool *pool;
};

static void run_job(int ith, int nth, void *arg)
{
    struct job *j = arg;
    struct llm_cpu_params p = { .ith = ith, .nth = nth, .wdata = j->m->work, .wsize = j->m->wsize,
                                .barrier = llm_threadpool_barrier, .pool = j->pool };
    llm_cpu_compute(&p, &j->m->d);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void make(struct mat *m, enum llm_type t, int64_t K, int64_t M, bool packed, int nth)
{
    memset(m, 0, sizeof *m);
    struct llm_tensor *w = &m->w;
    w->type = t, w->ne[0] = K, w->ne[1] = M, w->ne[2] = w->ne[3] = 1;
    w->nb[0] = llm_type_info(t)->type_size, w->nb[1] = llm_row_size(t, K), w->nb[2] = w->nb[3] = w->nb[1] * (size_t)M;
    w->flags = LLM_TENSOR_WEIGHT;
    char *rows = malloc(w->nb[2]);
    float *row = malloc((size_t)K * sizeof(float));
    for (int64_t r = 0; r < M; r++) {
        for (int64_t i = 0; i < K; i++)
            row[i] = (float)((r * 31 + i * 17) % 97) / 97.0f - 0.5f;
        llm_type_traits(t)->from_float(row, rows + (size_t)r * w->nb[1], K);
    }
    w->data = rows;
    if (packed) {
        w->data = malloc(llm_repack_size(t, K, M));
        llm_repack_groups(t, K, M, rows, w->nb[1], 0, (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, w->data);
        w->flags |= LLM_TENSOR_REPACKED;
        free(rows);
    }
    m->x = (struct llm_tensor){ .type = LLM_TYPE_F32, .ne = { K, 1, 1, 1 },
                                .nb = { 4, 4 * (size_t)K, 4 * (size_t)K, 4 * (size_t)K }, .data = row };
    m->d = (struct llm_tensor){ .type = LLM_TYPE_F32, .ne = { M, 1, 1, 1 }, .op = LLM_OP_MUL_MAT,
                                .nb = { 4, 4 * (size_t)M, 4 * (size_t)M, 4 * (size_t)M },
                                .data = malloc(4 * (size_t)M), .src = { w, &m->x } };
    m->wsize = llm_cpu_work_size(&m->d, nth);
    m->work = malloc(m->wsize + 64);
}

static double stack_ms(struct mat *mats, int n, struct llm_threadpool *pool)
{
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        struct job j = { &mats[i], pool };
        llm_threadpool_run(pool, run_job, &j);
    }
    return now_ms() - t0;
}

int main(int argc, char **argv)
{
    const char *tname = argc > 1 ? argv[1] : "q8_0";
    const int nth = argc > 2 ? atoi(argv[2]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 15;
    const int t = llm_type_from_name(tname);
    if (t < 0 || !llm_repack_type_ok((enum llm_type)t) || nth < 1 || nth > 512 || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "llm: error: usage: llm-repack-ab [q4_0|q5_0|q8_0|q4_k|q6_k] [THREADS 1-512] [ROUNDS 1-1000]\n");
        return 1;
    }
    if (!llm_repack_kernel((enum llm_type)t)) {
        fprintf(stderr, "llm: error: no repacked %s kernel on this CPU (LLM_REPACK=0? an AVX-512 or AVX-VNNI CPU "
                        "repacks %s only under LLM_REPACK=all)\n", tname, tname);
        return 1;
    }
    const struct stack *st = &stacks[llm_type_info(t)->blck_size > 32];
    const int n = st->layers * LAYER_MATS;
    struct mat *file = calloc((size_t)n, sizeof *file), *pack = calloc((size_t)n, sizeof *pack);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        const int64_t *s = st->shapes[i % LAYER_MATS];
        make(&file[i], (enum llm_type)t, s[0], s[1], false, nth);
        make(&pack[i], (enum llm_type)t, s[0], s[1], true, nth);
        bytes += file[i].w.nb[2];
    }
    struct llm_threadpool *pool = llm_threadpool_new(nth);
    double *a = malloc(sizeof(double) * (size_t)rounds), *b = malloc(sizeof(double) * (size_t)rounds);
    stack_ms(file, n, pool), stack_ms(pack, n, pool); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        /* alternate which goes first */
        if (r % 2) {
            b[r] = stack_ms(pack, n, pool), a[r] = stack_ms(file, n, pool);
        } else {
            a[r] = stack_ms(file, n, pool), b[r] = stack_ms(pack, n, pool);
        }
        printf("round %2d: file %.2f ms, repacked %.2f ms, file/repacked %.3f\n", r, a[r], b[r], a[r] / b[r]);
    }
    double *ratio = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++)
        ratio[r] = a[r] / b[r];
    qsort(a, (size_t)rounds, sizeof *a, cmp), qsort(b, (size_t)rounds, sizeof *b, cmp);
    qsort(ratio, (size_t)rounds, sizeof *ratio, cmp);
    printf("%s, %d threads, %.0f MiB per stack: file %.1f GB/s, repacked %.1f GB/s (medians); best %.1f / %.1f; "
           "median ratio repacked/file speed %.3f\n",
           tname, nth, bytes / 1048576.0, bytes / a[rounds / 2] / 1e6, bytes / b[rounds / 2] / 1e6, bytes / a[0] / 1e6,
           bytes / b[0] / 1e6, ratio[rounds / 2]);
    return 0;
}
