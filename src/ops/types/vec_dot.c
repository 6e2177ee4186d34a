/* Reference (scalar) dot products of a weight row with an activation row of its vec_dot_type.
 * Each weight block is first unpacked into integer quants and integer sub-block scales, so one
 * generic loop per activation type does the arithmetic. These are the AVX2 kernels' oracles. */
#include "quants.h"

#include "blocks.h"

void llm_vec_dot_f32_ref(int64_t n, float *s, const void *x, const void *y)
{
    const float *a = x, *b = y;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)a[i] * b[i];
    *s = (float)sum;
}

void llm_vec_dot_f16_ref(int64_t n, float *s, const void *x, const void *y)
{
    const uint16_t *a = x, *b = y;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)llm_fp16_to_fp32(a[i]) * llm_fp16_to_fp32(b[i]);
    *s = (float)sum;
}

void llm_vec_dot_bf16_ref(int64_t n, float *s, const void *x, const void *y)
{
    const uint16_t *a = x, *b = y;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)llm_bf16_to_fp32(a[i]) * llm_bf16_to_fp32(b[i]);
    *s = (float)sum;
}

/* ---- legacy 32-blocks: x = d*q + m per element ---------------------------------------------- */

struct unpacked32 {
    int q[QK];
    float d, m;
};

static uint32_t qh_bits(const uint8_t *qh)
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

/* 4-bit (and optional 5th bit) quants of a block: low nibbles are elements 0..15. */
static void nibbles(const uint8_t *qs, uint32_t h, int offset, int *q)
{
    for (int j = 0; j < QK / 2; j++) {
        q[j] = ((qs[j] & 0xf) | (int)((h >> j) & 1) << 4) - offset;
        q[j + QK / 2] = ((qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4) - offset;
    }
}

static void unpack_q4_0(const void *blk, struct unpacked32 *u)
{
    const struct block_q4_0 *b = blk;
    nibbles(b->qs, 0, 8, u->q);
    u->d = llm_fp16_to_fp32(b->d);
    u->m = 0;
}

static void unpack_q4_1(const void *blk, struct unpacked32 *u)
{
    const struct block_q4_1 *b = blk;
    nibbles(b->qs, 0, 0, u->q);
    u->d = llm_fp16_to_fp32(b->d);
    u->m = llm_fp16_to_fp32(b->m);
}

static void unpack_q5_0(const void *blk, struct unpacked32 *u)
{
    const struct block_q5_0 *b = blk;
    nibbles(b->qs, qh_bits(b->qh), 16, u->q);
    u->d = llm_fp16_to_fp32(b->d);
    u->m = 0;
}

static void unpack_q5_1(const void *blk, struct unpacked32 *u)
{
    const struct block_q5_1 *b = blk;
    nibbles(b->qs, qh_bits(b->qh), 0, u->q);
    u->d = llm_fp16_to_fp32(b->d);
    u->m = llm_fp16_to_fp32(b->m);
}

static void unpack_q8_0(const void *blk, struct unpacked32 *u)
{
    const struct block_q8_0 *b = blk;
    for (int j = 0; j < QK; j++)
        u->q[j] = b->qs[j];
    u->d = llm_fp16_to_fp32(b->d);
    u->m = 0;
}

static void unpack_iq4_nl(const void *blk, struct unpacked32 *u)
{
    const struct block_iq4_nl *b = blk;
    for (int j = 0; j < QK / 2; j++) {
        u->q[j] = iq4_nl_values[b->qs[j] & 0xf];
        u->q[j + QK / 2] = iq4_nl_values[b->qs[j] >> 4];
    }
    u->d = llm_fp16_to_fp32(b->d);
    u->m = 0;
}

typedef void (*unpack32_fn)(const void *blk, struct unpacked32 *u);

/* Symmetric weights (m == 0) against Q8_0 activations. */
static float dot_q8_0(int64_t n, const void *x, size_t bsize, unpack32_fn unpack, const void *y)
{
    const struct block_q8_0 *yb = y;
    float sum = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        struct unpacked32 u;
        unpack((const char *)x + i * bsize, &u);
        int isum = 0;
        for (int j = 0; j < QK; j++)
            isum += u.q[j] * yb[i].qs[j];
        sum += (float)isum * (u.d * llm_fp16_to_fp32(yb[i].d));
    }
    return sum;
}

/* Weights with a min against Q8_1 activations: sum d*q*y + m * (dy * sum qy). */
static float dot_q8_1(int64_t n, const void *x, size_t bsize, unpack32_fn unpack, const void *y)
{
    const struct block_q8_1 *yb = y;
    float sum = 0;
    for (int64_t i = 0; i < n / QK; i++) {
        struct unpacked32 u;
        unpack((const char *)x + i * bsize, &u);
        int isum = 0;
        for (int j = 0; j < QK; j++)
            isum += u.q[j] * yb[i].qs[j];
        sum += (float)isum * (u.d * llm_fp16_to_fp32(yb[i].d)) + u.m * llm_fp16_to_fp32(yb[i].s);
    }
    return sum;
}

void llm_vec_dot_q4_0_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_0(n, x, sizeof(struct block_q4_0), unpack_q4_0, y);
}

void llm_vec_dot_iq4_nl_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_0(n, x, sizeof(struct block_iq4_nl), unpack_iq4_nl, y);
}

void llm_vec_dot_q5_0_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_0(n, x, sizeof(struct block_q5_0), unpack_q5_0, y);
}

