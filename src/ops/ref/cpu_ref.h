/* Reference CPU kernels: plain scalar loops, single-threaded, whole node at once, sums in double.
 * They are the test oracles of the fast kernels in cpu.c (same contracts as enum llm_op in
 * tensor.h) and are compiled always. Each computes node dst from its sources into dst->data. */
#ifndef LLM_CPU_REF_H
#define LLM_CPU_REF_H

#include "tensor.h"

void llm_ref_get_rows(struct llm_tensor *dst);
void llm_ref_set_rows(struct llm_tensor *dst);
void llm_ref_cpy(struct llm_tensor *dst);      /* CPY and CONT */
void llm_ref_add(struct llm_tensor *dst);
void llm_ref_mul(struct llm_tensor *dst);
void llm_ref_scale(struct llm_tensor *dst);
void llm_ref_silu(struct llm_tensor *dst);
void llm_ref_swiglu(struct llm_tensor *dst);
void llm_ref_rms_norm(struct llm_tensor *dst);
void llm_ref_rope(struct llm_tensor *dst);     /* angles from the spec formula, not rope.c's fast path */
void llm_ref_soft_max(struct llm_tensor *dst);
void llm_ref_flash_attn(struct llm_tensor *dst);
/* dot(dequantized src0 row, src1 row) in double: no rounding of the activations. */
void llm_ref_mul_mat(struct llm_tensor *dst);

/* Fused ops: the reference kernels of the ops they replace, one after the other. */
void llm_ref_add_rms_norm(struct llm_tensor *dst);
void llm_ref_rms_norm_mul(struct llm_tensor *dst);
void llm_ref_mul_mat_add(struct llm_tensor *dst);
void llm_ref_mul_mat_swiglu(struct llm_tensor *dst);
void llm_ref_rope_qk(struct llm_tensor *dst);

/* Runs the reference kernel of dst->op (no-op for NONE/VIEW/RESHAPE/PERMUTE/TRANSPOSE). */
void llm_ref_compute(struct llm_tensor *dst);

#endif
