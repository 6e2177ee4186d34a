/* MUL_MAT_SWIGLU (src/ops/kernels/mul_mat_swiglu.c) against the three nodes it replaces, bit for
 * bit: on every weight type the FFN takes, in the file's rows and repacked, at batches that take
 * each MUL_MAT path (dot products, the integer and float GEMMs, sgemm with OpenBLAS) in one chunk of
 * rows and in many, on 1 to 3 threads, with a row count that ends in a partial repacked group. Its
 * reference kernel, the unfused reference kernels, agrees within a stated tolerance. */
#include "harness.h"
#include "mul_mat_job.h"
#include "cpu_features.h"
#include "ops/kernels/blas.h"
#include "ops/kernels/params.h"
#include "ops/ref/cpu_ref.h"
#include "ops/types/repack.h"

static float rnd(void)
{
    return (float)(test_rand() % 2001) / 1000.0f - 1.0f;
}

static float value(int64_t r, int64_t i)
{
    (void)r, (void)i;
    return rnd();
}

/* A k x M weight matrix of type t, in the decode layout when repack. */
static void weights(struct llm_tensor *w, enum llm_type t, int64_t k, int64_t M, bool repack)
{
    init_tensor(w, t, k, M);
    free(w->data);
    w->data = typed_rows(t, k, M, w->nb[1], value);
    if (repack) {
        void *packed = malloc(llm_repack_size(t, k, M));
        llm_repack_groups(t, k, M, w->data, w->nb[1], 0, (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, packed);
        free(w->data);
        w->data = packed;
        w->flags |= LLM_TENSOR_REPACKED;
    }
}

static void run(struct llm_tensor *node, struct llm_threadpool *pool)
{
    const size_t wsize = llm_cpu_work_size(node, llm_threadpool_n_threads(pool));
    struct job j = { .node = node, .wdata = malloc(wsize), .wsize = wsize, .pool = pool };
    llm_threadpool_run(pool, run_job, &j);
    free(j.wdata);
}

static void node_of(struct llm_tensor *n, enum llm_op op, int64_t M, int64_t N, struct llm_tensor *s0,
                    struct llm_tensor *s1, struct llm_tensor *s2)
{
    init_tensor(n, LLM_TYPE_F32, M, N);
    n->op = op;
    n->src[0] = s0, n->src[1] = s1, n->src[2] = s2;
}

static void check_case(enum llm_type t, bool repack, int64_t k, int64_t M, int64_t N, struct llm_threadpool *pool)
{
    struct llm_tensor g, u, x, gate, up, glu, fused;
    weights(&g, t, k, M, repack);
    weights(&u, t, k, M, repack);
    init_tensor(&x, LLM_TYPE_F32, k, N);
    for (int64_t i = 0; i < k * N; i++)
        ((float *)x.data)[i] = rnd();
    node_of(&gate, LLM_OP_MUL_MAT, M, N, &g, &x, NULL);
    node_of(&up, LLM_OP_MUL_MAT, M, N, &u, &x, NULL);
    node_of(&glu, LLM_OP_SWIGLU, M, N, &gate, &up, NULL);
    node_of(&fused, LLM_OP_MUL_MAT_SWIGLU, M, N, &g, &x, &u);
    const int nth = llm_threadpool_n_threads(pool);
    CHECK(llm_cpu_supports(&fused), "%s: not supported", llm_type_name(t));
    /* the path each batch is here for: dot products up to 5 rows; from 40 a GEMM, or sgemm (F32
     * weights, with OpenBLAS), where the CPU has AVX2 */
    const bool batched = llm_cpu_mul_mat_uses_gemm(&gate) || llm_cpu_mul_mat_uses_blas(&gate);
    CHECK(N > 5 || !batched, "%s N %lld: not the dot path", llm_type_name(t), (long long)N);
    CHECK(N < 40 || batched || !llm_cpu_has_avx2() || (t == LLM_TYPE_F32 && !llm_blas_available()),
          "%s N %lld: neither a GEMM nor sgemm", llm_type_name(t), (long long)N);
    run(&gate, pool);
    run(&up, pool);
    run(&glu, pool);
    run(&fused, pool);
    CHECK(memcmp(fused.data, glu.data, glu.nb[2]) == 0, "%s%s K %lld M %lld N %lld, %d threads: differs from the "
          "unfused nodes", llm_type_name(t), repack ? " repacked" : "", (long long)k, (long long)M, (long long)N, nth);
    /* the oracle reads the file's rows, in double (slow); its products keep the activations in F32,
     * the fast ones round them to the weights' vec_dot_type (Q8_0, Q8_K): 1e-4 */
    if (N <= 16 && nth == 1 && !repack) {
        struct llm_tensor ref = fused;
        ref.data = malloc(fused.nb[2]);
        llm_ref_compute(&ref);
        const double e = test_nmse(fused.data, ref.data, M * N);
        CHECK(e < 1e-4, "%s%s N %lld: NMSE %g against the reference kernel", llm_type_name(t),
              repack ? " repacked" : "", (long long)N, e);
        free(ref.data);
    }
    struct llm_tensor *all[] = { &g, &u, &x, &gate, &up, &glu, &fused };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->data);
}

int main(void)
{
    /* N 1 and 5: dot products; 16: AVX2's integer GEMM (Q8_0, Q4_0, Q5_0), the others' dot products;
     * 40 and 1100: a GEMM or sgemm. The GEMM deals chunks of a quarter of a thread's share (288 rows
     * on 1 thread, 144 on 2, fewer than 1001 however many fit the tile), the last ending in a
     * partial group */
    static const int64_t batches[] = { 1, 5, 16, 40, 1100 };
    static const enum llm_type types[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0, LLM_TYPE_Q4_0,
                                           LLM_TYPE_Q5_0, LLM_TYPE_Q4_K, LLM_TYPE_Q6_K };
    for (int nth = 1; nth <= 3; nth++) {
        struct llm_threadpool *pool = llm_threadpool_new(nth);
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            for (int repack = 0; repack <= (int)llm_repack_type_ok(types[i]); repack++)
                for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
                    check_case(types[i], repack, 256, 1001, batches[b], pool);
        /* F32 weights batched take sgemm (with OpenBLAS) in the node's own slices of its tiles of
         * 1049 rows, so chunks start off SWIGLU's 8-float vectors */
        check_case(LLM_TYPE_F32, false, 999, 2200, 300, pool);
        llm_threadpool_free(pool);
    }
    return test_done("test_mul_mat_swiglu");
}
