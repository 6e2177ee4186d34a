/* FLASH_ATTN: softmax(scale·q·kᵀ + mask)·v per query row and head in one pass (online softmax: a
 * running max and sum, the accumulator rescaled when the max grows), so the n_q × n_kv score
 * matrix is never stored. Cells masked with -inf are skipped, which is most of a padded KV window. */
#include <math.h>
#include <stdlib.h>

#include "cpu_ref.h"
#include "cpu_features.h"
#include "kernels.h"
#include "simd.h"
#include "types.h"

static float load_kv(enum llm_type t, const char *p)
{
    return t == LLM_TYPE_F16 ? llm_fp16_to_fp32(*(const uint16_t *)p) : *(const float *)p;
}

/* ---- row primitives: dot(q, k row) and acc += w·(v row), q and acc F32 contiguous -------------- */

AVX2 static float dot_avx2(int64_t n, const float *q, enum llm_type t, const void *k)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    float s;
    if (t == LLM_TYPE_F16) {
        const uint16_t *kh = k;
        for (; i + 16 <= n; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_f16x8(kh + i), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load_f16x8(kh + i + 8), a1);
        }
        s = hsum_ps(_mm256_add_ps(a0, a1));
        for (; i < n; i++)
            s += q[i] * llm_fp16_to_fp32(kh[i]);
    } else {
        const float *kf = k;
        for (; i + 16 <= n; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kf + i), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(kf + i + 8), a1);
        }
        s = hsum_ps(_mm256_add_ps(a0, a1));
        for (; i < n; i++)
            s += q[i] * kf[i];
    }
    return s;
}

/* acc = acc·c + w·v */
AVX2 static void axpby_avx2(int64_t n, float *acc, float c, float w, enum llm_type t, const void *v)
{
    __m256 vc = _mm256_set1_ps(c), vw = _mm256_set1_ps(w);
    int64_t i = 0;
    if (t == LLM_TYPE_F16) {
        const uint16_t *vh = v;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, load_f16x8(vh + i),
                                                      _mm256_mul_ps(vc, _mm256_loadu_ps(acc + i))));
        for (; i < n; i++)
            acc[i] = acc[i] * c + w * llm_fp16_to_fp32(vh[i]);
    } else {
        const float *vf = v;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(vf + i),
                                                      _mm256_mul_ps(vc, _mm256_loadu_ps(acc + i))));
        for (; i < n; i++)
            acc[i] = acc[i] * c + w * vf[i];
    }
}

static float dot_strided(int64_t n, const float *q, const struct llm_tensor *k, const char *kr)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += q[i] * load_kv(k->type, kr + i * k->nb[0]);
    return s;
}

static void axpby_strided(int64_t n, float *acc, float c, float w, const struct llm_tensor *v, const char *vr)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] = acc[i] * c + w * load_kv(v->type, vr + i * v->nb[0]);
}

static bool unit_rows(const struct llm_tensor *t)
{
    return t->nb[0] == llm_type_traits(t->type)->type_size;
}

/* ---- the kernel --------------------------------------------------------------------------- */

size_t cpu_flash_attn_work_size(const struct llm_tensor *dst, int nth)
{
    const struct llm_tensor *q = dst->src[0], *v = dst->src[2];
    return (size_t)nth * (size_t)(q->ne[0] + v->ne[0] + 16) * sizeof(float);
}

/* One output row: query iq of head h. qs and acc are this thread's scratch (hd and hd_v floats). */
static void attend(const struct llm_tensor *dst, int64_t iq, int64_t h, float *qs, float *acc, bool avx2)
{
    const struct llm_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    int64_t hd = q->ne[0], hd_v = v->ne[0], n_kv = k->ne[1];
    int64_t hk = h / (q->ne[2] / k->ne[2]);
    float scale = llm_get_op_f32(dst, 0);
    bool fast = avx2 && unit_rows(k) && unit_rows(v);

    const char *qr = tensor_at(q, 0, iq, h, 0);
    for (int64_t i = 0; i < hd; i++)
        qs[i] = *(const float *)(qr + i * q->nb[0]) * scale;
    for (int64_t i = 0; i < hd_v; i++)
        acc[i] = 0.0f;
    const char *mr = m ? tensor_at(m, 0, iq, h % m->ne[2], 0) : NULL;

    float max = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < n_kv; j++) {
        float mv = mr ? *(const float *)(mr + j * m->nb[0]) : 0.0f;
        if (mv == -INFINITY)
            continue;
        const char *kr = tensor_at(k, 0, j, hk, 0), *vr = tensor_at(v, 0, j, hk, 0);
        float s = (fast ? dot_avx2(hd, qs, k->type, kr) : dot_strided(hd, qs, k, kr)) + mv;
        float c = 1.0f, w;
        if (s > max) {
            c = expf(max - s); /* 0 on the first cell */
            max = s;
            w = 1.0f;
        } else {
            w = expf(s - max);
        }
        sum = sum * c + w;
        if (fast)
            axpby_avx2(hd_v, acc, c, w, v->type, vr);
        else
            axpby_strided(hd_v, acc, c, w, v, vr);
    }

    float inv = sum > 0.0f ? 1.0f / sum : 0.0f; /* every cell masked: zeros */
    char *z = tensor_at(dst, 0, h, iq, 0);
    for (int64_t i = 0; i < hd_v; i++)
        *(float *)(z + i * dst->nb[0]) = acc[i] * inv;
}

void cpu_flash_attn(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor *q = dst->src[0], *v = dst->src[2];
    int64_t heads = q->ne[2], n_q = q->ne[1], r0, r1;
    float *qs = (float *)p->wdata + (size_t)p->ith * (size_t)(q->ne[0] + v->ne[0] + 16);
    float *acc = qs + q->ne[0];
    bool avx2 = llm_cpu_has_avx2();
    /* rows ordered head-fastest so heads sharing a KV head run back to back on one thread */
    thread_rows(heads * n_q, p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        attend(dst, r / heads, r % heads, qs, acc, avx2);
}

void llm_ref_flash_attn(struct llm_tensor *dst)
{
    const struct llm_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *m = dst->src[3];
    int64_t hd = q->ne[0], hd_v = v->ne[0], n_kv = k->ne[1], heads = q->ne[2];
    double scale = llm_get_op_f32(dst, 0);
    double *w = malloc((size_t)n_kv * sizeof(double));
    if (!w)
        return;
    for (int64_t iq = 0; iq < q->ne[1]; iq++)
        for (int64_t h = 0; h < heads; h++) {
            int64_t hk = h / (heads / k->ne[2]);
            double max = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < n_kv; j++) {
                double s = 0.0;
                for (int64_t i = 0; i < hd; i++)
                    s += (double)*(float *)tensor_at(q, i, iq, h, 0) * load_kv(k->type, tensor_at(k, i, j, hk, 0));
                s = s * scale + (m ? *(float *)tensor_at(m, j, iq, h % m->ne[2], 0) : 0.0f);
                w[j] = s;
                max = s > max ? s : max;
            }
            for (int64_t j = 0; j < n_kv; j++) {
                w[j] = max == -INFINITY ? 0.0 : exp(w[j] - max);
                sum += w[j];
            }
            for (int64_t i = 0; i < hd_v; i++) {
                double o = 0.0;
                for (int64_t j = 0; j < n_kv; j++)
                    o += w[j] * load_kv(v->type, tensor_at(v, i, j, hk, 0));
                *(float *)tensor_at(dst, i, h, iq, 0) = sum > 0.0 ? (float)(o / sum) : 0.0f;
            }
        }
    free(w);
}
