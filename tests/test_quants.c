/* Type traits kernels against the reference data of models/quant (MODELS.md "quant/"):
 * - the traits table has a row exactly for the ids the core IR knows the geometry of;
 * - fp16/bf16 conversions are exact and round to nearest even;
 * - to_float of every supported type reproduces `ref` of quant/<TYPE>.gguf exactly;
 * - from_float of the types gguf-py quantizes gives bytes identical to `q` when applied to `src`
 *   of quant/source.gguf; the Q4_K/Q6_K quantizers round-trip with small error;
 * - the fast activation quantizers (from_float_fast) produce the reference bytes. */
#include <stdint.h>

#include "cpu_features.h"
#include "harness.h"
#include "model/gguf.h"
#include "ops/types/types.h"

#define NE0 512
#define NROWS 8
#define NELEM (NE0 * NROWS)

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* h must be a nearest half to f (ties to the even one), judged in double. */
static int fp16_is_nearest(float f, uint16_t h)
{
    if (isnan(f))
        return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0 && (h & 0x200);
    double v = llm_fp16_to_fp32(h), x = f;
    if (fabs(x) >= 65520.0)
        return isinf(v) && (v > 0) == (x > 0);
    if (isinf(v) || signbit(v) != signbit(x))
        return 0;
    for (int dlt = -1; dlt <= 1; dlt += 2) {
        uint16_t o = (uint16_t)(h + dlt);
        if ((h & 0x7fff) == 0 && dlt < 0)
            continue;
        double w = llm_fp16_to_fp32(o);
        if ((o & 0x7c00) == 0x7c00)
            continue;
        if (fabs(w - x) < fabs(v - x) || (fabs(w - x) == fabs(v - x) && (h & 1)))
            return 0;
    }
    return 1;
}

static void test_fp16(void)
{
    int bad_round = 0, bad_trip = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = llm_fp16_to_fp32((uint16_t)h);
        uint16_t back = llm_fp32_to_fp16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan ? back != (h | 0x200) : back != h)
            bad_trip++;
        /* the midpoints to both neighbours and one float ulp either side of them */
        float next = llm_fp16_to_fp32((uint16_t)(h + 1));
        if (!is_nan && (h & 0x7fff) < 0x7c00 && !isinf(next) && !isnan(next) &&
            signbit(next) == signbit(f)) {
            float mid = (float)(((double)f + next) / 2);
            float cases[] = { mid, nextafterf(mid, 0), nextafterf(mid, INFINITY),
                              nextafterf(mid, -INFINITY) };
            for (int k = 0; k < 4; k++)
                bad_round += !fp16_is_nearest(cases[k], llm_fp32_to_fp16(cases[k]));
        }
    }
    for (int i = 0; i < 1000000; i++) {
        float f = bits_f32(test_rand());
        bad_round += !fp16_is_nearest(f, llm_fp32_to_fp16(f));
    }
    CHECK(bad_trip == 0, "%d halves do not round-trip", bad_trip);
    CHECK(bad_round == 0, "%d floats not rounded to the nearest-even half", bad_round);
    CHECK_EQ_INT(llm_fp32_to_fp16(65519.99f), 0x7bff);
    CHECK_EQ_INT(llm_fp32_to_fp16(65520.0f), 0x7c00);
    CHECK_EQ_INT(llm_fp32_to_fp16(-INFINITY), 0xfc00);
    CHECK_EQ_INT(llm_fp32_to_fp16(0x1p-25f), 0x0000);          /* tie to even: 0    */
    CHECK_EQ_INT(llm_fp32_to_fp16(0x1.8p-24f), 0x0002);        /* tie to even: 2    */
    CHECK(llm_fp16_to_fp32(0x0001) == 0x1p-24f, "smallest subnormal");
}

static void test_bf16(void)
{
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = test_rand();
        float f = bits_f32(u);
        uint16_t b = llm_fp32_to_bf16(f);
        if (isnan(f)) {
            bad += !isnan(llm_bf16_to_fp32(b)) || !(b & 0x40);
            continue;
        }
        /* nearest of the two bf16 values bracketing u (ties to even) */
        uint32_t lo = u >> 16, rem = u & 0xffff;
        uint32_t want = rem > 0x8000 || (rem == 0x8000 && (lo & 1)) ? lo + 1 : lo;
        bad += b != want;
    }
    CHECK(bad == 0, "%d bf16 roundings wrong", bad);
    CHECK(llm_bf16_to_fp32(0x3f80) == 1.0f, "bf16 1.0");
    CHECK_EQ_INT(llm_fp32_to_bf16(bits_f32(0x3f808000)), 0x3f80); /* tie to even, down */
    CHECK_EQ_INT(llm_fp32_to_bf16(bits_f32(0x3f818000)), 0x3f82); /* tie to even, up   */
    CHECK_EQ_INT(llm_fp32_to_bf16(bits_f32(0x7f800001)), 0x7fc0); /* sNaN quietened    */
}

