/* llm-bench printers: llama-bench's md, csv, json, jsonl and sql layouts (field names, order,
 * quoting, number formats), with our graph fields appended after llama-bench's (sql: in a companion
 * table, so that llama-bench's table stays exactly llama-bench's). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"
#include "mpi/link.h"

enum ftype { T_STRING, T_INT, T_BOOL, T_FLOAT };

enum field {
    F_BUILD_COMMIT, F_BUILD_NUMBER, F_CPU_INFO, F_GPU_INFO, F_BACKENDS, F_MODEL_FILENAME, F_MODEL_TYPE,
    F_MODEL_SIZE, F_MODEL_N_PARAMS, F_N_BATCH, F_N_UBATCH, F_N_THREADS, F_CPU_MASK, F_CPU_STRICT, F_POLL,
    F_TYPE_K, F_TYPE_V, F_N_GPU_LAYERS, F_N_CPU_MOE, F_SPLIT_MODE, F_MAIN_GPU, F_NO_KV_OFFLOAD,
    F_FLASH_ATTN, F_DEVICES, F_TENSOR_SPLIT, F_TENSOR_BUFT_OVERRIDES, F_LOAD_MODE, F_EMBEDDINGS,
    F_NO_OP_OFFLOAD, F_NO_HOST, F_FIT_TARGET, F_FIT_MIN_CTX, F_N_PROMPT, F_N_GEN, F_N_DEPTH,
    F_TEST_TIME, F_AVG_NS, F_STDDEV_NS, F_AVG_TS, F_STDDEV_TS,
    /* ours: the A/B dimension and the ACL graph statistics */
    F_ACL_GRAPH, F_GRAPH_CAPTURES, F_GRAPH_REPLAYS, F_GRAPH_HITS, F_GRAPH_MISSES, F_GRAPH_EVICTIONS,
    F_EAGER_LAUNCHES, F_NPU_LAUNCH_US, F_OPS_REPLAYED, F_HOST_LAUNCH_US, F_HOST_MATCH_US, F_HOST_SERIAL_US, F_DEVICE_US,
    F_HOST_WAITS, F_HOST_WAITS_SHARED_CPU,
    /* the schedule's splits and copies, the MPI ranks and their layers (sql: llm_bench_splits) */
    F_N_SPLITS, F_COPY_BYTES, F_N_RANKS, F_RANKS_SPLIT,
    /* older llama-bench's use_mmap beside load_mode (sql: llm_bench_load) */
    F_USE_MMAP,
    /* operator fusion and the kernels run per token with and without it (sql: llm_bench_fusion) */
    F_OPERATOR_FUSION, F_LAUNCHES, F_LAUNCHES_UNFUSED, N_FIELDS,
    N_LLAMA_FIELDS = F_ACL_GRAPH, /* llama-bench's fields are [0, N_LLAMA_FIELDS) */
    N_EXTRA_END = F_N_SPLITS      /* llm_bench_extra's are [N_LLAMA_FIELDS, N_EXTRA_END) */
};

/* A field's name and type; the device's figures (backend.h llm_backend_stat) name the figure they
 * show, per token where the field says so. */
