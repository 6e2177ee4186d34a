/* Dot products of every weight type with its vec_dot_type, on random rows of several lengths:
 * - the fast kernel (traits->vec_dot, AVX2 when available) matches the scalar oracle
 *   (vec_dot_ref) within 1e-5 of sum |x_i * y_i|;
 * - the oracle matches a double-precision dot of the dequantized weight row with the
 *   dequantized activation row (same tolerance, plus the fp16 rounding of Q8_1's stored sum). */
#include <stddef.h>
#include <stdint.h>

#include "cpu_features.h"
#include "harness.h"
#include "ops/types/blocks.h"
#include "ops/types/quants.h"
#include "ops/types/types.h"

static float uniform(void)
{
    return (float)(test_rand() & 0xffffff) / (float)0x1000000;
}

/* Roughly normal values with occasional outliers, like activations and weights. */
static float sample(void)
{
    float v = (uniform() + uniform() + uniform() - 1.5f) * 2.0f;
    return test_rand() % 97 == 0 ? v * 15.0f : v;
}

static void put_half(uint8_t *p, float v)
{
    uint16_t h = llm_fp32_to_fp16(v);
    memcpy(p, &h, sizeof h);
}

/* Offsets of the fp16 scale fields of each block (random bytes elsewhere are valid quants). */
static int scale_offsets(int t, size_t off[2])
{
    switch (t) {
    case LLM_TYPE_Q4_0: off[0] = offsetof(struct block_q4_0, d); return 1;
    case LLM_TYPE_Q5_0: off[0] = offsetof(struct block_q5_0, d); return 1;
    case LLM_TYPE_Q8_0: off[0] = offsetof(struct block_q8_0, d); return 1;
    case LLM_TYPE_IQ4_NL: off[0] = offsetof(struct block_iq4_nl, d); return 1;
    case LLM_TYPE_Q3_K: off[0] = offsetof(struct block_q3_K, d); return 1;
    case LLM_TYPE_Q6_K: off[0] = offsetof(struct block_q6_K, d); return 1;
    case LLM_TYPE_Q4_1: off[0] = offsetof(struct block_q4_1, d);
                        off[1] = offsetof(struct block_q4_1, m); return 2;
    case LLM_TYPE_Q5_1: off[0] = offsetof(struct block_q5_1, d);
                        off[1] = offsetof(struct block_q5_1, m); return 2;
    case LLM_TYPE_Q2_K: off[0] = offsetof(struct block_q2_K, d);
                        off[1] = offsetof(struct block_q2_K, dmin); return 2;
    case LLM_TYPE_Q4_K: off[0] = offsetof(struct block_q4_K, d);
                        off[1] = offsetof(struct block_q4_K, dmin); return 2;
    case LLM_TYPE_Q5_K: off[0] = offsetof(struct block_q5_K, d);
                        off[1] = offsetof(struct block_q5_K, dmin); return 2;
    default: return 0;
    }
}

/* A weight row: quantized from random floats (when the type has a quantizer and `bytes` is
 * false), or random block bytes with sane scales (covers every bit pattern of the quants). */
static void make_weight(int t, int64_t n, void *row, float *tmp, int random_bytes)
{
    const struct llm_type_info *ti = llm_type_info(t);
    size_t size = llm_row_size(t, n);
    size_t off[2];
    int nscale = scale_offsets(t, off);
    if (random_bytes && nscale) {
        uint8_t *p = row;
        for (size_t i = 0; i < size; i++)
            p[i] = (uint8_t)test_rand();
        for (int64_t b = 0; b < n / ti->blck_size; b++)
            for (int k = 0; k < nscale; k++)
                put_half(p + b * ti->type_size + off[k], (uniform() - (k ? 0.5f : 0.0f)) * 0.05f);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        tmp[i] = sample();
    llm_type_traits(t)->from_float(tmp, row, n);
}

/* Allowance for Q8_1's stored s = fp16(d * sum q): the min term of each block uses it. */
static double q8_1_allowance(int t, int64_t n, const void *w, const void *act)
{
    if (t != LLM_TYPE_Q4_1 && t != LLM_TYPE_Q5_1)
        return 0;
    const struct block_q8_1 *y = act;
    double a = 0;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *blk = (const uint8_t *)w + b * llm_type_info(t)->type_size;
        uint16_t mh;
        memcpy(&mh, blk + 2, sizeof mh); /* m follows d in both Q4_1 and Q5_1 */
        int sum = 0;
        for (int j = 0; j < QK; j++)
            sum += y[b].qs[j];
        double exact = (double)llm_fp16_to_fp32(y[b].d) * sum;
        a += fabs(llm_fp16_to_fp32(mh)) * fabs(llm_fp16_to_fp32(y[b].s) - exact);
    }
    return a * 1.01;
}

