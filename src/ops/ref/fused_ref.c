/* Reference kernels of the fused ops: the unfused ops' reference kernels, one after the other. */
#include <stdlib.h>

#include "cpu_ref.h"
#include "ops/kernels/kernels.h"

void llm_ref_add_rms_norm(struct llm_tensor *dst)
{
    struct llm_tensor add = as_op(dst->src[2], LLM_OP_ADD, dst->src[0], dst->src[1]);
    struct llm_tensor norm = as_op(dst, LLM_OP_RMS_NORM, dst->src[2], NULL);
    llm_ref_add(&add);
    llm_ref_rms_norm(&norm);
    if (dst->src[3]) {
        struct llm_tensor mul = as_op(dst, LLM_OP_MUL, dst, dst->src[3]);
        llm_ref_mul(&mul);
    }
}

void llm_ref_rms_norm_mul(struct llm_tensor *dst)
{
    struct llm_tensor norm = as_op(dst, LLM_OP_RMS_NORM, dst->src[0], NULL), mul = as_op(dst, LLM_OP_MUL, dst, dst->src[1]);
    llm_ref_rms_norm(&norm);
    llm_ref_mul(&mul);
}

void llm_ref_mul_mat_add(struct llm_tensor *dst)
{
    struct llm_tensor mm = as_op(dst, LLM_OP_MUL_MAT, dst->src[0], dst->src[1]), add = as_op(dst, LLM_OP_ADD, dst, dst->src[2]);
    llm_ref_mul_mat(&mm);
    llm_ref_add(&add);
}

/* The up product goes to a buffer of its own (the fast kernel's tile), the gate product into dst. */
void llm_ref_mul_mat_swiglu(struct llm_tensor *dst)
{
    struct llm_tensor up = as_op(dst, LLM_OP_MUL_MAT, dst->src[2], dst->src[1]);
    up.data = malloc(llm_nbytes(dst));
    if (!up.data)
        abort(); /* an oracle has no error path; tests only */
    for (int d = 1; d < LLM_MAX_DIMS; d++)
        up.nb[d] = up.nb[d - 1] * (size_t)up.ne[d - 1];
    struct llm_tensor gate = as_op(dst, LLM_OP_MUL_MAT, dst->src[0], dst->src[1]);
    struct llm_tensor glu = as_op(dst, LLM_OP_SWIGLU, dst, &up);
    llm_ref_mul_mat(&gate);
    llm_ref_mul_mat(&up);
    llm_ref_swiglu(&glu);
    free(up.data);
}

void llm_ref_rope_qk(struct llm_tensor *dst)
{
    for (int part = 0; part < 2; part++) {
        struct llm_tensor r = llm_rope_qk_part(dst, part);
        llm_ref_rope(&r);
    }
}
