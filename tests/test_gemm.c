/* The integer GEMM kernels of the prefill path (issue 9): the kernel the CPU dispatch chose (AVX-512
 * VNNI, AVX-VNNI under LLM_CPU_ISA=avxvnni, AVX2 under LLM_CPU_ISA=avx2: tests/test_isa_caps.sh)
 * against vec_dot_ref (src/ops/types/vec_dot.c) for every product, on odd shapes (M, N not multiples of
 * any tile, M past one block of rows, K of 1-152 blocks) with padded weight, activation and output
 * rows, and extreme quants (-128 weights). Tolerance: 2e-6 of Σ|w·x| per product (the integer block
 * sums are exact; only the float scaling and summation order differ). Wherever the CPU has AVX-VNNI
 * (natively too), its Q8_0 kernel must give the old AVX2 tiles' bits on the same cases (the AVX2
 * kernels of 8 rows a register sum each row in one lane, not eight: gemm_q4_0_avx2.c,
 * gemm_q8_0_avx2.c). Then MUL_MAT nodes on the GEMM path must give the same floats on 1, 2 and 3
 * threads. On any AVX2 CPU, the AVX2 Q8_0 kernel on every N 1-70 and odd M (not multiples of 4, 8
 * or 16, past a block of rows), on the file's rows and on repacked groups from several group
 * boundaries (the bits of the file's rows); the AVX2 Q4_0 and Q5_0 kernels likewise against
 * vec_dot_ref at every N from 1 to 70, their twins reading the matrix repacked at load from its first
 * group and from a later one giving the file rows' bits. */
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>

#include "cpu_features.h"
#include "harness.h"
#include "mul_mat_job.h"
#include "ops/cpu/cpu.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "ops/types/repack.h"
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

/* The AVX-VNNI Q8_0 kernel against the old AVX2 tiles (gemm_avx2.c), whose bits it keeps, on case c:
 * the number of output floats (padding included) whose bits differ. */
static int64_t avxvnni_differs(const struct gemm_case *c)
{
    size_t n = (size_t)c->N * c->ldd;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    void *scratch = malloc(llm_gemm_scratch_size(c->k, c->N));
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = GEMM_PAD;
    llm_gemm_q8_0_tiles_avx2(c->k, c->M, c->N, c->w, c->wstride, c->x, c->xstride, a, c->ldd, scratch);
    llm_gemm_q8_0_avxvnni(c->k, c->M, c->N, c->w, c->wstride, c->x, c->xstride, b, c->ldd, scratch);
    int64_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    free(a);
    free(b);
    free(scratch);
    return differ;
}

/* The AVX2 kernels of the file's rows with their twins on repacked groups. */
static const struct {
    enum llm_type t;
    llm_gemm_fn rows, groups;
} avx2_twins[] = {
    { LLM_TYPE_Q4_0, llm_gemm_q4_0_avx2, llm_gemm_q4_0_packed_avx2 },
    { LLM_TYPE_Q5_0, llm_gemm_q5_0_avx2, llm_gemm_q5_0_packed_avx2 },
};

/* gemm's output on w (rows or groups wstride bytes apart), N rows ldd floats apart, the padding set
 * to GEMM_PAD first (the caller frees it). */
static float *twin_out(llm_gemm_fn gemm, const struct gemm_case *c, const char *w, size_t wstride)
{
    float *dst = malloc((size_t)c->N * c->ldd * sizeof(float));
    void *scratch = malloc(llm_gemm_scratch_size(c->k, c->N));
    for (size_t i = 0; i < (size_t)c->N * c->ldd; i++)
        dst[i] = GEMM_PAD;
    gemm(c->k, c->M, c->N, w, wstride, c->x, c->xstride, dst, c->ldd, scratch);
    free(scratch);
    return dst;
}

/* The AVX2 kernel of the file's rows (case c: contiguous rows) on rows [4 * g0, 4 * g0 + M) of a
 * matrix of 4 * g0 + M rows, against vec_dot_ref; its twin on the repacked matrix from group g0 must
 * give the same bits, padding included. The first row has every quant at its top (15 or 31) and the
 * first activation row every quant at 127: the largest int16 sums the kernels hold before a madd. */