static void check_type(int t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    const struct llm_type_traits *yt = llm_type_traits(tt->vec_dot_type);
    const char *name = llm_type_name(t);
    CHECK(tt->vec_dot && tt->vec_dot_ref, "%s has no vec_dot", name);
    CHECK(yt && yt->to_float && yt->from_float_fast, "%s: vec_dot_type %d unusable", name,
          (int)tt->vec_dot_type);
    if (!tt->vec_dot || !tt->vec_dot_ref || !yt || !yt->to_float || !yt->from_float_fast)
        return;
    static const int64_t plain_len[] = { 1, 7, 8, 31, 33, 64, 257, 1000, 4096 };
    static const int64_t blocks[] = { 1, 2, 3, 5, 11, 16, 35 };
    int worst_fast = 0, worst_ref = 0;
    double worst_fast_err = 0, worst_ref_err = 0;
    const int64_t blck = llm_type_info(t)->blck_size;
    const int64_t y_blck = llm_type_info(tt->vec_dot_type)->blck_size;
    int nlen = blck == 1 ? 9 : 7;
    for (int li = 0; li < nlen; li++) {
        int64_t n = blck == 1 ? plain_len[li] : blocks[li] * blck;
        if (n % y_blck)
            continue;
        void *w = malloc(llm_row_size(t, n)), *act = malloc(llm_row_size(tt->vec_dot_type, n));
        float *tmp = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * sizeof(float));
        float *yf = malloc((size_t)n * sizeof(float));
        for (int rep = 0; rep < 6; rep++) {
            int random_bytes = rep % 2 == 1 || !tt->from_float;
            make_weight(t, n, w, tmp, random_bytes);
            for (int64_t i = 0; i < n; i++)
                tmp[i] = rep == 4 ? 0.0f : sample(); /* rep 4: all-zero activations */
            yt->from_float_fast(tmp, act, n);
            tt->to_float(w, wf, n);
            yt->to_float(act, yf, n);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                exact += (double)wf[i] * yf[i];
                mag += fabs((double)wf[i] * yf[i]);
            }
            float ref = NAN, fast = NAN;
            tt->vec_dot_ref(n, &ref, w, act);
            tt->vec_dot(n, &fast, w, act);
            double tol = 1e-5 * mag + 1e-30;
            double e_fast = fabs((double)fast - ref) / tol;
            double e_ref = fabs((double)ref - exact) / (tol + q8_1_allowance(t, n, w, act));
            if (!(e_fast <= 1.0))
                worst_fast++;
            if (!(e_ref <= 1.0))
                worst_ref++;
            worst_fast_err = e_fast > worst_fast_err ? e_fast : worst_fast_err;
            worst_ref_err = e_ref > worst_ref_err ? e_ref : worst_ref_err;
            if (!(e_fast <= 1.0) || !(e_ref <= 1.0))
                fprintf(stderr, "%s n=%lld rep=%d: fast %.9g ref %.9g exact %.9g (sum|xy| %g)\n",
                        name, (long long)n, rep, fast, ref, exact, mag);
        }
        free(w);
        free(act);
        free(tmp);
        free(wf);
        free(yf);
    }
    CHECK(worst_fast == 0, "%s: %d fast results off the reference (worst %.3g x tolerance)",
          name, worst_fast, worst_fast_err);
    CHECK(worst_ref == 0, "%s: %d reference results off the float dot (worst %.3g x tolerance)",
          name, worst_ref, worst_ref_err);
}

/* A vec_dot4 kernel of type t (the traits' where the CPU gives the type one): each of the four
 * sums matches vec_dot_ref within the same tolerance, and a row gives the same bits in every one
 * of the four places. Block counts cover the 4- and 8-block steps of the quantized kernels and
 * every tail of them. */
