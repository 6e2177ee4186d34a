/* Reference kernels of the element-wise ops and the normalisations: ADD, MUL, SCALE, SILU, SWIGLU,
 * RMS_NORM and SOFT_MAX, in double where a sum is taken. */
#include <math.h>

#include "cpu_ref.h"
#include "ops/kernels/kernels.h"

enum elem { ELEM_ADD, ELEM_MUL, ELEM_SCALE, ELEM_SILU, ELEM_SWIGLU };

/* Every element of dst from its sources' elements at the same coordinates; ADD and MUL repeat b
 * along each dimension it is shorter in. */
static void elementwise_ref(enum elem op, struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0], *b = dst->src[1];
    for (int64_t f = 0; f < llm_nelements(dst); f++) {
        int64_t c[4];
        flat_coords(dst, f, c);
        double x = *(const float *)tensor_at(a, c[0], c[1], c[2], c[3]), v = 0.0;
        switch (op) {
        case ELEM_ADD:
        case ELEM_MUL: {
            float xf = (float)x, y = *(const float *)tensor_at(b, c[0] % b->ne[0], c[1] % b->ne[1],
                                                                c[2] % b->ne[2], c[3] % b->ne[3]);
            v = op == ELEM_ADD ? xf + y : xf * y;
            break;
        }
        case ELEM_SCALE:
            v = (float)x * llm_get_op_f32(dst, 0);
            break;
        case ELEM_SILU:
        case ELEM_SWIGLU:
            v = x / (1.0 + exp(-x));
            if (op == ELEM_SWIGLU)
                v *= *(const float *)tensor_at(b, c[0], c[1], c[2], c[3]);
            break;
        }
        *(float *)tensor_at(dst, c[0], c[1], c[2], c[3]) = (float)v;
    }
}

void llm_ref_add(struct llm_tensor *dst)
{
    elementwise_ref(ELEM_ADD, dst);
}

void llm_ref_mul(struct llm_tensor *dst)
{
    elementwise_ref(ELEM_MUL, dst);
}

void llm_ref_scale(struct llm_tensor *dst)
{
    elementwise_ref(ELEM_SCALE, dst);
}

void llm_ref_silu(struct llm_tensor *dst)
{
    elementwise_ref(ELEM_SILU, dst);
}

void llm_ref_swiglu(struct llm_tensor *dst)
{
    elementwise_ref(ELEM_SWIGLU, dst);
}

void llm_ref_rms_norm(struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0];
    double eps = llm_get_op_f32(dst, 0);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++) {
                double ss = 0.0;
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    double v = *(float *)tensor_at(a, i0, i1, i2, i3);
                    ss += v * v;
                }
                double scale = 1.0 / sqrt(ss / (double)dst->ne[0] + eps);
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++)
                    *(float *)tensor_at(dst, i0, i1, i2, i3) =
                        (float)(*(float *)tensor_at(a, i0, i1, i2, i3) * scale);
            }
}

void llm_ref_soft_max(struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0], *m = dst->src[1];
    double scale = llm_get_op_f32(dst, 0);
    int64_t n = dst->ne[0];
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++) {
                double max = -INFINITY, sum = 0.0;
                for (int64_t i0 = 0; i0 < n; i0++) {
                    double v = *(float *)tensor_at(a, i0, i1, i2, i3) * scale;
                    if (m)
                        v += *(float *)tensor_at(m, i0, i1, i2 % m->ne[2], i3 % m->ne[3]);
                    max = v > max ? v : max;
                }
                for (int64_t i0 = 0; i0 < n; i0++) {
                    double v = *(float *)tensor_at(a, i0, i1, i2, i3) * scale;
                    if (m)
                        v += *(float *)tensor_at(m, i0, i1, i2 % m->ne[2], i3 % m->ne[3]);
                    sum += max == -INFINITY ? 0.0 : exp(v - max);
                }
                for (int64_t i0 = 0; i0 < n; i0++) {
                    double v = *(float *)tensor_at(a, i0, i1, i2, i3) * scale;
                    if (m)
                        v += *(float *)tensor_at(m, i0, i1, i2 % m->ne[2], i3 % m->ne[3]);
                    *(float *)tensor_at(dst, i0, i1, i2, i3) =
                        max == -INFINITY ? 0.0f : (float)(exp(v - max) / sum);
                }
            }
}
