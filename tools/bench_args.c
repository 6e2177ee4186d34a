/* llm-bench command line: llama-bench's hand-rolled parser (lists, repeated flags, integer ranges,
 * its error lines), plus our -dev cpu|npu, -g/--acl-graph, --npu-launch-us, --roofline, --profile,
 * --trace and --token-times. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "bench.h"
#include "commands.h"
#include "graphcache/graphcache.h"
#include "model/kv_cache.h"
#include "npu/acl.h"
#include "thread_policy.h"

#define DEFAULT_MODEL "models/7B/ggml-model-q4_0.gguf"

static const char *const kv_names[BENCH_KV_COUNT] = {
    "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl",
};
static const char *const dev_names[] = { "auto", "cpu", "npu", "none" };
static const char *const sm_names[BENCH_SM_COUNT] = { "none", "layer", "row", "tensor" };
static const char *const lm_names[BENCH_LM_COUNT] = { "auto", "none", "mmap", "mlock", "mmap+mlock", "dio" };

const char *bench_kv_name(int kv)
{
    return kv >= 0 && kv < BENCH_KV_COUNT ? kv_names[kv] : "?";
}

int bench_kv_type(int kv)
{
    return kv >= 0 && kv < BENCH_KV_COUNT ? llm_kv_cache_type_from_name(kv_names[kv]) : -1;
}

const char *bench_sm_name(int sm)
{
    return sm >= 0 && sm < BENCH_SM_COUNT ? sm_names[sm] : "?";
}

const char *bench_lm_name(int lm)
{
    return lm >= 0 && lm < BENCH_LM_COUNT ? lm_names[lm] : "?";
}

const char *bench_dev_name(int dev)
{
    return dev >= 0 && dev < (int)(sizeof dev_names / sizeof dev_names[0]) ? dev_names[dev] : "?";
}

/* Physical cores: distinct thread_siblings masks, as llama.cpp counts its "math" cores on Linux. */
static int count_physical_cores(void)
{
    char seen[64][64];
    int n_seen = 0;
    for (int cpu = 0; cpu < 4096 && n_seen < 64; cpu++) {
        char path[128], mask[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings", cpu);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        bool ok = fgets(mask, sizeof mask, f) != NULL;
        fclose(f);
        if (!ok)
            break;
        bool dup = false;
        for (int i = 0; i < n_seen && !dup; i++)
            dup = strcmp(seen[i], mask) == 0;
        if (!dup)
            memcpy(seen[n_seen++], mask, sizeof mask);
    }
    if (n_seen > 0)
        return n_seen;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

struct bench_defaults bench_system_defaults(void)
{
    struct bench_defaults d = { .n_threads = count_physical_cores(),
                                .acl_graph = llm_env_flag("GGML_CANN_ACL_GRAPH", true) };
    const char *cost = getenv("LLM_NPU_LAUNCH_US");
    char *end;
    long us = cost ? strtol(cost, &end, 10) : 0;
    d.launch_us = cost && end != cost && !*end && us >= 0 && us <= 1000000 ? (int)us : 0;
    return d;
}

static int ints_push(struct bench_ints *l, int v)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        int *nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return 0;
}

static int ints_append(struct bench_ints *dst, const struct bench_ints *src)
{
    for (int i = 0; i < src->n; i++)
        if (ints_push(dst, src->v[i]) != 0)
            return -1;
    return 0;
}

static int strs_push(struct bench_strs *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        char **nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = cap;
    }
    char *c = strndup(s, len);
    if (!c)
        return -1;
    l->v[l->n++] = c;
    return 0;
}

void bench_params_free(struct bench_params *p)
{
    for (int i = 0; i < p->model.n; i++)
        free(p->model.v[i]);
    free(p->model.v);
    struct bench_strs *strs[] = { &p->overrides, &p->cpu_mask, &p->devices_text, &p->tensor_split };
    for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++) {
        for (int i = 0; i < strs[k]->n; i++)
            free(strs[k]->v[i]);
        free(strs[k]->v);
    }
    free(p->trace);
    free(p->ranks_split);
    struct bench_ints *lists[] = { &p->n_prompt, &p->n_gen, &p->n_pg, &p->n_depth, &p->n_batch, &p->n_ubatch,
                                   &p->type_k, &p->type_v, &p->n_threads, &p->n_gpu_layers, &p->flash_attn,
                                   &p->devices, &p->acl_graph, &p->launch_us, &p->no_kv_offload,
                                   &p->load_mode, &p->cpu_strict, &p->poll, &p->n_cpu_moe, &p->split_mode,
                                   &p->main_gpu, &p->embeddings, &p->no_op_offload, &p->no_host,
                                   &p->fit_target, &p->fit_min_ctx };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        free(lists[i]->v);
    memset(p, 0, sizeof *p);
}

/* Outcome of one value parser: OK, an "error: <what>" line before the generic one, or plain invalid. */
enum vstatus { V_OK, V_INVALID, V_NOMEM };

struct vctx {
    char *msg;
    size_t cap, len;
};

static enum vstatus fail_with(struct vctx *c, const char *what)
{
    if (c->len < c->cap)
        c->len += (size_t)snprintf(c->msg + c->len, c->cap - c->len, "error: %s\n", what);
    if (c->len > c->cap)
        c->len = c->cap;
    return V_INVALID;
}

/* std::stoi: leading blanks and a sign allowed, trailing text ignored; no digits or out of range
 * throws, and llama-bench prints the exception's text, "stoi". */
static enum vstatus parse_stoi(struct vctx *c, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return fail_with(c, "stoi");
    *out = (int)v;
    return V_OK;
}