static const struct {
    const char *name;
    enum ftype type;
    const char *stat;
    bool per_token;
} fields[N_FIELDS] = {
    [F_BUILD_COMMIT] = { "build_commit", T_STRING }, [F_BUILD_NUMBER] = { "build_number", T_INT },
    [F_CPU_INFO] = { "cpu_info", T_STRING }, [F_GPU_INFO] = { "gpu_info", T_STRING },
    [F_BACKENDS] = { "backends", T_STRING }, [F_MODEL_FILENAME] = { "model_filename", T_STRING },
    [F_MODEL_TYPE] = { "model_type", T_STRING }, [F_MODEL_SIZE] = { "model_size", T_INT },
    [F_MODEL_N_PARAMS] = { "model_n_params", T_INT }, [F_N_BATCH] = { "n_batch", T_INT },
    [F_N_UBATCH] = { "n_ubatch", T_INT }, [F_N_THREADS] = { "n_threads", T_INT },
    [F_CPU_MASK] = { "cpu_mask", T_STRING }, [F_CPU_STRICT] = { "cpu_strict", T_BOOL },
    [F_POLL] = { "poll", T_INT }, [F_TYPE_K] = { "type_k", T_STRING }, [F_TYPE_V] = { "type_v", T_STRING },
    [F_N_GPU_LAYERS] = { "n_gpu_layers", T_INT }, [F_N_CPU_MOE] = { "n_cpu_moe", T_INT },
    [F_SPLIT_MODE] = { "split_mode", T_STRING }, [F_MAIN_GPU] = { "main_gpu", T_INT },
    [F_NO_KV_OFFLOAD] = { "no_kv_offload", T_BOOL }, [F_FLASH_ATTN] = { "flash_attn", T_INT },
    [F_DEVICES] = { "devices", T_STRING }, [F_TENSOR_SPLIT] = { "tensor_split", T_STRING },
    [F_TENSOR_BUFT_OVERRIDES] = { "tensor_buft_overrides", T_STRING },
    [F_LOAD_MODE] = { "load_mode", T_STRING }, [F_EMBEDDINGS] = { "embeddings", T_BOOL },
    [F_NO_OP_OFFLOAD] = { "no_op_offload", T_INT }, [F_NO_HOST] = { "no_host", T_BOOL },
    [F_FIT_TARGET] = { "fit_target", T_INT }, [F_FIT_MIN_CTX] = { "fit_min_ctx", T_INT },
    [F_N_PROMPT] = { "n_prompt", T_INT }, [F_N_GEN] = { "n_gen", T_INT }, [F_N_DEPTH] = { "n_depth", T_INT },
    [F_TEST_TIME] = { "test_time", T_STRING }, [F_AVG_NS] = { "avg_ns", T_INT },
    [F_STDDEV_NS] = { "stddev_ns", T_INT }, [F_AVG_TS] = { "avg_ts", T_FLOAT },
    [F_STDDEV_TS] = { "stddev_ts", T_FLOAT }, [F_ACL_GRAPH] = { "acl_graph", T_BOOL },
    [F_GRAPH_CAPTURES] = { "graph_captures", T_INT, "captures" }, [F_GRAPH_REPLAYS] = { "graph_replays", T_INT, "replays" },
    [F_GRAPH_HITS] = { "graph_hits", T_INT, "hits" }, [F_GRAPH_MISSES] = { "graph_misses", T_INT, "misses" },
    [F_GRAPH_EVICTIONS] = { "graph_evictions", T_INT, "evictions" }, [F_EAGER_LAUNCHES] = { "eager_launches", T_INT, "eager_launches" },
    [F_NPU_LAUNCH_US] = { "npu_launch_us", T_INT }, [F_OPS_REPLAYED] = { "ops_replayed", T_INT, "ops_replayed" },
    [F_HOST_LAUNCH_US] = { "host_launch_us_per_token", T_FLOAT, "host_launch_us", true },
    [F_HOST_MATCH_US] = { "host_match_us_per_token", T_FLOAT, "host_match_us", true },
    [F_HOST_SERIAL_US] = { "host_serial_us_per_token", T_FLOAT, "host_serial_us", true }, [F_DEVICE_US] = { "device_us_per_token", T_FLOAT, "device_us", true },
    [F_HOST_WAITS] = { "host_waits", T_INT, "host_waits" }, [F_HOST_WAITS_SHARED_CPU] = { "host_waits_shared_cpu", T_INT, "host_waits_shared_cpu" },
    [F_N_SPLITS] = { "n_splits", T_INT }, [F_COPY_BYTES] = { "copy_bytes_per_token", T_FLOAT },
    [F_N_RANKS] = { "n_ranks", T_INT }, [F_RANKS_SPLIT] = { "ranks_split", T_STRING },
    [F_USE_MMAP] = { "use_mmap", T_BOOL },
    [F_OPERATOR_FUSION] = { "operator_fusion", T_BOOL, "operator_fusion" },
    [F_LAUNCHES] = { "launches_per_token", T_FLOAT, "kernels_run", true },
    [F_LAUNCHES_UNFUSED] = { "launches_per_token_unfused", T_FLOAT, "kernels_run_unfused", true },
};

/* A result with its summary statistics. */
struct record {
    const struct bench_env *env;
    const struct bench_result *r;
    double *ts; /* per-sample t/s */
    uint64_t avg_ns, stddev_ns;
    double avg_ts, stddev_ts;
    bool tokens;                /* --token-times and the result has them */
    struct latency_summary lat; /* their summaries                       */
};

static int record_init(struct record *rec, const struct bench_printer *pr, const struct bench_env *env,
                       const struct bench_result *r)
{
    rec->env = env;
    rec->r = r;
    rec->tokens = pr->params->token_times && r->token_ns;
    if (bench_latency(r, &rec->lat) != 0)
        return -1;
    rec->ts = malloc((r->n_samples ? r->n_samples : 1) * sizeof *rec->ts);
    if (!rec->ts)
        return -1;
    bench_samples_ts(r, rec->ts);
    rec->avg_ns = bench_avg_ns(r->samples_ns, r->n_samples);
    rec->stddev_ns = bench_stdev_ns(r->samples_ns, r->n_samples);
    rec->avg_ts = bench_avg_ts(rec->ts, r->n_samples);
    rec->stddev_ts = bench_stdev_ts(rec->ts, r->n_samples);
    return 0;
}

