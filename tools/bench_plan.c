/* llm-bench test plan and statistics, as llama-bench enumerates and summarises its tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct plan {
    struct bench_instance *v;
    size_t n, cap;
};

static int plan_push(struct plan *pl, const struct bench_instance *t)
{
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? pl->cap * 2 : 16;
        struct bench_instance *nv = realloc(pl->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        pl->v = nv;
        pl->cap = cap;
    }
    pl->v[pl->n++] = *t;
    return 0;
}

/* The innermost step: pp tests, tg tests, then pg tests for one set of the other parameters. */
static int push_tests(const struct bench_params *p, struct bench_instance t, struct plan *pl)
{
    for (int i = 0; i < p->n_prompt.n; i++) {
        if (p->n_prompt.v[i] == 0)
            continue;
        t.n_prompt = p->n_prompt.v[i];
        t.n_gen = 0;
        if (plan_push(pl, &t) != 0)
            return -1;
    }
    for (int i = 0; i < p->n_gen.n; i++) {
        if (p->n_gen.v[i] == 0)
            continue;
        t.n_prompt = 0;
        t.n_gen = p->n_gen.v[i];
        if (plan_push(pl, &t) != 0)
            return -1;
    }
    for (int i = 0; i + 1 < p->n_pg.n; i += 2) {
        if (p->n_pg.v[i] == 0 && p->n_pg.v[i + 1] == 0)
            continue;
        t.n_prompt = p->n_pg.v[i];
        t.n_gen = p->n_pg.v[i + 1];
        if (plan_push(pl, &t) != 0)
            return -1;
    }
    return 0;
}

/* One nesting level per list, outermost first; level k sets field k of the instance. */
enum { L_MODEL, L_FITT, L_FITC, L_NGL, L_NCMOE, L_SM, L_LM, L_MG, L_DEV, L_TS, L_OT, L_NOH, L_EMBD, L_NOPO, L_ACL, L_LAUNCH, L_BATCH,
       L_UBATCH, L_TK, L_TV, L_NKVO, L_FA, L_THREADS, L_MASK, L_STRICT, L_DEPTH, L_POLL, N_LEVELS };

static int nest(const struct bench_params *p, int level, struct bench_instance t, struct plan *pl)
{
    if (level == N_LEVELS)
        return push_tests(p, t, pl);
    const struct bench_strs *strs[N_LEVELS] = {
        [L_MODEL] = &p->model, [L_OT] = &p->overrides, [L_MASK] = &p->cpu_mask, [L_TS] = &p->tensor_split,
    };
    const char **str_fields[N_LEVELS] = {
        [L_MODEL] = &t.model, [L_OT] = &t.overrides, [L_MASK] = &t.cpu_mask, [L_TS] = &t.tensor_split,
    };
    if (strs[level]) { /* the string lists; no -ot: one pass without */
        const struct bench_strs *l = strs[level];
        for (int i = 0; i < (l->n || level != L_OT ? l->n : 1); i++) {
            *str_fields[level] = l->n ? l->v[i] : NULL;
            if (nest(p, level + 1, t, pl) != 0)
                return -1;
        }
        return 0;
    }
    const struct bench_ints *lists[N_LEVELS] = {
        [L_NGL] = &p->n_gpu_layers, [L_LM] = &p->load_mode, [L_DEV] = &p->devices, [L_ACL] = &p->acl_graph, [L_LAUNCH] = &p->launch_us,
        [L_BATCH] = &p->n_batch, [L_UBATCH] = &p->n_ubatch, [L_TK] = &p->type_k, [L_TV] = &p->type_v,
        [L_NKVO] = &p->no_kv_offload,
        [L_FA] = &p->flash_attn, [L_THREADS] = &p->n_threads, [L_DEPTH] = &p->n_depth,
        [L_STRICT] = &p->cpu_strict, [L_POLL] = &p->poll, [L_NCMOE] = &p->n_cpu_moe, [L_SM] = &p->split_mode,
        [L_MG] = &p->main_gpu, [L_NOH] = &p->no_host, [L_EMBD] = &p->embeddings, [L_NOPO] = &p->no_op_offload,
        [L_FITT] = &p->fit_target, [L_FITC] = &p->fit_min_ctx,
    };
    int *fields[N_LEVELS] = {
        [L_NGL] = &t.n_gpu_layers, [L_LM] = &t.load_mode, [L_DEV] = &t.device, [L_ACL] = &t.acl_graph, [L_LAUNCH] = &t.launch_us,
        [L_BATCH] = &t.n_batch,
        [L_UBATCH] = &t.n_ubatch, [L_TK] = &t.type_k, [L_TV] = &t.type_v, [L_NKVO] = &t.no_kv_offload,
        [L_FA] = &t.flash_attn,
        [L_THREADS] = &t.n_threads, [L_DEPTH] = &t.n_depth, [L_STRICT] = &t.cpu_strict, [L_POLL] = &t.poll,
        [L_NCMOE] = &t.n_cpu_moe, [L_SM] = &t.split_mode, [L_MG] = &t.main_gpu, [L_NOH] = &t.no_host,
        [L_EMBD] = &t.embeddings, [L_NOPO] = &t.no_op_offload, [L_FITT] = &t.fit_target, [L_FITC] = &t.fit_min_ctx,
    };
    for (int i = 0; i < lists[level]->n; i++) {
        *fields[level] = lists[level]->v[i];
        if (level == L_DEV) /* the -dev item as given, beside its device */
            t.devices_text = p->devices_text.v[i];
        if (nest(p, level + 1, t, pl) != 0)
            return -1;
    }
    return 0;
}