/* [-]digits at *s (the minus only when neg); advances *s. Digits are kept as text for stoi. */
static bool scan_number(const char **s, bool neg, const char **start, size_t *len)
{
    const char *p = *s;
    *start = p;
    if (neg && *p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    while (isdigit((unsigned char)*p))
        p++;
    *len = (size_t)(p - *start);
    *s = p;
    return true;
}

static enum vstatus number_value(struct vctx *c, const char *start, size_t len, int *out)
{
    char buf[64];
    if (len >= sizeof buf)
        return fail_with(c, "stoi");
    memcpy(buf, start, len);
    buf[len] = '\0';
    return parse_stoi(c, buf, out);
}

static bool at_item_end(const char *p)
{
    return *p == ',' || *p == '\0';
}

/* Wraps like the int arithmetic of llama-bench on two's complement machines. */
static int wrap_int(long long v)
{
    return (int)(int32_t)(uint32_t)(unsigned long long)v;
}

/* Comma items of first[-last[(+|*)step]] (llama-bench's regex also takes '|' as an operator and
 * then rejects it while expanding). A step that does not advance is "invalid range"; text that no
 * item matches is "invalid range format"; first > last gives nothing. */
static enum vstatus parse_range(struct vctx *c, const char *s, bool neg, struct bench_ints *out)
{
    struct bench_ints tmp = { 0 };
    enum vstatus st = V_OK;
    const char *p = s;
    while (*p) {
        const char *fs, *ls = NULL, *ss = NULL, *q = p;
        size_t fl, ll = 0, sl = 0;
        char op = '+';
        if (!scan_number(&q, neg, &fs, &fl))
            break;
        /* longest of first-last(op)step, first-last, first that ends at ',' or the end */
        const char *r = q;
        if (*r == '-') {
            r++;
            if (scan_number(&r, neg, &ls, &ll)) {
                const char *t = r;
                if ((*t == '+' || *t == '*' || *t == '|') && (t++, scan_number(&t, false, &ss, &sl)) &&
                    at_item_end(t)) {
                    op = r[0];
                    q = t;
                } else if (at_item_end(r)) {
                    ss = NULL;
                    q = r;
                } else {
                    ls = ss = NULL;
                }
            } else {
                ls = NULL;
            }
        }
        if (!at_item_end(q))
            break;
        int first, last, step = 1;
        if ((st = number_value(c, fs, fl, &first)) != V_OK)
            goto out;
        last = first;
        if (ls && (st = number_value(c, ls, ll, &last)) != V_OK)
            goto out;
        if (ss && (st = number_value(c, ss, sl, &step)) != V_OK)
            goto out;
        for (int i = first; i <= last;) {
            if (ints_push(&tmp, i) != 0) {
                st = V_NOMEM;
                goto out;
            }
            int prev = i;
            if (op == '+') {
                i = wrap_int((long long)i + step);
            } else if (op == '*') {
                i = wrap_int((long long)i * step);
            } else {
                st = fail_with(c, "invalid range format");
                goto out;
            }
            if (i <= prev) {
                st = fail_with(c, "invalid range");
                goto out;
            }
        }
        p = *q == ',' ? q + 1 : q;
    }
    if (*p) {
        st = fail_with(c, "invalid range format");
        goto out;
    }
    if (ints_append(out, &tmp) != 0)
        st = V_NOMEM;
out:
    free(tmp.v);
    return st;
}

/* Items of a comma list as (pointer, length); a trailing empty item is dropped like getline does. */
static const char *next_item(const char *s, size_t *len)
{
    const char *e = strchr(s, ',');
    *len = e ? (size_t)(e - s) : strlen(s);
    return e ? e + 1 : NULL;
}

static bool item_is(const char *it, size_t len, const char *word)
{
    return strlen(word) == len && strncasecmp(it, word, len) == 0;
}

/* A comma list of names out of names[0..n) (case-sensitive, as llama-bench's), as their indices. */
static enum vstatus parse_names(const char *s, const char *const *names, int n, struct bench_ints *out)
{
    for (const char *it = s; it && *it;) {
        size_t len;
        const char *next = next_item(it, &len);
        int t = -1;
        for (int k = 0; k < n && t < 0; k++)
            if (strlen(names[k]) == len && strncmp(it, names[k], len) == 0)
                t = k;
        if (t < 0)
            return V_INVALID;
        if (ints_push(out, t) != 0)
            return V_NOMEM;
        it = next;
    }
    return V_OK;
}

static enum vstatus parse_fa(struct vctx *c, const char *s, struct bench_ints *out)
{
    static const char *const on[] = { "on", "enabled", "true", "1" };
    static const char *const off[] = { "off", "disabled", "false", "0" };
    static const char *const aut[] = { "auto", "-1" };
    (void)c;
    for (const char *it = s; it && *it;) {
        size_t len;
        const char *next = next_item(it, &len);
        int v = 2;
        for (int k = 0; k < 4; k++) {
            if (strlen(on[k]) == len && !strncmp(it, on[k], len))
                v = 1;
            if (strlen(off[k]) == len && !strncmp(it, off[k], len))
                v = 0;
            if (k < 2 && strlen(aut[k]) == len && !strncmp(it, aut[k], len))
                v = -1;
        }
        if (v == 2)
            return V_INVALID;
        if (ints_push(out, v) != 0)
            return V_NOMEM;
        it = next;
    }
    return V_OK;
}

/* One -dev item: devices joined by '/' (auto, cpu, npu or CANN0; none alone). */
static int dev_item(const char *it, size_t len)
{
    if (item_is(it, len, "none"))
        return BENCH_DEV_NONE;
    int d = -1;
    for (size_t k = 0; k < len;) {
        size_t part = strcspn(it + k, "/");
        part = part < len - k ? part : len - k;
        const char *w = it + k;
        int one = item_is(w, part, "npu") || item_is(w, part, "CANN0") ? BENCH_DEV_NPU
                  : item_is(w, part, "cpu")                            ? BENCH_DEV_CPU
                  : item_is(w, part, "auto")                           ? BENCH_DEV_AUTO
                                                                       : -1;
        if (one < 0)
            return -1;
        d = d == BENCH_DEV_NPU || one == BENCH_DEV_NPU ? BENCH_DEV_NPU : d == BENCH_DEV_CPU ? d : one;
        k += part + 1;
    }
    return d;
}

static enum vstatus parse_dev(struct vctx *c, const char *s, struct bench_params *p)
{
    for (const char *it = s; it && *it;) {
        size_t len;
        const char *next = next_item(it, &len);
        const int d = dev_item(it, len);
        if (d < 0) {
            char what[128];
            snprintf(what, sizeof what, "invalid device: %.*s", (int)(len > 100 ? 100 : len), it);
            return fail_with(c, what);
        }
        if (ints_push(&p->devices, d) != 0 || strs_push(&p->devices_text, it, len) != 0)
            return V_NOMEM;
        it = next;
    }
    return V_OK;
}

/* -ts items: shares joined by '/' or ';', each recorded as llama-bench does ("%.2f" up to the last
 * non-zero share, "0.00" for none). */
static enum vstatus parse_ts(const char *s, struct bench_strs *out)
{
    for (const char *it = s; it && *it;) {
        size_t len;
        const char *next = next_item(it, &len);
        char text[256] = "", *end;
        size_t used = 0, keep = 0;
        for (size_t k = 0; k <= len;) {
            size_t part = strcspn(it + k, "/;,");
            part = part < len - k ? part : len - k;
            char num[64];
            if (part == 0 || part >= sizeof num)
                return V_INVALID;
            memcpy(num, it + k, part);
            num[part] = '\0';
            const double v = strtod(num, &end);
            if (*end || !(v >= 0) || used + 16 > sizeof text)
                return V_INVALID;
            used += (size_t)snprintf(text + used, sizeof text - used, "%s%.2f", used ? "/" : "", v);
            keep = v != 0 ? used : keep;
            k += part + 1;
        }
        text[keep ? keep : 4] = '\0';
        if (strs_push(out, text, strlen(text)) != 0)
            return V_NOMEM;
        it = next;
    }
    return V_OK;
}

static enum vstatus parse_onoff(struct vctx *c, const char *s, struct bench_ints *out)
{
    static const char *const on[] = { "on", "1", "yes", "y", "enable", "true" };
    static const char *const off[] = { "off", "0", "no", "n", "disable", "false" };
    (void)c;
    for (const char *it = s; it && *it;) {
        size_t len;
        const char *next = next_item(it, &len);
        int v = -1;
        for (int k = 0; k < 6; k++) {
            if (item_is(it, len, on[k]))
                v = 1;
            if (item_is(it, len, off[k]))
                v = 0;
        }
        if (v < 0)
            return V_INVALID;
        if (ints_push(out, v) != 0)
            return V_NOMEM;
        it = next;
    }
    return V_OK;
}

/* The older -mmp 0|1 (none or mmap) and -dio 0|1 (mmap or dio) as -lm values. */
static enum vstatus parse_load_flags(struct vctx *c, const char *s, bool mmp, struct bench_ints *out)
{
    struct bench_ints flags = { 0 };
    enum vstatus st = parse_onoff(c, s, &flags);
    for (int i = 0; st == V_OK && i < flags.n; i++) {
        int m = mmp ? (flags.v[i] ? BENCH_LM_MMAP : BENCH_LM_NONE) : (flags.v[i] ? BENCH_LM_DIO : BENCH_LM_MMAP);
        st = ints_push(out, m) != 0 ? V_NOMEM : V_OK;
    }
    free(flags.v);
    return st;
}

static enum vstatus parse_pg(struct vctx *c, const char *s, struct bench_ints *out)
{
    /* exactly two items; like getline, a trailing ',' adds no third */
    const char *comma = strchr(s, ','), *extra = comma ? strchr(comma + 1, ',') : NULL;
    if (!comma || !comma[1] || (extra && extra[1]))
        return V_INVALID;
    int pp, tg;
    enum vstatus st;
    if ((st = parse_stoi(c, s, &pp)) != V_OK || (st = parse_stoi(c, comma + 1, &tg)) != V_OK)
        return st;
    return ints_push(out, pp) || ints_push(out, tg) ? V_NOMEM : V_OK;
}

static enum vstatus parse_models(const char *s, struct bench_strs *out)
{
    for (const char *it = s; it && *it;) {
        size_t len;
        const char *next = next_item(it, &len);
        if (strs_push(out, it, len) != 0)
            return V_NOMEM;
        it = next;
    }
    return V_OK;
}

/* -ot: alternatives separated by ',', each PATTERN=DEVICE items separated by ';' (the device is
 * checked when the test's context is made). */
static enum vstatus parse_overrides(const char *s, struct bench_strs *out)
{
    for (const char *it = s; it && *it;) {
        size_t len;
        const char *next = next_item(it, &len);
        for (size_t k = 0; k < len;) {
            size_t item = strcspn(it + k, ";,");
            item = item < len - k ? item : len - k;
            const char *eq = memchr(it + k, '=', item);
            if (!eq || eq == it + k || eq == it + k + item - 1)
                return V_INVALID;
            k += item + 1;
        }
        if (strs_push(out, it, len) != 0)
            return V_NOMEM;
        it = next;
    }
    return V_OK;
}

static enum vstatus parse_output(const char *s, enum bench_output *out)
{
    static const struct { const char *name; enum bench_output fmt; } fmts[] = {
        { "csv", BENCH_OUT_CSV }, { "json", BENCH_OUT_JSON }, { "jsonl", BENCH_OUT_JSONL },
        { "md", BENCH_OUT_MD }, { "sql", BENCH_OUT_SQL }, { "none", BENCH_OUT_NONE },
    };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
        if (!strcmp(s, fmts[i].name)) {
            *out = fmts[i].fmt;
            return V_OK;
        }
    return V_INVALID;
}

enum opt_kind { K_HELP, K_LIST_DEVICES, K_FLAG, K_INT, K_RANGE, K_RANGE_NEG, K_PG, K_KV, K_FA, K_DEV, K_ACL, K_BOOLS, K_MODEL,
                K_OT, K_OUTPUT, K_PATH, K_LM, K_MMP, K_DIO, K_STRS, K_NUMA, K_SM, K_TS, K_REFUSED };

struct opt {
    const char *s, *l;
    enum opt_kind kind;
    size_t off; /* the field of struct bench_params it fills */
};

#define F(field) offsetof(struct bench_params, field)
static const struct opt opts[] = {
    { "-h", "--help", K_HELP, 0 },
    { NULL, "--list-devices", K_LIST_DEVICES, 0 },
    { "-m", "--model", K_MODEL, F(model) },
    { "-p", "--n-prompt", K_RANGE, F(n_prompt) },
    { "-n", "--n-gen", K_RANGE, F(n_gen) },
    { "-pg", NULL, K_PG, F(n_pg) },
    { "-d", "--n-depth", K_RANGE, F(n_depth) },
    { "-b", "--batch-size", K_RANGE, F(n_batch) },
    { "-ub", "--ubatch-size", K_RANGE, F(n_ubatch) },
    { "-ctk", "--cache-type-k", K_KV, F(type_k) },
    { "-ctv", "--cache-type-v", K_KV, F(type_v) },
    { "-t", "--threads", K_RANGE, F(n_threads) },
    { "-ngl", "--n-gpu-layers", K_RANGE_NEG, F(n_gpu_layers) },
    { "-fa", "--flash-attn", K_FA, F(flash_attn) },
    { "-dev", "--device", K_DEV, F(devices) },
    { "-ot", "--override-tensor", K_OT, F(overrides) },
    { "-g", "--acl-graph", K_ACL, F(acl_graph) },
    { "-nkvo", "--no-kv-offload", K_BOOLS, F(no_kv_offload) },
    { NULL, "--npu-launch-us", K_RANGE, F(launch_us) },
    { "-lm", "--load-mode", K_LM, F(load_mode) },
    { "-mmp", "--mmap", K_MMP, F(load_mode) },
    { "-dio", "--direct-io", K_DIO, F(load_mode) },
    { "-C", "--cpu-mask", K_STRS, F(cpu_mask) },
    { NULL, "--cpu-strict", K_BOOLS, F(cpu_strict) },
    { NULL, "--poll", K_RANGE, F(poll) },
    { NULL, "--prio", K_INT, F(prio) },
    { NULL, "--numa", K_NUMA, F(numa) },
    { "-ncmoe", "--n-cpu-moe", K_RANGE, F(n_cpu_moe) },
    { "-sm", "--split-mode", K_SM, F(split_mode) },
    { "-mg", "--main-gpu", K_RANGE, F(main_gpu) },
    { "-ts", "--tensor-split", K_TS, F(tensor_split) },
    { "-embd", "--embeddings", K_BOOLS, F(embeddings) },
    { "-nopo", "--no-op-offload", K_BOOLS, F(no_op_offload) },
    { NULL, "--no-host", K_BOOLS, F(no_host) },
    { "-fitt", "--fit-target", K_RANGE, F(fit_target) },
    { "-fitc", "--fit-ctx", K_RANGE, F(fit_min_ctx) },
    { "-hf", "--hf-repo", K_REFUSED, 0 },
    { "-hfr", NULL, K_REFUSED, 0 },
    { "-hff", "--hf-file", K_REFUSED, 0 },
    { "-hft", "--hf-token", K_REFUSED, 0 },
    { NULL, "--offline", K_REFUSED, 0 },
    { "-rpc", "--rpc", K_REFUSED, 0 },
    { "-r", "--repetitions", K_INT, F(reps) },
    { NULL, "--delay", K_INT, F(delay) },
    { "-o", "--output", K_OUTPUT, F(output) },
    { "-oe", "--output-err", K_OUTPUT, F(output_err) },
    { "-v", "--verbose", K_FLAG, F(verbose) },
    { NULL, "--progress", K_FLAG, F(progress) },
    { NULL, "--no-warmup", K_FLAG, F(no_warmup) },
    { NULL, "--roofline", K_FLAG, F(roofline) },
    { NULL, "--profile", K_FLAG, F(profile) },
    { NULL, "--token-times", K_FLAG, F(token_times) },
    { NULL, "--trace", K_PATH, F(trace) },
    { NULL, "--ranks-split", K_PATH, F(ranks_split) },
};
#undef F

static const struct opt *find_opt(const char *arg)
{
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if ((opts[i].s && !strcmp(arg, opts[i].s)) || (opts[i].l && !strcmp(arg, opts[i].l)))
            return &opts[i];
    return NULL;
}

/* Items in the list o fills (-1 for scalar options). */
static int list_len(const struct opt *o, const struct bench_params *p)
{
    const char *field = (const char *)p + o->off;
    switch (o->kind) {
    case K_RANGE: case K_RANGE_NEG: case K_PG: case K_KV: case K_FA: case K_DEV: case K_ACL: case K_BOOLS:
    case K_LM: case K_MMP: case K_DIO:
        return ((const struct bench_ints *)field)->n;
    case K_MODEL: case K_OT: case K_STRS: case K_TS:
        return ((const struct bench_strs *)field)->n;
    case K_SM:
        return ((const struct bench_ints *)field)->n;
    default:
        return -1;
    }
}

static enum vstatus apply_value(struct vctx *c, const struct opt *o, const char *val, struct bench_params *p);

/* Parse one value; remember the first list value that adds nothing ("-p 5-1", "-p ''"). */
static enum vstatus apply(struct vctx *c, const struct opt *o, const char *arg, const char *val,
                          struct bench_params *p)
{
    int before = list_len(o, p);
    enum vstatus st = apply_value(c, o, val, p);
    if (st == V_OK && before >= 0 && list_len(o, p) == before && !p->empty[0])
        snprintf(p->empty, sizeof p->empty, "%s '%.60s'", arg, val);
    return st;
}

static enum vstatus apply_value(struct vctx *c, const struct opt *o, const char *val, struct bench_params *p)
{
    char *field = (char *)p + o->off;
    struct bench_ints *list = (struct bench_ints *)field;
    switch (o->kind) {
    case K_INT:
        return parse_stoi(c, val, (int *)field);
    case K_RANGE:
        return parse_range(c, val, false, list);
    case K_RANGE_NEG:
        return parse_range(c, val, true, list);
    case K_PG:
        return parse_pg(c, val, list);
    case K_KV:
        return parse_names(val, kv_names, BENCH_KV_COUNT, list);
    case K_FA:
        return parse_fa(c, val, list);
    case K_DEV:
        p->devices_given = true;
        return parse_dev(c, val, p);
    case K_SM:
        return parse_names(val, sm_names, BENCH_SM_COUNT, list);
    case K_TS:
        return parse_ts(val, (struct bench_strs *)field);
    case K_ACL:
        p->acl_graph_given = true;
        return parse_onoff(c, val, list);
    case K_BOOLS:
        return parse_onoff(c, val, list);
    case K_LM:
        return parse_names(val, lm_names, BENCH_LM_COUNT, list);
    case K_MMP: case K_DIO:
        return parse_load_flags(c, val, o->kind == K_MMP, list);
    case K_MODEL: case K_STRS:
        return parse_models(val, (struct bench_strs *)field);
    case K_NUMA: {
        static const char *const modes[] = { "distribute", "isolate", "numactl" };
        const char *v = *val ? val : modes[0]; /* llama-bench: an empty value is distribute */
        for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++)
            if (!strcmp(v, modes[k])) {
                snprintf((char *)field, sizeof p->numa, "%s", v);
                return V_OK;
            }
        return V_INVALID;
    }
    case K_OT:
        return parse_overrides(val, (struct bench_strs *)field);
    case K_OUTPUT:
        return parse_output(val, (enum bench_output *)field);
    case K_FLAG:
        *(bool *)field = true;
        return V_OK;
    case K_PATH: {
        char **path = (char **)field;
        free(*path);
        *path = strdup(val);
        return *path ? V_OK : V_NOMEM;
    }
    case K_HELP: case K_LIST_DEVICES: case K_REFUSED: /* handled before any value */
        break;
    }
    return V_INVALID;
}