void llm_vec_dot_q8_0_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_0(n, x, sizeof(struct block_q8_0), unpack_q8_0, y);
}

void llm_vec_dot_q4_1_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_1(n, x, sizeof(struct block_q4_1), unpack_q4_1, y);
}

void llm_vec_dot_q5_1_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_1(n, x, sizeof(struct block_q5_1), unpack_q5_1, y);
}

/* ---- K-quants: x = d*sc[k]*q - dmin*mn[k] for sub-block k of 16 elements --------------------- */

struct unpackedK {
    int q[QK_K];
    int sc[QK_K / 16], mn[QK_K / 16];
    float d, dmin;
};

static void unpack_q2_K(const void *blk, struct unpackedK *u)
{
    const struct block_q2_K *b = blk;
    for (int k = 0; k < 16; k++) {
        u->sc[k] = b->scales[k] & 0xf;
        u->mn[k] = b->scales[k] >> 4;
    }
    /* output 128*half + 32*g + l comes from qs[32*half + l] at shift 2*g */
    for (int i = 0; i < QK_K; i++)
        u->q[i] = (b->qs[32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
    u->d = llm_fp16_to_fp32(b->d);
    u->dmin = llm_fp16_to_fp32(b->dmin);
}

static void unpack_q3_K(const void *blk, struct unpackedK *u)
{
    const struct block_q3_K *b = blk;
    q3_K_scales(b->scales, u->sc);
    for (int k = 0; k < 16; k++)
        u->mn[k] = 0;
    /* like Q2_K; hmask bit (i/32) of hmask[i%32] set means no -4 offset */
    for (int i = 0; i < QK_K; i++) {
        int lo = (b->qs[32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
        u->q[i] = lo - ((b->hmask[i % 32] >> (i / 32)) & 1 ? 0 : 4);
    }
    u->d = llm_fp16_to_fp32(b->d);
    u->dmin = 0;
}

/* Q4_K and Q5_K: 32-element sub-blocks; chunk c of 64 takes low then high nibbles of qs[32c..]. */
static void unpack_k4(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                      struct unpackedK *u)
{
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k4_scale_min(scales, j, &sc, &mn);
        u->sc[2 * j] = u->sc[2 * j + 1] = sc;
        u->mn[2 * j] = u->mn[2 * j + 1] = mn;
    }
    for (int i = 0; i < QK_K; i++) {
        int c = i / 64, h = i % 64 / 32, l = i % 32;
        int v = (qs[32 * c + l] >> (4 * h)) & 0xf;
        if (qh)
            v |= ((qh[l] >> (2 * c + h)) & 1) << 4;
        u->q[i] = v;
    }
}

static void unpack_q4_K(const void *blk, struct unpackedK *u)
{
    const struct block_q4_K *b = blk;
    unpack_k4(b->scales, b->qs, NULL, u);
    u->d = llm_fp16_to_fp32(b->d);
    u->dmin = llm_fp16_to_fp32(b->dmin);
}

static void unpack_q5_K(const void *blk, struct unpackedK *u)
{
    const struct block_q5_K *b = blk;
    unpack_k4(b->scales, b->qs, b->qh, u);
    u->d = llm_fp16_to_fp32(b->d);
    u->dmin = llm_fp16_to_fp32(b->dmin);
}

static void unpack_q6_K(const void *blk, struct unpackedK *u)
{
    const struct block_q6_K *b = blk;
    for (int k = 0; k < 16; k++) {
        u->sc[k] = b->scales[k];
        u->mn[k] = 0;
    }
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
        int *q = u->q + 128 * half;
        for (int l = 0; l < 32; l++) {
            q[l] = ((ql[l] & 0xf) | (qh[l] & 3) << 4) - 32;
            q[l + 32] = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
            q[l + 64] = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            q[l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
        }
    }
    u->d = llm_fp16_to_fp32(b->d);
    u->dmin = 0;
}

typedef void (*unpackK_fn)(const void *blk, struct unpackedK *u);

/* Against Q8_K: the min term uses the activation's per-16 sums (bsums). */
static float dot_q8_K(int64_t n, const void *x, size_t bsize, unpackK_fn unpack, const void *y)
{
    const struct block_q8_K *yb = y;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        struct unpackedK u;
        unpack((const char *)x + i * bsize, &u);
        int isum = 0, msum = 0;
        for (int k = 0; k < QK_K / 16; k++) {
            int sub = 0;
            for (int j = 16 * k; j < 16 * k + 16; j++)
                sub += u.q[j] * yb[i].qs[j];
            isum += u.sc[k] * sub;
            msum += u.mn[k] * yb[i].bsums[k];
        }
        sum += yb[i].d * (u.d * (float)isum - u.dmin * (float)msum);
    }
    return sum;
}

void llm_vec_dot_q2_K_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_K(n, x, sizeof(struct block_q2_K), unpack_q2_K, y);
}

void llm_vec_dot_q3_K_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_K(n, x, sizeof(struct block_q3_K), unpack_q3_K, y);
}

void llm_vec_dot_q4_K_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_K(n, x, sizeof(struct block_q4_K), unpack_q4_K, y);
}

void llm_vec_dot_q5_K_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_K(n, x, sizeof(struct block_q5_K), unpack_q5_K, y);
}

void llm_vec_dot_q6_K_ref(int64_t n, float *s, const void *x, const void *y)
{
    *s = dot_q8_K(n, x, sizeof(struct block_q6_K), unpack_q6_K, y);
}
