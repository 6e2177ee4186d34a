/* The npu backend (src/npu/README.md: the runtime, ACL graph mode): device memory for every buffer,
 * one stream with its device workers, aclnn launches per op, and graph mode:
 *
 *   use_graph = graph mode on && (GGML_CANN_PREFILL_USE_GRAPH || attention query length == 1)
 *   hit  -> aclmdlRIExecuteAsync of the cached instance only (no per-op host work)
 *   miss -> push a record (evicting the LRU tail), CaptureBegin(GLOBAL), launch every op (recorded,
 *           not run), CaptureEnd, ExecuteAsync
 *   eager (prefill, or graph mode off) -> launch every op; the cache is not touched.
 *
 * The workspace and the RoPE cos/sin table are device buffers sized at reserve time, so a replay
 * finds them where its capture left them. The table is filled by a device kernel at the first ROPE
 * node of each graph (and again only when a later ROPE node's parameters differ), so a replay
 * recomputes it from the positions of the token it runs: nothing host-computed is frozen. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "aclnn.h"
#include "fusion.h"
#include "graphcache/graphcache.h"
#include "launch_cost.h"
#include "layout.h"
#include "log.h"
#include "npu_backend.h"
#include "ops/cpu/cpu.h"
#include "profile.h"
#include "trace.h"

#define MAX_RETIRED 16

/* The parameters a RoPE table was filled for (positions buffer, count and every op param). */
struct rope_key {
    const void *pos;
    int64_t n_pos;
    const void *factors;
    int32_t params[LLM_MAX_OP_PARAMS];
};

/* A captured graph in the cache: the instance, and the nodes fusion absorbed in the graph it records. */
struct npu_graph {
    aclmdlRI ri;
    uint64_t fused;
};

struct npu_backend {
    aclrtStream stream;
    int n_workers;
    bool graph_mode, prefill_graph;
    bool fusion;                 /* GGML_CANN_OPERATOR_FUSION                                    */
    bool layout_align;           /* LLM_NPU_LAYOUT_ALIGN (default on): ALIGN rows enforced and made */
    char fusion_log[448];        /* the last pass summary logged, so each is said once           */
    struct llm_graph_lru *lru;
    struct npu_launch_cost cost;
    void *workspace;             /* stream-ordered: every launch uses it from offset 0          */
    size_t workspace_size;
    void *retired[MAX_RETIRED];  /* outgrown workspaces: captured graphs may still point at them */
    int n_retired;
    float *rope_table;
    size_t rope_floats;
    bool rope_valid;             /* reset per graph: the first ROPE node refills the table       */
    struct rope_key rope_key;
    struct llm_npu_stats stats;
    double last_sync_us;         /* when the previous graph was waited for; 0 before the first */
    double launch_acc_us;        /* host time inside launches (phase 2), for the profile's split */
    struct llm_profile *prof;    /* observers, NULL when off */
    struct llm_trace *trace;
};

/* What CANN runs (ggml-cann's supports_op, 3f545be): its matmul takes float weights, and Q8_0 and
 * Q4_0 ones with both operands contiguous, no K-quants, Q4_1 or Q5_x; GET_ROWS reads float and
 * Q8_0 rows; SET_ROWS writes float rows; RoPE rows are at most 896 elements. Attention reads float
 * K and V only: this npu takes no quantized KV cache (it stays in host memory, the cpu attends).
 * The rest as the cpu. */
static bool is_float(enum llm_type t)
{
    return t == LLM_TYPE_F32 || t == LLM_TYPE_F16 || t == LLM_TYPE_BF16;
}

static bool npu_supports_type(struct llm_backend *b, enum llm_type type)
{
    (void)b;
    return is_float(type) || type == LLM_TYPE_Q8_0 || type == LLM_TYPE_Q4_0;
}

