/* Reference dequantize/quantize of IQ4_NL: 32-element blocks of a binary16 scale and 4-bit indices
 * into a fixed non-linear codebook (blocks.h). The quantizer is ours: it tries scales that put the
 * block's extreme value near the codebook's long (negative) end, keeps the one with the least
 * squared error, refines it by least squares on the chosen codes and picks the codes again for the
 * scale as stored (binary16), so a block decodes to what was measured. */
#include "quants.h"

#include <math.h>

#include "blocks.h"

void llm_to_float_iq4_nl(const void *src, float *dst, int64_t n)
{
    const struct block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = llm_fp16_to_fp32(b->d);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = (float)iq4_nl_values[b->qs[j] & 0xf] * d;
            dst[j + QK / 2] = (float)iq4_nl_values[b->qs[j] >> 4] * d;
        }
    }
}

/* Index of the codebook value nearest a (the lower one on ties): how many midpoints lie below a. */
static int nearest_code(float a)
{
    int l = 0;
    for (int k = 0; k < 15; k++)
        l += a > 0.5f * (float)(iq4_nl_values[k] + iq4_nl_values[k + 1]);
    return l;
}

/* Squared error of block x under scale d with the nearest codes, which go to l when l is not NULL;
 * also Σ w·x and Σ w² (w the decoded codes) for the least-squares scale of those codes. */
static float block_error(const float *x, float d, uint8_t *l, float *sxw, float *sww)
{
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float e = 0.0f, xw = 0.0f, ww = 0.0f;
    for (int j = 0; j < QK; j++) {
        const int c = nearest_code(x[j] * id);
        const float w = (float)iq4_nl_values[c], r = x[j] - d * w;
        e += r * r;
        xw += x[j] * w;
        ww += w * w;
        if (l)
            l[j] = (uint8_t)c;
    }
    *sxw = xw;
    *sww = ww;
    return e;
}

void llm_from_float_iq4_nl(const float *src, void *dst, int64_t n)
{
    struct block_iq4_nl *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b++, src += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++)
            if (fabsf(src[j]) > amax) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        float best_d = 0.0f, xw, ww;
        if (amax > 0.0f) {
            float best = INFINITY;
            for (int t = -4; t <= 4; t++) { /* the extreme onto -127 + 2t: slightly inside or past the end */
                const float d = max / (-127.0f + 2.0f * (float)t);
                float e = block_error(src, d, NULL, &xw, &ww);
                if (e < best)
                    best = e, best_d = d;
                const float ls = ww > 0.0f ? xw / ww : 0.0f; /* the best scale for these codes */
                e = block_error(src, ls, NULL, &xw, &ww);
                if (ls != 0.0f && e < best)
                    best = e, best_d = ls;
            }
        }
        b->d = llm_fp32_to_fp16(best_d);
        uint8_t l[QK];
        block_error(src, llm_fp16_to_fp32(b->d), l, &xw, &ww);
        for (int j = 0; j < QK / 2; j++)
            b->qs[j] = (uint8_t)(l[j] | l[j + QK / 2] << 4);
    }
}
