/* The graph constructors (src/graph.h) run through the allocator and the cpu backend: views,
 * transpose + cont, scale, silu, cpy to F16, with 1 and 2 threads, against values computed here. */
#include <math.h>

#include "alloc.h"
#include "backend.h"
#include "graph.h"
#include "harness.h"
#include "ops/types/types.h"

static float in[6 * 4]; /* [6, 4]: element (i, j) = 10 j + i */

static float at(const struct llm_tensor *t, int i, int j)
{
    const char *p = (const char *)t->data + (size_t)i * t->nb[0] + (size_t)j * t->nb[1];
    return t->type == LLM_TYPE_F16 ? llm_fp16_to_fp32(*(const uint16_t *)p) : *(const float *)p;
}

static void run(int threads)
{
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 6; i++)
            in[j * 6 + i] = (float)(10 * j + i);
    struct llm_ctx *ctx = llm_ctx_new(64);
    struct llm_tensor *x = llm_new_tensor_2d(ctx, LLM_TYPE_F32, 6, 4);
    x->data = in;
    /* rows 1..2, columns 2..5 of x, then transposed and made contiguous: [2, 4] -> [4, 2] */
    struct llm_tensor *v = llm_view_2d(ctx, x, 4, 2, x->nb[1], 2 * sizeof(float) + x->nb[1]);
    struct llm_tensor *t = llm_cont(ctx, llm_transpose(ctx, v));
    struct llm_tensor *s = llm_scale(ctx, t, 0.5f);
    struct llm_tensor *a = llm_silu(ctx, llm_view_1d(ctx, x, 6, 3 * x->nb[1]));
    struct llm_tensor *h = llm_new_tensor_2d(ctx, LLM_TYPE_F16, 2, 4);
    uint16_t hbuf[8];
    h->data = hbuf;
    struct llm_tensor *c = llm_cpy(ctx, s, llm_reshape_2d(ctx, h, 2, 4));
    struct llm_tensor *outs[] = { s, a, c };
    struct llm_graph *g = llm_graph_build(outs, 3);
    struct llm_allocator *al = llm_allocator_new(NULL);
    const struct llm_backend_params bp = { .device = LLM_DEVICE_CPU, .n_threads = threads };
    struct llm_backend *be = llm_backend_cpu_new(&bp, NULL);
    struct llm_error err;
    CHECK(g && al && be);
    CHECK(!llm_allocator_alloc_graph(al, g, &err), "%s", err.msg);
    CHECK(!llm_backend_compute(be, g, &err), "%s", err.msg);

    CHECK_EQ_INT(t->ne[0], 2);
    CHECK_EQ_INT(t->ne[1], 4);
    bool ok = true;
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 2; i++) {
            float want = 0.5f * (float)(10 * (1 + i) + 2 + j); /* x[2 + j, 1 + i] */
            ok &= at(s, i, j) == want && at(h, i, j) == want;
        }
    CHECK(ok, "view/transpose/cont/scale/cpy values (%d threads)", threads);
    ok = true;
    for (int i = 0; i < 6; i++) {
        float xv = (float)(30 + i);
        ok &= fabsf(at(a, i, 0) - xv / (1.0f + expf(-xv))) <= 1e-6f * fabsf(xv);
    }
    CHECK(ok, "silu of a 1-d view (%d threads)", threads);
    llm_backend_free(be);
    llm_allocator_free(al);
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

int main(void)
{
    run(1);
    run(2);
    return test_done("test_graph_ops");
}