static char fixture[256];

static const char *quant_file(const char *type)
{
    snprintf(fixture, sizeof fixture, "models/quant/%s.gguf", type);
    return test_path(fixture);
}

/* Copy of tensor `name` of a fixture, checked to be want_type with NELEM elements; NULL (and a
 * failed check) otherwise. */
static void *load(const char *file, const char *name, int want_type, size_t want_bytes)
{
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    int rc = gguf_open(file, &f, &err);
    CHECK(rc == LLM_OK, "%s", err.msg);
    if (rc != LLM_OK)
        return NULL;
    const struct gguf_tensor_info *ti = gguf_find_tensor(f, name);
    void *d = NULL;
    CHECK(ti != NULL, "%s: tensor %s missing", file, name);
    if (ti) {
        int64_t ne = ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3];
        CHECK((int)ti->type == want_type && ne == NELEM && ti->nbytes == want_bytes,
              "%s: %s has type %d, %lld elements, %llu bytes", file, name, (int)ti->type,
              (long long)ne, (unsigned long long)ti->nbytes);
        if ((int)ti->type == want_type && ne == NELEM && ti->nbytes == want_bytes) {
            d = malloc(want_bytes);
            memcpy(d, ti->data, want_bytes);
        }
    }
    gguf_close(f);
    return d;
}

static const char *const all_types[] = { "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K" };

/* How many types each loop actually compared (a type that is silently left out is a failure). */
static int n_dequantized, n_quantized_bytes, n_fast_quantizers, n_fast_distinct, n_k_quantizers;

/* Types with a from_float (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 IQ4_NL Q4_K Q6_K Q8_K) and, of those,
 * types whose from_float_fast is an AVX2 kernel of its own (F16 BF16 Q8_0 Q8_1 Q8_K). */
#define N_FROM_FLOAT 13
#define N_FAST_AVX2 5

static void test_dequantize(const char *name)
{
    int t = llm_type_from_name(name);
    const struct llm_type_traits *tt = llm_type_traits(t);
    CHECK(tt && tt->to_float, "%s has no to_float", name);
    if (!tt || !tt->to_float)
        return;
    size_t qbytes = llm_row_size(t, NE0) * NROWS;
    const char *file = quant_file(name);
    void *q = load(file, "q", t, qbytes);
    float *ref = load(file, "ref", LLM_TYPE_F32, NELEM * sizeof(float));
    if (q && ref) {
        float out[NELEM];
        /* row by row, as the kernels are used */
        for (int r = 0; r < NROWS; r++)
            tt->to_float((const char *)q + r * llm_row_size(t, NE0), out + r * NE0, NE0);
        int mismatches = 0;
        float maxdiff = 0;
        for (int i = 0; i < NELEM; i++) {
            mismatches += f32_bits(out[i]) != f32_bits(ref[i]);
            maxdiff = fmaxf(maxdiff, fabsf(out[i] - ref[i]));
        }
        CHECK(mismatches == 0, "%s to_float: %d of %d values differ from ref (max abs diff %g)",
              name, mismatches, NELEM, maxdiff);
        n_dequantized++;
    }
    free(q);
    free(ref);
}

static void test_quantize_bytes(const char *name, const float *src)
{
    int t = llm_type_from_name(name);
    const struct llm_type_traits *tt = llm_type_traits(t);
    CHECK(tt && tt->from_float, "%s has no from_float", name);
    if (!tt || !tt->from_float)
        return;
    size_t rs = llm_row_size(t, NE0), qbytes = rs * NROWS;
    void *q = load(quant_file(name), "q", t, qbytes);
    if (!q)
        return;
    uint8_t *mine = malloc(qbytes);
    for (int r = 0; r < NROWS; r++)
        tt->from_float(src + r * NE0, mine + r * rs, NE0);
    size_t first = qbytes;
    for (size_t i = 0; i < qbytes && first == qbytes; i++)
        if (mine[i] != ((uint8_t *)q)[i])
            first = i;
    CHECK(first == qbytes, "%s from_float: bytes differ from q, first at byte %zu (row %zu)",
          name, first, first / rs);
    n_quantized_bytes++;
    free(mine);
    free(q);
}

