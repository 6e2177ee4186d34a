/* The integer GEMM kernels of the prefill path (issue 9): the kernel the CPU dispatch chose (AVX-512
 * VNNI, AVX-VNNI under LLM_CPU_ISA=avxvnni, AVX2 under LLM_CPU_ISA=avx2: tests/test_isa_caps.sh)
 * against vec_dot_ref (src/ops/types/vec_dot.c) for every product, on odd shapes (M, N not multiples of
 * any tile, M past one block of rows, K of 1-152 blocks) with padded weight, activation and output
 * rows, and extreme quants (-128 weights). Tolerance: 2e-6 of Σ|w·x| per product (the integer block
 * sums are exact; only the float scaling and summation order differ). Wherever the CPU has AVX-VNNI
 * (natively too), its Q8_0 kernel must give the AVX2 kernel's bits on the same cases (the AVX2 Q4_0
 * kernel sums each row in one lane, not eight: gemm_q4_0_avx2.c). Then MUL_MAT nodes
 * on the GEMM path must give the same floats on 1, 2 and 3 threads. */
#include <math.h>
#include <stdint.h>

#include "cpu_features.h"
#include "harness.h"
#include "mul_mat_job.h"
#include "ops/cpu/cpu.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "ops/types/types.h"

static float frand(void)
{
    return (float)(test_rand() >> 8) / (float)(1u << 24) - 0.5f;
}

/* random floats, every third row with the quants at the ends of the range */
static float quant_value(int64_t r, int64_t i)
{
    return r % 3 == 0 ? (i % 2 ? -1.0f : 0.25f * frand()) : frand();
}

static char *quant_rows(enum llm_type t, int64_t k, int64_t rows, size_t stride)
{
    return typed_rows(t, k, rows, stride, quant_value);
}

/* Σ|w_i · x_i| with both rows dequantized: the scale of a product's rounding error */
static double abs_dot(enum llm_type t, int64_t k, const void *w, const void *x)
{
    float *a = malloc((size_t)k * sizeof(float)), *b = malloc((size_t)k * sizeof(float));
    llm_type_traits(t)->to_float(w, a, k);
    llm_type_traits(LLM_TYPE_Q8_0)->to_float(x, b, k);
    double s = 0;
    for (int64_t i = 0; i < k; i++)
        s += fabs((double)a[i] * b[i]);
    free(a);
    free(b);
    return s;
}

/* against vec_dot_ref, relative to Σ|w·x| */
static double product_error(const struct gemm_case *c, int64_t m, int64_t n)
{
    const char *w = c->w + m * c->wstride, *x = c->x + n * c->xstride;
    float want;
    llm_type_traits(c->t)->vec_dot_ref(c->k, &want, w, x);
    return fabs((double)c->dst[n * c->ldd + m] - want) / (abs_dot(c->t, c->k, w, x) + 1e-30);
}

/* The AVX-VNNI Q8_0 kernel against the AVX2 one on case c: the number of output floats (padding
 * included) whose bits differ. */
static int64_t avxvnni_differs(const struct gemm_case *c)
{
    size_t n = (size_t)c->N * c->ldd;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    void *scratch = malloc(llm_gemm_scratch_size(c->k, c->N));
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = GEMM_PAD;
    llm_gemm_q8_0_avx2(c->k, c->M, c->N, c->w, c->wstride, c->x, c->xstride, a, c->ldd, scratch);
    llm_gemm_q8_0_avxvnni(c->k, c->M, c->N, c->w, c->wstride, c->x, c->xstride, b, c->ldd, scratch);
    int64_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    free(a);
    free(b);
    free(scratch);
    return differ;
}

