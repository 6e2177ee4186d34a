/* llm-attn-ab: FLASH_ATTN of a prefill batch on the tile path (one node of N query rows, tiles of
 * rows sharing each K and V block) against the row-at-a-time path (the same rows as N nodes of one
 * query row each, which never tile), llama-k256's shape by default (hd 32, 8 query heads over 4 KV
 * heads), a causal window of DEPTH cells before the batch; alternating round by round in one
 * process, so a shared machine's slow seconds hit both alike. Prints each round's ms and the
 * median ratio. The row side also pays N node dispatches (a few µs each), a small part of its time.
 *   usage: llm-attn-ab [KV TYPE (f16)] [DEPTH (4096)] [THREADS (2)] [ROUNDS (15)] [N (512)] [HD (32)]
 * (memory: the mask is DEPTH + N by N floats). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ops/cpu/cpu.h"
#include "ops/types/types.h"
#include "threadpool.h"

#define HEADS 8
#define HEADS_KV 4

struct job {
    struct llm_tensor *node;
    void *work;
    size_t wsize;
    struct llm_threadpool *pool;
};

static void run_job(int ith, int nth, void *arg)
{
    struct job *j = arg;
    struct llm_cpu_params p = { .ith = ith, .nth = nth, .wdata = j->work, .wsize = j->wsize,
                                .barrier = llm_threadpool_barrier, .pool = j->pool };
    llm_cpu_compute(&p, j->node);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A contiguous tensor of ne0 × ne1 × ne2, each row of floats from a fixed pattern converted to type. */
static struct llm_tensor tensor(enum llm_type type, int64_t ne0, int64_t ne1, int64_t ne2)
{
    struct llm_tensor t = { .type = type, .ne = { ne0, ne1, ne2, 1 } };
    t.nb[0] = llm_type_info(type)->type_size, t.nb[1] = llm_row_size(type, ne0);
    t.nb[2] = t.nb[1] * (size_t)ne1, t.nb[3] = t.nb[2] * (size_t)ne2;
    t.data = malloc(t.nb[3]);
    float *row = malloc((size_t)ne0 * sizeof(float));
    for (int64_t r = 0; r < ne1 * ne2; r++) {
        for (int64_t i = 0; i < ne0; i++)
            row[i] = (float)((r * 31 + i * 17) % 97) / 97.0f - 0.5f;
        llm_type_traits(type)->from_float(row, (char *)t.data + r * (int64_t)t.nb[1], ne0);
    }
    free(row);
    return t;
}

/* The FLASH_ATTN node of query rows [a, a + n) of q (a view of [hd, heads, rows] as [hd, rows, heads]). */
static struct llm_tensor *attn_node(const struct llm_tensor *q, struct llm_tensor *k, struct llm_tensor *v,
                                    const struct llm_tensor *m, int64_t a, int64_t n)
{
    struct llm_tensor *qv = malloc(sizeof *qv), *mv = malloc(sizeof *mv), *d = calloc(1, sizeof *d);
    *qv = *q, *mv = *m;
    qv->ne[1] = n, qv->data = (char *)q->data + a * (int64_t)q->nb[1];
    mv->ne[1] = n, mv->data = (char *)m->data + a * (int64_t)m->nb[1];
    d->type = LLM_TYPE_F32, d->op = LLM_OP_FLASH_ATTN;
    d->ne[0] = v->ne[0], d->ne[1] = HEADS, d->ne[2] = n, d->ne[3] = 1;
    d->nb[0] = 4, d->nb[1] = 4 * (size_t)v->ne[0], d->nb[2] = d->nb[1] * HEADS, d->nb[3] = d->nb[2] * (size_t)n;
    d->data = malloc(d->nb[3]);
    d->src[0] = qv, d->src[1] = k, d->src[2] = v, d->src[3] = mv;
    llm_set_op_f32(d, 0, 1.0f / sqrtf((float)q->ne[0]));
    return d;
}

static double run_ms(struct llm_tensor **nodes, int n, void *work, size_t wsize, struct llm_threadpool *pool)
{
    double t0 = llm_now_us();
    for (int i = 0; i < n; i++) {
        struct job j = { nodes[i], work, wsize, pool };
        llm_threadpool_run(pool, run_job, &j);
    }
    return (llm_now_us() - t0) / 1e3;
}

