/* The op-traits table (op_table.h) and the shape rules, FLOPs and bytes of each op. */
#include "op_table.h"

#include "graph.h"
#include "ops/kernels/kernels.h"
#include "ops/ref/cpu_ref.h"

/* ---- shape rules (types are the kernels' business: their supports functions) ---------------- */

/* Each dim of b divides that of a (b repeats over a). */
static bool broadcasts(const struct llm_tensor *a, const struct llm_tensor *b)
{
    for (int d = 0; d < LLM_MAX_DIMS; d++)
        if (b->ne[d] == 0 || a->ne[d] % b->ne[d])
            return false;
    return true;
}

static const char *check_get_rows(const struct llm_tensor *n)
{
    const struct llm_tensor *ids = n->src[1];
    return n->ne[0] == n->src[0]->ne[0] && n->ne[1] == ids->ne[0] && ids->ne[3] == 1
               ? NULL : "ids must be [n] (or [n, b2, b3]) picking rows of src0";
}

static const char *check_set_rows(const struct llm_tensor *n)
{
    const struct llm_tensor *rows = n->src[1], *ids = n->src[2];
    return rows->ne[0] == n->ne[0] && ids->ne[0] == rows->ne[1]
               ? NULL : "rows must be as wide as the destination and ids one per row";
}

static const char *check_broadcast(const struct llm_tensor *n)
{
    return broadcasts(n->src[0], n->src[1]) ? NULL : "src1 does not broadcast over src0";
}

static const char *check_same_shape(const struct llm_tensor *n)
{
    return same_shape(n->src[0], n->src[1]) ? NULL : "the two sources differ in shape";
}

static const char *check_mul_mat(const struct llm_tensor *n)
{
    const struct llm_tensor *w = n->src[0], *x = n->src[1];
    if (w->ne[0] != x->ne[0])
        return "src0 and src1 rows differ in length";
    return w->ne[2] > 0 && w->ne[3] > 0 && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0
               ? NULL : "src0 does not broadcast over src1's dims 2 and 3";
}

static const char *check_rope(const struct llm_tensor *n)
{
    const int n_dims = n->op_params[1];
    if (n->src[1]->ne[0] != n->src[0]->ne[2])
        return "one position per row of dim 2 is needed";
    return n_dims > 0 && n_dims % 2 == 0 && n_dims <= n->src[0]->ne[0]
               ? NULL : "n_dims must be even, positive and at most the row length";
}

static const char *check_soft_max(const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0], *m = n->src[1];
    return !m || (m->ne[0] == a->ne[0] && m->ne[1] >= a->ne[1])
               ? NULL : "the mask must be [n_kv, >= n_q]";
}

static const char *check_flash_attn(const struct llm_tensor *n)
{
    const struct llm_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *m = n->src[3];
    if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2])
        return "q, k and v disagree on head size, cells or kv heads";
    if (k->ne[2] == 0 || q->ne[2] % k->ne[2])
        return "kv heads must divide q heads";
    return !m || (m->ne[0] == k->ne[1] && m->ne[1] >= q->ne[1]) ? NULL : "the mask must be [n_kv, >= n_q]";
}

static const char *check_cpy(const struct llm_tensor *n)
{
    return llm_nelements(n->src[0]) == llm_nelements(n) ? NULL : "source and destination differ in elements";
}

static const char *check_add_rms_norm(const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0], *w = n->src[3];
    if (!same_shape(a, n->src[1]) || !same_shape(a, n->src[2]) || !same_shape(a, n))
        return "the two addends, the sum and the result differ in shape";
    return !w || broadcasts(n, w) ? NULL : "the weight does not broadcast over the result";
}

static const char *check_mul_mat_add(const struct llm_tensor *n)
{
    const char *why = check_mul_mat(n);
    return why ? why : broadcasts(n, n->src[2]) ? NULL : "the bias does not broadcast over the product";
}

static const char *check_mul_mat_swiglu(const struct llm_tensor *n)
{
    const struct llm_tensor *g = n->src[0], *u = n->src[2], *x = n->src[1];
    if (!same_shape(g, u) || g->ne[2] != 1 || g->ne[3] != 1 || x->ne[2] != 1 || x->ne[3] != 1)
        return "the two weights must be matrices of one shape, and src1 one matrix";
    return check_mul_mat(n);
}

