/* Reference dequantize/quantize of the legacy 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q8_1). The quantizers follow ggml's reference rounding exactly, so their bytes equal
 * those of gguf-py / ggml_quantize_chunk (checked by tests/test_quants.c). */
#include "quants.h"

#include <math.h>

#include "blocks.h"

void llm_to_float_q4_0(const void *src, float *dst, int64_t n)
{
    const struct block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = llm_fp16_to_fp32(b->d);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = (float)((b->qs[j] & 0xf) - 8) * d;
            dst[j + QK / 2] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

void llm_to_float_q4_1(const void *src, float *dst, int64_t n)
{
    const struct block_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = llm_fp16_to_fp32(b->d), m = llm_fp16_to_fp32(b->m);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = (float)(b->qs[j] & 0xf) * d + m;
            dst[j + QK / 2] = (float)(b->qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32le(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

void llm_to_float_q5_0(const void *src, float *dst, int64_t n)
{
    const struct block_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = llm_fp16_to_fp32(b->d);
        uint32_t h = load_u32le(b->qh);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = (b->qs[j] & 0xf) | (int)((h >> j) & 1) << 4;
            int q1 = (b->qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
            dst[j] = (float)(q0 - 16) * d;
            dst[j + QK / 2] = (float)(q1 - 16) * d;
        }
    }
}

void llm_to_float_q5_1(const void *src, float *dst, int64_t n)
{
    const struct block_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = llm_fp16_to_fp32(b->d), m = llm_fp16_to_fp32(b->m);
        uint32_t h = load_u32le(b->qh);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = (b->qs[j] & 0xf) | (int)((h >> j) & 1) << 4;
            int q1 = (b->qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
            dst[j] = (float)q0 * d + m;
            dst[j + QK / 2] = (float)q1 * d + m;
        }
    }
}

void llm_to_float_q8_0(const void *src, float *dst, int64_t n)
{
    const struct block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = llm_fp16_to_fp32(b->d);
        for (int j = 0; j < QK; j++)
            dst[j] = (float)b->qs[j] * d;
    }
}

void llm_to_float_q8_1(const void *src, float *dst, int64_t n)
{
    const struct block_q8_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = llm_fp16_to_fp32(b->d);
        for (int j = 0; j < QK; j++)
            dst[j] = (float)b->qs[j] * d;
    }
}

/* Value of largest magnitude in x[0..QK) with its sign (the first one on ties). */
static float signed_absmax(const float *x)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void min_max(const float *x, float *mn, float *mx)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < QK; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    *mn = lo;
    *mx = hi;
}

/* Truncate toward zero, clamped to 0..hi (the legacy quantizers add 0.5 or an offset first). */
static int trunc_clamp(float v, int hi)
{
    int q = (int)v;
    return q < 0 ? 0 : q > hi ? hi : q;
}

void llm_from_float_q4_0(const float *src, void *dst, int64_t n)
{
    struct block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b++, src += QK) {
        /* the extreme value maps to -8, so the full range -8..7 is usable */
        float d = signed_absmax(src) / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = llm_fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = trunc_clamp(src[j] * id + 8.5f, 15);
            int q1 = trunc_clamp(src[j + QK / 2] * id + 8.5f, 15);
            b->qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void llm_from_float_q4_1(const float *src, void *dst, int64_t n)
{
    struct block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b++, src += QK) {
        float mn, mx;
        min_max(src, &mn, &mx);
        float d = (mx - mn) / 15.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = llm_fp32_to_fp16(d);
        b->m = llm_fp32_to_fp16(mn);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = trunc_clamp((src[j] - mn) * id + 0.5f, 15);
            int q1 = trunc_clamp((src[j + QK / 2] - mn) * id + 0.5f, 15);
            b->qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void llm_from_float_q5_0(const float *src, void *dst, int64_t n)
{
    struct block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b++, src += QK) {
        float d = signed_absmax(src) / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t h = 0;
        b->d = llm_fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = trunc_clamp(src[j] * id + 16.5f, 31);
            int q1 = trunc_clamp(src[j + QK / 2] * id + 16.5f, 31);
            b->qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
            h |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_u32le(b->qh, h);
    }
}

void llm_from_float_q5_1(const float *src, void *dst, int64_t n)
{
    struct block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b++, src += QK) {
        float mn, mx;
        min_max(src, &mn, &mx);
        float d = (mx - mn) / 31.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t h = 0;
        b->d = llm_fp32_to_fp16(d);
        b->m = llm_fp32_to_fp16(mn);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = trunc_clamp((src[j] - mn) * id + 0.5f, 31);
            int q1 = trunc_clamp((src[j + QK / 2] - mn) * id + 0.5f, 31);
            b->qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
            h |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_u32le(b->qh, h);
    }
}

/* Symmetric 8-bit block: d = amax/127, q = round-half-away(x / d) computed as x * (1/d).
 * Returns d (unrounded) and the sum of the quantized values via *sum. */
static float quantize_q8(const float *x, int8_t *qs, int *sum)
{
    float amax = 0.0f;
    for (int j = 0; j < QK; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int s = 0;
    for (int j = 0; j < QK; j++) {
        qs[j] = (int8_t)roundf(x[j] * id);
        s += qs[j];
    }
    *sum = s;
    return d;
}

void llm_from_float_q8_0(const float *src, void *dst, int64_t n)
{
    struct block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b++, src += QK) {
        int sum;
        b->d = llm_fp32_to_fp16(quantize_q8(src, b->qs, &sum));
    }
}

void llm_from_float_q8_1(const float *src, void *dst, int64_t n)
{
    struct block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b++, src += QK) {
        int sum;
        float d = quantize_q8(src, b->qs, &sum);
        b->d = llm_fp32_to_fp16(d);
        b->s = llm_fp32_to_fp16((float)sum * d);
    }
}