static double per_token(const struct bench_result *r, double total)
{
    return r->n_tokens ? total / (double)r->n_tokens : 0.0;
}

/* llama-bench's backend names: the npu's rows run on CANN (as an Ascend's would) with the cpu
 * beside it, the others on the cpu alone. */
static const char *row_backends(const struct record *rec)
{
    return rec->r->inst.device == BENCH_DEV_NPU ? "CANN" : rec->env->backends;
}

/* A field showing one of the device's figures (0 on the cpu alone, which keeps none). */
static const char *stat_value(const struct bench_result *r, enum field f, char *buf, size_t cap)
{
    const double v = bench_stat(r, fields[f].stat);
    if (fields[f].type == T_INT || fields[f].type == T_BOOL)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%f", fields[f].per_token ? per_token(r, v) : v);
    return buf;
}

/* The value of field f as llama-bench's get_values() renders it (bools "0"/"1", floats "%f").
 * Returns a pointer to buf (64 bytes) or to a string of env/r. */
static const char *value(const struct record *rec, enum field f, char *buf)
{
    const struct bench_result *r = rec->r;
    const struct bench_instance *t = &r->inst;
    const size_t cap = 64;
    switch (f) {
    case F_BUILD_COMMIT: return rec->env->build_commit;
    case F_BUILD_NUMBER: snprintf(buf, cap, "%d", rec->env->build_number); return buf;
    case F_CPU_INFO: return rec->env->cpu_info;
    case F_GPU_INFO: return rec->env->gpu_info;
    case F_BACKENDS: return row_backends(rec);
    case F_MODEL_FILENAME: return t->model;
    case F_MODEL_TYPE: return r->model_type;
    case F_MODEL_SIZE: snprintf(buf, cap, "%" PRIu64, r->model_size); return buf;
    case F_MODEL_N_PARAMS: snprintf(buf, cap, "%" PRIu64, r->model_n_params); return buf;
    case F_N_BATCH: snprintf(buf, cap, "%d", t->n_batch); return buf;
    case F_N_UBATCH: snprintf(buf, cap, "%d", t->n_ubatch); return buf;
    case F_N_THREADS: snprintf(buf, cap, "%d", t->n_threads); return buf;
    case F_CPU_MASK: return t->cpu_mask;
    case F_CPU_STRICT: return t->cpu_strict ? "1" : "0";
    case F_POLL: snprintf(buf, cap, "%d", t->poll); return buf;
    case F_TYPE_K: return bench_kv_name(t->type_k);
    case F_TYPE_V: return bench_kv_name(t->type_v);
    case F_N_GPU_LAYERS: snprintf(buf, cap, "%d", t->n_gpu_layers); return buf;
    case F_SPLIT_MODE: return bench_sm_name(t->split_mode);
    case F_FLASH_ATTN: snprintf(buf, cap, "%d", t->flash_attn); return buf;
    case F_DEVICES: return t->devices_text;
    case F_TENSOR_SPLIT: return t->tensor_split;
    case F_TENSOR_BUFT_OVERRIDES: return t->overrides ? t->overrides : "none";
    case F_LOAD_MODE: return bench_lm_name(t->load_mode);
    case F_USE_MMAP:
        return t->load_mode == BENCH_LM_AUTO || t->load_mode == BENCH_LM_MMAP || t->load_mode == BENCH_LM_MMAP_MLOCK
                   ? "1" : "0";
    case F_NO_KV_OFFLOAD: return t->no_kv_offload ? "1" : "0";
    case F_N_CPU_MOE: snprintf(buf, cap, "%d", t->n_cpu_moe); return buf;
    case F_MAIN_GPU: snprintf(buf, cap, "%d", t->main_gpu); return buf;
    case F_EMBEDDINGS: return t->embeddings ? "1" : "0";
    case F_NO_OP_OFFLOAD: snprintf(buf, cap, "%d", t->no_op_offload); return buf;
    case F_NO_HOST: return t->no_host ? "1" : "0";
    case F_FIT_TARGET: snprintf(buf, cap, "%d", t->fit_target); return buf;
    case F_FIT_MIN_CTX: snprintf(buf, cap, "%d", t->fit_min_ctx); return buf;
    case F_N_PROMPT: snprintf(buf, cap, "%d", t->n_prompt); return buf;
    case F_N_GEN: snprintf(buf, cap, "%d", t->n_gen); return buf;
    case F_N_DEPTH: snprintf(buf, cap, "%d", t->n_depth); return buf;
    case F_TEST_TIME: return r->test_time;
    case F_AVG_NS: snprintf(buf, cap, "%" PRIu64, rec->avg_ns); return buf;
    case F_STDDEV_NS: snprintf(buf, cap, "%" PRIu64, rec->stddev_ns); return buf;
    case F_AVG_TS: snprintf(buf, cap, "%f", rec->avg_ts); return buf;
    case F_STDDEV_TS: snprintf(buf, cap, "%f", rec->stddev_ts); return buf;
    case F_ACL_GRAPH: return t->acl_graph ? "1" : "0";
    case F_NPU_LAUNCH_US: snprintf(buf, cap, "%d", t->launch_us); return buf;
    case F_GRAPH_CAPTURES: case F_GRAPH_REPLAYS: case F_GRAPH_HITS: case F_GRAPH_MISSES: case F_GRAPH_EVICTIONS:
    case F_EAGER_LAUNCHES: case F_OPS_REPLAYED: case F_HOST_LAUNCH_US: case F_HOST_MATCH_US: case F_HOST_SERIAL_US:
    case F_DEVICE_US: case F_HOST_WAITS: case F_HOST_WAITS_SHARED_CPU: case F_OPERATOR_FUSION: case F_LAUNCHES:
    case F_LAUNCHES_UNFUSED:
        return stat_value(r, f, buf, cap);
    case F_N_SPLITS: snprintf(buf, cap, "%d", r->n_splits); return buf;
    case F_COPY_BYTES: snprintf(buf, cap, "%f", r->copy_bytes_per_token); return buf;
    case F_N_RANKS: snprintf(buf, cap, "%d", r->n_ranks); return buf;
    case F_RANKS_SPLIT: return r->ranks_split;
    case N_FIELDS: break;
    }
    return "";
}

