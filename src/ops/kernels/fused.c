/* Fused ops (tensor.h): each runs, row by row, the row kernels of the ops it replaces, so its floats
 * are theirs bit for bit while the node is one launch. Rows are independent and every intermediate
 * row is written before it is read in the same thread, so threads split rows as the unfused ops do.
 * The fusion pass (src/npu/fusion.h) makes them only where dst shares no memory with a source. */
#include <string.h>

#include "kernels.h"

/* ---- ADD_RMS_NORM: sum = a + b; dst = rms_norm(sum) [* w] -------------------------------------- */

bool cpu_add_rms_norm_supported(const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0], *b = n->src[1], *sum = n->src[2], *w = n->src[3];
    struct llm_tensor add = as_op(sum, LLM_OP_ADD, a, b), norm = as_op(n, LLM_OP_RMS_NORM, sum, NULL),
                      mul = as_op(n, LLM_OP_MUL, n, w);
    return tensor_is_f32(sum) && same_shape(a, b) && cpu_binary_supported(&add) && cpu_unary_supported(&norm) &&
           (!w || cpu_binary_supported(&mul));
}

void cpu_add_rms_norm(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor *w = dst->src[3];
    const struct llm_tensor add = as_op(dst->src[2], LLM_OP_ADD, dst->src[0], dst->src[1]);
    const struct llm_tensor norm = as_op(dst, LLM_OP_RMS_NORM, dst->src[2], NULL), mul = as_op(dst, LLM_OP_MUL, dst, w);
    const float eps = llm_get_op_f32(dst, 0);
    int64_t r0, r1;
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_add_row(&add, r);
        cpu_rms_norm_row(&norm, r, eps);
        if (w)
            cpu_mul_row(&mul, r);
    }
}

/* ---- RMS_NORM_MUL: dst = rms_norm(x) * w -------------------------------------------------------- */

bool cpu_rms_norm_mul_supported(const struct llm_tensor *n)
{
    struct llm_tensor norm = as_op(n, LLM_OP_RMS_NORM, n->src[0], NULL), mul = as_op(n, LLM_OP_MUL, n, n->src[1]);
    return cpu_unary_supported(&norm) && cpu_binary_supported(&mul);
}

void cpu_rms_norm_mul(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    const struct llm_tensor norm = as_op(dst, LLM_OP_RMS_NORM, dst->src[0], NULL);
    const struct llm_tensor mul = as_op(dst, LLM_OP_MUL, dst, dst->src[1]);
    const float eps = llm_get_op_f32(dst, 0);
    int64_t r0, r1;
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        cpu_rms_norm_row(&norm, r, eps);
        cpu_mul_row(&mul, r);
    }
}

/* ---- MUL_MAT_ADD: dst = w · x + bias -------------------------------------------------------------- */

bool cpu_mul_mat_add_supported(const struct llm_tensor *n)
{
    struct llm_tensor mm = as_op(n, LLM_OP_MUL_MAT, n->src[0], n->src[1]), add = as_op(n, LLM_OP_ADD, n, n->src[2]);
    return cpu_mul_mat_supports(&mm) && cpu_binary_supported(&add);
}

/* The matmul's threads split its output differently from rows, so all of it is done (a barrier)
 * before each thread adds the bias to its rows. */
void cpu_mul_mat_add_planned(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct llm_cpu_plan *plan)
{
    struct llm_tensor mm = as_op(dst, LLM_OP_MUL_MAT, dst->src[0], dst->src[1]);
    const struct llm_tensor add = as_op(dst, LLM_OP_ADD, dst, dst->src[2]);
    cpu_mul_mat_planned(p, &mm, plan);
    pool_barrier(p);
    int64_t r0, r1;
    thread_rows(llm_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        cpu_add_row(&add, r);
}

void cpu_mul_mat_add(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    struct llm_cpu_plan plan;
    struct llm_tensor mm = as_op(dst, LLM_OP_MUL_MAT, dst->src[0], dst->src[1]);
    cpu_mul_mat_plan(&mm, &plan);
    cpu_mul_mat_add_planned(p, dst, &plan);
}

/* ---- ROPE_QK: ROPE of src0 into dst and of src2 into src3's memory, one table --------------------- */

struct llm_tensor llm_rope_qk_part(const struct llm_tensor *n, int part)
{
    struct llm_tensor r = part == 0 ? as_op(n, LLM_OP_ROPE, n->src[0], n->src[1])
                                    : as_op(n->src[3], LLM_OP_ROPE, n->src[2], n->src[1]);
    memcpy(r.op_params, n->op_params, sizeof r.op_params); /* the second ROPE's are the same */
    return r;
}

bool cpu_rope_qk_supported(const struct llm_tensor *n)
{
    const struct llm_tensor q = llm_rope_qk_part(n, 0), k = llm_rope_qk_part(n, 1);
    return same_shape(n->src[2], n->src[3]) && cpu_rope_supported(&q) && cpu_rope_supported(&k);
}

/* Both halves through the ROPE kernel: the second finds the first's table in the cache (same
 * positions and parameters), and each splits its rows over the threads as ROPE does. */
void cpu_rope_qk(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    for (int part = 0; part < 2; part++) {
        struct llm_tensor r = llm_rope_qk_part(dst, part);
        cpu_rope(p, &r);
    }
}

