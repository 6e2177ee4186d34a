/* What each op's cpu kernel runs: the types, strides and shapes its loops handle (the op table's
 * `supports` column, ops/cpu/op_table.c). The shape rules every backend shares are the op's check. */
#include "kernels.h"
#include "ops/types/types.h"

static bool unit_stride(const struct llm_tensor *t)
{
    return t->nb[0] == llm_type_info(t->type)->type_size;
}

/* F32, F16 or BF16 (with its row conversions, whose traits another module fills). */
static bool float_type(enum llm_type t)
{
    const struct llm_type_traits *tt = llm_type_traits(t);
    return t == LLM_TYPE_F32 ||
           ((t == LLM_TYPE_F16 || t == LLM_TYPE_BF16) && tt->to_float && tt->from_float_fast);
}

/* CPY/CONT conversions: same type (quantized only row for row), or F32 <-> F16/BF16. */
static bool cpy_supported(const struct llm_tensor *a, const struct llm_tensor *d)
{
    const struct llm_type_info *ta = llm_type_info(a->type);
    if (!ta || !llm_type_info(d->type) || llm_nelements(a) != llm_nelements(d))
        return false;
    if (a->type == d->type)
        return ta->blck_size == 1 || (same_shape(a, d) && unit_stride(a) && unit_stride(d));
    return float_type(a->type) && float_type(d->type) &&
           (a->type == LLM_TYPE_F32 || d->type == LLM_TYPE_F32);
}

/* Each dim of b from `from` on divides that of a. */
static bool broadcasts(const struct llm_tensor *a, const struct llm_tensor *b, int from)
{
    for (int d = from; d < LLM_MAX_DIMS; d++)
        if (b->ne[d] == 0 || a->ne[d] % b->ne[d])
            return false;
    return true;
}

bool cpu_get_rows_supported(const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0], *ids = n->src[1];
    const struct llm_type_traits *ta = llm_type_traits(a->type);
    if (!ta || !ids || ids->type != LLM_TYPE_I32 || !tensor_is_f32(n) || n->ne[0] != a->ne[0] ||
        n->ne[1] != ids->ne[0] || n->ne[2] != ids->ne[1] || n->ne[3] != ids->ne[2] || ids->ne[3] != 1)
        return false;
    if (llm_type_info(a->type)->blck_size > 1)
        return ta->to_float && unit_stride(a) && unit_stride(n);
    return float_type(a->type);
}

/* A quantized destination (a quantized KV cache) takes whole rows of whole blocks, quantized by the
 * type's from_float, so both rows need unit strides. */
static bool set_rows_type(const struct llm_tensor *n)
{
    const struct llm_type_traits *tt = llm_type_traits(n->type);
    if (!tt || llm_type_info(n->type)->blck_size == 1)
        return float_type(n->type);
    return tt->from_float && n->ne[0] % llm_type_info(n->type)->blck_size == 0 && unit_stride(n) &&
           n->src[1]->nb[0] == sizeof(float);
}

bool cpu_set_rows_supported(const struct llm_tensor *n)
{
    const struct llm_tensor *b = n->src[1], *ids = n->src[2];
    return tensor_is_f32(b) && set_rows_type(n) && ids && ids->type == LLM_TYPE_I32 && b->ne[0] == n->ne[0] &&
           ids->ne[0] == b->ne[1] && ids->ne[1] > 0 && ids->ne[2] > 0 && n->ne[2] > 0 && n->ne[3] > 0;
}

bool cpu_rope_supported(const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0], *pos = n->src[1], *ff = n->src[2];
    int n_dims = n->op_params[1], mode = n->op_params[2];
    return tensor_is_f32(a) && tensor_is_f32(n) && same_shape(a, n) && pos && pos->type == LLM_TYPE_I32 &&
           pos->ne[0] == a->ne[2] && a->ne[3] == 1 && (mode == 0 || mode == 2) && n_dims > 0 &&
           n_dims % 2 == 0 && n_dims <= a->ne[0] && n_dims <= 1024 && llm_get_op_f32(n, 7) == 0.0f &&
           (!ff || (tensor_is_f32(ff) && ff->ne[0] >= n_dims / 2 && unit_stride(ff)));
}

bool cpu_soft_max_supported(const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0], *m = n->src[1];
    return tensor_is_f32(a) && tensor_is_f32(n) && same_shape(a, n) && n->nb[0] == sizeof(float) &&
           (!m || (tensor_is_f32(m) && m->ne[0] == a->ne[0] && m->ne[1] >= a->ne[1] && broadcasts(a, m, 2)));
}

/* K or V of FLASH_ATTN: F32 or F16 with any strides, or another type with a dequantizer (a BF16
 * or quantized KV cache), rows of whole blocks with unit stride, converted as they are read. */
static bool attn_kv_type(const struct llm_tensor *t)
{
    const struct llm_type_traits *tt = llm_type_traits(t->type);
    if (!attn_kv_converted(t))
        return true;
    return tt && tt->to_float && t->ne[0] % llm_type_info(t->type)->blck_size == 0 && unit_stride(t);
}

bool cpu_flash_attn_supported(const struct llm_tensor *n)
{
    const struct llm_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *m = n->src[3];
    bool kv_ok = k && v && attn_kv_type(k) && attn_kv_type(v);
    return tensor_is_f32(q) && tensor_is_f32(n) && kv_ok && k->ne[0] == q->ne[0] && v->ne[1] == k->ne[1] &&
           v->ne[2] == k->ne[2] && k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0 && q->ne[3] == 1 &&
           n->ne[0] == v->ne[0] && n->ne[1] == q->ne[2] && n->ne[2] == q->ne[1] &&
           (!m || (tensor_is_f32(m) && m->ne[0] == k->ne[1] && m->ne[1] >= q->ne[1] && q->ne[2] % m->ne[2] == 0));
}

bool cpu_binary_supported(const struct llm_tensor *n)
{
    const struct llm_tensor *a = n->src[0], *b = n->src[1];
    return tensor_is_f32(a) && tensor_is_f32(b) && tensor_is_f32(n) && same_shape(a, n) && broadcasts(a, b, 0);
}

bool cpu_unary_supported(const struct llm_tensor *n)
{
    return tensor_is_f32(n->src[0]) && tensor_is_f32(n) && same_shape(n->src[0], n);
}

bool cpu_swiglu_supported(const struct llm_tensor *n)
{
    return cpu_binary_supported(n) && same_shape(n->src[0], n->src[1]);
}

bool cpu_cpy_supported(const struct llm_tensor *n)
{
    return cpy_supported(n->src[0], n) && n->src[1] && n->type == n->src[1]->type;
}

bool cpu_cont_supported(const struct llm_tensor *n)
{
    return n->src[0]->type == n->type && cpy_supported(n->src[0], n);
}