/* ---- md ---- */

enum col_kind { C_FIELD, C_MODEL, C_SIZE, C_PARAMS, C_BACKEND, C_TEST, C_TS };

struct col {
    enum col_kind kind;
    enum field f;       /* C_FIELD */
    const char *title;
    int width;          /* printf width; negative = left-aligned */
};

/* llama-bench's conditional columns between backend and test, in its order (ours after dev). */
static const struct { enum field f; const char *title; int width; } md_optional[] = {
    { F_N_GPU_LAYERS, "ngl", 3 }, { F_N_CPU_MOE, "n_cpu_moe", 10 }, { F_N_THREADS, "threads", 7 },
    { F_CPU_MASK, "cpu_mask", -10 },
    { F_CPU_STRICT, "cpu_strict", 10 }, { F_POLL, "poll", 10 }, { F_N_BATCH, "n_batch", 7 }, { F_N_UBATCH, "n_ubatch", 8 },
    { F_TYPE_K, "type_k", 6 }, { F_TYPE_V, "type_v", 6 }, { F_MAIN_GPU, "main_gpu", 10 }, { F_SPLIT_MODE, "sm", 6 },
    { F_NO_KV_OFFLOAD, "nkvo", 4 }, { F_FLASH_ATTN, "fa", 3 }, { F_DEVICES, "dev", -12 },
    { F_TENSOR_SPLIT, "ts", -12 }, { F_TENSOR_BUFT_OVERRIDES, "ot", -24 }, { F_LOAD_MODE, "lm", 10 },
    { F_EMBEDDINGS, "embd", 10 }, { F_NO_OP_OFFLOAD, "nopo", 4 }, { F_NO_HOST, "noh", 4 },
    { F_FIT_TARGET, "fitt", 10 }, { F_FIT_MIN_CTX, "fitc", 11 },
    { F_ACL_GRAPH, "acl_graph", 10 }, { F_NPU_LAUNCH_US, "launch_us", 9 },
};

static bool any_npu(const struct bench_params *p)
{
    for (int i = 0; i < p->devices.n; i++)
        if (p->devices.v[i] == BENCH_DEV_NPU)
            return true;
    return false;
}

