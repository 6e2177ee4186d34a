/* Element-wise F32 ops: ADD, MUL (src1 broadcast), SCALE, SILU, SWIGLU. Rows are split between
 * threads; rows with unit stride take AVX2 loops (plain loops without AVX2). */
#include <math.h>
#include <string.h>

#include "cpu_features.h"
#include "kernels.h"
#include "ops/isa/simd.h"

static inline const float *row_f32(const struct llm_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
    return tensor_at(t, 0, i1, i2, i3);
}

static inline float elem(const struct llm_tensor *t, const float *row, int64_t i0)
{
    return *(const float *)((const char *)row + i0 * (int64_t)t->nb[0]);
}

static inline float *elem_w(const struct llm_tensor *t, float *row, int64_t i0)
{
    return (float *)((char *)row + i0 * (int64_t)t->nb[0]);
}

/* ---- ADD / MUL ---------------------------------------------------------------------------- */

enum binop { BIN_ADD, BIN_MUL };

static inline float apply(enum binop op, float a, float b)
{
    return op == BIN_ADD ? a + b : a * b;
}

/* z = x op y over n unit-stride floats, y one value when bcast. gcc -O2 leaves the plain loops
 * below scalar (z may alias x or y): 8 lanes do a decode row of 64-896 floats at a fraction of
 * the cost. Each lane is the same IEEE operation, so the results are the scalar loop's. */
static AVX2 void binary_unit_avx2(enum binop op, float *z, const float *x, const float *y, bool bcast, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i), b = bcast ? _mm256_broadcast_ss(y) : _mm256_loadu_ps(y + i);
        _mm256_storeu_ps(z + i, op == BIN_ADD ? _mm256_add_ps(a, b) : _mm256_mul_ps(a, b));
    }
    for (; i < n; i++)
        z[i] = apply(op, x[i], bcast ? y[0] : y[i]);
}

static void binary_row(enum binop op, const struct llm_tensor *dst, int64_t r)
{
    const struct llm_tensor *a = dst->src[0], *b = dst->src[1];
    int64_t i1, i2, i3, n = dst->ne[0], nb0 = b->ne[0];
    row_index(dst, r, &i1, &i2, &i3);
    const float *x = row_f32(a, i1, i2, i3);
    const float *y = row_f32(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
    float *z = tensor_at(dst, 0, i1, i2, i3);
    bool unit = a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);

    if (unit && (nb0 == n || nb0 == 1) && llm_cpu_has_avx2()) {
        binary_unit_avx2(op, z, x, y, nb0 != n, n);
    } else if (unit && nb0 == n) {
        if (op == BIN_ADD)
            for (int64_t i = 0; i < n; i++)
                z[i] = x[i] + y[i];
        else
            for (int64_t i = 0; i < n; i++)
                z[i] = x[i] * y[i];
    } else if (unit && nb0 == 1) {
        float s = y[0];
        if (op == BIN_ADD)
            for (int64_t i = 0; i < n; i++)
                z[i] = x[i] + s;
        else
            for (int64_t i = 0; i < n; i++)
                z[i] = x[i] * s;
    } else {
        for (int64_t i = 0; i < n; i++)
            *elem_w(dst, z, i) = apply(op, elem(a, x, i), elem(b, y, i % nb0));
    }
}

void cpu_add_row(const struct llm_tensor *dst, int64_t r)
{
    binary_row(BIN_ADD, dst, r);
}

void cpu_mul_row(const struct llm_tensor *dst, int64_t r)
{
    binary_row(BIN_MUL, dst, r);
}

static void binary(enum binop op, const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    int64_t r0, r1;
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        binary_row(op, dst, r);
}

void cpu_add(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    binary(BIN_ADD, p, dst);
}

void cpu_mul(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    binary(BIN_MUL, p, dst);
}

/* ---- SCALE -------------------------------------------------------------------------------- */

void cpu_scale(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0];
    float s = llm_get_op_f32(dst, 0);
    int64_t r0, r1, n = dst->ne[0];
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        const float *x = row_f32(a, i1, i2, i3);
        float *z = tensor_at(dst, 0, i1, i2, i3);
        if (a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float))
            for (int64_t i = 0; i < n; i++)
                z[i] = x[i] * s;
        else
            for (int64_t i = 0; i < n; i++)
                *elem_w(dst, z, i) = elem(a, x, i) * s;
    }
}

/* ---- SILU / SWIGLU ------------------------------------------------------------------------ */

static inline float silu_f32(float x)
{
    return x / (1.0f + expf(-x));
}

/* z = silu(x) (y == NULL) or silu(x)·y over n contiguous floats. */
static AVX2 void silu_row_avx2(int64_t n, float *z, const float *x, const float *y)
{
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, e));
        if (y)
            s = _mm256_mul_ps(s, _mm256_loadu_ps(y + i));
        _mm256_storeu_ps(z + i, s);
    }
    for (; i < n; i++)
        z[i] = y ? silu_f32(x[i]) * y[i] : silu_f32(x[i]);
}

static void glu(const struct llm_cpu_params *p, struct llm_tensor *dst, bool gated)
{
    const struct llm_tensor *a = dst->src[0], *b = gated ? dst->src[1] : NULL;
    bool avx2 = llm_cpu_has_avx2();
    int64_t r0, r1, n = dst->ne[0];
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        const float *x = row_f32(a, i1, i2, i3);
        const float *y = b ? row_f32(b, i1, i2, i3) : NULL;
        float *z = tensor_at(dst, 0, i1, i2, i3);
        bool unit = a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float) &&
                    (!b || b->nb[0] == sizeof(float));
        if (unit && avx2) {
            silu_row_avx2(n, z, x, y);
        } else {
            for (int64_t i = 0; i < n; i++) {
                float v = silu_f32(elem(a, x, i));
                *elem_w(dst, z, i) = b ? v * elem(b, y, i) : v;
            }
        }
    }
}

void cpu_swiglu_part(int64_t row_len, int64_t i0, int64_t len, float *z, const float *x, const float *y)
{
    int64_t vec = 0;
    if (llm_cpu_has_avx2()) { /* the elements SWIGLU's row takes 8 lanes at a time: below row_len & ~7 */
        const int64_t end = row_len / 8 * 8, whole = (vec = end <= i0 ? 0 : end - i0 < len ? end - i0 : len) / 8 * 8;
        silu_row_avx2(whole, z, x, y);
        if (whole < vec) { /* lanes of a vector there, though not here: through one vector, padded */
            float xs[8] = { 0 }, ys[8] = { 0 }, zs[8];
            memcpy(xs, x + whole, (size_t)(vec - whole) * sizeof(float));
            memcpy(ys, y + whole, (size_t)(vec - whole) * sizeof(float));
            silu_row_avx2(8, zs, xs, ys);
            memcpy(z + whole, zs, (size_t)(vec - whole) * sizeof(float));
        }
    }
    for (int64_t i = vec; i < len; i++)
        z[i] = silu_f32(x[i]) * y[i];
}

void cpu_silu(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    glu(p, dst, false);
}

void cpu_swiglu(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    glu(p, dst, true);
}