static int default_if_empty(struct bench_ints *l, int v)
{
    return l->n == 0 ? ints_push(l, v) : 0;
}

static int fill_defaults(struct bench_params *p, const struct bench_defaults *d)
{
    if (p->model.n == 0 && strs_push(&p->model, DEFAULT_MODEL, strlen(DEFAULT_MODEL)) != 0)
        return -1;
    return default_if_empty(&p->n_prompt, 512) | default_if_empty(&p->n_gen, 128) |
           default_if_empty(&p->n_depth, 0) | default_if_empty(&p->n_batch, 2048) |
           default_if_empty(&p->n_ubatch, 512) | default_if_empty(&p->type_k, BENCH_KV_F16) |
           default_if_empty(&p->type_v, BENCH_KV_F16) | default_if_empty(&p->n_threads, d->n_threads) |
           default_if_empty(&p->n_gpu_layers, -1) | default_if_empty(&p->flash_attn, -1) |
           (p->devices.n == 0 ? default_if_empty(&p->devices, BENCH_DEV_AUTO) | strs_push(&p->devices_text, "auto", 4)
                              : 0) | default_if_empty(&p->acl_graph, d->acl_graph) |
           default_if_empty(&p->launch_us, d->launch_us) | default_if_empty(&p->no_kv_offload, 0) |
           default_if_empty(&p->load_mode, BENCH_LM_AUTO) |
           default_if_empty(&p->cpu_strict, 0) | default_if_empty(&p->poll, 50) |
           (p->cpu_mask.n == 0 ? strs_push(&p->cpu_mask, "0x0", 3) : 0) |
           (p->tensor_split.n == 0 ? strs_push(&p->tensor_split, "0.00", 4) : 0) |
           default_if_empty(&p->n_cpu_moe, 0) | default_if_empty(&p->split_mode, BENCH_SM_LAYER) |
           default_if_empty(&p->main_gpu, 0) | default_if_empty(&p->embeddings, 0) |
           default_if_empty(&p->no_op_offload, 0) | default_if_empty(&p->no_host, 0) |
           default_if_empty(&p->fit_target, 0) | default_if_empty(&p->fit_min_ctx, 0);
}