static int md_columns(const struct bench_printer *pr, struct col *cols)
{
    int n = 0;
    cols[n++] = (struct col){ C_MODEL, 0, "model", -30 };
    cols[n++] = (struct col){ C_SIZE, 0, "size", 10 };
    cols[n++] = (struct col){ C_PARAMS, 0, "params", 10 };
    cols[n++] = (struct col){ C_BACKEND, 0, "backend", -10 };
    /* threads always, as for llama-bench's CPU backend; ngl as for its GPU ones, once a test runs
     * on the npu */
    for (size_t i = 0; i < sizeof md_optional / sizeof md_optional[0]; i++) {
        enum field f = md_optional[i].f;
        if (f == F_N_THREADS || (f == F_N_GPU_LAYERS && any_npu(pr->params)) ||
            bench_param_differs(pr->params, pr->defaults, fields[f].name))
            cols[n++] = (struct col){ C_FIELD, f, md_optional[i].title, md_optional[i].width };
    }
    if (llm_link_size(tool_job_link()) > 1) /* pipeline stages over MPI: the layers of each rank */
        cols[n++] = (struct col){ C_FIELD, F_RANKS_SPLIT, "ranks", -8 };
    cols[n++] = (struct col){ C_TEST, 0, "test", 15 };
    cols[n++] = (struct col){ C_TS, 0, "t/s", 20 };
    return n;
}

#define MD_MAX_COLS 32

static void md_header(const struct bench_printer *pr)
{
    struct col cols[MD_MAX_COLS];
    int n = md_columns(pr, cols);
    fputc('|', pr->out);
    for (int i = 0; i < n; i++)
        fprintf(pr->out, " %*s |", cols[i].width, cols[i].title);
    fputs("\n|", pr->out);
    for (int i = 0; i < n; i++) {
        int w = abs(cols[i].width);
        fputc(' ', pr->out);
        for (int k = 0; k < w - 1; k++)
            fputc('-', pr->out);
        fputs(cols[i].width > 0 ? ": |" : "- |", pr->out);
    }
    fputc('\n', pr->out);
}

static void md_test(const struct bench_printer *pr, const struct record *rec)
{
    struct col cols[MD_MAX_COLS];
    int n = md_columns(pr, cols);
    const struct bench_result *r = rec->r;
    fputc('|', pr->out);
    for (int i = 0; i < n; i++) {
        char buf[128];
        const char *v = buf;
        int w = cols[i].width;
        switch (cols[i].kind) {
        case C_MODEL: v = r->model_type; break;
        case C_SIZE:
            if (r->model_size < 1024ull * 1024 * 1024)
                snprintf(buf, sizeof buf, "%.2f MiB", (double)r->model_size / 1024.0 / 1024.0);
            else
                snprintf(buf, sizeof buf, "%.2f GiB", (double)r->model_size / 1024.0 / 1024.0 / 1024.0);
            break;
        case C_PARAMS:
            if (r->model_n_params < 1000000000ull)
                snprintf(buf, sizeof buf, "%.2f M", (double)r->model_n_params / 1e6);
            else
                snprintf(buf, sizeof buf, "%.2f B", (double)r->model_n_params / 1e9);
            break;
        case C_BACKEND: v = row_backends(rec); break;
        case C_TEST: bench_test_name(&r->inst, buf, sizeof buf); break;
        case C_TS:
            /* "±" is two bytes of UTF-8: one more byte of width keeps the column aligned */
            snprintf(buf, sizeof buf, "%.2f \u00b1 %.2f", rec->avg_ts, rec->stddev_ts);
            w += 1;
            break;
        case C_FIELD: v = value(rec, cols[i].f, buf); break;
        }
        fprintf(pr->out, " %*s |", w, v);
    }
    fputc('\n', pr->out);
}

/* ---- csv, json, jsonl, sql ---- */

static void put_csv(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void put_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

static void put_sql(FILE *out, const char *s)
{
    fputc('\'', out);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', out);
        fputc(*s, out);
    }
    fputc('\'', out);
}

static void put_json_value(FILE *out, enum field f, const char *v)
{
    switch (fields[f].type) {
    case T_STRING: put_json_string(out, v); break;
    case T_BOOL: fputs(strcmp(v, "0") ? "true" : "false", out); break;
    case T_INT: case T_FLOAT: fputs(v, out); break;
    }
}

static void put_samples(FILE *out, const struct record *rec, const char *between)
{
    fputs("\"samples_ns\": [ ", out);
    for (size_t i = 0; i < rec->r->n_samples; i++)
        fprintf(out, "%s%" PRIu64, i ? ", " : "", rec->r->samples_ns[i]);
    fprintf(out, " ],%s\"samples_ts\": [ ", between);
    /* C++ ostream's default: 6 significant digits, like %g */
    for (size_t i = 0; i < rec->r->n_samples; i++)
        fprintf(out, "%s%g", i ? ", " : "", rec->ts[i]);
    fputs(" ]", out);
}

/* --token-times in json (sep ",\n", indent "    ") and jsonl (sep ", ", indent ""): the summaries
 * that apply to the test, then token_ns, a list per repetition; each followed by sep. */
