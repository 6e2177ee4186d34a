/* Reference kernels of row movement: GET_ROWS, SET_ROWS, CPY and CONT, one element at a time. */
#include <stdlib.h>
#include <string.h>

#include "cpu_ref.h"
#include "ops/kernels/kernels.h"
#include "ops/types/types.h"

void llm_ref_get_rows(struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0], *ids = dst->src[1];
    const struct llm_type_info *ti = llm_type_info(a->type);
    const struct llm_type_traits *tt = llm_type_traits(a->type);
    float buf[256]; /* one block */
    for (int64_t k = 0; k < dst->ne[3]; k++)
        for (int64_t j = 0; j < dst->ne[2]; j++)
            for (int64_t i = 0; i < dst->ne[1]; i++) {
                int32_t id = *(const int32_t *)tensor_at(ids, i, j, k, 0);
                bool ok = id >= 0 && id < a->ne[1];
                for (int64_t e = 0; e < dst->ne[0]; e++) {
                    float v = 0.0f;
                    if (ok && ti->blck_size == 1) {
                        v = load_float(a->type, tensor_at(a, e, id, j % a->ne[2], k % a->ne[3]));
                    } else if (ok) {
                        int64_t b = e / ti->blck_size;
                        const char *blk = (const char *)tensor_at(a, 0, id, j % a->ne[2], k % a->ne[3]) +
                                          b * ti->type_size;
                        tt->to_float(blk, buf, ti->blck_size);
                        v = buf[e % ti->blck_size];
                    }
                    *(float *)tensor_at(dst, e, i, j, k) = v;
                }
            }
}

/* A quantized destination row is written whole by the type's reference quantizer. */
void llm_ref_set_rows(struct llm_tensor *dst)
{
    const struct llm_tensor *b = dst->src[1], *ids = dst->src[2];
    const bool quant = llm_type_info(dst->type)->blck_size > 1;
    float *row = quant ? malloc((size_t)b->ne[0] * sizeof(float)) : NULL;
    if (quant && !row)
        return;
    for (int64_t k = 0; k < b->ne[3]; k++)
        for (int64_t j = 0; j < b->ne[2]; j++)
            for (int64_t i = 0; i < b->ne[1]; i++) {
                int32_t id = *(const int32_t *)tensor_at(ids, i, j % ids->ne[1], k % ids->ne[2], 0);
                if (id < 0 || id >= dst->ne[1])
                    continue;
                char *z = tensor_at(dst, 0, id, j % dst->ne[2], k % dst->ne[3]);
                for (int64_t e = 0; e < b->ne[0]; e++) {
                    const float v = *(const float *)tensor_at(b, e, i, j, k);
                    if (quant)
                        row[e] = v;
                    else
                        store_float(dst->type, z + e * (int64_t)dst->nb[0], v);
                }
                if (quant)
                    llm_type_traits(dst->type)->from_float(row, z, b->ne[0]);
            }
    free(row);
}

void llm_ref_cpy(struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0];
    const struct llm_type_info *ti = llm_type_info(a->type);
    if (ti->blck_size > 1) { /* quantized: same type and shape, whole rows */
        for (int64_t r = 0; r < llm_nrows(a); r++) {
            int64_t i1, i2, i3;
            row_index(a, r, &i1, &i2, &i3);
            memcpy(tensor_at(dst, 0, i1, i2, i3), tensor_at(a, 0, i1, i2, i3), llm_row_size(a->type, a->ne[0]));
        }
        return;
    }
    for (int64_t f = 0; f < llm_nelements(a); f++) {
        int64_t s[4], d[4];
        flat_coords(a, f, s);
        flat_coords(dst, f, d);
        const void *x = tensor_at(a, s[0], s[1], s[2], s[3]);
        void *z = tensor_at(dst, d[0], d[1], d[2], d[3]);
        if (a->type == dst->type)
            memcpy(z, x, ti->type_size);
        else
            store_float(dst->type, z, load_float(a->type, x));
    }
}
