/* RMS_NORM: each row divided by sqrt(mean(x²) + eps). Rows are split between threads. */
#include <math.h>

#include "cpu_features.h"
#include "kernels.h"
#include "ops/isa/simd.h"

static AVX2 float sum_sq_avx2(int64_t n, const float *x)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
    }
    float s = hsum_ps(_mm256_add_ps(a0, a1));
    for (; i < n; i++)
        s += x[i] * x[i];
    return s;
}

/* z = x * scale: the same products as the plain loop, which gcc -O2 leaves scalar. */
static AVX2 void scale_avx2(int64_t n, float *z, const float *x, float scale)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(z + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(scale)));
    for (; i < n; i++)
        z[i] = x[i] * scale;
}

void cpu_rms_norm_row(const struct llm_tensor *dst, int64_t r, float eps)
{
    const struct llm_tensor *a = dst->src[0];
    const int64_t n = dst->ne[0];
    int64_t i1, i2, i3;
    row_index(dst, r, &i1, &i2, &i3);
    const char *x = tensor_at(a, 0, i1, i2, i3);
    char *z = tensor_at(dst, 0, i1, i2, i3);
    const bool unit = a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float), avx2 = llm_cpu_has_avx2();
    float ss;
    if (unit && avx2) {
        ss = sum_sq_avx2(n, (const float *)x);
    } else {
        ss = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            float v = *(const float *)(x + i * a->nb[0]);
            ss += v * v;
        }
    }
    float scale = 1.0f / sqrtf(ss / (float)n + eps);
    if (unit && avx2)
        scale_avx2(n, (float *)z, (const float *)x, scale);
    else if (unit)
        for (int64_t i = 0; i < n; i++)
            ((float *)z)[i] = ((const float *)x)[i] * scale;
    else
        for (int64_t i = 0; i < n; i++)
            *(float *)(z + i * dst->nb[0]) = *(const float *)(x + i * a->nb[0]) * scale;
}

void cpu_rms_norm(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const float eps = llm_get_op_f32(dst, 0);
    int64_t r0, r1;
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        cpu_rms_norm_row(dst, r, eps);
}