static bool npu_supports_op(struct llm_backend *b, const struct llm_tensor *node)
{
    const struct llm_tensor *s0 = node->src[0];
    if (!llm_cpu_supports(node))
        return false;
    switch (node->op) {
    case LLM_OP_MUL_MAT:
    case LLM_OP_MUL_MAT_ADD: /* the same matmul */
    case LLM_OP_MUL_MAT_SWIGLU: /* two of them, on weights of one type */
        return is_float(s0->type) ||
               (npu_supports_type(b, s0->type) && llm_is_contiguous(s0) && llm_is_contiguous(node->src[1]));
    case LLM_OP_GET_ROWS:
        return is_float(s0->type) || s0->type == LLM_TYPE_Q8_0;
    case LLM_OP_SET_ROWS:
        return is_float(s0->type);
    case LLM_OP_FLASH_ATTN: /* a float cache only: a quantized one stays in host memory */
        return is_float(node->src[1]->type) && is_float(node->src[2]->type);
    case LLM_OP_ROPE:
    case LLM_OP_ROPE_QK: /* both halves have the rows of one layer's heads */
        return s0->ne[0] <= 896 && (node->op == LLM_OP_ROPE || node->src[2]->ne[0] <= 896);
    case LLM_OP_NONE: case LLM_OP_ADD: case LLM_OP_MUL: case LLM_OP_SCALE: case LLM_OP_RMS_NORM:
    case LLM_OP_SOFT_MAX: case LLM_OP_SWIGLU: case LLM_OP_SILU: case LLM_OP_CPY:
    case LLM_OP_CONT: case LLM_OP_VIEW: case LLM_OP_RESHAPE: case LLM_OP_PERMUTE: case LLM_OP_TRANSPOSE:
    case LLM_OP_CHANNEL_NORM: case LLM_OP_FUSED: case LLM_OP_ADD_RMS_NORM:
    case LLM_OP_RMS_NORM_MUL: case LLM_OP_COUNT:
        return true; /* as the cpu */
    }
    return true;
}

/* Replace buf (size *have) by a device buffer of need bytes; the old one is kept alive until the
 * backend is freed, since a captured graph may still use it. */
static int grow_device_buffer(struct npu_backend *nb, void **buf, size_t *have, size_t need, struct llm_error *err)
{
    if (need <= *have)
        return LLM_OK;
    if (*buf && nb->n_retired == MAX_RETIRED)
        return llm_fail(err, LLM_ERR_NOMEM, "npu: device buffers outgrown too often (reserve the largest graph first)");
    void *p = NULL;
    if (aclrtMalloc(&p, need, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        size_t free_bytes = 0, total = 0;
        aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total);
        return llm_fail(err, LLM_ERR_NOMEM, "cannot place %zu bytes of workspace in npu memory: %zu of %zu bytes available",
                        need, free_bytes, total);
    }
    if (*buf)
        nb->retired[nb->n_retired++] = *buf;
    *buf = p;
    *have = need;
    return LLM_OK;
}

static int npu_graph_reserve(struct llm_backend *b, const struct llm_graph *g, struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    size_t ws = 0, rope = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct llm_tensor *node = g->nodes[i];
        if (llm_op_is_noop(node->op))
            continue;
        if (!llm_cpu_supports(node))
            return llm_fail(err, LLM_ERR_UNSUPPORTED, "npu backend: op %s on %s tensors is not supported (node '%s')",
                            llm_op_name(node->op), llm_type_name(node->src[0] ? node->src[0]->type : node->type),
                            node->name);
        size_t w = llm_cpu_work_size_bound(node, nb->n_workers); /* and every smaller batch */
        ws = w > ws ? w : ws;
        if ((node->op == LLM_OP_ROPE || node->op == LLM_OP_ROPE_QK) && llm_rope_table_floats(node) > rope)
            rope = llm_rope_table_floats(node);
    }
    int rc = grow_device_buffer(nb, &nb->workspace, &nb->workspace_size, ws, err);
    size_t rope_bytes = nb->rope_floats * sizeof(float);
    if (!rc)
        rc = grow_device_buffer(nb, (void **)&nb->rope_table, &rope_bytes, rope * sizeof(float), err);
    nb->rope_floats = rope_bytes / sizeof(float);
    return rc;
}

