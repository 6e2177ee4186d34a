/* SOFT_MAX over rows of scale·x + mask. A row that is -inf everywhere gives zeros (no NaN): it is a
 * query that may attend to nothing, e.g. a padded batch row. Rows are split between threads. */
#include <math.h>

#include "cpu_features.h"
#include "kernels.h"
#include "ops/isa/simd.h"

static AVX2 float exp_sub_sum_avx2(int64_t n, float *z, float max)
{
    __m256 vm = _mm256_set1_ps(max), acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(z + i), vm));
        _mm256_storeu_ps(z + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float s = hsum_ps(acc);
    for (; i < n; i++) {
        z[i] = expf(z[i] - max);
        s += z[i];
    }
    return s;
}

float cpu_exp_sub_sum(int64_t n, float *z, float max)
{
    if (llm_cpu_has_avx2())
        return exp_sub_sum_avx2(n, z, max);
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        z[i] = expf(z[i] - max);
        s += z[i];
    }
    return s;
}

static void softmax_row(int64_t n, float *z, const struct llm_tensor *a, const char *x,
                        const struct llm_tensor *m, const char *mrow, float scale)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        float v = *(const float *)(x + i * a->nb[0]) * scale;
        if (mrow)
            v += *(const float *)(mrow + i * m->nb[0]);
        z[i] = v;
        max = v > max ? v : max;
    }
    if (max == -INFINITY) {
        for (int64_t i = 0; i < n; i++)
            z[i] = 0.0f;
        return;
    }
    float inv = 1.0f / cpu_exp_sub_sum(n, z, max);
    for (int64_t i = 0; i < n; i++)
        z[i] *= inv;
}

static const char *softmax_mask_row(const struct llm_tensor *m, int64_t i1, int64_t i2, int64_t i3)
{
    return m ? tensor_at(m, 0, i1, i2 % m->ne[2], i3 % m->ne[3]) : NULL;
}

void cpu_soft_max(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0], *m = dst->src[1];
    float scale = llm_get_op_f32(dst, 0);
    int64_t r0, r1, n = dst->ne[0];
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        /* the kernel works in the dst row, so it needs unit stride there (checked in supports) */
        softmax_row(n, tensor_at(dst, 0, i1, i2, i3), a, tensor_at(a, 0, i1, i2, i3), m,
                    softmax_mask_row(m, i1, i2, i3), scale);
    }
}

