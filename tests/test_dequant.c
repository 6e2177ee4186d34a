/* Fast dequantization (to_float_fast) against the reference to_float, bit for bit:
 * - on the `q` tensor of models/quant/<TYPE>.gguf, row by row and as one run, at every byte
 *   offset 0..7 of the source (blocks are packed; rows may start anywhere; F16/BF16 rows at
 *   every 2-byte offset);
 * - on random bytes (so random scales, signs, NaN/Inf/subnormal halves), odd row counts,
 *   unaligned sources and destinations, and odd lengths for the plain types (vector tails).
 * For the quantized types a NaN output only has to be NaN (payload of NaN-scaled blocks is not
 * part of the contract); F16/BF16 must match in every bit, signalling NaNs included.
 * With AVX2 the fast slot must really be the AVX2 kernel (a different function). */
#include <stdint.h>

#include "cpu_features.h"
#include "harness.h"
#include "model/gguf.h"
#include "ops/types/types.h"

#define NE0 512
#define NROWS 8

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static const char *const types[] = { "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                     "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K" };

/* Number of values of a and b (n each) that differ; see the header for the NaN rule. */
static int64_t mismatches(const float *a, const float *b, int64_t n, bool nan_any_payload)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool same = f32_bits(a[i]) == f32_bits(b[i]) ||
                    (nan_any_payload && isnan(a[i]) && isnan(b[i]));
        bad += !same;
    }
    return bad;
}

/* Dequantize nrows rows of ne0 elements of type t from src (row bytes rs apart) with both kernels
 * into dst + dst_off floats, and count differing values. */
static int64_t compare_rows(int t, const uint8_t *src, size_t rs, int64_t ne0, int64_t nrows,
                            int dst_off)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    size_t n = (size_t)(ne0 * nrows) + (size_t)dst_off;
    float *ref = malloc(n * sizeof(float)), *fast = malloc(n * sizeof(float));
    for (int64_t r = 0; r < nrows; r++) {
        tt->to_float(src + r * rs, ref + dst_off + r * ne0, ne0);
        tt->to_float_fast(src + r * rs, fast + dst_off + r * ne0, ne0);
    }
    int64_t bad = mismatches(ref + dst_off, fast + dst_off, ne0 * nrows, llm_type_info(t)->is_quantized);
    free(ref);
    free(fast);
    return bad;
}

/* Source alignment a row may have: any byte for packed blocks, the element size for the plain
 * types (their rows are arrays of uint16_t). */
static int src_align(int t)
{
    const struct llm_type_info *ti = llm_type_info(t);
    return ti->blck_size > 1 ? 1 : (int)ti->type_size;
}

/* The `q` tensor of the fixture (type t, NE0 x NROWS), or NULL. */
static uint8_t *load_q(const char *name, int t, size_t bytes)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/quant/%s.gguf", name);
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    int rc = gguf_open(test_path(rel), &f, &err);
    CHECK(rc == LLM_OK, "%s", err.msg);
    if (rc != LLM_OK)
        return NULL;
    const struct gguf_tensor_info *ti = gguf_find_tensor(f, "q");
    uint8_t *q = NULL;
    CHECK(ti && (int)ti->type == t && ti->nbytes == bytes, "%s: tensor q missing or not %zu bytes",
          name, bytes);
    if (ti && (int)ti->type == t && ti->nbytes == bytes) {
        q = malloc(bytes);
        memcpy(q, ti->data, bytes);
    }
    gguf_close(f);
    return q;
}

static void test_fixture(const char *name)
{
    int t = llm_type_from_name(name);
    size_t rs = llm_row_size(t, NE0), bytes = rs * NROWS;
    uint8_t *q = load_q(name, t, bytes);
    if (!q)
        return;
    uint8_t *buf = malloc(bytes + 8);
    for (int off = 0; off < 8; off += src_align(t)) {
        memcpy(buf + off, q, bytes);
        int64_t bad = compare_rows(t, buf + off, rs, NE0, NROWS, off % 3);
        CHECK(bad == 0, "%s fixture, source offset %d: %lld values differ", name, off, (long long)bad);
        bad = compare_rows(t, buf + off, 0, NE0 * NROWS, 1, 0); /* the whole tensor as one run */
        CHECK(bad == 0, "%s fixture as one run, offset %d: %lld values differ", name, off,
              (long long)bad);
    }
    free(buf);
    free(q);
}

