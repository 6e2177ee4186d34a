/* The float GEMM kernels of the prefill path (issue 9): F16 and BF16 weights, and the quantized ones
 * without an integer GEMM (Q4_1, Q5_0, Q5_1, K-quants: dequantized per row into the panels), against F32
 * activations, every kernel this CPU can run (AVX-512 and AVX2; AVX2 alone under LLM_CPU_ISA=avx2:
 * tests/test_isa_avx2.sh) against the dot product of the dequantized rows in double (the arithmetic
 * of llm_ref_mul_mat) for every product, on odd shapes (M, N not multiples of any tile, K odd, K past
 * one k block, M past one block of rows) and on full tiles of 1, 2 and 3 panels (plain moves, the
 * others masked ones), with padded weight, activation and output rows. Tolerance:
 * 2e-6 of Σ|w·x| per product (float sums of up to 1100 products in k order, the weights converted
 * exactly; the worst seen is 1.6e-7). Then MUL_MAT nodes of both types in batches on the GEMM path
 * of both ISAs give the same floats on 1, 2 and 3 threads. */
#include <math.h>
#include <stdint.h>

#include "cpu_features.h"
#include "harness.h"
#include "mul_mat_job.h"
#include "ops/cpu/cpu.h"
#include "ops/types/quants.h"
#include "ops/types/types.h"

static float frand(void)
{
    return (float)(test_rand() >> 8) / (float)(1u << 24) - 0.5f;
}

/* random values up to ±8 */
static float half_value(int64_t r, int64_t i)
{
    (void)r, (void)i;
    return 16.0f * frand();
}

static char *half_rows(enum llm_type t, int64_t k, int64_t rows, size_t stride)
{
    return typed_rows(t, k, rows, stride, half_value);
}

/* against the dot product of the dequantized rows in double, relative to Σ|w·x| */
static double product_error(const struct gemm_case *c, int64_t m, int64_t n)
{
    float *a = malloc((size_t)c->k * sizeof(float));
    const float *x = (const float *)(c->x + n * c->xstride);
    llm_type_traits(c->t)->to_float(c->w + m * c->wstride, a, c->k);
    double s = 0, abs_sum = 0;
    for (int64_t i = 0; i < c->k; i++) {
        s += (double)a[i] * x[i];
        abs_sum += fabs((double)a[i] * x[i]);
    }
    free(a);
    return fabs((double)c->dst[n * c->ldd + m] - s) / (abs_sum + 1e-30);
}

static void kernel_case(const char *isa, llm_gemm_fn gemm, enum llm_type t, int64_t k, int64_t M, int64_t N)
{
    size_t wstride = llm_row_size(t, k) + 6, xstride = (size_t)k * sizeof(float) + 12, ldd = (size_t)M + 3;
    char *w = half_rows(t, k, M, wstride), *x = calloc((size_t)N, xstride);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < k; i++)
            ((float *)(x + n * xstride))[i] = frand();
    struct gemm_case c = { t, k, M, N, w, x, wstride, xstride, ldd, NULL };
    double worst;
    int64_t bad = gemm_wrong(gemm, &c, llm_gemm_f32_scratch_size(k), product_error, 2e-6, &worst);
    CHECK(bad == 0, "%s gemm %s K%lld M%lld N%lld: %lld products wrong (worst relative error %.3g)", isa,
          llm_type_name(t), (long long)k, (long long)M, (long long)N, (long long)bad, worst);
    free(w);
    free(x);
}

/* MUL_MAT nodes on 1, 2 and 3 threads: the same bits (N past both ISAs' fgemm_min_batch). */
static void threads_cases(enum llm_type t, const int64_t (*shapes)[3])
{
    for (size_t i = 0; i < 2; i++) {
        const int64_t k = shapes[i][0], M = shapes[i][1], N = shapes[i][2];
        int differ = gemm_threads_differ(t, k, M, N, half_rows(t, k, M, llm_row_size(t, k)), frand);
        CHECK(differ >= 0, "%s K%lld M%lld N%lld: not on the GEMM path", llm_type_name(t), (long long)k,
              (long long)M, (long long)N);
        CHECK(differ <= 0, "%s K%lld M%lld N%lld: %d threads differ from 1", llm_type_name(t), (long long)k,
              (long long)M, (long long)N, differ);
    }
}

