#include "aclnn.h"

#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"
#include "graph.h"
#include "layout.h"
#include "ops/cpu/cpu.h"
#include "profile.h"
#include "trace.h"

enum kernel_kind { KERNEL_COMPUTE, KERNEL_ROPE_CACHE, KERNEL_ROPE_APPLY };

/* What the device kernel receives (copied into the task): the node and its sources by value, so a
 * captured graph does not depend on the host's graph structs, which the next build reuses. */
struct kernel_args {
    struct llm_tensor dst;
    struct llm_tensor src[LLM_MAX_SRC];
    unsigned has_src;  /* bit i: dst had src[i] */
    enum kernel_kind kind;
    struct llm_cpu_plan plan; /* compute kind: the kernel picked in GetWorkspaceSize */
    float *table;      /* rope kinds: the cos/sin table */
    void *wdata;
    size_t wsize;
    struct llm_profile *prof; /* observers, NULL when off */
    struct llm_trace *trace;
};

_Static_assert(sizeof(struct kernel_args) <= ACL_KERNEL_ARGS_MAX, "kernel args exceed a task's room");

struct aclOpExecutor {
    struct kernel_args args;
    uint32_t block_dim;
    uint64_t workspace_size;
    const char *name;
};

static void npu_kernel(const struct acl_kernel_ctx *k, void *argp)
{
    struct kernel_args *a = argp;
    /* dst's src pointers must lead into this task's own copies of the sources. A worker alone on
     * the task points them there in place (idempotent: a replay's task is then ready), workers
     * sharing it each take a copy of dst (no worker writes what another reads). */
    struct llm_tensor copy, *dst = &a->dst;
    if (k->nth > 1) {
        copy = a->dst;
        dst = &copy;
    }
    for (unsigned m = a->has_src; m; m &= m - 1) /* the absent ones are NULL already */
        dst->src[__builtin_ctz(m)] = &a->src[__builtin_ctz(m)];
    struct llm_cpu_params p = { .ith = k->ith, .nth = k->nth, .wdata = a->wdata, .wsize = a->wsize,
                                .barrier = k->barrier, .pool = k->pool };
    const bool watch = a->prof || a->trace;
    const double t0 = watch ? llm_now_us() : 0.0;
    switch (a->kind) {
    case KERNEL_COMPUTE: llm_cpu_compute_planned(&p, dst, &a->plan); break;
    case KERNEL_ROPE_CACHE: llm_cpu_rope_fill_table(&p, dst, a->table); break;
    case KERNEL_ROPE_APPLY: llm_cpu_rope_apply(&p, dst, a->table); break;
    }
    if (!watch)
        return;
    if (a->kind != KERNEL_ROPE_CACHE) {
        llm_observe_node(a->prof, a->trace, LLM_TRACE_WORKER + k->ith, k->ith == 0, dst, t0);
        return;
    }
    /* the table is part of the node's ROPE work: its time counts there, not as another node */
    const double dur = llm_now_us() - t0;
    if (a->prof && k->ith == 0)
        llm_profile_entry_of(a->prof, a->prof->phase, dst)->us += dur;
    llm_trace_span(a->trace, LLM_TRACE_WORKER + k->ith, "rope cache", "ROPE", t0, dur, NULL);
}

/* A tensor the kernel touches must have data inside one device allocation. */
static aclError check_device(const char *name, const struct llm_tensor *t, const char *role)
{
    if (t->data && acl_is_device_range(t->data, llm_nbytes(t)))
        return ACL_SUCCESS;
    return acl_set_error(ACL_ERROR_INVALID_PARAM, "%sGetWorkspaceSize: %s '%s' (%zu bytes at %p) is not in device memory",
                         name, role, t->name, llm_nbytes(t), t->data);
}