static void twin_case(size_t i, int64_t k, int64_t M, int64_t N, int64_t g0)
{
    const enum llm_type t = avx2_twins[i].t;
    const int64_t all = LLM_REPACK_ROWS * g0 + M;
    const size_t row = llm_row_size(t, k), xstride = llm_row_size(LLM_TYPE_Q8_0, k) + 10, ldd = (size_t)M + 3;
    char *w = quant_rows(t, k, all, row), *x = quant_rows(LLM_TYPE_Q8_0, k, N, xstride);
    const size_t bs = llm_type_info(t)->type_size;
    for (int64_t b = 0; b < k / QK; b++) {
        char *top = w + (size_t)(LLM_REPACK_ROWS * g0) * row + (size_t)b * bs;
        memset(top + sizeof(uint16_t), 0xff, bs - sizeof(uint16_t)); /* qs (and Q5_0's qh) */
        memset(((struct block_q8_0 *)x)[b].qs, 127, QK);
    }
    char *p = malloc(llm_repack_size(t, k, all));
    llm_repack_groups(t, k, all, w, row, 0, (all + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, p);
    struct gemm_case c = { t, k, M, N, w + (size_t)(LLM_REPACK_ROWS * g0) * row, x, row, xstride, ldd, NULL };
    double worst;
    int64_t bad = gemm_wrong(avx2_twins[i].rows, &c, llm_gemm_scratch_size(k, N), product_error, 2e-6, &worst);
    CHECK(bad == 0, "AVX2 gemm %s K%lld M%lld N%lld: %lld products wrong (worst relative error %.3g)",
          llm_type_name(t), (long long)k, (long long)M, (long long)N, (long long)bad, worst);
    const size_t gs = llm_repack_group_size(t, k);
    float *a = twin_out(avx2_twins[i].rows, &c, c.w, row);
    float *b = twin_out(avx2_twins[i].groups, &c, p + (size_t)g0 * gs, gs);
    CHECK(memcmp(a, b, (size_t)N * ldd * sizeof(float)) == 0,
          "AVX2 gemm %s K%lld M%lld N%lld from group %lld: the repacked twin gives other bits", llm_type_name(t),
          (long long)k, (long long)M, (long long)N, (long long)g0);
    free(a), free(b), free(p), free(w), free(x);
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

/* gemm on rows w (wstride bytes apart) into N rows of ldd floats set to GEMM_PAD first. */
static float *gemm_out(llm_gemm_fn gemm, int64_t k, int64_t M, int64_t N, const void *w, size_t wstride,
                       const void *x, size_t xstride, size_t ldd)
{
    float *dst = malloc((size_t)N * ldd * sizeof(float));
    void *scratch = malloc(llm_gemm_scratch_size(k, N));
    for (size_t i = 0; i < (size_t)N * ldd; i++)
        dst[i] = GEMM_PAD;
    gemm(k, M, N, w, wstride, x, xstride, dst, ldd, scratch);
    free(scratch);
    return dst;
}

/* The AVX2 Q8_0 kernel with 8 rows a register (gemm_q8_0_avx2.c), whatever kernel the dispatch
 * chose: on the file's rows against vec_dot_ref (the tolerance above), then its twin on the matrix
 * repacked at load (repack.h), started at several group boundaries as a thread's share is, must give
 * the file layout's bits for those rows and leave every other float alone. */
static void q8_0_avx2_case(int64_t k, int64_t M, int64_t N)
{
    const enum llm_type t = LLM_TYPE_Q8_0;
    const size_t wstride = llm_row_size(t, k), xstride = llm_row_size(t, k) + 10, ldd = (size_t)M + 3;
    char *w = quant_rows(t, k, M, wstride), *x = quant_rows(t, k, N, xstride);
    memset(((struct block_q8_0 *)w)->qs, 0x80, QK); /* a row of -128s: |w| = 128 in maddubs */
    struct gemm_case c = { t, k, M, N, w, x, wstride, xstride, ldd, NULL };
    double worst;
    int64_t bad = gemm_wrong(llm_gemm_q8_0_avx2, &c, llm_gemm_scratch_size(k, N), product_error, 2e-6, &worst);
    CHECK(bad == 0, "AVX2 Q8_0 K%lld M%lld N%lld: %lld products wrong (worst relative error %.3g)", (long long)k,
          (long long)M, (long long)N, (long long)bad, worst);
    const int64_t groups = (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS;
    const size_t gs = llm_repack_group_size(t, k);
    const size_t page = 4096, bytes = llm_repack_size(t, k, M), span = (bytes + page - 1) / page * page;
    /* the repacked matrix ends where an inaccessible page starts: a kernel reading past it faults */
    char *map = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED && mprotect(map + span, page, PROT_NONE) == 0, "mmap of a guarded copy");
    char *p = map + span - bytes;
    llm_repack_groups(t, k, M, w, wstride, 0, groups, p);
    float *want = gemm_out(llm_gemm_q8_0_avx2, k, M, N, w, wstride, x, xstride, ldd);
    const int64_t starts[] = { 0, 1, groups / 2, groups - 1 };
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        const int64_t g0 = starts[i] < groups ? starts[i] : 0, m0 = g0 * LLM_REPACK_ROWS;
        float *got = gemm_out(llm_gemm_q8_0_packed_avx2, k, M - m0, N, p + (size_t)g0 * gs, gs, x, xstride,
                              ldd - (size_t)m0);
        int64_t differ = 0;
        for (int64_t n = 0; n < N; n++) /* got's rows are ldd - m0 floats long: compare as dst columns m0.. */
            for (size_t m = (size_t)m0; m < ldd; m++) {
                const float a = want[(size_t)n * ldd + m], b = got[(size_t)n * (ldd - (size_t)m0) + m - (size_t)m0];
                differ += memcmp(&a, &b, sizeof a) != 0;
            }
        CHECK(differ == 0, "AVX2 Q8_0 K%lld M%lld N%lld, repacked from group %lld: %lld floats differ", (long long)k,
              (long long)M, (long long)N, (long long)g0, (long long)differ);
        free(got);
    }
    munmap(map, span + page);
    free(want), free(w), free(x);
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

/* Where AVX2 is the widest ISA, a MUL_MAT node of Q5_0 or Q8_0 weights (qwen2-0.5B's rows, in the
 * file's layout) on 2 threads takes the integer GEMM from N = `from` at every batch (matmul.c
 * gemm_batch: Q5_0 and Q8_0 from 8): it gives the AVX2 kernel's bits, where the dot path and
 * the float GEMM round otherwise; below, the dot path. */
static void avx2_path_case(enum llm_type t, llm_gemm_fn kernel, int64_t from, int64_t N)
{
    const int64_t k = 896, M = 61;
    struct llm_tensor w, x, d;
    init_tensor(&w, t, k, M);
    init_tensor(&x, LLM_TYPE_F32, k, N);
    init_tensor(&d, LLM_TYPE_F32, M, N);
    free(w.data);
    w.data = quant_rows(t, k, M, w.nb[1]);
    for (int64_t i = 0; i < k * N; i++)
        ((float *)x.data)[i] = frand();
    d.op = LLM_OP_MUL_MAT;
    d.src[0] = &w, d.src[1] = &x;
    struct llm_threadpool *pool = llm_threadpool_new(2);
    struct job j = { .node = &d, .wsize = llm_cpu_work_size(&d, 2), .pool = pool };
    j.wdata = malloc(j.wsize);
    llm_threadpool_run(pool, run_job, &j);
    const size_t xs = llm_row_size(LLM_TYPE_Q8_0, k);
    char *xq = malloc(xs * (size_t)N);
    for (int64_t n = 0; n < N; n++)
        llm_type_traits(LLM_TYPE_Q8_0)->from_float_fast((const float *)x.data + n * k, xq + (size_t)n * xs, k);
    struct gemm_case c = { t, k, M, N, w.data, xq, w.nb[1], xs, (size_t)M, NULL };
    float *want = twin_out(kernel, &c, w.data, w.nb[1]);
    const bool same = memcmp(want, d.data, d.nb[2]) == 0;
    CHECK(same == (N >= from), "%s K%lld M%lld N%lld: %s the AVX2 integer GEMM's bits", llm_type_name(t), (long long)k,
          (long long)M, (long long)N, same ? "gives" : "does not give");
    free(want), free(xq), free(j.wdata), free(w.data), free(x.data), free(d.data);
    llm_threadpool_free(pool);
}

/* Each AVX2 kernel with a repacked twin: N across the tile edges, K with a tail chunk of 2 blocks
 * (320) and qwen2-0.5B's 896 (28 blocks: 3 chunks and a tail of 4), M odd, not a multiple of 8,
 * less than a group, past one block of rows; calls from group 0 and from a later group. */
static void twin_cases(void)
{
    for (size_t i = 0; i < sizeof avx2_twins / sizeof avx2_twins[0]; i++) {
        for (int64_t N = 1; N <= 70; N++)
            twin_case(i, 320, 37, N, N % 3);
        twin_case(i, 896, 13, 16, 1);
        twin_case(i, 896, 3, 5, 2);
        twin_case(i, 32, 1, 1, 0);
        twin_case(i, 2048, 300, 7, 5); /* past one block of rows (gemm_block_rows) */
        twin_case(i, 4864, 21, 4, 0);
    }
}

int main(void)
{
    if (llm_cpu_has_avx2())
        twin_cases();
    if (llm_cpu_has_avx2() && !llm_cpu_has_avx512() && !llm_cpu_has_avxvnni()) {
        static const int64_t Ns[] = { 4, 7, 8, 16, 64, 512 };
        for (size_t i = 0; i < sizeof Ns / sizeof Ns[0]; i++) {
            avx2_path_case(LLM_TYPE_Q5_0, llm_gemm_q5_0_avx2, 8, Ns[i]);
            avx2_path_case(LLM_TYPE_Q8_0, llm_gemm_q8_0_avx2, 8, Ns[i]);
        }
    }
    static const enum llm_type types[] = { LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q5_0 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        enum llm_type t = types[i];
        const struct llm_type_traits *tt = llm_type_traits(t);
        if (!llm_cpu_has_avx2()) {
            CHECK(tt->gemm == NULL, "%s: a GEMM kernel without AVX2", llm_type_name(t));
            continue;
        }
        bool q8 = t == LLM_TYPE_Q8_0;
        llm_gemm_fn want = t == LLM_TYPE_Q5_0          ? llm_gemm_q5_0_avx2 /* its only one */
                           : llm_cpu_has_avx512()    ? (q8 ? llm_gemm_q8_0_avx512 : llm_gemm_q4_0_avx512)
                           : llm_cpu_has_avxvnni() ? (q8 ? llm_gemm_q8_0_avxvnni : llm_gemm_q4_0_avxvnni)
                                                   : (q8 ? llm_gemm_q8_0_avx2 : llm_gemm_q4_0_avx2);
        CHECK(tt->gemm == want, "%s: not the GEMM kernel of the best ISA allowed", llm_type_name(t));
        /* the repacked twin only beside the AVX2 kernel it keeps the bits of */
        llm_gemm_fn twin = want == llm_gemm_q4_0_avx2   ? llm_gemm_q4_0_packed_avx2
                           : want == llm_gemm_q5_0_avx2 ? llm_gemm_q5_0_packed_avx2
                           : want == llm_gemm_q8_0_avx2 ? llm_gemm_q8_0_packed_avx2
                                                        : NULL;
        CHECK(tt->gemm_packed == twin, "%s: gemm_packed is not the twin of gemm", llm_type_name(t));
        printf("%s: %s GEMM\n", llm_type_name(t),
               t != LLM_TYPE_Q5_0 && llm_cpu_has_avx512()    ? "AVX-512 VNNI"
               : t != LLM_TYPE_Q5_0 && llm_cpu_has_avxvnni() ? "AVX-VNNI"
                                                             : "AVX2");
        kernel_case(t, 32, 1, 1);
        kernel_case(t, 96, 17, 5);
        kernel_case(t, 224, 50, 13);
        kernel_case(t, 320, 9, 4); /* 8 blocks, then a tail of 2 */
        kernel_case(t, 4864, 37, 6);
        kernel_case(t, 2048, 300, 3); /* past one block of rows (gemm_block_rows) */
        kernel_case(t, 64, 16, 8); /* whole tiles only */
        threads_case(t, 256, 67, 45); /* a batch on the GEMM path of both ISAs */
        threads_case(t, 128, 29, 100); /* the GEMM past N = 64 on AVX2 too */
        if (t == LLM_TYPE_Q5_0)
            threads_case(t, 896, 61, 16); /* qwen2-0.5B's rows, a chat-sized batch */
    }
    if (llm_cpu_has_avx2()) {
        for (int64_t N = 1; N <= 70; N++) /* every count of activation tiles and tail */
            q8_0_avx2_case(320, 37, N); /* 4 lane groups and a tail of 5 rows; a chunk of 8 blocks and one of 2 */
        static const int64_t shapes[][2] = { { 32, 1 }, { 32, 4 }, { 96, 8 }, { 64, 13 }, { 288, 16 },
                                             { 256, 23 }, { 4864, 45 }, { 2048, 300 } }; /* K, M */
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            q8_0_avx2_case(shapes[i][0], shapes[i][1], 6);
    }
    return test_done("test_gemm");
}