static void test_random(const char *name)
{
    int t = llm_type_from_name(name);
    const int64_t blck = llm_type_info(t)->blck_size;
    /* quantized: 1..3 blocks per row; plain: lengths that leave every vector tail */
    static const int64_t plain_len[] = { 1, 7, 8, 9, 15, 16, 17, 31, 33, 100 };
    int cases = blck > 1 ? 3 : (int)(sizeof plain_len / sizeof plain_len[0]);
    for (int c = 0; c < cases; c++) {
        int64_t ne0 = blck > 1 ? blck * (c + 1) : plain_len[c];
        for (int64_t nrows = 1; nrows <= 7; nrows += 2) {
            size_t rs = llm_row_size(t, ne0), bytes = rs * (size_t)nrows;
            int off = (int)(test_rand() % 8) / src_align(t) * src_align(t);
            uint8_t *buf = malloc(bytes + 8);
            for (size_t i = 0; i < bytes + 8; i++)
                buf[i] = (uint8_t)test_rand();
            int64_t bad = compare_rows(t, buf + off, rs, ne0, nrows, (int)(test_rand() % 8));
            CHECK(bad == 0, "%s random: ne0 %lld, %lld rows, offset %d: %lld values differ", name,
                  (long long)ne0, (long long)nrows, off, (long long)bad);
            free(buf);
        }
    }
}

/* Half/bfloat special values, signalling NaNs in particular (F16C quietens them). */
static void test_special_halves(void)
{
    static const uint16_t specials[] = { 0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x7bff, 0x7c00,
                                         0xfc00, 0x7c01, 0xfc01, 0x7dff, 0x7e00, 0xfe01, 0x7fff,
                                         0xff80, 0x7f81, 0x3c00, 0xbc00 };
    enum { N = 64 };
    uint16_t h[N];
    for (int i = 0; i < N; i++)
        h[i] = specials[i % (sizeof specials / sizeof specials[0])];
    const int plain[] = { LLM_TYPE_F16, LLM_TYPE_BF16 };
    for (int k = 0; k < 2; k++) {
        const struct llm_type_traits *tt = llm_type_traits(plain[k]);
        float a[N], b[N];
        tt->to_float(h, a, N);
        tt->to_float_fast(h, b, N);
        CHECK(mismatches(a, b, N, false) == 0, "%s special values differ", llm_type_name(plain[k]));
    }
}

int main(void)
{
    bool avx2 = llm_cpu_has_avx2();
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const struct llm_type_traits *tt = llm_type_traits(llm_type_from_name(types[i]));
        CHECK(tt && tt->to_float && tt->to_float_fast, "%s: missing to_float(_fast)", types[i]);
        if (!tt || !tt->to_float || !tt->to_float_fast)
            continue;
        CHECK(!avx2 || tt->to_float_fast != tt->to_float, "%s: no AVX2 to_float_fast", types[i]);
        test_fixture(types[i]);
        test_random(types[i]);
    }
    /* IQ4_NL has no ggml fixture: random blocks only */
    const struct llm_type_traits *iq4 = llm_type_traits(LLM_TYPE_IQ4_NL);
    CHECK(!avx2 || iq4->to_float_fast != iq4->to_float, "IQ4_NL: no AVX2 to_float_fast");
    test_random("IQ4_NL");
    test_special_halves();
    /* types without an AVX2 twin fall back to the reference */
    const struct llm_type_traits *f32 = llm_type_traits(LLM_TYPE_F32);
    CHECK(f32->to_float_fast == f32->to_float, "F32 to_float_fast is not the reference");
    return test_done("test_dequant");
}