enum bench_parse_status bench_parse(int argc, char **argv, const struct bench_defaults *d,
                                    struct bench_params *p, char *msg, size_t msg_cap)
{
    memset(p, 0, sizeof *p);
    p->reps = 5;
    p->output = BENCH_OUT_MD;
    p->output_err = BENCH_OUT_NONE;
    struct vctx c = { .msg = msg, .cap = msg_cap, .len = 0 };
    if (msg_cap)
        msg[0] = '\0';
    for (int i = 1; i < argc; i++) {
        char *arg = strdup(argv[i]);
        if (!arg)
            return BENCH_PARSE_NOMEM;
        if (!strncmp(arg, "--", 2))
            for (char *q = arg + 2; *q; q++)
                if (*q == '_')
                    *q = '-';
        const struct opt *o = find_opt(arg);
        enum vstatus st = V_INVALID;
        if (o && (o->kind == K_HELP || o->kind == K_LIST_DEVICES)) {
            free(arg);
            return o->kind == K_HELP ? BENCH_PARSE_HELP : BENCH_PARSE_LIST_DEVICES;
        }
        if (o && o->kind == K_REFUSED) {
            snprintf(msg, msg_cap, "%s: this tool does not %s; pass -m FILE", argv[i],
                     strstr(o->s ? o->s : o->l, "rpc") ? "talk RPC to other machines" : "download models");
            free(arg);
            return BENCH_PARSE_REFUSED;
        }
        if (o && (o->kind == K_FLAG || ++i < argc))
            st = apply(&c, o, arg, o->kind == K_FLAG ? NULL : argv[i], p);
        if (st == V_INVALID) {
            if (c.len < c.cap)
                snprintf(msg + c.len, c.cap - c.len, "error: invalid parameter for argument: %s\n", arg);
            free(arg);
            return BENCH_PARSE_INVALID;
        }
        free(arg);
        if (st == V_NOMEM)
            return BENCH_PARSE_NOMEM;
    }
    return fill_defaults(p, d) == 0 ? BENCH_PARSE_OK : BENCH_PARSE_NOMEM;
}

