/* Shared by the MUL_MAT tests that run one node on a thread pool of their own: a contiguous 2-D
 * tensor, rows of a type from chosen values, the pool job that computes a node with its work buffer,
 * and the check that a GEMM path gives the same bits on any number of threads. */
#ifndef TEST_MUL_MAT_JOB_H
#define TEST_MUL_MAT_JOB_H

#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu.h"
#include "ops/types/types.h"
#include "threadpool.h"

static void init_tensor(struct llm_tensor *t, enum llm_type type, int64_t ne0, int64_t ne1)
{
    memset(t, 0, sizeof *t);
    t->type = type;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = t->ne[3] = 1;
    t->nb[0] = llm_type_info(type)->type_size;
    t->nb[1] = llm_row_size(type, ne0);
    t->nb[2] = t->nb[3] = t->nb[1] * (size_t)ne1;
    t->data = malloc(t->nb[2]);
}

/* rows of type t, each `stride` bytes apart (padding zero), from value(r, i) by the reference
 * from_float */
static inline char *typed_rows(enum llm_type t, int64_t k, int64_t rows, size_t stride,
                               float (*value)(int64_t r, int64_t i))
{
    char *out = calloc((size_t)rows, stride);
    float *row = malloc((size_t)k * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++)
            row[i] = value(r, i);
        llm_type_traits(t)->from_float(row, out + r * stride, k);
    }
    free(row);
    return out;
}

struct job {
    struct llm_tensor *node;
    void *wdata;
    size_t wsize;
    struct llm_threadpool *pool;
};

static void run_job(int ith, int nth, void *arg)
{
    struct job *j = arg;
    struct llm_cpu_params p = { .ith = ith, .nth = nth, .wdata = j->wdata, .wsize = j->wsize,
                                .barrier = llm_threadpool_barrier, .pool = j->pool };
    llm_cpu_compute(&p, j->node);
}

/* A GEMM kernel's case as tests/test_gemm*.c check it: the output has N rows of M products, ldd
 * floats apart, the padding past M set to GEMM_PAD before the call. */
#define GEMM_PAD -7.0f
struct gemm_case {
    enum llm_type t;
    int64_t k, M, N;
    const char *w, *x; /* weight and activation rows, wstride and xstride bytes apart */
    size_t wstride, xstride, ldd;
    const float *dst;
};

/* Runs gemm on case c (scratch_size bytes of scratch; c->dst is set for err() and freed after) and
 * returns how many products have a relative error err(c, m, n) above tol, plus padding floats
 * changed; *worst gets the largest error. */
static inline int64_t gemm_wrong(llm_gemm_fn gemm, struct gemm_case *c, size_t scratch_size,
                                 double (*err)(const struct gemm_case *c, int64_t m, int64_t n), double tol,
                                 double *worst)
{
    float *dst = malloc((size_t)c->N * c->ldd * sizeof(float));
    void *scratch = malloc(scratch_size);
    for (size_t i = 0; i < (size_t)c->N * c->ldd; i++)
        dst[i] = GEMM_PAD;
    gemm(c->k, c->M, c->N, c->w, c->wstride, c->x, c->xstride, dst, c->ldd, scratch);
    c->dst = dst;
    int64_t bad = 0;
    *worst = 0;
    for (int64_t n = 0; n < c->N; n++) {
        for (int64_t m = 0; m < c->M; m++) {
            double e = err(c, m, n);
            *worst = e > *worst ? e : *worst;
            bad += !(e <= tol);
        }
        for (size_t m = (size_t)c->M; m < c->ldd; m++)
            bad += dst[(size_t)n * c->ldd + m] != GEMM_PAD;
    }
    free(dst);
    free(scratch);
    c->dst = NULL;
    return bad;
}

/* MUL_MAT of weights k x M of type t (wdata: contiguous rows, taken over) and F32 activations k x N
 * from rnd(), on pools of 1, 2 and 3 threads: 0 when it takes a GEMM path and every pool gives the
 * same bits, -1 when it does not take a GEMM path, else the first thread count that differs. */
static inline int gemm_threads_differ(enum llm_type t, int64_t k, int64_t M, int64_t N, void *wdata,
                                      float (*rnd)(void))
{
    struct llm_tensor w, x, d;
    init_tensor(&w, t, k, M);
    init_tensor(&x, LLM_TYPE_F32, k, N);
    init_tensor(&d, LLM_TYPE_F32, M, N);
    free(w.data);
    w.data = wdata;
    for (int64_t i = 0; i < k * N; i++)
        ((float *)x.data)[i] = rnd();
    d.op = LLM_OP_MUL_MAT;
    d.src[0] = &w, d.src[1] = &x;
    int differ = llm_cpu_mul_mat_uses_gemm(&d) ? 0 : -1;
    float *first = malloc(d.nb[2]);
    for (int nth = 1; nth <= 3 && differ == 0; nth++) {
        struct llm_threadpool *pool = llm_threadpool_new(nth);
        size_t wsize = llm_cpu_work_size(&d, nth);
        struct job j = { .node = &d, .wdata = malloc(wsize), .wsize = wsize, .pool = pool };
        llm_threadpool_run(pool, run_job, &j);
        if (nth == 1)
            memcpy(first, d.data, d.nb[2]);
        else if (memcmp(first, d.data, d.nb[2]) != 0)
            differ = nth;
        free(j.wdata);
        llm_threadpool_free(pool);
    }
    free(first);
    free(w.data);
    free(x.data);
    free(d.data);
    return differ;
}

#endif