struct kernel {
    const char *isa;
    llm_gemm_fn fn;
};

/* The kernels of t against the dequantized rows on the shapes given ({K, M, N}; K a multiple of t's
 * block size), then MUL_MAT nodes of t on 1, 2 and 3 threads. */
static void check_type(enum llm_type t, const int64_t (*shapes)[3], size_t n_shapes, const int64_t (*threads)[3])
{
    llm_gemm_fn gemm = llm_type_traits(t)->gemm_f32;
    if (!llm_cpu_has_avx2()) {
        CHECK(gemm == NULL, "%s: a float GEMM kernel without AVX2", llm_type_name(t));
        return;
    }
    struct kernel kernels[2] = { { "AVX2", llm_gemm_f32_avx2(t) } };
    int n_kernels = 1;
    if (llm_cpu_has_avx512())
        kernels[n_kernels++] = (struct kernel){ "AVX-512", llm_gemm_f32_avx512(t) };
    CHECK(gemm == kernels[n_kernels - 1].fn, "%s: not the float GEMM of the best ISA allowed", llm_type_name(t));
    for (int j = 0; j < n_kernels; j++) {
        printf("%s: %s float GEMM\n", llm_type_name(t), kernels[j].isa);
        for (size_t i = 0; i < n_shapes; i++)
            kernel_case(kernels[j].isa, kernels[j].fn, t, shapes[i][0], shapes[i][1], shapes[i][2]);
    }
    threads_cases(t, threads);
}

int main(void)
{
    static const int64_t halves[][3] = {
        { 1, 1, 1 }, { 7, 5, 3 }, { 96, 17, 9 },
        { 251, 70, 13 },  /* odd K, 1-3 panels per tile */
        { 96, 40, 9 },    /* a full tile of 3 panels, then a full one of 2 */
        { 33, 8, 5 },     /* a full tile of 1 panel */
        { 1100, 53, 11 }, /* three k blocks, the last odd */
        { 64, 1200, 4 },  /* past one block of rows */
    };
    static const int64_t halves_threads[2][3] = { { 320, 101, 45 }, { 33, 67, 40 } };
    check_type(LLM_TYPE_F16, halves, sizeof halves / sizeof halves[0], halves_threads);
    check_type(LLM_TYPE_BF16, halves, sizeof halves / sizeof halves[0], halves_threads);
    /* quantized weights without an integer GEMM, dequantized per row into the panels: k blocks are
     * whole quant blocks */
    static const int64_t blocks32[][3] = { { 32, 5, 3 }, { 96, 17, 9 }, { 1120, 53, 11 }, { 64, 1200, 4 } };
    static const int64_t blocks32_threads[2][3] = { { 320, 101, 45 }, { 32, 67, 40 } };
    static const int64_t blocks256[][3] = { { 256, 5, 3 }, { 768, 70, 13 }, { 2304, 53, 11 }, { 256, 1200, 4 } };
    static const int64_t blocks256_threads[2][3] = { { 512, 101, 45 }, { 256, 67, 40 } };
    static const enum llm_type small[] = { LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1 };
    /* the K-quants with a quantizer to make rows from (Q2_K, Q3_K and Q5_K share pack_dequant; test_ops
     * runs their MUL_MAT batches on this path against the reference) */
    static const enum llm_type super[] = { LLM_TYPE_Q4_K, LLM_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        check_type(small[i], blocks32, sizeof blocks32 / sizeof blocks32[0], blocks32_threads);
    for (size_t i = 0; i < sizeof super / sizeof super[0]; i++)
        check_type(super[i], blocks256, sizeof blocks256 / sizeof blocks256[0], blocks256_threads);
    /* Q8_0 and Q4_0 keep their integer GEMM */
    CHECK(!llm_type_traits(LLM_TYPE_Q8_0)->gemm_f32 && !llm_type_traits(LLM_TYPE_Q4_0)->gemm_f32,
          "a float GEMM for a type with an integer GEMM");
    return test_done("test_gemm_f16");
}
