/* Reference ROPE: the angles from the formula for every element, in double (no table). */
#include <math.h>

#include "cpu_ref.h"
#include "ops/kernels/kernels.h"

/* Reference: the angles straight from the formula (src/model/README.md: RoPE modes), in double,
 * sharing nothing with the fast path above (no rope_params, rope_angle or table), so that a wrong
 * angle in either one shows as a difference: θ_i = pos · freq_scale · freq_base^(−2i/n_dims) / factor_i
 * (factor_i = src[2][i], 1 without freq factors), pair i rotated by θ_i and scaled by attn_factor. */
void llm_ref_rope(struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0], *pos = dst->src[1], *factors = dst->src[2];
    const int n_dims = dst->op_params[1], neox = dst->op_params[2] == 2;
    const double freq_base = llm_get_op_f32(dst, 5), freq_scale = llm_get_op_f32(dst, 6);
    const double attn_factor = llm_get_op_f32(dst, 8);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++) {
            const double p = *(const int32_t *)tensor_at(pos, i2, 0, 0, 0);
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++) {
                for (int i = 0; i < n_dims / 2; i++) {
                    double theta = p * freq_scale * pow(freq_base, -2.0 * i / n_dims);
                    if (factors)
                        theta /= *(const float *)tensor_at(factors, i, 0, 0, 0);
                    /* NORMAL rotates adjacent pairs (2i, 2i+1), NEOX the halves (i, i + n_dims/2) */
                    int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_dims / 2 : 2 * i + 1;
                    double x0 = *(const float *)tensor_at(a, j0, i1, i2, i3);
                    double x1 = *(const float *)tensor_at(a, j1, i1, i2, i3);
                    *(float *)tensor_at(dst, j0, i1, i2, i3) =
                        (float)((x0 * cos(theta) - x1 * sin(theta)) * attn_factor);
                    *(float *)tensor_at(dst, j1, i1, i2, i3) =
                        (float)((x0 * sin(theta) + x1 * cos(theta)) * attn_factor);
                }
                for (int64_t j = n_dims; j < dst->ne[0]; j++)
                    *(float *)tensor_at(dst, j, i1, i2, i3) = *(const float *)tensor_at(a, j, i1, i2, i3);
            }
        }
}