/* Rewrite the split for the device's row layouts (LLM_NPU_LAYOUT_ALIGN) and append the pass's
 * figures to line. Returns the nodes added, or -1 when out of memory. */
static int layout_align(struct llm_graph *g, int first, int end, char *line, size_t cap)
{
    enum npu_layout *modes = malloc(((size_t)(end - first) + 1) * sizeof *modes);
    struct npu_layout_report r;
    const double t0 = llm_now_us();
    const int added = modes ? npu_layout_align(g, first, end, true, modes, &r) : -1;
    const double us = llm_now_us() - t0;
    free(modes);
    if (added >= 0) {
        const size_t n = strlen(line);
        snprintf(line + n, cap - n, "; layout align: %d CHANNEL_NORM nodes, %d by a naive pass, %zu bytes of padding, "
                 "%.0f us", r.inserted, r.naive, r.padding_bytes, us);
    }
    return added;
}

/* Fuse the split's nodes when GGML_CANN_OPERATOR_FUSION is on, then rewrite them for the layout
 * when LLM_NPU_LAYOUT_ALIGN is on (fused kernels read and write rows as the ops they replace);
 * either way say once per kind of graph (-v) how many kernels a graph launches, fused and unfused,
 * and what the layout pass did. */
static int npu_graph_optimize(struct llm_backend *b, struct llm_graph *g, int first, int end)
{
    struct npu_backend *nb = b->ctx;
    struct npu_fusion_counts c = { 0 };
    int launches = 0;
    for (int i = first; i < end; i++)
        launches += !llm_op_is_noop(g->nodes[i]->op) && llm_nelements(g->nodes[i]) > 0;
    const int absorbed = nb->fusion ? npu_fuse(g, first, end, &c) : 0;
    char line[sizeof nb->fusion_log];
    snprintf(line, sizeof line, "npu: operator fusion %s: a %d-token graph launches %d kernels, %d unfused "
             "(MUL_MAT+ADD %d, RMS_NORM+MUL %d, ADD+RMS_NORM %d, ROPE+ROPE %d), RoPE tables and layout aside",
             nb->fusion ? "on" : "off", (int)llm_graph_query_len(g), launches - (absorbed > 0 ? absorbed : 0), launches,
             c.mul_mat_add, c.rms_norm_mul, c.add_rms_norm, c.rope_qk);
    const int added = nb->layout_align ? layout_align(g, first, end, line, sizeof line) : 0;
    if (strcmp(line, nb->fusion_log) != 0) {
        llm_log(LLM_LOG_INFO, "%s", line);
        memcpy(nb->fusion_log, line, sizeof line);
    }
    return added;
}

static void rope_key_of(const struct llm_tensor *node, struct rope_key *k)
{
    const struct llm_tensor first = node->op == LLM_OP_ROPE_QK ? llm_rope_qk_part(node, 0) : *node;
    const struct llm_tensor *rope = &first;
    memset(k, 0, sizeof *k);
    k->pos = rope->src[1]->data;
    k->n_pos = rope->src[1]->ne[0];
    k->factors = rope->src[2] ? rope->src[2]->data : NULL;
    memcpy(k->params, rope->op_params, sizeof k->params);
}

/* Phase 2 of one executor: the workspace (grown outside capture only), then the launch. */
static int launch(struct npu_backend *nb, aclOpExecutor *ex, uint64_t ws, struct llm_error *err)
{
    const double t0 = llm_now_us();
    if (ws > nb->workspace_size) {
        int rc = grow_device_buffer(nb, &nb->workspace, &nb->workspace_size, ws, err);
        if (rc) {
            aclnnDestroyExecutor(ex);
            return rc;
        }
    }
    aclnnSetObservers(ex, nb->prof, nb->trace);
    aclError rc = aclnnLaunch(nb->workspace, nb->workspace_size, ex, nb->stream);
    if (rc == ACL_SUCCESS) { /* every kernel is one launch: the driver's cost, and one count */
        npu_launch_cost_pay(&nb->cost, nb->stream);
        nb->stats.eager_launches++;
    }
    nb->launch_acc_us += llm_now_us() - t0;
    ACL_CHECK(rc);
    return LLM_OK;
}