static void put_token_times(FILE *out, const struct record *rec, const char *indent, const char *sep)
{
    const struct latency_summary *l = &rec->lat;
    if (l->has_ttft)
        fprintf(out, "%s\"ttft_ms\": %f%s", indent, l->ttft_ms, sep);
    if (l->n_itl)
        fprintf(out, "%s\"itl_p50_ms\": %f%s%s\"itl_p90_ms\": %f%s%s\"itl_p99_ms\": %f%s%s\"itl_max_ms\": %f%s", indent,
                l->itl_p50_ms, sep, indent, l->itl_p90_ms, sep, indent, l->itl_p99_ms, sep, indent, l->itl_max_ms, sep);
    const size_t stride = bench_token_count(&rec->r->inst);
    fprintf(out, "%s\"token_ns\": [ ", indent);
    for (size_t r = 0; r < rec->r->n_samples; r++) {
        fputs(r ? ", [ " : "[ ", out);
        for (size_t i = 0; i < stride; i++)
            fprintf(out, "%s%" PRIu64, i ? ", " : "", rec->r->token_ns[r * stride + i]);
        fputs(" ]", out);
    }
    fprintf(out, " ]%s", sep);
}

/* ---- sql ----
 * llama_bench is llama-bench's table column for column: whichever tool creates it, both append to
 * it, and compare-llama-bench.py reads both. Our fields go to llm_bench_extra, one row per row of
 * ours, linked by llama_bench_rowid = llama_bench.rowid (llama_bench has no key, and may not get one):
 * - the sqlite3 CLI (or executescript) runs the statements in order on one connection, so right
 *   after our llama_bench INSERT last_insert_rowid() is that row's, whatever other connections do;
 * - if that INSERT failed (the CLI goes on after errors, e.g. in an older llama-bench's table that
 *   lacks a newer column), last_insert_rowid() names an earlier row: the extra row is inserted only
 *   if the named row has our test_time and avg_ns, so it is dropped, not misattached;
 * - rowids without an INTEGER PRIMARY KEY are not stable: VACUUM renumbers them after a delete
 *   (SQLite 3.40 does) and a deleted last rowid is reused. So the extra row keeps test_time and
 *   avg_ns, joins match them too (a stale link drops out instead of pairing wrong rows), and they
 *   can relink it.
 * llm_bench_extra's columns never change (CREATE TABLE IF NOT EXISTS keeps an older one, and our
 * INSERTs would fail in it, dropping the extra rows): new fields get a new table keyed the same
 * way, one of linked_tables. (A database made while n_splits .. ranks_split sat in llm_bench_extra
 * keeps working: those columns are left NULL there.) The linked tables' rows (llm_bench_splits,
 * llm_bench_load: use_mmap, llm_bench_fusion: operator fusion and the kernels run per token with
 * and without it), the --profile row (llm_bench_profile) and the --token-times rows
 * (llm_bench_tokens) are keyed the same way too.
 * By then last_insert_rowid() is llm_bench_extra's, and it moves with every row inserted, so they
 * take the link from the newest llm_bench_extra row with the test's test_time and avg_ns: the row
 * just written (none if its INSERT failed). */

/* The tables of fields after llm_bench_extra's, in field order, each linked through its row. */
static const struct {
    const char *name;
    int from, to; /* its fields [from, to) */
} linked_tables[] = {
    { "llm_bench_splits", F_N_SPLITS, F_USE_MMAP },
    { "llm_bench_load", F_USE_MMAP, F_OPERATOR_FUSION },
    { "llm_bench_fusion", F_OPERATOR_FUSION, N_FIELDS },
};

#define SQL_EXTRA_KEY_COLUMNS "  llama_bench_rowid INTEGER,\n  test_time TEXT,\n  avg_ns INTEGER,\n"

static void sql_create(FILE *out, const char *table, const char *key_columns, int from, int to)
{
    static const char *const types[] = { [T_STRING] = "TEXT", [T_INT] = "INTEGER", [T_BOOL] = "INTEGER",
                                         [T_FLOAT] = "REAL" };
    fprintf(out, "CREATE TABLE IF NOT EXISTS %s (\n%s", table, key_columns);
    for (int f = from; f < to; f++)
        fprintf(out, "  %s %s%s\n", fields[f].name, types[fields[f].type], f + 1 < to ? "," : "");
    fputs(");\n\n", out);
}

static void sql_names(FILE *out, int from, int to)
{
    for (int f = from; f < to; f++)
        fprintf(out, "%s%s", f > from ? ", " : "", fields[f].name);
}

