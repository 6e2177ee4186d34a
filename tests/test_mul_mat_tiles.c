/* MUL_MAT on the BLAS path when the weights span several sgemm tiles (4 Mi floats each) and the
 * last tile is shorter: threads' slices of the dequantized tile then move between tiles, and a
 * thread that runs ahead must not overwrite rows another thread's sgemm is still reading. Each
 * case runs a few times on 2 and 3 pool threads (the overlap is timing-dependent) and is compared
 * with a double-precision product of the reference dequantization. */
#include <stdint.h>

#include "harness.h"
#include "mul_mat_job.h"
#include "ops/cpu/cpu.h"
#include "ops/types/types.h"

static float frand(void)
{
    return (float)(test_rand() >> 8) / (float)(1u << 24) - 0.5f;
}

/* W (type, K x M) times X (F32, K x N); every product checked against the reference. */
static void test_case(enum llm_type type, int64_t K, int64_t M, int64_t N)
{
    const struct llm_type_traits *tt = llm_type_traits(type);
    struct llm_tensor w, x, d;
    init_tensor(&w, type, K, M);
    init_tensor(&x, LLM_TYPE_F32, K, N);
    init_tensor(&d, LLM_TYPE_F32, M, N);
    float *row = malloc((size_t)K * sizeof(float));
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++)
            row[k] = frand();
        tt->from_float(row, (char *)w.data + m * w.nb[1], K);
    }
    float *xs = x.data;
    for (int64_t i = 0; i < K * N; i++)
        xs[i] = frand();
    d.op = LLM_OP_MUL_MAT;
    d.src[0] = &w, d.src[1] = &x;
    CHECK(llm_cpu_supports(&d) && llm_cpu_mul_mat_uses_blas(&d), "%s K%lld M%lld N%lld: not on the BLAS path",
          llm_type_name(type), (long long)K, (long long)M, (long long)N);

    /* reference, in double */
    double *want = malloc((size_t)(M * N) * sizeof(double));
    for (int64_t m = 0; m < M; m++) {
        tt->to_float((const char *)w.data + m * w.nb[1], row, K);
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)row[k] * xs[n * K + k];
            want[n * M + m] = s;
        }
    }
    for (int nth = 2; nth <= 3; nth++) {
        struct llm_threadpool *pool = llm_threadpool_new(nth);
        size_t wsize = llm_cpu_work_size(&d, nth);
        struct job j = { .node = &d, .wdata = malloc(wsize), .wsize = wsize, .pool = pool };
        for (int rep = 0; rep < 5; rep++) {
            memset(d.data, 0xff, d.nb[2]); /* NaN: rows nobody wrote show up */
            llm_threadpool_run(pool, run_job, &j);
            const float *got = d.data;
            int64_t bad = 0;
            for (int64_t i = 0; i < M * N; i++)
                bad += !(fabs(got[i] - want[i]) <= 1e-4 * (1.0 + fabs(want[i])));
            CHECK(bad == 0, "%s K%lld M%lld N%lld nth %d run %d: %lld of %lld products wrong",
                  llm_type_name(type), (long long)K, (long long)M, (long long)N, nth, rep,
                  (long long)bad, (long long)(M * N));
        }
        free(j.wdata);
        llm_threadpool_free(pool);
    }
    free(want);
    free(row);
    free(w.data);
    free(x.data);
    free(d.data);
}

int main(void)
{
    /* 4 Mi floats per tile: K 256 gives 16384-row tiles, so M 2.3 tiles; K 64 as the output
     * matrix of a 64-wide model (65536-row tiles). The weight types with a GEMM kernel take it where
     * the CPU has AVX2 (every quantized type a model uses), so the dequantizing tiles are reached
     * here through the two that have none, with blocks of 256 and of 32. */
    test_case(LLM_TYPE_Q8_K, 256, 16384 * 2 + 5000, 32);
    test_case(LLM_TYPE_Q8_1, 64, 65536 + 9000, 32);
    return test_done("test_mul_mat_tiles");
}