int bench_plan(const struct bench_params *p, struct bench_instance **out, size_t *n)
{
    struct plan pl = { 0 };
    struct bench_instance t = { 0 };
    if (nest(p, L_MODEL, t, &pl) != 0) {
        free(pl.v);
        return -1;
    }
    *out = pl.v;
    *n = pl.n;
    return 0;
}

size_t bench_token_count(const struct bench_instance *t)
{
    return (size_t)(t->n_prompt > 0) + (size_t)(t->n_gen > 0 ? t->n_gen : 0);
}

void bench_test_name(const struct bench_instance *t, char *buf, size_t cap)
{
    int len;
    if (t->n_prompt > 0 && t->n_gen == 0)
        len = snprintf(buf, cap, "pp%d", t->n_prompt);
    else if (t->n_gen > 0 && t->n_prompt == 0)
        len = snprintf(buf, cap, "tg%d", t->n_gen);
    else
        len = snprintf(buf, cap, "pp%d+tg%d", t->n_prompt, t->n_gen);
    if (t->n_depth > 0 && len >= 0 && (size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len, " @ d%d", t->n_depth);
}

uint64_t bench_avg_ns(const uint64_t *v, size_t n)
{
    if (n == 0)
        return 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    return sum / (uint64_t)n;
}

uint64_t bench_stdev_ns(const uint64_t *v, size_t n)
{
    if (n <= 1)
        return 0;
    uint64_t mean = bench_avg_ns(v, n), sq = 0, k = (uint64_t)n;
    for (size_t i = 0; i < n; i++)
        sq += v[i] * v[i];
    /* every step in uint64 as llama-bench's template does for integer samples */
    uint64_t var = sq / (k - 1) - mean * mean * k / (k - 1);
    return (uint64_t)sqrt((double)var);
}

double bench_avg_ts(const double *v, size_t n)
{
    if (n == 0)
        return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    return sum / (double)n;
}

double bench_stdev_ts(const double *v, size_t n)
{
    if (n <= 1)
        return 0;
    double mean = bench_avg_ts(v, n), sq = 0, k = (double)n;
    for (size_t i = 0; i < n; i++)
        sq += v[i] * v[i];
    return sqrt(sq / (k - 1) - mean * mean * k / (k - 1));
}

double bench_stat(const struct bench_result *r, const char *name)
{
    for (int i = 0; i < r->n_stats; i++)
        if (!strcmp(r->stats[i].name, name))
            return r->stats[i].value;
    return 0;
}

void bench_samples_ts(const struct bench_result *r, double *ts)
{
    double tokens = (double)r->inst.n_prompt + (double)r->inst.n_gen;
    for (size_t i = 0; i < r->n_samples; i++)
        ts[i] = 1e9 * tokens / (double)r->samples_ns[i];
}

int bench_latency(const struct bench_result *r, struct latency_summary *out)
{
    const struct bench_instance *t = &r->inst;
    const bool prompt = t->n_prompt > 0, pg = prompt && t->n_gen > 0;
    return latency_summarize(r->token_ns, r->token_ns ? r->n_samples : 0, bench_token_count(t), pg ? 2 : 0,
                             prompt ? 1 : 0, out);
}
