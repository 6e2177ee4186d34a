/* Reference dequantize of the K-quants (Q2_K..Q6_K, Q8_K) and quantizers for Q4_K, Q6_K (simple,
 * used to synthesize models) and Q8_K (activations, rounding like ggml's reference). */
#include "quants.h"

#include <math.h>
#include <string.h>

#include "blocks.h"

void llm_to_float_q2_K(const void *src, float *dst, int64_t n)
{
    const struct block_q2_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = llm_fp16_to_fp32(b->d), dmin = llm_fp16_to_fp32(b->dmin);
        const uint8_t *q = b->qs;
        int is = 0;
        /* two halves of 128; each reads 32 bytes four times at shifts 0,2,4,6 (32 outputs each,
         * as two sub-blocks of 16 with their own scale byte) */
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int sub = 0; sub < 2; sub++) {
                    int sc = b->scales[is++];
                    float dl = d * (float)(sc & 0xf), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *dst++ = dl * (float)((q[16 * sub + l] >> shift) & 3) - ml;
                }
    }
}

void llm_to_float_q3_K(const void *src, float *dst, int64_t n)
{
    const struct block_q3_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++) {
        float d = llm_fp16_to_fp32(b->d);
        int sc[16];
        q3_K_scales(b->scales, sc);
        const uint8_t *q = b->qs;
        int is = 0, bit = 0;
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2, bit++)
                for (int sub = 0; sub < 2; sub++) {
                    float dl = d * (float)sc[is++];
                    for (int l = 16 * sub; l < 16 * sub + 16; l++) {
                        int v = ((q[l] >> shift) & 3) - ((b->hmask[l] >> bit) & 1 ? 0 : 4);
                        *dst++ = dl * (float)v;
                    }
                }
    }
}

/* One Q4_K (qh NULL) or Q5_K super-block: chunk c of 64 outputs uses qs[32c..32c+31], low nibbles
 * with sub-block 2c, high nibbles with 2c+1; Q5_K adds bit 2c+h of qh[l] as the fifth bit. */
static void k45_block(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qs,
                      const uint8_t *qh, float *dst)
{
    float d = llm_fp16_to_fp32(d16), dmin = llm_fp16_to_fp32(dmin16);
    for (int c = 0; c < 4; c++) {
        const uint8_t *q = qs + 32 * c;
        for (int h = 0; h < 2; h++) {
            int sc, mn;
            k4_scale_min(scales, 2 * c + h, &sc, &mn);
            float d1 = d * (float)sc, m1 = dmin * (float)mn;
            for (int l = 0; l < 32; l++) {
                int v = (q[l] >> (4 * h)) & 0xf;
                if (qh)
                    v |= ((qh[l] >> (2 * c + h)) & 1) << 4;
                *dst++ = d1 * (float)v - m1;
            }
        }
    }
}

void llm_to_float_q4_K(const void *src, float *dst, int64_t n)
{
    const struct block_q4_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++, dst += QK_K)
        k45_block(b->d, b->dmin, b->scales, b->qs, NULL, dst);
}

void llm_to_float_q5_K(const void *src, float *dst, int64_t n)
{
    const struct block_q5_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++, dst += QK_K)
        k45_block(b->d, b->dmin, b->scales, b->qs, b->qh, dst);
}

void llm_to_float_q6_K(const void *src, float *dst, int64_t n)
{
    const struct block_q6_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++, dst += QK_K) {
        float d = llm_fp16_to_fp32(b->d);
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            const int8_t *sc = b->scales + 8 * half;
            float *y = dst + 128 * half;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (ql[l] & 0xf) | (qh[l] & 3) << 4;
                int q2 = (ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4;
                int q3 = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
                int q4 = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
                y[l] = d * (float)sc[is] * (float)(q1 - 32);
                y[l + 32] = d * (float)sc[is + 2] * (float)(q2 - 32);
                y[l + 64] = d * (float)sc[is + 4] * (float)(q3 - 32);
                y[l + 96] = d * (float)sc[is + 6] * (float)(q4 - 32);
            }
        }
    }
}

void llm_to_float_q8_K(const void *src, float *dst, int64_t n)
{
    const struct block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b++)
        for (int j = 0; j < QK_K; j++)
            *dst++ = b->d * (float)b->qs[j];
}

/* Round to nearest, ties to even (the default FP rounding mode). */
static int nearest_int(float v)
{
    return (int)lrintf(v);
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void llm_from_float_q8_K(const float *src, void *dst, int64_t n)
{
    struct block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, b++, src += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++)
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        if (amax == 0.0f) {
            memset(b, 0, sizeof *b);
            continue;
        }
        /* the extreme value maps to -127; the other sign may reach 128, clamped to 127 */
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = nearest_int(iscale * src[j]);
            b->qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int k = 0; k < QK_K / 16; k++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += b->qs[16 * k + j];
            b->bsums[k] = (int16_t)s;
        }
        b->d = 1.0f / iscale;
    }
}

/* Fit x ≈ scale*q - min over one 32-element sub-block with q in 0..15 and min >= 0: start from
 * the min/max range, then alternate rounding and a least-squares refit of (scale, min). */