/* Normalised squared error of quantize -> dequantize over the source data. */
static double roundtrip_nmse(int t, const float *src, int64_t n)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    void *q = malloc(llm_row_size(t, n));
    float *back = malloc((size_t)n * sizeof(float));
    tt->from_float(src, q, n);
    tt->to_float(q, back, n);
    double err = 0, sig = 0;
    for (int64_t i = 0; i < n; i++) {
        err += ((double)back[i] - src[i]) * ((double)back[i] - src[i]);
        sig += (double)src[i] * src[i];
    }
    free(q);
    free(back);
    return sig > 0 ? err / sig : err;
}

/* Rows 0, 1, 3, 4, 6 of the source are plain N(0,1); 2 and 5 carry x20 outliers, 7 is zero. */
static const int plain_rows[] = { 0, 1, 3, 4, 6 };

/* NMSE limits on the plain rows; on every row our error must stay within 1.25x of ggml's
 * reference quantizer (the `ref` dequantization of quant/<TYPE>.gguf), when that file exists. */
static void test_k_quantizers(const float *src)
{
    struct { int t; double limit; } cases[] = {
        { LLM_TYPE_Q4_K, 1e-2 }, { LLM_TYPE_Q6_K, 1e-3 }, { LLM_TYPE_Q8_K, 2e-4 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int t = cases[c].t;
        double worst = 0;
        for (size_t k = 0; k < sizeof plain_rows / sizeof plain_rows[0]; k++) {
            double e = roundtrip_nmse(t, src + plain_rows[k] * NE0, NE0);
            worst = e > worst ? e : worst;
        }
        CHECK(worst < cases[c].limit, "%s round trip NMSE %g >= %g", llm_type_name(t), worst,
              cases[c].limit);
        if (t == LLM_TYPE_Q8_K)
            continue;
        float *ref = load(quant_file(llm_type_name(t)), "ref", LLM_TYPE_F32, NELEM * sizeof(float));
        n_k_quantizers += ref != NULL;
        for (int r = 0; ref && r < NROWS; r++) {
            double mine = roundtrip_nmse(t, src + r * NE0, NE0), theirs = 0, sig = 0;
            for (int i = r * NE0; i < (r + 1) * NE0; i++) {
                theirs += ((double)ref[i] - src[i]) * ((double)ref[i] - src[i]);
                sig += (double)src[i] * src[i];
            }
            theirs = sig > 0 ? theirs / sig : theirs;
            CHECK(mine <= 1.25 * theirs, "%s row %d: NMSE %g vs ggml's %g", llm_type_name(t), r,
                  mine, theirs);
        }
        free(ref);
    }
}

/* Squared error of block x (32 values) at the best of 1202 binary16 scales ±amax/(80 .. 140), each
 * value taking its nearest code: a brute-force bound on what an IQ4_NL quantizer can reach. */
static double iq4_nl_search(const float *x, const int8_t *book)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    double best = INFINITY;
    for (int sign = -1; sign <= 1; sign += 2)
        for (int k = 0; k <= 600; k++) {
            const float d = llm_fp16_to_fp32(llm_fp32_to_fp16((float)sign * amax / (80.0f + 0.1f * (float)k)));
            double e = 0.0;
            for (int j = 0; j < 32; j++) {
                float r = INFINITY;
                for (int c = 0; c < 16; c++)
                    r = fminf(r, fabsf(x[j] - d * (float)book[c]));
                e += (double)r * r;
            }
            best = e < best ? e : best;
        }
    return best;
}

/* IQ4_NL (no ggml fixture): a hand-made block decodes to the codebook; a block made of codebook
 * values at a binary16 scale, its extreme on the -127 end, comes back exactly; on the plain rows
 * the round trip beats Q4_0's (same 18 bytes per 32 values, a codebook fitted to normal data) and
 * its squared error is within 1.08x of the brute-force search's (measured 1.045x on normal data;
 * one candidate scale instead of nine gives 1.13x). */
