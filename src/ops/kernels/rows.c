/* Row movement: GET_ROWS (embedding lookup, dequantizing one row per id), SET_ROWS (KV cache writes),
 * CPY (with type conversion) and CONT. Type conversions of whole runs go through the type traits;
 * strided elements are converted one at a time. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"

/* Converts n elements from (ts, x, stride sx) to (td, z, stride sz). Same type copies bytes; otherwise
 * one side is F32 and the other F32/F16/BF16 (see llm_cpu_supports). Unit strides convert the run at
 * once through the traits (quantized runs must be whole blocks). */
static void convert_span(enum llm_type ts, const char *x, size_t sx, enum llm_type td, char *z,
                         size_t sz, int64_t n)
{
    const struct llm_type_info *si = llm_type_info(ts), *di = llm_type_info(td);
    bool unit = sx == si->type_size && sz == di->type_size;
    if (ts == td && (unit || si->blck_size > 1)) {
        memcpy(z, x, llm_row_size(ts, n));
    } else if (ts == td) {
        for (int64_t i = 0; i < n; i++)
            memcpy(z + i * sz, x + i * sx, si->type_size);
    } else if (unit && td == LLM_TYPE_F32) {
        llm_type_traits(ts)->to_float_fast(x, (float *)z, n);
    } else if (unit && ts == LLM_TYPE_F32) {
        llm_type_traits(td)->from_float_fast((const float *)x, z, n);
    } else {
        for (int64_t i = 0; i < n; i++)
            store_float(td, z + i * sz, load_float(ts, x + i * sx));
    }
}

/* ---- GET_ROWS ----------------------------------------------------------------------------- */

/* dst row (i, j, k) = src0 row ids[i, j, k] of src0 matrix (j, k) (broadcast when src0 has fewer).
 * An id outside src0 gives a row of zeros instead of reading out of bounds. */
static void get_row(struct llm_tensor *dst, int64_t i, int64_t j, int64_t k)
{
    const struct llm_tensor *a = dst->src[0], *ids = dst->src[1];
    int32_t id = *(const int32_t *)tensor_at(ids, i, j, k, 0);
    char *z = tensor_at(dst, 0, i, j, k);
    if (id < 0 || id >= a->ne[1]) {
        for (int64_t e = 0; e < dst->ne[0]; e++)
            *(float *)(z + e * dst->nb[0]) = 0.0f;
        return;
    }
    if (a->flags & LLM_TENSOR_REPACKED) /* a 2-D matrix; dst rows are contiguous floats */
        llm_repack_row_to_float(a->type, a->ne[0], a->data, id, (float *)z);
    else
        convert_span(a->type, tensor_at(a, 0, id, j % a->ne[2], k % a->ne[3]), a->nb[0], LLM_TYPE_F32, z,
                     dst->nb[0], dst->ne[0]);
}

void cpu_get_rows(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    int64_t r0, r1;
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i, j, k;
        row_index(dst, r, &i, &j, &k);
        get_row(dst, i, j, k);
    }
}

/* ---- SET_ROWS ----------------------------------------------------------------------------- */

/* Row i of src1 matrix (j, k) goes to row ids[i, j, k] (ids broadcast) of dst matrix (j, k); dst is
 * a view of src0 with its geometry, written through dst->data. Ids outside dst are skipped. */
static void set_row(struct llm_tensor *dst, int64_t i, int64_t j, int64_t k)
{
    const struct llm_tensor *b = dst->src[1], *ids = dst->src[2];
    int32_t id = *(const int32_t *)tensor_at(ids, i, j % ids->ne[1], k % ids->ne[2], 0);
    if (id < 0 || id >= dst->ne[1])
        return;
    convert_span(LLM_TYPE_F32, tensor_at(b, 0, i, j, k), b->nb[0], dst->type,
                 tensor_at(dst, 0, id, j % dst->ne[2], k % dst->ne[3]), dst->nb[0], b->ne[0]);
}

void cpu_set_rows(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor *b = dst->src[1];
    int64_t r0, r1;
    thread_rows(llm_nrows(b), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i, j, k;
        row_index(b, r, &i, &j, &k);
        set_row(dst, i, j, k);
    }
}

/* ---- CPY / CONT --------------------------------------------------------------------------- */

void cpu_cpy(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor *a = dst->src[0];
    int64_t r0, r1, n = a->ne[0];
    thread_rows(llm_nrows(a), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3, c[4];
        row_index(a, r, &i1, &i2, &i3);
        const char *x = tensor_at(a, 0, i1, i2, i3);
        flat_coords(dst, r * n, c);
        for (int64_t done = 0; done < n;) {
            int64_t len = dst->ne[0] - c[0] < n - done ? dst->ne[0] - c[0] : n - done;
            /* done is 0 for quantized rows: their shapes must match (llm_cpu_supports) */
            convert_span(a->type, x + done * (int64_t)a->nb[0], a->nb[0], dst->type,
                         tensor_at(dst, c[0], c[1], c[2], c[3]), dst->nb[0], len);
            done += len;
            flat_coords(dst, r * n + done, c);
        }
    }
}