/* ROPE or ROPE_QK: refill the table when this node's key differs from the table's (the first ROPE
 * node of every graph, since the table is invalidated per graph), then rotate with it (ROPE_QK: both
 * halves in one kernel). A table larger than reserved is not grown: the rotation then computes its
 * angles per row. */
static int launch_rope(struct npu_backend *nb, const struct llm_tensor *node, struct llm_error *err)
{
    uint64_t ws;
    aclOpExecutor *ex;
    float *table = llm_rope_table_floats(node) <= nb->rope_floats ? nb->rope_table : NULL;
    struct rope_key k;
    rope_key_of(node, &k);
    if (table && (!nb->rope_valid || memcmp(&k, &nb->rope_key, sizeof k) != 0)) {
        ACL_CHECK(aclnnRopeCacheGetWorkspaceSize(node, table, &ws, &ex));
        int rc = launch(nb, ex, ws, err);
        if (rc)
            return rc;
        nb->stats.rope_tables++;
        nb->rope_key = k;
        nb->rope_valid = true;
    }
    ACL_CHECK(aclnnRotaryPositionEmbeddingGetWorkspaceSize(node, table, &ws, &ex));
    return launch(nb, ex, ws, err);
}

static int launch_node(struct npu_backend *nb, const struct llm_tensor *node, struct llm_error *err)
{
    if (node->op == LLM_OP_ROPE || node->op == LLM_OP_ROPE_QK)
        return launch_rope(nb, node, err);
    uint64_t ws;
    aclOpExecutor *ex;
    ACL_CHECK(aclnnComputeGetWorkspaceSize(node, nb->n_workers, nb->layout_align, &ws, &ex));
    nb->stats.layout_pads += node->op == LLM_OP_CHANNEL_NORM;
    return launch(nb, ex, ws, err);
}

/* Launch every computing node of g in order (recorded when the stream captures); *fused: the nodes
 * fusion absorbed in g, which an unfused graph would have launched. */
static int launch_graph(struct npu_backend *nb, const struct llm_graph *g, uint64_t *fused, struct llm_error *err)
{
    nb->rope_valid = false;
    *fused = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct llm_tensor *node = g->nodes[i];
        *fused += node->op == LLM_OP_FUSED;
        if (llm_op_is_noop(node->op) || llm_nelements(node) == 0)
            continue;
        const double t0 = llm_now_us(), in_launch = nb->launch_acc_us;
        int rc = launch_node(nb, node, err);
        const double t1 = llm_now_us();
        nb->stats.host_launch_us += t1 - t0;
        if (nb->prof) { /* executor build, then launch and the driver's cost */
            const double launching = nb->launch_acc_us - in_launch;
            llm_profile_host(nb->prof, "build", (t1 - t0) - launching);
            llm_profile_host(nb->prof, "launch", launching);
        }
        llm_trace_span(nb->trace, LLM_TRACE_HOST, llm_op_name(node->op), "launch", t0, t1 - t0, NULL);
        if (rc)
            return rc;
    }
    return LLM_OK;
}