/* Each value of l within [lo, hi]; else the message names opt. */
static int check_list(const struct bench_ints *l, const char *opt, long long lo, long long hi, char *msg,
                      size_t cap)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i] < lo || l->v[i] > hi) {
            if (hi == INT_MAX)
                snprintf(msg, cap, "invalid value %d for %s: must be >= %lld", l->v[i], opt, lo);
            else
                snprintf(msg, cap, "invalid value %d for %s: must be between %lld and %lld", l->v[i], opt, lo, hi);
            return -1;
        }
    return 0;
}

static int list_max(const struct bench_ints *l)
{
    int m = 0;
    for (int i = 0; i < l->n; i++)
        m = l->v[i] > m ? l->v[i] : m;
    return m;
}

int bench_validate(const struct bench_params *p, char *msg, size_t cap)
{
    if (p->empty[0]) {
        snprintf(msg, cap, "%s gives no values", p->empty);
        return -1;
    }
    if (p->reps < 1) {
        snprintf(msg, cap, "invalid value %d for -r: must be >= 1", p->reps);
        return -1;
    }
    if (p->delay < 0) {
        snprintf(msg, cap, "invalid value %d for --delay: must be >= 0", p->delay);
        return -1;
    }
    if (check_list(&p->n_prompt, "-p", 0, INT_MAX, msg, cap) || check_list(&p->n_gen, "-n", 0, INT_MAX, msg, cap) ||
        check_list(&p->n_pg, "-pg", 0, INT_MAX, msg, cap) || check_list(&p->n_depth, "-d", 0, INT_MAX, msg, cap) ||
        check_list(&p->n_batch, "-b", 1, INT_MAX, msg, cap) || check_list(&p->n_ubatch, "-ub", 1, INT_MAX, msg, cap) ||
        check_list(&p->n_threads, "-t", 1, TOOL_MAX_THREADS, msg, cap) ||
        check_list(&p->launch_us, "--npu-launch-us", 0, 1000000, msg, cap) ||
        check_list(&p->poll, "--poll", 0, 100, msg, cap))
        return -1;
    for (int i = 0; i < p->split_mode.n; i++)
        if (p->split_mode.v[i] > BENCH_SM_LAYER) {
            snprintf(msg, cap, "-sm %s splits tensors over several devices; there is one (use none or layer)",
                     bench_sm_name(p->split_mode.v[i]));
            return -1;
        }
    for (int i = 0; i < p->main_gpu.n; i++)
        if (p->main_gpu.v[i] != 0) {
            snprintf(msg, cap, "-mg %d: there is one device beside the cpu, 0", p->main_gpu.v[i]);
            return -1;
        }
    for (int i = 0; i < p->tensor_split.n; i++)
        if (strchr(p->tensor_split.v[i], '/')) {
            snprintf(msg, cap, "-ts %s: there is one device beside the cpu, it takes one share", p->tensor_split.v[i]);
            return -1;
        }
    if (p->prio < LLM_PRIO_LOW || p->prio > LLM_PRIO_REALTIME) {
        snprintf(msg, cap, "invalid value %d for --prio: must be between -1 and 3", p->prio);
        return -1;
    }
    for (int i = 0; i < p->cpu_mask.n; i++) {
        uint64_t mask[LLM_MAX_CPUS / 64];
        const char *m = p->cpu_mask.v[i];
        bool none = true;
        if (llm_cpu_mask_parse(m, mask) != 0) {
            snprintf(msg, cap, "invalid value '%.64s' for -C: not a hex cpu mask of at most %d cpus", m, LLM_MAX_CPUS);
            return -1;
        }
        for (int w = 0; w < LLM_MAX_CPUS / 64; w++)
            none &= mask[w] == 0;
        if (!none && llm_cpu_mask_usable(mask) == 0) {
            snprintf(msg, cap, "-C %.64s: none of its cpus is one this process may run on", m);
            return -1;
        }
    }
    /* a test's context holds its prompt, generation and depth */
    long long pg = 0;
    for (int i = 0; i + 1 < p->n_pg.n; i += 2)
        pg = (long long)p->n_pg.v[i] + p->n_pg.v[i + 1] > pg ? (long long)p->n_pg.v[i] + p->n_pg.v[i + 1] : pg;
    long long most = (long long)list_max(&p->n_prompt) + list_max(&p->n_gen);
    most = (pg > most ? pg : most) + list_max(&p->n_depth);
    if (most > INT_MAX) {
        snprintf(msg, cap, "-p/-n/-pg plus -d need a context of %lld tokens, more than %d", most, INT_MAX);
        return -1;
    }
    /* the cache's rules that need no model (a quantized V needs flash attention), before any test runs */
    for (int k = 0; k < p->type_k.n; k++)
        for (int v = 0; v < p->type_v.n; v++)
            for (int j = 0; j < p->flash_attn.n; j++) {
                struct llm_error err = { 0 };
                if (llm_kv_cache_check(NULL, (enum llm_type)bench_kv_type(p->type_k.v[k]),
                                       (enum llm_type)bench_kv_type(p->type_v.v[v]), p->flash_attn.v[j] != 0, &err)) {
                    snprintf(msg, cap, "%s (-ctv %s with -fa 0)", err.msg, bench_kv_name(p->type_v.v[v]));
                    return -1;
                }
            }
    return 0;
}