static void test_iq4_nl(const float *src)
{
    static const int8_t book[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
    const struct llm_type_traits *tt = llm_type_traits(LLM_TYPE_IQ4_NL);
    uint8_t blk[18] = { 0x00, 0x3c }; /* d = 1.0 */
    for (int j = 0; j < 16; j++)
        blk[2 + j] = (uint8_t)(j | (15 - j) << 4);
    float out[32], x[32];
    tt->to_float(blk, out, 32);
    int bad = 0;
    for (int j = 0; j < 16; j++)
        bad += out[j] != book[j] || out[j + 16] != book[15 - j];
    CHECK(bad == 0, "IQ4_NL to_float: %d of 32 values off the codebook", bad);
    for (int j = 0; j < 32; j++)
        x[j] = 0.375f * book[(j * 7 + 3) % 16];
    x[5] = 0.375f * -127;
    uint8_t q[18];
    tt->from_float(x, q, 32);
    tt->to_float(q, out, 32);
    bad = 0;
    for (int j = 0; j < 32; j++)
        bad += out[j] != x[j];
    CHECK(bad == 0, "IQ4_NL round trip of codebook values: %d of 32 differ", bad);
    for (size_t k = 0; src && k < sizeof plain_rows / sizeof plain_rows[0]; k++) {
        const float *row = src + plain_rows[k] * NE0;
        double mine = roundtrip_nmse(LLM_TYPE_IQ4_NL, row, NE0), q4 = roundtrip_nmse(LLM_TYPE_Q4_0, row, NE0);
        CHECK(mine < q4, "IQ4_NL row %d: NMSE %g not below Q4_0's %g", plain_rows[k], mine, q4);
        double sig = 0.0, searched = 0.0;
        for (int i = 0; i < NE0; i++)
            sig += (double)row[i] * row[i];
        for (int b = 0; b < NE0 / 32; b++)
            searched += iq4_nl_search(row + 32 * b, book);
        CHECK(mine <= 1.08 * searched / sig, "IQ4_NL row %d: NMSE %g, %.3fx the searched %g", plain_rows[k], mine,
              mine * sig / searched, searched / sig);
    }
}

/* Activation quantizers: the fast path must give the reference bytes, also on awkward data. */
static void test_fast_quantizers(const float *src)
{
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        x[i] = src[i % NELEM];
    /* exact halves of the Q8 step, an all-equal block, a lone negative extreme, tiny values */
    for (int i = 0; i < 32; i++)
        x[i] = i == 31 ? 127.0f : (float)(i - 16) + 0.5f; /* scale 1: every value is a tie */
    for (int i = 32; i < 64; i++)
        x[i] = 1.25f;
    x[300] = -1000.0f;
    for (int i = 512; i < 768; i++)
        x[i] = (float)(i - 640) * 1e-30f;
    for (int i = 768; i < 1024; i++)
        x[i] = 0.0f;
    for (int t = 0; t < LLM_TYPE_COUNT; t++) {
        const struct llm_type_traits *tt = llm_type_traits(t);
        if (!tt || !tt->from_float || !tt->from_float_fast)
            continue;
        size_t bytes = llm_row_size(t, N);
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        tt->from_float(x, a, N);
        tt->from_float_fast(x, b, N);
        CHECK(memcmp(a, b, bytes) == 0, "%s: from_float_fast bytes differ from from_float",
              llm_type_name(t));
        n_fast_quantizers++;
        n_fast_distinct += tt->from_float_fast != tt->from_float;
        free(a);
        free(b);
    }
    free(x);
}

/* llm_type_traits() answers for exactly the known type ids (kernels or not). */
static void test_traits_rows(void)
{
    for (int t = -1; t <= LLM_TYPE_COUNT; t++)
        CHECK(!llm_type_traits(t) == !llm_type_info(t), "type id %d: traits %p, geometry %p", t,
              (const void *)llm_type_traits(t), (const void *)llm_type_info(t));
    CHECK(!llm_type_traits(LLM_TYPE_IQ4_XS)->to_float, "IQ4_XS has a to_float");
}

int main(void)
{
    test_traits_rows();
    test_fp16();
    test_bf16();
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++)
        test_dequantize(all_types[i]);

    CHECK_EQ_INT(n_dequantized, sizeof all_types / sizeof all_types[0]);

    float *src = load(test_path("models/quant/source.gguf"), "src", LLM_TYPE_F32,
                      NELEM * sizeof(float));
    static const char *const exact[] = { "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1" };
    if (src) {
        for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
            test_quantize_bytes(exact[i], src);
        test_k_quantizers(src);
        test_fast_quantizers(src);
    }
    test_iq4_nl(src);
    free(src);
    /* every loop covered what it lists: the types with reference bytes, Q4_K and Q6_K against
     * ggml's quantizer, and the activation quantizers with a fast path (the vec_dot types Q8_0,
     * Q8_1, Q8_K and the F16/BF16 conversions) */
    CHECK_EQ_INT(n_quantized_bytes, sizeof exact / sizeof exact[0]);
    CHECK_EQ_INT(n_k_quantizers, 2);
    CHECK(n_fast_quantizers == N_FROM_FLOAT, "%d types have from_float_fast, expected %d",
          n_fast_quantizers, N_FROM_FLOAT);
    if (llm_cpu_has_avx2())
        CHECK(n_fast_distinct == N_FAST_AVX2, "%d fast activation quantizers compared, expected %d",
              n_fast_distinct, N_FAST_AVX2);
    else
        SKIP("no AVX2: from_float_fast is from_float for every type, no fast quantizer compared");
    return test_done("test_quants");
}