static void check_dot4(int t, llm_vec_dot4_fn dot4, const char *kernel)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    if (!dot4)
        return;
    static const int64_t lens[] = { 1, 2, 7, 8, 15, 16, 17, 24, 28, 30, 63, 64, 172, 1000 };
    const int64_t blck = llm_type_info(t)->blck_size;
    const int yt = tt->vec_dot_type;
    const size_t n_lens = sizeof lens / sizeof lens[0];
    int bad = 0, moved = 0;
    for (size_t li = 0; li < n_lens; li++) {
        const int64_t n = lens[li] * blck;
        const size_t row = llm_row_size(t, n);
        char *w = malloc(5 * row), *act = malloc(llm_row_size(yt, n));
        float *tmp = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * sizeof(float));
        for (int r = 0; r < 5; r++)
            make_weight(t, n, w + r * row, tmp, r % 2);
        for (int64_t i = 0; i < n; i++)
            tmp[i] = sample();
        llm_type_traits(yt)->from_float(tmp, act, n);
        llm_type_traits(yt)->to_float(act, tmp, n);
        const void *rows[4] = { w, w + row, w + 2 * row, w + 3 * row };
        float s[4];
        dot4(n, s, rows, act);
        for (int r = 0; r < 4; r++) {
            float ref;
            double mag = 0;
            tt->vec_dot_ref(n, &ref, rows[r], act);
            tt->to_float(rows[r], wf, n);
            for (int64_t i = 0; i < n; i++)
                mag += fabs((double)wf[i] * tmp[i]);
            if (!(fabs((double)s[r] - ref) <= 1e-5 * mag + 1e-30)) {
                bad++;
                fprintf(stderr, "%s %s dot4 n=%lld row %d: %.9g, reference %.9g\n", llm_type_name(t), kernel,
                        (long long)n, r, s[r], ref);
            }
        }
        /* row 4 in each place, next to other rows: the same bits as when it is alone */
        const void *alone[4] = { w + 4 * row, w + 4 * row, w + 4 * row, w + 4 * row };
        float base[4];
        dot4(n, base, alone, act);
        for (int place = 0; place < 4; place++) {
            const void *mix[4] = { rows[0], rows[1], rows[2], rows[3] };
            mix[place] = w + 4 * row;
            float got[4];
            dot4(n, got, mix, act);
            moved += memcmp(&got[place], &base[0], sizeof(float)) != 0;
        }
        free(w);
        free(act);
        free(tmp);
        free(wf);
    }
    CHECK(bad == 0, "%s %s: %d vec_dot4 sums off the reference", llm_type_name(t), kernel, bad);
    CHECK(moved == 0, "%s %s: %d vec_dot4 sums changed with the row's place", llm_type_name(t), kernel, moved);
}

/* vec_dot_rows of type t: every row's sum has the bits vec_dot4 gives it, for row counts of one
 * to several groups, rows padded apart (a stride longer than the row), lengths with every tail. */
static void check_dot_rows(int t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    if (!tt->vec_dot_rows)
        return;
    static const int64_t lens[] = { 1, 8, 15, 16, 17, 31, 32, 33, 64, 172, 1000 };
    int bad = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li], rows = 12;
        const size_t stride = llm_row_size(t, n) + 64;
        char *w = calloc((size_t)rows, stride), *act = malloc(llm_row_size(tt->vec_dot_type, n));
        float *tmp = malloc((size_t)n * sizeof(float)), got[12], want[12];
        for (int64_t r = 0; r < rows; r++)
            make_weight(t, n, w + r * stride, tmp, (int)(r % 2));
        for (int64_t i = 0; i < n; i++)
            tmp[i] = sample();
        llm_type_traits(tt->vec_dot_type)->from_float(tmp, act, n);
        for (int64_t groups = 1; groups <= rows / 4; groups++) {
            for (int64_t g = 0; g < groups; g++) {
                const char *r = w + (size_t)(4 * g) * stride;
                const void *four[4] = { r, r + stride, r + 2 * stride, r + 3 * stride };
                tt->vec_dot4(n, want + 4 * g, four, act);
            }
            memset(got, 0xff, sizeof got);
            tt->vec_dot_rows(n, 4 * groups, got, w, stride, act);
            bad += memcmp(got, want, (size_t)(4 * groups) * sizeof(float)) != 0;
            for (int64_t r = 4 * groups; r < rows; r++) /* nothing written past the rows asked for */
                bad += !isnan(got[r]);
        }
        free(w);
        free(act);
        free(tmp);
    }
    CHECK(bad == 0, "%s: %d vec_dot_rows results differ from vec_dot4", llm_type_name(t), bad);
}

/* vec_dot1 of type t: each row's sum has the bits vec_dot4 gives it, for lengths with every tail. */
static void check_dot1(int t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    if (!tt->vec_dot1)
        return;
    static const int64_t lens[] = { 1, 8, 15, 16, 17, 31, 32, 33, 64, 172, 896, 1000, 4864 };
    int bad = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        const size_t row = llm_row_size(t, n);
        char *w = malloc(4 * row), *act = malloc(llm_row_size(tt->vec_dot_type, n));
        float *tmp = malloc((size_t)n * sizeof(float)), want[4], got;
        for (int r = 0; r < 4; r++)
            make_weight(t, n, w + r * row, tmp, r % 2);
        for (int64_t i = 0; i < n; i++)
            tmp[i] = sample();
        llm_type_traits(tt->vec_dot_type)->from_float(tmp, act, n);
        const void *four[4] = { w, w + row, w + 2 * row, w + 3 * row };
        tt->vec_dot4(n, want, four, act);
        for (int r = 0; r < 4; r++) {
            tt->vec_dot1(n, &got, four[r], act);
            bad += memcmp(&got, &want[r], sizeof got) != 0;
        }
        free(w);
        free(act);
        free(tmp);
    }
    CHECK(bad == 0, "%s: %d vec_dot1 results differ from vec_dot4", llm_type_name(t), bad);
}