static const char *check_rope_qk(const struct llm_tensor *n)
{
    const struct llm_tensor q = llm_rope_qk_part(n, 0), k = llm_rope_qk_part(n, 1);
    const char *why = check_rope(&q);
    why = why ? why : check_rope(&k);
    return why ? why : same_shape(n->src[2], n->src[3]) ? NULL : "the second rope's input and result differ in shape";
}

/* ---- FLOPs and bytes for the profile --------------------------------------------------------- */

static double flops_mul_mat(const struct llm_tensor *n) /* K · M · N multiply-adds */
{
    return 2.0 * (double)n->src[0]->ne[0] * (double)llm_nelements(n);
}

static double flops_mul_mat_swiglu(const struct llm_tensor *n) /* two products, then SWIGLU */
{
    return 2.0 * flops_mul_mat(n) + (double)llm_nelements(n);
}

static double flops_flash_attn(const struct llm_tensor *n) /* Q·K and P·V over every (query, head, cell) */
{
    const struct llm_tensor *q = n->src[0];
    return 2.0 * (double)q->ne[1] * (double)q->ne[2] * (double)n->src[1]->ne[1] * (double)(q->ne[0] + n->ne[0]);
}

static double bytes_get_rows(const struct llm_tensor *n) /* only the selected rows, and the ids */
{
    const struct llm_tensor *a = n->src[0];
    return (double)llm_row_size(a->type, a->ne[0]) * (double)llm_nrows(n) + (double)llm_nbytes(n->src[1]);
}

static double bytes_set_rows(const struct llm_tensor *n) /* the new rows and their ids, not the destination */
{
    return (double)llm_nbytes(n->src[1]) + (double)llm_nbytes(n->src[2]);
}

/* ---- the table --------------------------------------------------------------------------------- */

#define NOOP(nm, nsrc) { .name = nm, .n_src = nsrc, .is_noop = true }

