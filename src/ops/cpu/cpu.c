/* The cpu kernels' entry points: which nodes they run, the scratch they need, and dispatch. */
#include "cpu.h"

#include "op_table.h"
#include "ops/kernels/kernels.h"
#include "ops/ref/cpu_ref.h"
#include "ops/types/types.h"

bool llm_cpu_supports(const struct llm_tensor *n)
{
    const struct llm_op_traits *t = llm_op_traits(n->op);
    return t->is_noop || (t->supports && t->supports(n));
}

/* A node runs on one thread below about 20 µs of work on one core: SPLIT_MIN_MADDS multiply-adds
 * for MUL_MAT and FLASH_ATTN, SPLIT_MIN_ELEMENTS elements written for the other ops (each element
 * of ADD, RMS_NORM or ROPE costs 0.3-0.6 ns, a matmul's multiply-add 0.01-0.2). On the cpu a
 * barrier is cheap, but the emulated npu, which must split exactly as the cpu does (its results
 * are the cpu's bit for bit), puts its second worker to sleep while the host needs the core, and
 * only a node of about this size repays waking it. A decode token's element-wise nodes (one row)
 * stay far below; a prompt's (896 x 256 on the 0.5B shape) are split (bench/results/kernel_choices.md). */
#define SPLIT_MIN_MADDS (1 << 18)
#define SPLIT_MIN_ELEMENTS (1 << 16)

bool llm_cpu_worth_splitting(const struct llm_tensor *node)
{
    if (node->op == LLM_OP_SET_ROWS) /* src1's rows, written into a (large) cache: src0 and dst */
        return llm_nelements(node->src[1]) >= SPLIT_MIN_ELEMENTS;
    if (node->op == LLM_OP_MUL_MAT || node->op == LLM_OP_MUL_MAT_ADD || node->op == LLM_OP_MUL_MAT_SWIGLU)
        return llm_nelements(node) * node->src[0]->ne[0] >= SPLIT_MIN_MADDS;
    if (node->op == LLM_OP_FLASH_ATTN) /* × KV cells */
        return llm_nelements(node) * node->src[1]->ne[1] >= SPLIT_MIN_MADDS;
    return llm_nelements(node) >= SPLIT_MIN_ELEMENTS;
}

bool llm_cpu_supports_type(enum llm_type type)
{
    const struct llm_type_traits *tt = llm_type_traits(type);
    return tt && tt->to_float;
}

size_t llm_cpu_work_size(const struct llm_tensor *node, int n_threads)
{
    const struct llm_op_traits *t = llm_op_traits(node->op);
    return t->work_size ? t->work_size(node, n_threads) : 0;
}

size_t llm_cpu_work_size_bound(const struct llm_tensor *node, int n_threads)
{
    if (node->op == LLM_OP_MUL_MAT || node->op == LLM_OP_MUL_MAT_ADD)
        return cpu_mul_mat_work_size_bound(node, n_threads);
    return llm_cpu_work_size(node, n_threads); /* FLASH_ATTN's is the same at any query count */
}

void llm_cpu_compute(const struct llm_cpu_params *p, struct llm_tensor *node)
{
    const struct llm_op_traits *t = llm_op_traits(node->op);
    if (t->compute)
        t->compute(p, node);
}

void llm_cpu_plan(const struct llm_tensor *node, struct llm_cpu_plan *plan)
{
    *plan = (struct llm_cpu_plan){ 0 };
    if (node->op == LLM_OP_MUL_MAT || node->op == LLM_OP_MUL_MAT_ADD)
        cpu_mul_mat_plan(node, plan);
}

void llm_cpu_compute_planned(const struct llm_cpu_params *p, struct llm_tensor *node, const struct llm_cpu_plan *plan)
{
    if (node->op == LLM_OP_MUL_MAT)
        cpu_mul_mat_planned(p, node, plan);
    else if (node->op == LLM_OP_MUL_MAT_ADD)
        cpu_mul_mat_add_planned(p, node, plan);
    else
        llm_cpu_compute(p, node);
}

void llm_ref_compute(struct llm_tensor *dst)
{
    const struct llm_op_traits *t = llm_op_traits(dst->op);
    if (t->ref)
        t->ref(dst);
}
