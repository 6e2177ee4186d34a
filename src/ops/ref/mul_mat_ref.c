/* Reference MUL_MAT: each weight row dequantized block by block and dotted in double with the
 * activations as they are (no rounding to vec_dot_type). */
#include "cpu_ref.h"
#include "ops/kernels/kernels.h"
#include "ops/types/types.h"

void llm_ref_mul_mat(struct llm_tensor *dst)
{
    const struct llm_tensor *w = dst->src[0], *x = dst->src[1];
    const struct llm_type_traits *wt = llm_type_traits(w->type);
    const struct llm_type_info *wi = llm_type_info(w->type);
    const int64_t bs = wi->blck_size;
    int64_t K = w->ne[0], r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    float blk[256];
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t n = 0; n < dst->ne[1]; n++)
                for (int64_t m = 0; m < dst->ne[0]; m++) {
                    const char *wr = tensor_at(w, 0, m, i2 / r2, i3 / r3);
                    double s = 0.0;
                    for (int64_t k0 = 0; k0 < K; k0 += bs) {
                        if (w->type == LLM_TYPE_F32)
                            blk[0] = ((const float *)wr)[k0];
                        else
                            wt->to_float(wr + k0 / bs * wi->type_size, blk, bs);
                        for (int64_t k = 0; k < bs; k++)
                            s += (double)blk[k] * *(const float *)tensor_at(x, k0 + k, n, i2, i3);
                    }
                    *(float *)tensor_at(dst, m, n, i2, i3) = (float)s;
                }
}