bool bench_param_differs(const struct bench_params *p, const struct bench_defaults *d, const char *name)
{
    static const struct { const char *name; size_t off; int def; } lists[] = {
        { "n_batch", offsetof(struct bench_params, n_batch), 2048 },
        { "n_ubatch", offsetof(struct bench_params, n_ubatch), 512 },
        { "type_k", offsetof(struct bench_params, type_k), BENCH_KV_F16 },
        { "type_v", offsetof(struct bench_params, type_v), BENCH_KV_F16 },
        { "flash_attn", offsetof(struct bench_params, flash_attn), -1 },
        { "n_gpu_layers", offsetof(struct bench_params, n_gpu_layers), -1 },
        { "no_kv_offload", offsetof(struct bench_params, no_kv_offload), 0 },
        { "load_mode", offsetof(struct bench_params, load_mode), BENCH_LM_AUTO },
        { "cpu_strict", offsetof(struct bench_params, cpu_strict), 0 },
        { "poll", offsetof(struct bench_params, poll), 50 },
        { "n_cpu_moe", offsetof(struct bench_params, n_cpu_moe), 0 },
        { "split_mode", offsetof(struct bench_params, split_mode), BENCH_SM_LAYER },
        { "main_gpu", offsetof(struct bench_params, main_gpu), 0 },
        { "embeddings", offsetof(struct bench_params, embeddings), 0 },
        { "no_op_offload", offsetof(struct bench_params, no_op_offload), 0 },
        { "no_host", offsetof(struct bench_params, no_host), 0 },
        { "fit_target", offsetof(struct bench_params, fit_target), 0 },
        { "fit_min_ctx", offsetof(struct bench_params, fit_min_ctx), 0 },
    };
    if (!strcmp(name, "n_threads"))
        return p->n_threads.n != 1 || p->n_threads.v[0] != d->n_threads;
    if (!strcmp(name, "devices"))
        return p->devices_given;
    if (!strcmp(name, "tensor_buft_overrides"))
        return p->overrides.n > 0;
    if (!strcmp(name, "tensor_split"))
        return p->tensor_split.n != 1 || strcmp(p->tensor_split.v[0], "0.00") != 0;
    if (!strcmp(name, "cpu_mask"))
        return p->cpu_mask.n != 1 || strcmp(p->cpu_mask.v[0], "0x0") != 0;
    if (!strcmp(name, "acl_graph"))
        return p->acl_graph_given;
    if (!strcmp(name, "npu_launch_us"))
        return p->launch_us.n != 1 || p->launch_us.v[0] != d->launch_us;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        if (!strcmp(name, lists[i].name)) {
            const struct bench_ints *l = (const struct bench_ints *)((const char *)p + lists[i].off);
            return l->n != 1 || l->v[0] != lists[i].def;
        }
    return false;
}

