/* Shared by the MUL_MAT tests that run one node on a thread pool of their own: a contiguous 2-D
 * tensor, and the pool job that computes a node with its work buffer. */
#ifndef TEST_MUL_MAT_JOB_H
#define TEST_MUL_MAT_JOB_H

#include <stdlib.h>
#include <string.h>

#include "ops/cpu.h"
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

#endif