static void sql_values(FILE *out, const struct record *rec, int from, int to)
{
    char buf[64];
    for (int f = from; f < to; f++) {
        if (f > from)
            fputs(", ", out);
        put_sql(out, value(rec, (enum field)f, buf));
    }
}

/* "test_time = .. AND avg_ns = ..": what identifies a test's rows across the tables. */
static void sql_test_key(FILE *out, const struct record *rec)
{
    char buf[64];
    fputs("test_time = ", out);
    put_sql(out, value(rec, F_TEST_TIME, buf));
    fputs(" AND avg_ns = ", out);
    put_sql(out, value(rec, F_AVG_NS, buf));
}

/* " FROM llama_bench WHERE rowid = last_insert_rowid() AND test_time = .. AND avg_ns = ..;" */
static void sql_link(FILE *out, const struct record *rec)
{
    fputs(" FROM llama_bench WHERE rowid = last_insert_rowid() AND ", out);
    sql_test_key(out, rec);
    fputs(";\n", out);
}

#define SQL_TOKENS_CREATE                                                                                    \
    "CREATE TABLE IF NOT EXISTS llm_bench_tokens (\n" SQL_EXTRA_KEY_COLUMNS                                  \
    "  repetition INTEGER,\n  token_index INTEGER,\n  ns INTEGER,\n  depth INTEGER\n);\n\n"

/* " FROM (the test's llm_bench_extra row) AS e": the link of the rows written after it (see above). */
static void sql_from_extra(FILE *out, const struct record *rec)
{
    fputs(" FROM (SELECT llama_bench_rowid, test_time, avg_ns FROM llm_bench_extra WHERE ", out);
    sql_test_key(out, rec);
    fputs(" ORDER BY rowid DESC LIMIT 1) AS e", out);
}

/* The test's row of fields [from, to) in table, keyed as its llm_bench_extra row. */
static void sql_keyed_row(FILE *out, const struct record *rec, const char *table, int from, int to)
{
    fprintf(out, "INSERT INTO %s (llama_bench_rowid, test_time, avg_ns, ", table);
    sql_names(out, from, to);
    fputs(") SELECT e.llama_bench_rowid, e.test_time, e.avg_ns, ", out);
    sql_values(out, rec, from, to);
    sql_from_extra(out, rec);
    fputs(";\n", out);
}

/* One INSERT per repetition into llm_bench_tokens. */
static void sql_tokens(FILE *out, const struct record *rec)
{
    const struct bench_result *r = rec->r;
    const size_t stride = bench_token_count(&r->inst);
    for (size_t k = 0; k < r->n_samples && stride > 0; k++) {
        fputs("INSERT INTO llm_bench_tokens (llama_bench_rowid, test_time, avg_ns, repetition, token_index, ns, "
              "depth) SELECT e.llama_bench_rowid, e.test_time, e.avg_ns, t.column1, t.column2, t.column3, "
              "t.column4", out);
        sql_from_extra(out, rec);
        fputs(", (VALUES ", out);
        for (size_t i = 0; i < stride; i++)
            fprintf(out, "%s(%zu, %zu, %" PRIu64 ", %" PRId32 ")", i ? ", " : "", k, i, r->token_ns[k * stride + i],
                    r->token_depth[k * stride + i]);
        fputs(") AS t;\n", out);
    }
}

/* llama-bench's INSERT, then ours taking the new rowid (see above); with --profile the profile's
 * JSON text too, in llm_bench_profile keyed the same way; with --token-times the tokens. */
static void sql_insert(FILE *out, const struct record *rec, bool profile)
{
    fputs("INSERT INTO llama_bench (", out);
    sql_names(out, 0, N_LLAMA_FIELDS);
    fputs(") VALUES (", out);
    sql_values(out, rec, 0, N_LLAMA_FIELDS);
    fputs(");\nINSERT INTO llm_bench_extra (llama_bench_rowid, test_time, avg_ns, ", out);
    sql_names(out, N_LLAMA_FIELDS, N_EXTRA_END);
    fputs(") SELECT rowid, test_time, avg_ns, ", out);
    sql_values(out, rec, N_LLAMA_FIELDS, N_EXTRA_END);
    sql_link(out, rec);
    for (size_t t = 0; t < sizeof linked_tables / sizeof linked_tables[0]; t++)
        sql_keyed_row(out, rec, linked_tables[t].name, linked_tables[t].from, linked_tables[t].to);
    if (profile) {
        fputs("INSERT INTO llm_bench_profile (llama_bench_rowid, test_time, avg_ns, profile) SELECT "
              "e.llama_bench_rowid, e.test_time, e.avg_ns, ", out);
        put_sql(out, rec->r->profile ? rec->r->profile : "");
        sql_from_extra(out, rec);
        fputs(";\n", out);
    }
    if (rec->tokens)
        sql_tokens(out, rec);
}