/* Capture g into entry (a miss, or an entry whose earlier capture failed). */
static int capture(struct npu_backend *nb, const struct llm_graph *g, struct llm_graph_entry *entry,
                   struct llm_error *err)
{
    double t0 = llm_now_us();
    ACL_CHECK(aclmdlRICaptureBegin(nb->stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    llm_trace_span(nb->trace, LLM_TRACE_HOST, "aclmdlRICaptureBegin", "graph", t0, llm_now_us() - t0, NULL);
    struct npu_graph *cg = calloc(1, sizeof *cg);
    if (!cg)
        return llm_fail(err, LLM_ERR_NOMEM, "npu: out of memory for a graph record");
    int rc = launch_graph(nb, g, &cg->fused, err);
    aclmdlRI ri = NULL;
    t0 = llm_now_us();
    aclError end = aclmdlRICaptureEnd(nb->stream, &ri);
    llm_trace_span(nb->trace, LLM_TRACE_HOST, "aclmdlRICaptureEnd", "graph", t0, llm_now_us() - t0, NULL);
    if (rc || end != ACL_SUCCESS) {
        if (ri)
            aclmdlRIDestroy(ri);
        free(cg);
        ACL_CHECK(end);
        return rc;
    }
    cg->ri = ri;
    entry->graph = cg;
    nb->stats.captures++;
    return LLM_OK;
}

static int npu_graph_compute(struct llm_backend *b, struct llm_graph *g, struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    if (nb->last_sync_us > 0)
        nb->stats.host_serial_us += llm_now_us() - nb->last_sync_us;
    bool use_graph = nb->graph_mode && (nb->prefill_graph || llm_graph_query_len(g) <= 1);
    if (!use_graph) {
        nb->stats.eager_graphs++;
        const uint64_t before = nb->stats.eager_launches;
        uint64_t fused;
        int rc = launch_graph(nb, g, &fused, err);
        nb->stats.kernels_run += nb->stats.eager_launches - before;
        nb->stats.kernels_run_unfused += nb->stats.eager_launches - before + fused;
        return rc;
    }
    double t0 = llm_now_us();
    const uint64_t evictions = llm_graph_lru_evictions(nb->lru);
    struct llm_graph_entry *entry = llm_graph_lru_find(nb->lru, g);
    if (entry) {
        nb->stats.hits++;
    } else {
        nb->stats.misses++;
        entry = llm_graph_lru_push(nb->lru, g);
        if (!entry)
            return llm_fail(err, LLM_ERR_NOMEM, "npu: out of memory for a graph record");
    }
    double t1 = llm_now_us();
    nb->stats.host_match_us += t1 - t0;
    if (nb->prof)
        llm_profile_host(nb->prof, "match", t1 - t0);
    llm_trace_span(nb->trace, LLM_TRACE_HOST, "graph match", "graph", t0, t1 - t0, NULL);
    if (llm_graph_lru_evictions(nb->lru) != evictions)
        llm_trace_instant(nb->trace, LLM_TRACE_HOST, "cache eviction", "graph", t1, NULL);
    llm_trace_instant(nb->trace, LLM_TRACE_HOST, entry->graph ? "cache hit" : "cache miss", "graph", t1, NULL);
    if (!entry->graph) {
        int rc = capture(nb, g, entry, err);
        if (rc)
            return rc;
    }
    const struct npu_graph *cg = entry->graph;
    t0 = llm_now_us();
    ACL_CHECK(aclmdlRIExecuteAsync(cg->ri, nb->stream));
    t1 = llm_now_us();
    nb->stats.host_launch_us += t1 - t0;
    if (nb->prof)
        llm_profile_host(nb->prof, "replay", t1 - t0);
    llm_trace_span(nb->trace, LLM_TRACE_HOST, "aclmdlRIExecuteAsync", "graph", t0, t1 - t0, NULL);
    nb->stats.replays++;
    const uint64_t ops = aclmdlRITaskCount(cg->ri);
    nb->stats.ops_replayed += ops;
    nb->stats.kernels_run += ops;
    nb->stats.kernels_run_unfused += ops + cg->fused;
    return LLM_OK;
}

static void npu_synchronize(struct llm_backend *b)
{
    struct npu_backend *nb = b->ctx;
    const double t0 = llm_now_us();
    aclrtSynchronizeStream(nb->stream);
    nb->last_sync_us = llm_now_us();
    llm_trace_span(nb->trace, LLM_TRACE_HOST, "aclrtSynchronizeStream", "sync", t0, nb->last_sync_us - t0, NULL);
}

static void *npu_mem_alloc(struct llm_backend *b, size_t size)
{
    (void)b;
    void *p = NULL;
    return aclrtMalloc(&p, size ? size : 1, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS ? p : NULL;
}

static void npu_memory(struct llm_backend *b, size_t *free_bytes, size_t *total_bytes)
{
    (void)b;
    aclrtGetMemInfo(ACL_HBM_MEM, free_bytes, total_bytes);
}

static void npu_mem_free(struct llm_backend *b, void *ptr)
{
    (void)b;
    aclrtFree(ptr);
}

/* The copies wait for the stream first: they are ordered after the work already submitted. */
static int npu_tensor_set(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t offset, size_t size,
                          struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    ACL_CHECK(aclrtSynchronizeStream(nb->stream));
    ACL_CHECK(aclrtMemcpy((char *)t->data + offset, size, data, size, ACL_MEMCPY_HOST_TO_DEVICE));
    return LLM_OK;
}

/* Host to device on the stream, before the kernels launched after it (the inputs of a split). */
static int npu_tensor_set_async(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t size,
                                struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    ACL_CHECK(aclrtMemcpyAsync(t->data, size, data, size, ACL_MEMCPY_HOST_TO_DEVICE, nb->stream));
    return LLM_OK;
}

/* Device to host on the stream, after the kernels launched before it (the outputs of a split). */
static int npu_tensor_get_async(struct llm_backend *b, const struct llm_tensor *t, void *data, size_t size,
                                struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    ACL_CHECK(aclrtMemcpyAsync(data, size, t->data, size, ACL_MEMCPY_DEVICE_TO_HOST, nb->stream));
    return LLM_OK;
}

static int npu_tensor_get(struct llm_backend *b, const struct llm_tensor *t, void *data, size_t offset,
                          size_t size, struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    ACL_CHECK(aclrtSynchronizeStream(nb->stream));
    ACL_CHECK(aclrtMemcpy(data, size, (const char *)t->data + offset, size, ACL_MEMCPY_DEVICE_TO_HOST));
    return LLM_OK;
}

static int npu_tensor_memset(struct llm_backend *b, struct llm_tensor *t, int value, size_t offset, size_t size,
                             struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    ACL_CHECK(aclrtSynchronizeStream(nb->stream));
    ACL_CHECK(aclrtMemset((char *)t->data + offset, size, value, size));
    return LLM_OK;
}

static int npu_tensor_copy(struct llm_backend *b, const struct llm_tensor *src, struct llm_tensor *dst,
                           struct llm_error *err)
{
    struct npu_backend *nb = b->ctx;
    const size_t n = llm_nbytes(src);
    if (n != llm_nbytes(dst))
        return llm_fail(err, LLM_ERR_ARG, "tensor copy: %zu bytes into %zu", n, llm_nbytes(dst));
    ACL_CHECK(aclrtMemcpyAsync(dst->data, n, src->data, n, ACL_MEMCPY_DEVICE_TO_DEVICE, nb->stream));
    ACL_CHECK(aclrtSynchronizeStream(nb->stream));
    return LLM_OK;
}

void llm_npu_get_stats(struct llm_backend *b, struct llm_npu_stats *out)
{
    struct npu_backend *nb = b->ctx;
    *out = nb->stats;
    out->evictions = llm_graph_lru_evictions(nb->lru);
    struct aclrtStreamStats st;
    aclrtStreamGetStats(nb->stream, &st);
    out->device_us = (double)st.device_ns / 1e3;
    /* time blocked on a full queue is the device's time, not host work */
    out->host_launch_us -= (double)st.host_blocked_ns / 1e3;
    out->host_waits = st.host_waits;
    out->host_waits_shared_cpu = st.host_waits_shared_cpu;
    out->device_kernels = st.kernels;
    out->split_kernels = st.kernels_split;
    out->device_wakeups = st.device_wakeups;
    out->host_ran_tasks = st.host_ran_tasks;
}

/* The figures by name, in the order -v prints them. */
/* The times (doubles), the kernels run, the device thread's wake-ups and the tasks the host ran read
 * per token; the other counts as totals. */
#define STAT_AS(f, per_token) { #f, offsetof(struct llm_npu_stats, f), \
    _Generic(((struct llm_npu_stats *)0)->f, double: true, default: false), per_token }
#define STAT(f) STAT_AS(f, _Generic(((struct llm_npu_stats *)0)->f, double: true, default: false))
static const struct {
    const char *name;
    size_t offset;
    bool is_double, per_token;
} stat_fields[] = {
    STAT(captures), STAT(replays), STAT(hits), STAT(misses), STAT(evictions), STAT(eager_graphs),
    STAT(eager_launches), STAT(ops_replayed), STAT(rope_tables), STAT(layout_pads), STAT(operator_fusion), STAT(host_launch_us),
    STAT(host_match_us), STAT(host_serial_us), STAT(device_us), STAT(host_waits), STAT(host_waits_shared_cpu),
    STAT_AS(kernels_run, true), STAT_AS(kernels_run_unfused, true), STAT_AS(device_kernels, true),
    STAT_AS(split_kernels, true), STAT_AS(device_wakeups, true), STAT_AS(host_ran_tasks, true),
};
#undef STAT
#undef STAT_AS
#define N_STATS ((int)(sizeof stat_fields / sizeof stat_fields[0]))
_Static_assert(N_STATS <= LLM_BACKEND_MAX_STATS, "LLM_BACKEND_MAX_STATS is too small for the npu");

static int npu_get_stats(struct llm_backend *b, struct llm_backend_stat *out, int cap)
{
    struct llm_npu_stats st;
    llm_npu_get_stats(b, &st);
    for (int i = 0; i < N_STATS && i < cap; i++) {
        const char *f = (const char *)&st + stat_fields[i].offset;
        double v;
        if (stat_fields[i].is_double)
            memcpy(&v, f, sizeof v);
        else {
            uint64_t u;
            memcpy(&u, f, sizeof u);
            v = (double)u;
        }
        out[i] = (struct llm_backend_stat){ stat_fields[i].name, v, stat_fields[i].per_token };
    }
    return N_STATS;
}

static void npu_observe(struct llm_backend *b, struct llm_profile *prof, struct llm_trace *trace)
{
    struct npu_backend *nb = b->ctx;
    aclrtSynchronizeStream(nb->stream); /* kernels already queued keep the observers they had */
    nb->prof = prof;
    nb->trace = trace;
    for (int i = 0; i < nb->n_workers; i++) {
        char name[32];
        snprintf(name, sizeof name, "npu worker %d", i);
        llm_trace_track(trace, LLM_TRACE_WORKER + i, name);
    }
}

static int64_t npu_weight_row_align(struct llm_backend *b, const struct llm_tensor *t)
{
    (void)t;
    const struct npu_backend *nb = b->ctx;
    return nb->layout_align ? NPU_ALIGN_ELEMS : 1;
}

static void destroy_ri(void *graph, void *user)
{
    (void)user;
    struct npu_graph *cg = graph;
    aclmdlRIDestroy(cg->ri);
    free(cg);
}

static void npu_free(struct llm_backend *b)
{
    struct npu_backend *nb = b->ctx;
    if (nb->stream) {
        aclrtSynchronizeStream(nb->stream);
        aclrtDestroyStream(nb->stream);
    }
    llm_graph_lru_free(nb->lru);
    if (nb->workspace)
        aclrtFree(nb->workspace);
    if (nb->rope_table)
        aclrtFree(nb->rope_table);
    for (int i = 0; i < nb->n_retired; i++)
        aclrtFree(nb->retired[i]);
    aclFinalize();
    free(nb);
    free(b);
}

static const struct llm_backend_iface npu_iface = {
    .name = "npu",
    .supports_op = npu_supports_op,
    .supports_type = npu_supports_type,
    .graph_optimize = npu_graph_optimize,
    .graph_reserve = npu_graph_reserve,
    .graph_compute = npu_graph_compute,
    .synchronize = npu_synchronize,
    .mem_alloc = npu_mem_alloc,
    .mem_free = npu_mem_free,
    .host_memory = false,
    .tensor_set = npu_tensor_set,
    .tensor_get = npu_tensor_get,
    .tensor_memset = npu_tensor_memset,
    .tensor_copy = npu_tensor_copy,
    .tensor_set_async = npu_tensor_set_async,
    .tensor_get_async = npu_tensor_get_async,
    .weight_row_align = npu_weight_row_align,
    .get_stats = npu_get_stats,
    .observe = npu_observe,
    .free = npu_free,
    .memory = npu_memory,
};

/* "execution mode is GRAPH|EAGER", once per device and mode in a process (upstream logs it once
 * per device context). */
static void log_mode(bool graph)
{
    static bool logged[2];
    if (logged[graph])
        return;
    logged[graph] = true;
    llm_log(LLM_LOG_INFO, "device 0 execution mode is %s", graph ? "GRAPH (acl graph enabled)" : "EAGER (acl graph disabled)");
}

static const struct llm_backend_option_info npu_options[] = {
    { "acl_graph", 0, 1, "graph mode: 1 on, 0 off (default: GGML_CANN_ACL_GRAPH, else on)" },
    { "launch_us", 0, 1e6, "host µs per eager launch (default: LLM_NPU_LAUNCH_US, else 0)" },
};

static int npu_init(struct npu_backend *nb, const struct llm_backend_params *p, struct llm_error *err)
{
    int rc = llm_backend_options_check(p, npu_options, (int)(sizeof npu_options / sizeof npu_options[0]), err);
    if (rc)
        return rc;
    nb->n_workers = p->n_threads;
    nb->graph_mode = llm_backend_option(p, "acl_graph", llm_env_flag("GGML_CANN_ACL_GRAPH", true)) != 0;
    nb->prefill_graph = llm_env_flag("GGML_CANN_PREFILL_USE_GRAPH", false);
    nb->fusion = llm_env_flag("GGML_CANN_OPERATOR_FUSION", false);
    nb->stats.operator_fusion = nb->fusion;
    nb->layout_align = llm_env_flag("LLM_NPU_LAYOUT_ALIGN", true);
    npu_launch_cost_init(&nb->cost, llm_backend_option(p, "launch_us", -1));
    nb->lru = llm_graph_lru_new(llm_graph_cache_capacity(getenv("GGML_CANN_GRAPH_CACHE_CAPACITY")), destroy_ri, NULL);
    if (!nb->lru)
        return llm_fail(err, LLM_ERR_NOMEM, "npu: out of memory");
    ACL_CHECK(aclrtSetDevice(0));
    ACL_CHECK(aclrtCreateStreamWithWorkers(&nb->stream, nb->n_workers));
    log_mode(nb->graph_mode);
    llm_log(LLM_LOG_INFO, "npu launch cost model: %g us of host time per eager launch, %d device workers",
            nb->cost.us, nb->n_workers);
    return LLM_OK;
}

struct llm_backend *llm_backend_npu_new(const struct llm_backend_params *p, struct llm_error *err)
{
    struct llm_backend *b = calloc(1, sizeof *b);
    struct npu_backend *nb = calloc(1, sizeof *nb);
    if (!b || !nb) {
        free(b);
        free(nb);
        llm_fail(err, LLM_ERR_NOMEM, "npu: out of memory");
        return NULL;
    }
    aclInit(NULL);
    b->iface = &npu_iface;
    b->ctx = nb;
    if (npu_init(nb, p, err) != LLM_OK) {
        npu_free(b);
        return NULL;
    }
    return b;
}
