#include "tensor.h"

static const char *const op_names[] = {
    "NONE", "GET_ROWS", "SET_ROWS", "ADD", "MUL", "SCALE", "RMS_NORM", "MUL_MAT", "ROPE",
    "SOFT_MAX", "FLASH_ATTN", "SWIGLU", "SILU", "CPY", "CONT", "VIEW", "RESHAPE", "PERMUTE",
    "TRANSPOSE", "CHANNEL_NORM",
};
_Static_assert(sizeof op_names / sizeof op_names[0] == LLM_OP_COUNT,
               "op_names must list every enum llm_op value");

const char *llm_op_name(enum llm_op op)
{
    return (unsigned)op < LLM_OP_COUNT ? op_names[op] : "?";
}