static void fit_scale_min(const float *x, float *scale, float *min)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    lo = lo > 0.0f ? 0.0f : lo;
    float a = (hi - lo) / 15.0f, bmin = -lo;
    if (a == 0.0f) {
        *scale = 0.0f;
        *min = bmin;
        return;
    }
    float best_err = INFINITY, best_a = a, best_m = bmin;
    for (int it = 0; it < 6; it++) {
        double sq = 0, sqq = 0, sx = 0, sqx = 0, err = 0;
        int q[32];
        for (int j = 0; j < 32; j++) {
            q[j] = clampi(nearest_int((x[j] + bmin) / a), 0, 15);
            float e = a * (float)q[j] - bmin - x[j];
            err += (double)e * e;
            sq += q[j];
            sqq += (double)q[j] * q[j];
            sx += x[j];
            sqx += (double)q[j] * x[j];
        }
        if (err < best_err) {
            best_err = (float)err;
            best_a = a;
            best_m = bmin;
        }
        /* least squares for x = a*q + c, with c = -min <= 0 */
        double det = 32 * sqq - sq * sq;
        if (det <= 0)
            break;
        double na = (32 * sqx - sq * sx) / det, c = (sx - na * sq) / 32;
        if (c > 0) {
            c = 0;
            na = sqx / sqq;
        }
        if (na <= 0)
            break;
        a = (float)na;
        bmin = (float)-c;
    }
    *scale = best_a;
    *min = best_m;
}

static float max_of(const float *v, int n)
{
    float m = 0.0f;
    for (int j = 0; j < n; j++)
        m = v[j] > m ? v[j] : m;
    return m;
}

void llm_from_float_q4_K(const float *src, void *dst, int64_t n)
{
    struct block_q4_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, b++, src += QK_K) {
        float scales[8], mins[8];
        for (int k = 0; k < 8; k++)
            fit_scale_min(src + 32 * k, &scales[k], &mins[k]);
        b->d = llm_fp32_to_fp16(max_of(scales, 8) / 63.0f);
        b->dmin = llm_fp32_to_fp16(max_of(mins, 8) / 63.0f);
        /* quantize the 6-bit scales against the stored (rounded) super-scales */
        float d = llm_fp16_to_fp32(b->d), dmin = llm_fp16_to_fp32(b->dmin);
        int sc[8], mn[8];
        for (int k = 0; k < 8; k++) {
            sc[k] = d > 0.0f ? clampi(nearest_int(scales[k] / d), 0, 63) : 0;
            mn[k] = dmin > 0.0f ? clampi(nearest_int(mins[k] / dmin), 0, 63) : 0;
        }
        for (int j = 0; j < 4; j++) {
            b->scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
            b->scales[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
            b->scales[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | (mn[j + 4] & 0xf) << 4);
        }
        uint8_t q[QK_K];
        for (int k = 0; k < 8; k++) {
            float ds = d * (float)sc[k], dm = dmin * (float)mn[k];
            for (int j = 0; j < 32; j++)
                q[32 * k + j] = (uint8_t)(ds > 0.0f
                    ? clampi(nearest_int((src[32 * k + j] + dm) / ds), 0, 15) : 0);
        }
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    }
}

void llm_from_float_q6_K(const float *src, void *dst, int64_t n)
{
    struct block_q6_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, b++, src += QK_K) {
        /* per 16 values: the extreme maps to -32 (as Q4_0 does with -8) */
        float scales[16], amax = 0.0f;
        for (int k = 0; k < 16; k++) {
            float big = 0.0f, max = 0.0f;
            for (int j = 0; j < 16; j++)
                if (big < fabsf(src[16 * k + j])) {
                    big = fabsf(src[16 * k + j]);
                    max = src[16 * k + j];
                }
            scales[k] = max / -32.0f;
            amax = fabsf(scales[k]) > amax ? fabsf(scales[k]) : amax;
        }
        b->d = llm_fp32_to_fp16(amax / 127.0f);
        float d = llm_fp16_to_fp32(b->d);
        uint8_t q[QK_K];
        for (int k = 0; k < 16; k++) {
            int s = d > 0.0f ? clampi(nearest_int(scales[k] / d), -127, 127) : 0;
            b->scales[k] = (int8_t)s;
            float ds = d * (float)s;
            for (int j = 0; j < 16; j++)
                q[16 * k + j] = (uint8_t)(32 + (ds != 0.0f
                    ? clampi(nearest_int(src[16 * k + j] / ds), -32, 31) : 0));
        }
        for (int half = 0; half < 2; half++) {
            uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            const uint8_t *v = q + 128 * half;
            for (int l = 0; l < 32; l++) {
                int q1 = v[l], q2 = v[l + 32], q3 = v[l + 64], q4 = v[l + 96];
                ql[l] = (uint8_t)((q1 & 0xf) | (q3 & 0xf) << 4);
                ql[l + 32] = (uint8_t)((q2 & 0xf) | (q4 & 0xf) << 4);
                qh[l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
        }
    }
}