static aclError build(const char *name, const struct llm_tensor *node, enum kernel_kind kind, float *table,
                      int n_workers, uint64_t *workspace_size, aclOpExecutor **executor)
{
    *executor = NULL;
    if (!llm_cpu_supports(node))
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "%sGetWorkspaceSize: %s on %s -> %s is not supported (node '%s')",
                             name, llm_op_name(node->op), llm_type_name(node->src[0] ? node->src[0]->type : node->type),
                             llm_type_name(node->type), node->name);
    aclError rc = check_device(name, node, "output");
    for (int i = 0; !rc && i < LLM_MAX_SRC; i++)
        if (node->src[i])
            rc = check_device(name, node->src[i], "input");
    if (rc)
        return rc;
    aclOpExecutor *ex = malloc(sizeof *ex);
    if (!ex)
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "%sGetWorkspaceSize: out of memory", name);
    ex->name = name;
    ex->args.dst = *node;
    ex->args.dst.view_src = NULL;
    ex->args.has_src = 0;
    for (int i = 0; i < LLM_MAX_SRC; i++) {
        if (!node->src[i])
            continue;
        ex->args.has_src |= 1u << i;
        ex->args.src[i] = *node->src[i];
        ex->args.src[i].view_src = NULL;
        memset(ex->args.src[i].src, 0, sizeof ex->args.src[i].src);
    }
    ex->args.kind = kind;
    llm_cpu_plan(node, &ex->args.plan); /* the executor picks the kernel: replays reuse the choice */
    ex->args.table = table;
    ex->args.prof = NULL;
    ex->args.trace = NULL;
    ex->workspace_size = kind == KERNEL_COMPUTE ? llm_cpu_work_size(node, n_workers) : 0;
    ex->block_dim = llm_cpu_worth_splitting(node) ? 0 : 1;
    *workspace_size = ex->workspace_size;
    *executor = ex;
    return ACL_SUCCESS;
}

aclError aclnnComputeGetWorkspaceSize(const struct llm_tensor *node, int n_workers, bool aligned_rows,
                                      uint64_t *workspace_size, aclOpExecutor **executor)
{
    *executor = NULL;
    if (node->op == LLM_OP_ROPE || node->op == LLM_OP_ROPE_QK)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclnnComputeGetWorkspaceSize: ROPE goes through aclnnRopeCache "
                             "and aclnnRotaryPositionEmbedding");
    for (int j = 0; aligned_rows && j < LLM_MAX_SRC; j++) {
        const struct llm_tensor *s = node->src[j];
        if (s && npu_layout_reads_aligned(node, j) && !npu_layout_rows_aligned(s))
            return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclnnComputeGetWorkspaceSize: %s '%s' reads '%s' with rows of "
                                 "%lld elements every %zu bytes: its ALIGN kernel needs rows padded to %d elements",
                                 llm_op_name(node->op), node->name, s->name, (long long)s->ne[0], s->nb[1],
                                 NPU_ALIGN_ELEMS);
    }
    return build("aclnnCompute", node, KERNEL_COMPUTE, NULL, n_workers, workspace_size, executor);
}

aclError aclnnRopeCacheGetWorkspaceSize(const struct llm_tensor *rope, float *table, uint64_t *workspace_size,
                                        aclOpExecutor **executor)
{
    if ((rope->op != LLM_OP_ROPE && rope->op != LLM_OP_ROPE_QK) || !table || !acl_is_device_range(table, llm_rope_table_floats(rope) * sizeof(float)))
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclnnRopeCacheGetWorkspaceSize: not a ROPE node or no device table");
    return build("aclnnRopeCache", rope, KERNEL_ROPE_CACHE, table, 1, workspace_size, executor);
}

aclError aclnnRotaryPositionEmbeddingGetWorkspaceSize(const struct llm_tensor *rope, const float *table,
                                                      uint64_t *workspace_size, aclOpExecutor **executor)
{
    if ((rope->op != LLM_OP_ROPE && rope->op != LLM_OP_ROPE_QK) || (table && !acl_is_device_range(table, llm_rope_table_floats(rope) * sizeof(float))))
        return acl_set_error(ACL_ERROR_INVALID_PARAM,
                             "aclnnRotaryPositionEmbeddingGetWorkspaceSize: not a ROPE node or table outside device memory");
    return build("aclnnRotaryPositionEmbedding", rope, KERNEL_ROPE_APPLY, (float *)table, 1, workspace_size, executor);
}

aclError aclnnLaunch(void *workspace, uint64_t workspace_size, aclOpExecutor *ex, aclrtStream stream)
{
    if (!ex)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclnnLaunch: null executor");
    aclError rc = ACL_SUCCESS;
    if (workspace_size < ex->workspace_size || (ex->workspace_size && !workspace))
        rc = acl_set_error(ACL_ERROR_INVALID_PARAM, "%s: workspace of %llu bytes, %llu needed", ex->name,
                           (unsigned long long)workspace_size, (unsigned long long)ex->workspace_size);
    if (!rc) {
        ex->args.wdata = workspace;
        ex->args.wsize = (size_t)workspace_size;
        rc = aclrtLaunchKernel(npu_kernel, ex->block_dim, &ex->args, sizeof ex->args, stream);
    }
    free(ex);
    return rc;
}

void aclnnDestroyExecutor(aclOpExecutor *executor)
{
    free(executor);
}

void aclnnSetObservers(aclOpExecutor *executor, struct llm_profile *prof, struct llm_trace *trace)
{
    executor->args.prof = prof;
    executor->args.trace = trace;
}
