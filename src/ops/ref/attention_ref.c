/* Reference FLASH_ATTN: a quantized or BF16 K or V dequantized whole, then scores, softmax and the
 * weighted sum of V in double, one query row and head at a time. */
#include <math.h>
#include <stdlib.h>

#include "cpu_ref.h"
#include "ops/kernels/kernels.h"
#include "ops/types/types.h"

/* A converted (quantized, BF16) t as a contiguous F32 tensor of its shape (rows dequantized by the
 * reference to_float, data malloc'd into *f), else t itself; NULL when out of memory. */
static const struct llm_tensor *ref_dequantized(const struct llm_tensor *t, struct llm_tensor *f)
{
    if (!attn_kv_converted(t))
        return t;
    *f = (struct llm_tensor){ .type = LLM_TYPE_F32, .ne = { t->ne[0], t->ne[1], t->ne[2], 1 } };
    f->nb[0] = sizeof(float), f->nb[1] = (size_t)t->ne[0] * sizeof(float);
    f->nb[2] = f->nb[1] * (size_t)t->ne[1], f->nb[3] = f->nb[2] * (size_t)t->ne[2];
    f->data = malloc(f->nb[3]);
    for (int64_t h = 0; f->data && h < t->ne[2]; h++)
        for (int64_t j = 0; j < t->ne[1]; j++)
            llm_type_traits(t->type)->to_float(tensor_at(t, 0, j, h, 0), tensor_at(f, 0, j, h, 0), t->ne[0]);
    return f->data ? f : NULL;
}

static void ref_attend(struct llm_tensor *dst, const struct llm_tensor *k, const struct llm_tensor *v, double *w)
{
    const struct llm_tensor *q = dst->src[0], *m = dst->src[3];
    int64_t hd = q->ne[0], hd_v = v->ne[0], n_kv = k->ne[1], heads = q->ne[2];
    double scale = llm_get_op_f32(dst, 0);
    for (int64_t iq = 0; iq < q->ne[1]; iq++)
        for (int64_t h = 0; h < heads; h++) {
            int64_t hk = h / (heads / k->ne[2]);
            double max = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < n_kv; j++) {
                double s = 0.0;
                for (int64_t i = 0; i < hd; i++)
                    s += (double)*(float *)tensor_at(q, i, iq, h, 0) * load_float(k->type, tensor_at(k, i, j, hk, 0));
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
                    o += w[j] * load_float(v->type, tensor_at(v, i, j, hk, 0));
                *(float *)tensor_at(dst, i, h, iq, 0) = sum > 0.0 ? (float)(o / sum) : 0.0f;
            }
        }
}

/* A quantized or BF16 K or V is dequantized whole first, then the plain attention runs: the oracle
 * of the block-by-block reads of the fast paths. */
void llm_ref_flash_attn(struct llm_tensor *dst)
{
    struct llm_tensor kf = { 0 }, vf = { 0 };
    const struct llm_tensor *k = ref_dequantized(dst->src[1], &kf), *v = ref_dequantized(dst->src[2], &vf);
    double *w = malloc((size_t)dst->src[1]->ne[1] * sizeof(double));
    if (k && v && w)
        ref_attend(dst, k, v, w);
    free(w);
    free(kf.data);
    free(vf.data);
}
