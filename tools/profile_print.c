#include "profile_print.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

struct row {
    const char *op;
    int type; /* weight type for MUL_MAT, else -1 */
    const struct llm_profile_entry *e;
};

static int by_time(const void *a, const void *b)
{
    double x = ((const struct row *)a)->e->us, y = ((const struct row *)b)->e->us;
    return (x < y) - (x > y);
}

/* The phase's non-empty entries, most time first; returns how many (rows has room for all). */
static int phase_rows(const struct llm_profile *p, enum llm_phase ph, struct row *rows, double *total_us)
{
    int n = 0;
    *total_us = 0;
    for (int op = 0; op < LLM_OP_COUNT; op++)
        for (int t = 0; t < LLM_TYPE_COUNT; t++) {
            const struct llm_profile_entry *e = &p->op[ph][op][t];
            if (!e->count)
                continue;
            rows[n++] = (struct row){ llm_op_name((enum llm_op)op), op == LLM_OP_MUL_MAT ? t : -1, e };
            *total_us += e->us;
        }
    qsort(rows, (size_t)n, sizeof *rows, by_time);
    return n;
}

static void key_of(const struct row *r, char *buf, size_t cap)
{
    if (r->type >= 0)
        snprintf(buf, cap, "%s %s", r->op, llm_type_name((enum llm_type)r->type));
    else
        snprintf(buf, cap, "%s", r->op);
}

void profile_print_table(FILE *out, const char *prefix, const struct llm_profile *p, const char *backend,
                         const struct roofline *roof, int n_threads)
{
    static struct row rows[LLM_OP_COUNT * LLM_TYPE_COUNT];
    const double peak = roof ? roofline_peak_gflops(roof, n_threads) : 0;
    for (int ph = 0; ph < LLM_PHASE_COUNT; ph++) {
        double ops_us;
        int n = phase_rows(p, (enum llm_phase)ph, rows, &ops_us);
        const double tokens = p->tokens[ph] ? (double)p->tokens[ph] : 1.0;
        if (!n)
            continue;
        fprintf(out, "%sprofile: %s, %s: %llu tokens in %llu graphs, %.1f us of graphs (%.2f us/token), %.1f us in ops\n",
                prefix, backend, llm_phase_name((enum llm_phase)ph), (unsigned long long)p->tokens[ph],
                (unsigned long long)p->graphs[ph], p->graph_us[ph], p->graph_us[ph] / tokens, ops_us);
        fprintf(out, "%s| %-16s | %9s | %11s | %9s | %6s | %16s | %18s |\n", prefix, "op", "per token", "total us",
                "mean us", "%", roof ? "GB/s (% of bw)" : "GB/s", roof ? "GFLOP/s (% of peak)" : "GFLOP/s");
        fprintf(out, "%s|------------------|----------:|------------:|----------:|-------:|-----------------:|"
                     "-------------------:|\n", prefix);
        for (int i = 0; i < n; i++) {
            const struct llm_profile_entry *e = rows[i].e;
            char key[48], bw[32], fl[32];
            key_of(&rows[i], key, sizeof key);
            const double s = e->us > 0 ? e->us / 1e6 : 0, gbs = s > 0 ? e->bytes / s / 1e9 : 0,
                         gfl = s > 0 ? e->flops / s / 1e9 : 0;
            if (roof) {
                snprintf(bw, sizeof bw, "%.2f (%.0f%%)", gbs, roof->read_gbs > 0 ? 100 * gbs / roof->read_gbs : 0);
                snprintf(fl, sizeof fl, "%.2f (%.0f%%)", gfl, peak > 0 ? 100 * gfl / peak : 0);
            } else {
                snprintf(bw, sizeof bw, "%.2f", gbs);
                snprintf(fl, sizeof fl, "%.2f", gfl);
            }
            fprintf(out, "%s| %-16s | %9.2f | %11.1f | %9.3f | %6.1f | %16s | %18s |\n", prefix, key,
                    (double)e->count / tokens, e->us, e->us / (double)e->count, ops_us > 0 ? 100 * e->us / ops_us : 0,
                    bw, fl);
        }
        for (int h = 0; h < p->n_host; h++)
            fprintf(out, "%s%s%s %.2f us%s", h ? "" : prefix, h ? "" : "host per token: ", p->host[h].name,
                    p->host[h].us[ph] / tokens, h + 1 < p->n_host ? ", " : "\n");
    }
    if (roof)
        fprintf(out, "%smachine: read bandwidth %.2f GB/s, FP32 FMA peak %.2f GFLOP/s (%d threads)\n", prefix,
                roof->read_gbs, peak, n_threads);
}

static cJSON *phase_json(const struct llm_profile *p, enum llm_phase ph)
{
    static struct row rows[LLM_OP_COUNT * LLM_TYPE_COUNT];
    double ops_us;
    int n = phase_rows(p, ph, rows, &ops_us);
    cJSON *o = cJSON_CreateObject(), *host = cJSON_CreateObject(), *ops = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tokens", (double)p->tokens[ph]);
    cJSON_AddNumberToObject(o, "graphs", (double)p->graphs[ph]);
    cJSON_AddNumberToObject(o, "graph_us", p->graph_us[ph]);
    for (int h = 0; h < p->n_host; h++) {
        char key[40];
        snprintf(key, sizeof key, "%s_us", p->host[h].name);
        cJSON_AddNumberToObject(host, key, p->host[h].us[ph]);
    }
    cJSON_AddItemToObject(o, "host", host);
    for (int i = 0; i < n; i++) {
        char key[48];
        key_of(&rows[i], key, sizeof key);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "count", (double)rows[i].e->count);
        cJSON_AddNumberToObject(e, "us", rows[i].e->us);
        cJSON_AddNumberToObject(e, "bytes", rows[i].e->bytes);
        cJSON_AddNumberToObject(e, "flops", rows[i].e->flops);
        cJSON_AddItemToObject(ops, key, e);
    }
    cJSON_AddItemToObject(o, "ops", ops);
    return o;
}

char *profile_json(const struct llm_profile *p)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    for (int ph = 0; ph < LLM_PHASE_COUNT; ph++)
        if (p->graphs[ph])
            cJSON_AddItemToObject(root, llm_phase_name((enum llm_phase)ph), phase_json(p, (enum llm_phase)ph));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
