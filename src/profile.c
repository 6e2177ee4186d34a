#include "profile.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph.h"
#include "ops/cpu/op_table.h"
#include "trace.h"

static const char *const phase_names[LLM_PHASE_COUNT] = { "prefill", "decode" };

const char *llm_phase_name(enum llm_phase ph)
{
    return (unsigned)ph < LLM_PHASE_COUNT ? phase_names[ph] : "?";
}

void llm_profile_host(struct llm_profile *p, const char *name, double us)
{
    int i = 0;
    while (i < p->n_host && strcmp(p->host[i].name, name))
        i++;
    if (i == LLM_PROFILE_MAX_HOST)
        return;
    if (i == p->n_host)
        p->host[p->n_host++] = (struct llm_profile_host){ .name = name };
    p->host[i].us[p->phase] += us;
}

double llm_profile_host_us(const struct llm_profile *p, enum llm_phase ph, const char *name)
{
    for (int i = 0; i < p->n_host; i++)
        if (!strcmp(p->host[i].name, name))
            return p->host[i].us[ph];
    return 0;
}

double llm_node_bytes_read(const struct llm_tensor *node)
{
    const struct llm_op_traits *t = llm_op_traits(node->op);
    if (t->bytes)
        return t->bytes(node);
    double bytes = 0;
    for (int i = 0; i < LLM_MAX_SRC; i++)
        if (node->src[i])
            bytes += (double)llm_nbytes(node->src[i]);
    return bytes;
}

double llm_node_flops(const struct llm_tensor *node)
{
    const struct llm_op_traits *t = llm_op_traits(node->op);
    return t->flops ? t->flops(node) : (double)llm_nelements(node);
}

struct llm_profile_entry *llm_profile_entry_of(struct llm_profile *p, enum llm_phase ph,
                                               const struct llm_tensor *node)
{
    int type = node->op == LLM_OP_MUL_MAT ? (int)node->src[0]->type : (int)LLM_TYPE_F32;
    return &p->op[ph][node->op][(unsigned)type < LLM_TYPE_COUNT ? type : 0];
}

void llm_profile_node(struct llm_profile *p, const struct llm_tensor *node, double us)
{
    if (!p)
        return;
    struct llm_profile_entry *e = llm_profile_entry_of(p, p->phase, node);
    e->count++;
    e->us += us;
    e->bytes += llm_node_bytes_read(node);
    e->flops += llm_node_flops(node);
}

/* printf into buf at *n, never past cap (a truncated args object is still cut at a field). */
static void append(char *buf, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
    if (*n >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *n, cap - *n, fmt, ap);
    va_end(ap);
    *n = w < 0 ? cap : *n + (size_t)w;
}

/* "name":"F32[64,8,1,1]" for the args of a node's span. */
static void shape_field(char *buf, size_t cap, size_t *n, const char *name, const struct llm_tensor *t)
{
    append(buf, cap, n, ",\"%s\":\"%s[%lld,%lld,%lld,%lld]\"", name, llm_type_name(t->type), (long long)t->ne[0],
           (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
}

void llm_observe_node(struct llm_profile *prof, struct llm_trace *trace, int tid, bool lead,
                      const struct llm_tensor *node, double t0)
{
    const double dur = llm_now_us() - t0;
    if (lead)
        llm_profile_node(prof, node, dur);
    if (!trace)
        return;
    char args[768], name[160];
    static const char *const src_names[LLM_MAX_SRC] = { "src0", "src1", "src2", "src3" };
    size_t n = 0;
    llm_trace_escape(name, sizeof name, node->name);
    append(args, sizeof args - 1, &n, "{\"op\":\"%s\",\"node\":\"%s\"", llm_op_name(node->op), name);
    shape_field(args, sizeof args - 1, &n, "dst", node);
    for (int i = 0; i < LLM_MAX_SRC; i++)
        if (node->src[i])
            shape_field(args, sizeof args - 1, &n, src_names[i], node->src[i]);
    if (n >= sizeof args - 1) /* no room for every shape: keep the op alone */
        n = (size_t)snprintf(args, sizeof args - 1, "{\"op\":\"%s\"", llm_op_name(node->op));
    memcpy(args + n, "}", 2);
    llm_trace_span(trace, tid, node->name[0] ? node->name : llm_op_name(node->op), llm_op_name(node->op), t0, dur, args);
}