static void kernel_case(enum llm_type t, int64_t k, int64_t M, int64_t N)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    size_t wstride = llm_row_size(t, k) + 6, xstride = llm_row_size(LLM_TYPE_Q8_0, k) + 10, ldd = (size_t)M + 3;
    char *w = quant_rows(t, k, M, wstride), *x = quant_rows(LLM_TYPE_Q8_0, k, N, xstride);
    /* a weight row of -128s (Q8_0 only: the unsigned offset must not overflow) */
    if (t == LLM_TYPE_Q8_0)
        memset(((struct block_q8_0 *)w)->qs, 0x80, QK);
    struct gemm_case c = { t, k, M, N, w, x, wstride, xstride, ldd, NULL };
    double worst;
    int64_t bad = gemm_wrong(tt->gemm, &c, llm_gemm_scratch_size(k, N), product_error, 2e-6, &worst);
    CHECK(bad == 0, "gemm %s K%lld M%lld N%lld: %lld products wrong (worst relative error %.3g)", llm_type_name(t),
          (long long)k, (long long)M, (long long)N, (long long)bad, worst);
    if (llm_cpu_has_avxvnni() && t == LLM_TYPE_Q8_0) {
        int64_t differ = avxvnni_differs(&c);
        CHECK(differ == 0, "gemm %s K%lld M%lld N%lld: AVX-VNNI differs from AVX2 in %lld floats", llm_type_name(t),
              (long long)k, (long long)M, (long long)N, (long long)differ);
    }
    free(w);
    free(x);
}

/* The same node on 1, 2 and 3 threads: the same bits. */
static void threads_case(enum llm_type t, int64_t k, int64_t M, int64_t N)
{
    int differ = gemm_threads_differ(t, k, M, N, quant_rows(t, k, M, llm_row_size(t, k)), frand);
    CHECK(differ >= 0, "%s K%lld M%lld N%lld: not on the GEMM path", llm_type_name(t), (long long)k, (long long)M,
          (long long)N);
    CHECK(differ <= 0, "%s K%lld M%lld N%lld: %d threads differ from 1", llm_type_name(t), (long long)k, (long long)M,
          (long long)N, differ);
}

int main(void)
{
    static const enum llm_type types[] = { LLM_TYPE_Q8_0, LLM_TYPE_Q4_0 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        enum llm_type t = types[i];
        const struct llm_type_traits *tt = llm_type_traits(t);
        if (!llm_cpu_has_avx2()) {
            CHECK(tt->gemm == NULL, "%s: a GEMM kernel without AVX2", llm_type_name(t));
            continue;
        }
        bool q8 = t == LLM_TYPE_Q8_0;
        llm_gemm_fn want = llm_cpu_has_avx512()    ? (q8 ? llm_gemm_q8_0_avx512 : llm_gemm_q4_0_avx512)
                           : llm_cpu_has_avxvnni() ? (q8 ? llm_gemm_q8_0_avxvnni : llm_gemm_q4_0_avxvnni)
                                                   : (q8 ? llm_gemm_q8_0_avx2 : llm_gemm_q4_0_avx2);
        CHECK(tt->gemm == want, "%s: not the GEMM kernel of the best ISA allowed", llm_type_name(t));
        printf("%s: %s GEMM\n", llm_type_name(t),
               llm_cpu_has_avx512() ? "AVX-512 VNNI" : llm_cpu_has_avxvnni() ? "AVX-VNNI" : "AVX2");
        kernel_case(t, 32, 1, 1);
        kernel_case(t, 96, 17, 5);
        kernel_case(t, 224, 50, 13);
        kernel_case(t, 320, 9, 4); /* 8 blocks, then a tail of 2 */
        kernel_case(t, 4864, 37, 6);
        kernel_case(t, 2048, 300, 3); /* past one block of rows (gemm_block_rows) */
        kernel_case(t, 64, 16, 8); /* whole tiles only */
        threads_case(t, 256, 67, 45); /* a batch on the GEMM path of both ISAs */
        if (t == LLM_TYPE_Q4_0)
            threads_case(t, 128, 29, 100); /* Q4_0 keeps the GEMM past N = 64 on AVX2 too */
    }
    return test_done("test_gemm");
}