int main(int argc, char **argv)
{
    const char *tname = argc > 1 ? argv[1] : "f16";
    const int t = llm_type_from_name(tname);
    const long depth = argc > 2 ? atol(argv[2]) : 4096;
    const int nth = argc > 3 ? atoi(argv[3]) : 2, rounds = argc > 4 ? atoi(argv[4]) : 15;
    const int n_q = argc > 5 ? atoi(argv[5]) : 512, hd = argc > 6 ? atoi(argv[6]) : 32;
    if (t < 0 || !llm_type_traits(t)->from_float || depth < 0 || depth > 32768 || nth < 1 || nth > 512 ||
        rounds < 1 || rounds > 1000 || n_q < 2 || n_q > 1024 || hd < 8 || hd > 256 || hd % llm_type_info(t)->blck_size) {
        fprintf(stderr, "llm: error: usage: llm-attn-ab [KV TYPE with a quantizer] [DEPTH 0-32768] [THREADS 1-512] "
                        "[ROUNDS 1-1000] [N 2-1024] [HD 8-256, whole blocks of the type]\n");
        return 1;
    }
    const int64_t n_kv = depth + n_q;
    struct llm_tensor q = tensor(LLM_TYPE_F32, hd, HEADS, n_q), k = tensor((enum llm_type)t, hd, n_kv, HEADS_KV),
                      v = tensor((enum llm_type)t, hd, n_kv, HEADS_KV), m = tensor(LLM_TYPE_F32, n_kv, n_q, 1);
    /* q as the graph has it: [hd, rows, heads] over memory of [hd, heads, rows] */
    q.ne[1] = n_q, q.ne[2] = HEADS;
    size_t nb1 = q.nb[1];
    q.nb[1] = q.nb[2], q.nb[2] = nb1;
    for (int64_t i = 0; i < n_q; i++) /* causal: row i sees the depth and rows 0..i */
        for (int64_t j = 0; j < n_kv; j++)
            ((float *)m.data)[i * n_kv + j] = j <= depth + i ? 0.0f : -INFINITY;
    struct llm_tensor *tile = attn_node(&q, &k, &v, &m, 0, n_q), **rows = malloc(sizeof *rows * (size_t)n_q);
    for (int i = 0; i < n_q; i++)
        rows[i] = attn_node(&q, &k, &v, &m, i, 1);
    if (!llm_cpu_supports(tile)) {
        fprintf(stderr, "llm: error: FLASH_ATTN with a %s K and V of %d dims is not supported\n", tname, hd);
        return 1;
    }
    size_t wsize = llm_cpu_work_size(tile, nth), wrow = llm_cpu_work_size(rows[0], nth);
    wsize = wrow > wsize ? wrow : wsize;
    void *work = aligned_alloc(64, (wsize + 63) & ~(size_t)63);
    struct llm_threadpool *pool = llm_threadpool_new(nth);
    double *a = malloc(sizeof(double) * (size_t)rounds), *b = malloc(sizeof(double) * (size_t)rounds);
    double *ratio = malloc(sizeof(double) * (size_t)rounds);
    run_ms(&tile, 1, work, wsize, pool), run_ms(rows, n_q, work, wsize, pool); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        if (r % 2) /* alternate which goes first */
            b[r] = run_ms(rows, n_q, work, wsize, pool), a[r] = run_ms(&tile, 1, work, wsize, pool);
        else
            a[r] = run_ms(&tile, 1, work, wsize, pool), b[r] = run_ms(rows, n_q, work, wsize, pool);
        ratio[r] = b[r] / a[r];
        printf("round %2d: tiles %.2f ms, rows %.2f ms, rows/tiles %.3f\n", r, a[r], b[r], ratio[r]);
    }
    qsort(a, (size_t)rounds, sizeof *a, cmp), qsort(b, (size_t)rounds, sizeof *b, cmp);
    qsort(ratio, (size_t)rounds, sizeof *ratio, cmp);
    printf("%s K/V, hd %d, %d/%d heads, %d rows at depth %ld, %d threads: tiles %.2f ms, rows %.2f ms (medians); "
           "median speed-up tiles over rows %.3f\n",
           tname, hd, HEADS, HEADS_KV, n_q, depth, nth, a[rounds / 2], b[rounds / 2], ratio[rounds / 2]);
    return 0;
}