void bench_usage(FILE *out, const char *prog, const struct bench_defaults *d)
{
    fprintf(out, "usage: %s [options]\n\n", prog);
    fprintf(out, "options:\n");
    fprintf(out, "  -h, --help\n");
    fprintf(out, "  -r, --repetitions <n>                     number of times to repeat each test (default: 5)\n");
    fprintf(out, "  --delay <0...N> (seconds)                 delay between each test (default: 0)\n");
    fprintf(out, "  -o, --output <csv|json|jsonl|md|sql>      output format printed to stdout (default: md)\n");
    fprintf(out, "  -oe, --output-err <csv|json|jsonl|md|sql> output format printed to stderr (default: none)\n");
    fprintf(out, "  -v, --verbose                             verbose output (graph statistics, roofline)\n");
    fprintf(out, "  --numa <distribute|isolate|numactl>       (default: disabled; one NUMA node: no effect)\n");
    fprintf(out, "  --prio <-1|0|1|2|3>                       process/thread priority (default: 0; 2 and 3 need root)\n");
    fprintf(out, "  --progress                                print test progress indicators\n");
    fprintf(out, "  --no-warmup                               skip warmup runs before benchmarking\n");
    fprintf(out, "  --roofline                                measure memory bandwidth and FMA peak, and print\n");
    fprintf(out, "                                            each test's fraction of its bound on stderr\n");
    fprintf(out, "  --profile                                 per-op profile of each test (table on stderr, a\n"
                 "                                            `profile` field in csv/json/jsonl/sql)\n");
    fprintf(out, "  --trace <file>                            Chrome trace (Perfetto) of every op and host step\n");
    fprintf(out, "  --token-times                             per-token times (json/jsonl `token_ns`, sql table\n"
                 "                                            llm_bench_tokens), TTFT and inter-token latency\n");
    fprintf(out, "  --ranks-split <a/b/...>                   under mpirun -np K: shares of layers per rank\n"
                 "                                            (default: equal); rows add n_ranks, ranks_split\n");
    fprintf(out, "\ntest parameters:\n");
    fprintf(out, "  -m, --model <filename>                    (default: %s)\n", DEFAULT_MODEL);
    fprintf(out, "  -p, --n-prompt <n>                        (default: 512)\n");
    fprintf(out, "  -n, --n-gen <n>                           (default: 128)\n");
    fprintf(out, "  -pg <pp,tg>                               (default: )\n");
    fprintf(out, "  -d, --n-depth <n>                         (default: 0)\n");
    fprintf(out, "  -b, --batch-size <n>                      (default: 2048)\n");
    fprintf(out, "  -ub, --ubatch-size <n>                    (default: 512)\n");
    fprintf(out, "  -ctk, --cache-type-k <t>                  (default: f16; f16 or f32)\n");
    fprintf(out, "  -ctv, --cache-type-v <t>                  (default: f16; f16 or f32)\n");
    fprintf(out, "  -t, --threads <n>                         (default: %d)\n", d->n_threads);
    fprintf(out, "  -C, --cpu-mask <hex,hex>                  (default: 0x0 = no affinity)\n");
    fprintf(out, "  --cpu-strict <0|1>                        (default: 0; 1: each thread on one cpu of the mask)\n");
    fprintf(out, "  --poll <0...100>                          (default: 50; busy-wait before sleeping, 0: none)\n");
    fprintf(out, "  -ngl, --n-gpu-layers <n>                  (default: -1 = all; layers on -dev npu, from the last)\n");
    fprintf(out, "  -nkvo, --no-kv-offload <0|1>              (default: 0; 1: KV cache in host memory)\n");
    fprintf(out, "  -lm, --load-mode <auto|none|mmap|mlock|mmap+mlock|dio> (default: auto = mmap)\n");
    fprintf(out, "  -mmp, --mmap <0|1>                        (deprecated: -lm none|mmap)\n");
    fprintf(out, "  -dio, --direct-io <0|1>                   (deprecated: -lm mmap|dio)\n");
    fprintf(out, "  -fa, --flash-attn <on|off|auto>           (default: auto)\n");
    fprintf(out, "  -dev, --device <d0/d1/...>                (default: auto = cpu; cpu, npu or CANN0, none = cpu)\n");
    fprintf(out, "  -sm, --split-mode <none|layer>            (default: layer; one device: the same)\n");
    fprintf(out, "  -mg, --main-gpu <i>                       (default: 0, the only device)\n");
    fprintf(out, "  -ts, --tensor-split <ts0>                 (default: 0; one device: its one share)\n");
    fprintf(out, "  -ncmoe, --n-cpu-moe <n>                   (default: 0; no MoE model here: recorded)\n");
    fprintf(out, "  -embd, --embeddings <0|1>                 (default: 0; 1: compute embeddings, not logits)\n");
    fprintf(out, "  -nopo, --no-op-offload <0|1>              (default: 0)\n");
    fprintf(out, "  --no-host <0|1>                           (default: 0; recorded)\n");
    fprintf(out, "  -fitt, --fit-target <MiB>                 (default: 0 = off; -dev npu: the largest -ngl that\n"
                 "                                            leaves this much npu memory free, compute buffers\n"
                 "                                            included)\n");
    fprintf(out, "  -fitc, --fit-ctx <n>                      (default: 0; recorded)\n");
    fprintf(out, "  -ot, --override-tensor <pat>=<dev>;...    (default: none; dev cpu or npu)\n");
    fprintf(out, "  -g, --acl-graph <on|off>                  ACL graph mode of the npu (default: %s,\n"
                 "                                            from GGML_CANN_ACL_GRAPH, else on)\n",
            d->acl_graph ? "on" : "off");
    fprintf(out, "  --npu-launch-us <n>                       npu host microseconds per eager launch (default: %d,\n"
                 "                                            from LLM_NPU_LAUNCH_US, else 0)\n",
            d->launch_us);
    fprintf(out, "\nMultiple values can be given for each parameter by separating them with ','\n"
                 "or by specifying the parameter multiple times. Ranges can be given as\n"
                 "'first-last' or 'first-last+step' or 'first-last*mult'.\n");
}

/* The emulated npu's memory: LLM_NPU_MEMORY_MIB (aclrtGetMemInfo), all of it free before a context. */
void bench_list_devices(FILE *out)
{
    size_t free_bytes = 0, total = 0;
    aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total);
    fprintf(out, "Available devices:\n  CANN0: emulated Ascend NPU (%zu MiB, %zu MiB free)\n", total >> 20,
            free_bytes >> 20);
}
