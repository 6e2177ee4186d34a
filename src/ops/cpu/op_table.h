/* The op-traits table: one row per enum llm_op (tied to the enum by a static_assert in
 * op_table.c), holding what every layer asks of an op: its name and sources, the shape check its
 * constructor runs, the cpu kernel and its reference kernel, the scratch it needs, its FLOPs and
 * bytes for the profile, and whether it computes anything. Adding an op is one row, one kernel and
 * its oracle. */
#ifndef LLM_OPS_OP_TABLE_H
#define LLM_OPS_OP_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor.h"

struct llm_cpu_params;

struct llm_op_traits {
    const char *name;  /* "MUL_MAT", as ggml prints it                                        */
    int n_src;         /* sources every node of the op has (src[0 .. n_src-1])                 */
    int n_opt;         /* optional sources after them (NULL when absent)                       */
    bool is_noop;      /* computes nothing: a leaf or a view of its source                     */
    /* Shape rules of the op, whatever the types: NULL when node obeys them, else what is wrong.
     * Run by the op's constructor; NULL pointer = no rule beyond the constructor's own shapes. */
    const char *(*check)(const struct llm_tensor *node);
    /* Types, strides and layouts the cpu kernel runs (the shape check holding). */
    bool (*supports)(const struct llm_tensor *node);
    /* Thread ith's share of node (cpu.h), and the whole node by the plain reference kernel. */
    void (*compute)(const struct llm_cpu_params *p, struct llm_tensor *node);
    void (*ref)(struct llm_tensor *node);
    size_t (*work_size)(const struct llm_tensor *node, int n_threads); /* NULL: none          */
    double (*flops)(const struct llm_tensor *node);  /* NULL: one per element of the result  */
    double (*bytes)(const struct llm_tensor *node);  /* bytes read; NULL: all of every source */
    /* Every backend's kernel of the op (and its reference kernel) is right when the result is
     * written over src[0] laid out alike: each row of the result reads only the same row of src[0],
     * and reads each element before writing it. The graph allocator then lets the node take over
     * the block of a src[0] that dies there (alloc.h). */
    bool in_place;
};

/* The row of op; op must be < LLM_OP_COUNT. */
const struct llm_op_traits *llm_op_traits(enum llm_op op);

/* The first shape rule node breaks (its op's check, then its sources' count), or NULL. */
const char *llm_op_check(const struct llm_tensor *node);

#endif