/* Q4_0 / Q8_0: the traits hold the vec_dot4 of the best ISA allowed; where the CPU has AVX-VNNI
 * and the traits prefer AVX-512, the AVX-VNNI kernel is checked on its own too. */
static void check_dot4_isa(int t)
{
    bool q8 = t == LLM_TYPE_Q8_0;
    llm_vec_dot4_fn vnni = q8 ? llm_vec_dot4_q8_0_avxvnni : llm_vec_dot4_q4_0_avxvnni;
    llm_vec_dot4_fn want = llm_cpu_has_avx512()    ? (q8 ? llm_vec_dot4_q8_0_avx512 : llm_vec_dot4_q4_0_avx512)
                           : llm_cpu_has_avxvnni() ? vnni
                           : llm_cpu_has_avx2()    ? (q8 ? llm_vec_dot4_q8_0_avx2 : llm_vec_dot4_q4_0_avx2)
                                                   : NULL;
    CHECK(llm_type_traits(t)->vec_dot4 == want, "%s: not the vec_dot4 of the best ISA allowed", llm_type_name(t));
    if (llm_cpu_has_avxvnni() && want != vnni)
        check_dot4(t, vnni, "AVX-VNNI");
}

int main(void)
{
    /* every type with a dequantizer that can be a weight must have a dot product */
    const int weights[] = { LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q4_0,
                            LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q8_0,
                            LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K,
                            LLM_TYPE_Q6_K, LLM_TYPE_IQ4_NL };
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++)
        check_type(weights[i]);
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++)
        check_dot4(weights[i], llm_type_traits(weights[i])->vec_dot4, "traits");
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
        check_dot_rows(weights[i]);
        check_dot1(weights[i]);
    }
    CHECK(!llm_cpu_has_avx512() || llm_type_traits(LLM_TYPE_F16)->vec_dot1, "AVX-512 but no F16 vec_dot1");
    /* Q5_0 (most of a Q4_K_M file of the 0.5B shape, whose 896-wide rows fall back to it) */
    const struct llm_type_traits *q5 = llm_type_traits(LLM_TYPE_Q5_0);
    CHECK(llm_cpu_has_avx512() ? q5->vec_dot4 == llm_vec_dot4_q5_0_avx512 && q5->vec_dot1 == llm_vec_dot1_q5_0_avx512
          : llm_cpu_has_avx2() ? q5->vec_dot4 == llm_vec_dot4_q5_0_avx2 && !q5->vec_dot1
                               : !q5->vec_dot4,
          "Q5_0: not the vec_dot4 / vec_dot1 of the best ISA allowed");
    /* F32 (tiny models' decode) loops inside the kernel wherever it has a SIMD vec_dot4 */
    CHECK(!llm_type_traits(LLM_TYPE_F32)->vec_dot4 || llm_type_traits(LLM_TYPE_F32)->vec_dot_rows,
          "F32 has a vec_dot4 but no vec_dot_rows");
    check_dot4_isa(LLM_TYPE_Q4_0);
    check_dot4_isa(LLM_TYPE_Q8_0);
    /* the decode types have a 4-row kernel wherever they have a SIMD one */
    const int four[] = { LLM_TYPE_F16, LLM_TYPE_Q4_0, LLM_TYPE_Q8_0 };
    for (size_t i = 0; i < sizeof four / sizeof four[0]; i++)
        CHECK(llm_type_traits(four[i])->vec_dot4 || llm_type_traits(four[i])->vec_dot == llm_type_traits(four[i])->vec_dot_ref,
              "%s has a fast vec_dot but no vec_dot4", llm_type_name(four[i]));
    CHECK(llm_type_traits(LLM_TYPE_F32)->vec_dot4 || !llm_type_traits(LLM_TYPE_F32)->vec_dot_ref ||
          llm_type_traits(LLM_TYPE_F32)->vec_dot == llm_type_traits(LLM_TYPE_F32)->vec_dot_ref,
          "F32 has a fast vec_dot but no vec_dot4");
    CHECK_EQ_INT(llm_type_traits(LLM_TYPE_Q4_0)->vec_dot_type, LLM_TYPE_Q8_0);
    CHECK_EQ_INT(llm_type_traits(LLM_TYPE_Q5_1)->vec_dot_type, LLM_TYPE_Q8_1);
    CHECK_EQ_INT(llm_type_traits(LLM_TYPE_Q6_K)->vec_dot_type, LLM_TYPE_Q8_K);
    return test_done("test_vec_dot");
}