static const struct llm_op_traits table[] = {
    [LLM_OP_NONE] = NOOP("NONE", 0),
    [LLM_OP_GET_ROWS] = { "GET_ROWS", 2, 0, false, check_get_rows, cpu_get_rows_supported, cpu_get_rows,
                          llm_ref_get_rows, NULL, NULL, bytes_get_rows, .in_place = false },
    [LLM_OP_SET_ROWS] = { "SET_ROWS", 3, 0, false, check_set_rows, cpu_set_rows_supported, cpu_set_rows,
                          llm_ref_set_rows, NULL, NULL, bytes_set_rows, .in_place = false },
    [LLM_OP_ADD] = { "ADD", 2, 0, false, check_broadcast, cpu_binary_supported, cpu_add, llm_ref_add, NULL, NULL, NULL,
                     .in_place = true },
    [LLM_OP_MUL] = { "MUL", 2, 0, false, check_broadcast, cpu_binary_supported, cpu_mul, llm_ref_mul, NULL, NULL, NULL,
                     .in_place = true },
    [LLM_OP_SCALE] = { "SCALE", 1, 0, false, NULL, cpu_unary_supported, cpu_scale, llm_ref_scale, NULL, NULL, NULL,
                       .in_place = true },
    [LLM_OP_RMS_NORM] = { "RMS_NORM", 1, 0, false, NULL, cpu_unary_supported, cpu_rms_norm, llm_ref_rms_norm,
                          NULL, NULL, NULL, .in_place = true },
    [LLM_OP_MUL_MAT] = { "MUL_MAT", 2, 0, false, check_mul_mat, cpu_mul_mat_supports, cpu_mul_mat, llm_ref_mul_mat,
                         cpu_mul_mat_work_size, flops_mul_mat, NULL, .in_place = false },
    [LLM_OP_ROPE] = { "ROPE", 2, 1, false, check_rope, cpu_rope_supported, cpu_rope, llm_ref_rope, NULL, NULL, NULL,
                      .in_place = true },
    [LLM_OP_SOFT_MAX] = { "SOFT_MAX", 1, 1, false, check_soft_max, cpu_soft_max_supported, cpu_soft_max,
                          llm_ref_soft_max, NULL, NULL, NULL, .in_place = true },
    [LLM_OP_FLASH_ATTN] = { "FLASH_ATTN", 3, 1, false, check_flash_attn, cpu_flash_attn_supported, cpu_flash_attn,
                            llm_ref_flash_attn, cpu_flash_attn_work_size, flops_flash_attn, NULL, .in_place = false },
    [LLM_OP_SWIGLU] = { "SWIGLU", 2, 0, false, check_same_shape, cpu_swiglu_supported, cpu_swiglu, llm_ref_swiglu,
                        NULL, NULL, NULL, .in_place = true },
    [LLM_OP_SILU] = { "SILU", 1, 0, false, NULL, cpu_unary_supported, cpu_silu, llm_ref_silu, NULL, NULL, NULL,
                      .in_place = true },
    [LLM_OP_CPY] = { "CPY", 2, 0, false, check_cpy, cpu_cpy_supported, cpu_cpy, llm_ref_cpy, NULL, NULL, NULL,
                     .in_place = false },
    [LLM_OP_CONT] = { "CONT", 1, 0, false, check_cpy, cpu_cont_supported, cpu_cpy, llm_ref_cpy, NULL, NULL, NULL,
                      .in_place = false },
    [LLM_OP_VIEW] = NOOP("VIEW", 1),
    [LLM_OP_RESHAPE] = NOOP("RESHAPE", 1),
    [LLM_OP_PERMUTE] = NOOP("PERMUTE", 1),
    [LLM_OP_TRANSPOSE] = NOOP("TRANSPOSE", 1),
    /* the layout pass's row conversion: a copy into other strides */
    [LLM_OP_CHANNEL_NORM] = { "CHANNEL_NORM", 1, 0, false, check_cpy, cpu_cont_supported, cpu_cpy, llm_ref_cpy,
                              NULL, NULL, NULL, .in_place = false },
    [LLM_OP_FUSED] = NOOP("FUSED", 0),
    [LLM_OP_ADD_RMS_NORM] = { "ADD_RMS_NORM", 3, 1, false, check_add_rms_norm, cpu_add_rms_norm_supported,
                              cpu_add_rms_norm, llm_ref_add_rms_norm, NULL, NULL, NULL, .in_place = false },
    [LLM_OP_RMS_NORM_MUL] = { "RMS_NORM_MUL", 2, 0, false, check_broadcast, cpu_rms_norm_mul_supported,
                              cpu_rms_norm_mul, llm_ref_rms_norm_mul, NULL, NULL, NULL, .in_place = false },
    [LLM_OP_MUL_MAT_ADD] = { "MUL_MAT_ADD", 3, 0, false, check_mul_mat_add, cpu_mul_mat_add_supported,
                             cpu_mul_mat_add, llm_ref_mul_mat_add, cpu_mul_mat_work_size, flops_mul_mat, NULL,
                             .in_place = false },
    [LLM_OP_ROPE_QK] = { "ROPE_QK", 4, 0, false, check_rope_qk, cpu_rope_qk_supported, cpu_rope_qk, llm_ref_rope_qk,
                         NULL, NULL, NULL, .in_place = false },
    [LLM_OP_MUL_MAT_SWIGLU] = { "MUL_MAT_SWIGLU", 3, 0, false, check_mul_mat_swiglu, cpu_mul_mat_swiglu_supported,
                                cpu_mul_mat_swiglu, llm_ref_mul_mat_swiglu, cpu_mul_mat_swiglu_work_size,
                                flops_mul_mat_swiglu, NULL, .in_place = false },
};
_Static_assert(sizeof table / sizeof table[0] == LLM_OP_COUNT, "the op table must have a row for every enum llm_op");

const struct llm_op_traits *llm_op_traits(enum llm_op op)
{
    return &table[op];
}

const char *llm_op_name(enum llm_op op)
{
    return (unsigned)op < LLM_OP_COUNT && table[op].name ? table[op].name : "?";
}

bool llm_op_is_noop(enum llm_op op)
{
    return table[op].is_noop;
}

const char *llm_op_check(const struct llm_tensor *node)
{
    const struct llm_op_traits *t = &table[node->op];
    for (int i = 0; i < LLM_MAX_SRC; i++) {
        if (i < t->n_src && !node->src[i])
            return "a source is missing";
        if (i >= t->n_src + t->n_opt && node->src[i])
            return "more sources than the op takes";
    }
    return t->check ? t->check(node) : NULL;
}