static void print_fields(const struct bench_printer *pr, const struct record *rec)
{
    FILE *out = pr->out;
    char buf[64];
    const bool profile = pr->params->profile;
    const char *prof = rec->r->profile ? rec->r->profile : "{}";
    switch (pr->fmt) {
    case BENCH_OUT_CSV:
        for (int f = 0; f < N_FIELDS; f++) {
            if (f)
                fputc(',', out);
            put_csv(out, value(rec, (enum field)f, buf));
        }
        if (profile) {
            fputc(',', out);
            put_csv(out, prof);
        }
        fputc('\n', out);
        break;
    case BENCH_OUT_JSON:
        fputs(pr->first ? "  {\n" : ",\n  {\n", out);
        for (int f = 0; f < N_FIELDS; f++) {
            fprintf(out, "    \"%s\": ", fields[f].name);
            put_json_value(out, (enum field)f, value(rec, (enum field)f, buf));
            fputs(",\n", out);
        }
        if (profile)
            fprintf(out, "    \"profile\": %s,\n", prof);
        if (rec->tokens)
            put_token_times(out, rec, "    ", ",\n");
        fputs("    ", out);
        put_samples(out, rec, "\n    ");
        fputs("\n  }", out);
        break;
    case BENCH_OUT_JSONL:
        fputc('{', out);
        for (int f = 0; f < N_FIELDS; f++) {
            fprintf(out, "\"%s\": ", fields[f].name);
            put_json_value(out, (enum field)f, value(rec, (enum field)f, buf));
            fputs(", ", out);
        }
        if (profile)
            fprintf(out, "\"profile\": %s, ", prof);
        if (rec->tokens)
            put_token_times(out, rec, "", ", ");
        put_samples(out, rec, "");
        fputs("}\n", out);
        break;
    case BENCH_OUT_SQL: sql_insert(out, rec, profile); break;
    case BENCH_OUT_MD: case BENCH_OUT_NONE:
        break;
    }
}

void bench_print_header(struct bench_printer *pr, const struct bench_env *env)
{
    (void)env;
    pr->first = true;
    switch (pr->fmt) {
    case BENCH_OUT_MD: md_header(pr); break;
    case BENCH_OUT_CSV:
        for (int f = 0; f < N_FIELDS; f++)
            fprintf(pr->out, "%s%s", f ? "," : "", fields[f].name);
        fputs(pr->params->profile ? ",profile\n" : "\n", pr->out);
        break;
    case BENCH_OUT_JSON: fputs("[\n", pr->out); break;
    case BENCH_OUT_SQL:
        sql_create(pr->out, "llama_bench", "", 0, N_LLAMA_FIELDS);
        sql_create(pr->out, "llm_bench_extra", SQL_EXTRA_KEY_COLUMNS, N_LLAMA_FIELDS, N_EXTRA_END);
        for (size_t t = 0; t < sizeof linked_tables / sizeof linked_tables[0]; t++)
            sql_create(pr->out, linked_tables[t].name, SQL_EXTRA_KEY_COLUMNS, linked_tables[t].from, linked_tables[t].to);
        if (pr->params->profile)
            fputs("CREATE TABLE IF NOT EXISTS llm_bench_profile (\n" SQL_EXTRA_KEY_COLUMNS "  profile TEXT\n);\n\n",
                  pr->out);
        if (pr->params->token_times)
            fputs(SQL_TOKENS_CREATE, pr->out);
        break;
    case BENCH_OUT_JSONL: case BENCH_OUT_NONE: break;
    }
    fflush(pr->out);
}

int bench_print_test(struct bench_printer *pr, const struct bench_env *env, const struct bench_result *r)
{
    if (pr->fmt == BENCH_OUT_NONE)
        return 0;
    struct record rec;
    if (record_init(&rec, pr, env, r) != 0)
        return -1;
    if (pr->fmt == BENCH_OUT_MD)
        md_test(pr, &rec);
    else
        print_fields(pr, &rec);
    pr->first = false;
    fflush(pr->out);
    free(rec.ts);
    return 0;
}

void bench_print_footer(struct bench_printer *pr, const struct bench_env *env)
{
    if (pr->fmt == BENCH_OUT_MD)
        fprintf(pr->out, "\nbuild: %s (%d)\n", env->build_commit, env->build_number);
    else if (pr->fmt == BENCH_OUT_JSON)
        fputs("\n]\n", pr->out);
    fflush(pr->out);
}
