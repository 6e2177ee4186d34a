/* IEEE binary16 / bfloat16 scalar conversions (exact, table-free) and the plain-type row kernels
 * (F32, F16, BF16) of the type traits. */
#include "quants.h"

#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float llm_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 is exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31)
        return bits_f32(sign | 0x7f800000 | mant << 13);
    return bits_f32(sign | (exp + 112) << 23 | mant << 13);
}

uint16_t llm_fp32_to_fp16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) /* NaN: keep the top payload bits, force quiet */
        return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff);
    if (a >= 0x477ff000) /* >= 65520 rounds (ties-to-even) to infinity */
        return sign | 0x7c00;
    if (a >= 0x38800000) { /* normal half: round the 13 dropped bits, carry may bump exponent */
        uint32_t r = a + 0xfff + ((a >> 13) & 1);
        return sign | (uint16_t)((r >> 13) - (112 << 10));
    }
    /* subnormal half (or zero): value in units of 2^-24 */
    uint32_t e = a >> 23;
    uint32_t shift = 126 - e;
    if (shift > 24)
        return sign;
    uint32_t m = (a & 0x7fffff) | 0x800000;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return sign | (uint16_t)q;
}

float llm_bf16_to_fp32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t llm_fp32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

void llm_to_float_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void llm_from_float_f32(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void llm_to_float_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = llm_fp16_to_fp32(h[i]);
}

void llm_from_float_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = llm_fp32_to_fp16(src[i]);
}

void llm_to_float_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = llm_bf16_to_fp32(h[i]);
}

void llm_from_float_bf16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = llm_fp32_to_bf16(src[i]);
}
