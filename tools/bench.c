/* llm-bench: time prompt processing and generation exactly as llama-bench does (warm-up, synthetic
 * random tokens, KV cleared between repetitions, untimed depth prefill) and print the results. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "commands.h"
#include "cpu_opts.h"
#include "latency.h"
#include "log.h"
#include "model/context.h"
#include "model/model.h"
#include "model/vocab.h"
#include "profile.h"
#include "profile_print.h"
#include "roofline.h"
#include "stats_print.h"
#include "thread_policy.h"
#include "trace.h"

/* Set by the Makefile from `git rev-parse --short HEAD` and `git rev-list --count HEAD`. */
#ifndef LLM_BUILD_COMMIT
#define LLM_BUILD_COMMIT "unknown"
#endif
#ifndef LLM_BUILD_NUMBER
#define LLM_BUILD_NUMBER 0
#endif

#define ROOFLINE_BYTES (512u << 20)
#define ROOFLINE_THREADS 2

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

enum { RUN_OK = 0, RUN_FAILED = -1, RUN_INTERRUPTED = 1 };

struct bench_state {
    const struct bench_params *p;
    struct llm_model *model;      /* kept while consecutive tests use the same file */
    const char *model_path;
    int load_mode;                /* enum bench_lm the model was loaded with */
    int32_t n_vocab, bos;
    bool add_bos;
    int32_t *tokens;              /* n_batch token buffer of the current test */
    size_t index, count;          /* for --progress */
    bool have_roofline;
    struct roofline roof;
    struct bench_printer *prs;    /* the printers; their headers wait for the first test that runs */
    int n_prs;
    const struct bench_env *env;
    bool header_done;
    struct llm_trace *trace;      /* --trace: every test's contexts write into it */
    struct llm_profile *prof;     /* --profile: the current test's, reset per test */
};

/* Headers go out once the first test has its model and context: a model that fails to load, or any
 * error before that, leaves stdout empty. */
static void print_headers(struct bench_state *s)
{
    if (s->header_done)
        return;
    for (int k = 0; k < s->n_prs; k++)
        bench_print_header(&s->prs[k], s->env);
    fflush(stdout);
    s->header_done = true;
}

/* --token-times: where one repetition's entries go. */
struct token_log {
    uint64_t *ns;     /* this repetition's bench_token_count() entries */
    int32_t *depth;   /* KV cells in use before each entry             */
    size_t i;         /* the next entry                                */
    uint64_t last;    /* when the previous entry ended                 */
};

/* One entry ends now: consecutive stamps, so the entries add up to the repetition's time. */
static void log_token(struct token_log *lg, int32_t depth)
{
    const uint64_t t = llm_now_ns();
    lg->ns[lg->i] = t - lg->last;
    lg->depth[lg->i++] = depth;
    lg->last = t;
}

/* --progress: "llama-bench: benchmark i/N: <what>[ r/R]" as llama-bench words it (r > 0). */
static void progress(const struct bench_state *s, const char *what, int r)
{
    if (!s->p->progress)
        return;
    fprintf(stderr, "llama-bench: benchmark %zu/%zu: %s", s->index + 1, s->count, what);
    if (r > 0)
        fprintf(stderr, " %d/%d", r, s->p->reps);
    fputc('\n', stderr);
}

/* "model name" of the first processor in /proc/cpuinfo, as ggml describes the CPU device. */
static void read_cpu_info(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", "");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            continue;
        v += 1 + strspn(v + 1, " \t");
        size_t n = strcspn(v, "\n");
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        snprintf(buf, cap, "%.*s", (int)n, v);
        break;
    }
    fclose(f);
}

/* llama-bench's test_prompt: n tokens in chunks of n_batch, BOS first when the vocab adds it,
 * the rest rand() % n_vocab (C rand, never seeded). */
static int test_prompt(struct bench_state *s, struct llm_context *c, int n_prompt, int n_batch,
                       struct llm_error *err)
{
    for (int done = 0; done < n_prompt;) {
        int n = n_prompt - done < n_batch ? n_prompt - done : n_batch;
        s->tokens[0] = done == 0 && s->add_bos ? s->bos : rand() % s->n_vocab;
        for (int i = 1; i < n; i++)
            s->tokens[i] = rand() % s->n_vocab;
        if (llm_decode(c, s->tokens, n, false, err) != 0)
            return RUN_FAILED;
        if (interrupted)
            return RUN_INTERRUPTED;
        done += n;
    }
    return RUN_OK;
}

/* llama-bench's test_gen: one token per decode, starting from BOS (or a random token); lg, when
 * not NULL, gets each decode step's time. */
static int test_gen(struct bench_state *s, struct llm_context *c, int n_gen, struct token_log *lg,
                    struct llm_error *err)
{
    int32_t token = s->add_bos ? s->bos : rand() % s->n_vocab;
    for (int i = 0; i < n_gen; i++) {
        const int32_t depth = lg ? llm_n_past(c) : 0;
        if (llm_decode(c, &token, 1, false, err) != 0)
            return RUN_FAILED;
        if (lg)
            log_token(lg, depth);
        if (interrupted)
            return RUN_INTERRUPTED;
        token = rand() % s->n_vocab;
    }
    return RUN_OK;
}

static int sleep_s(int seconds)
{
    struct timespec ts = { .tv_sec = seconds, .tv_nsec = 0 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !interrupted) {
    }
    return interrupted ? RUN_INTERRUPTED : RUN_OK;
}

/* The model of test t, loaded again when its file or load mode differ from the last test's. */
static int ensure_model(struct bench_state *s, const struct bench_instance *t)
{
    const char *path = t->model;
    if (s->model && !strcmp(s->model_path, path) && s->load_mode == t->load_mode)
        return RUN_OK;
    if (s->model)
        llm_model_free(s->model);
    s->model = NULL;
    struct llm_error err = { 0 };
    const uint64_t t0 = llm_now_ns();
    if (llm_model_load_mode(path, gguf_load_mode_parse(bench_lm_name(t->load_mode)), tool_job_load_threads(t->n_threads),
                            &s->model, &err) != 0) {
        tool_error("failed to load model '%s': %s", path, err.msg);
        return RUN_FAILED;
    }
    if (s->p->verbose)
        fprintf(stderr, "llm-bench: loaded %s (-lm %s%s) in %.2f ms\n", path, bench_lm_name(t->load_mode),
                s->model->file->locked ? ", locked" : "", (double)(llm_now_ns() - t0) / 1e6);
    s->model_path = path;
    s->load_mode = t->load_mode;
    int32_t n = vocab_n_tokens(s->model->vocab);
    s->n_vocab = n > 0 && (uint32_t)n < s->model->hp.n_vocab ? n : (int32_t)s->model->hp.n_vocab;
    s->bos = vocab_bos(s->model->vocab);
    s->add_bos = vocab_add_bos(s->model->vocab) && s->bos >= 0;
    return RUN_OK;
}

/* Warm-up and the timed repetitions of one test in context c; fills samples (reps values) and,
 * with --token-times, tok (reps rows of bench_token_count() entries; else tok.ns is NULL). */
static int measure(struct bench_state *s, struct llm_context *c, const struct bench_instance *t,
                   uint64_t *samples, struct token_log tok)
{
    const size_t stride = bench_token_count(t);
    struct llm_error err = { 0 };
    int rc = RUN_OK;
    if (!s->p->no_warmup) {
        if (t->n_prompt > 0) {
            progress(s, "warmup prompt run", 0);
            rc = test_prompt(s, c, t->n_prompt, t->n_batch, &err);
        }
        if (rc == RUN_OK && t->n_gen > 0) {
            progress(s, "warmup generation run", 0);
            rc = test_gen(s, c, 1, NULL, &err);
        }
    }
    for (int r = 0; rc == RUN_OK && r < s->p->reps; r++) {
        llm_kv_clear(c);
        if (t->n_depth > 0) {
            progress(s, "depth run", r + 1);
            rc = test_prompt(s, c, t->n_depth, t->n_batch, &err);
            if (rc != RUN_OK)
                break;
        }
        struct token_log lg = { .ns = tok.ns + (size_t)r * stride, .depth = tok.depth + (size_t)r * stride };
        struct token_log *plg = tok.ns ? &lg : NULL;
        const int32_t depth0 = plg ? llm_n_past(c) : 0;
        uint64_t t0 = llm_now_ns();
        lg.last = t0;
        if (t->n_prompt > 0) {
            progress(s, "prompt run", r + 1);
            rc = test_prompt(s, c, t->n_prompt, t->n_batch, &err);
            if (plg && rc == RUN_OK)
                log_token(plg, depth0);
        }
        if (rc == RUN_OK && t->n_gen > 0) {
            progress(s, "generation run", r + 1);
            rc = test_gen(s, c, t->n_gen, plg, &err);
        }
        samples[r] = llm_now_ns() - t0;
    }
    if (rc == RUN_FAILED)
        tool_error("decode failed in %s: %s", s->model_path, err.msg);
    return rc;
}

/* The context test t runs in (observers not set). */
/* The context of test t; npu_opts (2 slots, read when the context is made) holds the npu's graph
 * mode and launch cost. */
/* The pipeline stages of the test's context: how many, and the layers of each ("3/2"). */
static void record_ranks(const struct llm_context *c, struct bench_result *res)
{
    struct llm_rank_info ri[64];
    res->n_ranks = llm_context_ranks(c, ri, 64);
    size_t len = 0;
    res->ranks_split[0] = '\0';
    for (int i = 0; i < res->n_ranks && len < sizeof res->ranks_split; i++)
        len += (size_t)snprintf(res->ranks_split + len, sizeof res->ranks_split - len, "%s%d", i ? "/" : "",
                                ri[i].end - ri[i].first);
}

static struct llm_context_params test_context_params(const struct bench_instance *t, const char *ranks_split,
                                                     struct llm_backend_option npu_opts[2])
{
    struct llm_context_params cp = llm_context_default_params();
    cp.n_ctx = t->n_prompt + t->n_gen + t->n_depth;
    cp.n_batch = t->n_batch;
    cp.n_ubatch = t->n_ubatch;
    cp.n_threads = t->n_threads;
    cp.type_k = (enum llm_type)bench_kv_type(t->type_k);
    cp.type_v = (enum llm_type)bench_kv_type(t->type_v);
    cp.flash_attn = t->flash_attn != 0; /* auto: our fused attention is the default path */
    cp.device = t->device == BENCH_DEV_NPU ? LLM_DEVICE_NPU : LLM_DEVICE_CPU;
    cp.n_gpu_layers = t->n_gpu_layers;
    cp.no_kv_offload = t->no_kv_offload != 0;
    cp.no_op_offload = t->no_op_offload != 0;
    cp.embeddings = t->embeddings != 0;
    cp.fit_target_mib = t->fit_target;
    cp.tensor_overrides = t->overrides;
    npu_opts[0] = (struct llm_backend_option){ LLM_DEVICE_NPU, "acl_graph", t->acl_graph };
    npu_opts[1] = (struct llm_backend_option){ LLM_DEVICE_NPU, "launch_us", t->launch_us };
    cp.backend_options = npu_opts;
    cp.n_backend_options = 2;
    cp.link = tool_job_link();
    cp.ranks_split = ranks_split;
    return cp;
}

/* Machine warm-up, once before the first test. On the shared VMs we run on, the first few hundred
 * ms of busy work after a quiet spell run slowly in stretches (bench/README.md: the warm-up), which
 * llama-bench's single warm-up run does not absorb, and whichever test comes first (graph mode on,
 * in `-g on,off`) took all of it. So llm-bench decodes
 * 16-token rounds of the first test's model, device and threads, in a context of its own (the
 * tests' statistics stay exact), for at least WARM_MIN_NS and until three rounds in a row are
 * within 20 % of the best before them, or WARM_MAX_NS has passed (a large model's few rounds). */
#define WARM_TOKENS 16
#define WARM_MIN_NS 300000000ull
#define WARM_MAX_NS 1000000000ull

static int warm_up_machine(struct bench_state *s, const struct bench_instance *t)
{
    struct llm_backend_option npu_opts[2];
    struct llm_context_params cp = test_context_params(t, s->p->ranks_split, npu_opts);
    cp.n_ctx = WARM_TOKENS;
    struct llm_context *c = NULL;
    struct llm_error err = { 0 };
    if (llm_context_new(s->model, &cp, &c, &err) != 0) {
        tool_error("failed to create context with model '%s': %s", t->model, err.msg);
        return RUN_FAILED;
    }
    const uint64_t start = llm_now_ns();
    uint64_t best = UINT64_MAX;
    int rounds = 0, steady = 0, rc = RUN_OK;
    for (uint64_t el = 0; (steady < 3 || el < WARM_MIN_NS) && el < WARM_MAX_NS; el = llm_now_ns() - start) {
        llm_kv_clear(c);
        const uint64_t t0 = llm_now_ns();
        if ((rc = test_gen(s, c, WARM_TOKENS, NULL, &err)) != RUN_OK)
            break;
        const uint64_t dt = llm_now_ns() - t0;
        steady = best != UINT64_MAX && dt * 5 <= best * 6 ? steady + 1 : 0;
        best = dt < best ? dt : best;
        rounds++;
    }
    llm_context_free(c);
    if (rc == RUN_FAILED)
        tool_error("decode failed in %s: %s", s->model_path, err.msg);
    else if (s->p->verbose)
        fprintf(stderr, "llm-bench: machine warm-up: %d rounds of %d tokens in %.1f ms%s\n", rounds, WARM_TOKENS,
                (double)(llm_now_ns() - start) / 1e6, steady < 3 ? " (not steady yet)" : "");
    return rc;
}

/* The cpu pool and the npu's threads of test t's contexts (the warm-up's too) follow -C, --cpu-strict,
 * --poll and --prio (checked by bench_validate). */
static void set_thread_policy(const struct bench_instance *t)
{
    struct llm_thread_policy tp = llm_thread_policy_default();
    llm_cpu_mask_parse(t->cpu_mask, tp.mask);
    tp.strict = t->cpu_strict != 0;
    tp.poll = t->poll;
    tp.prio = llm_thread_policy_get()->prio;
    llm_thread_policy_set(&tp);
}

/* Run test t: model (reused when the file is the same), the machine warm-up before the first test,
 * a fresh context, measure. tok: the --token-times buffers (ns NULL without the flag). */
static int run_test(struct bench_state *s, const struct bench_instance *t, struct bench_result *res,
                    uint64_t *samples, struct token_log tok)
{
    progress(s, "starting", 0);
    set_thread_policy(t);
    if (ensure_model(s, t) != RUN_OK)
        return RUN_FAILED;
    if (s->index == 0 && !s->p->no_warmup) {
        int rc = warm_up_machine(s, t);
        if (rc != RUN_OK)
            return rc;
    }
    struct llm_backend_option npu_opts[2];
    struct llm_context_params cp = test_context_params(t, s->p->ranks_split, npu_opts);
    cp.trace = s->trace;
    if (s->prof) {
        memset(s->prof, 0, sizeof *s->prof);
        cp.profile = s->prof;
    }
    struct llm_context *c = NULL;
    struct llm_error err = { 0 };
    if (llm_context_new(s->model, &cp, &c, &err) != 0) {
        tool_error("failed to create context with model '%s': %s", t->model, err.msg);
        return RUN_FAILED;
    }
    if (s->p->verbose && t->fit_target > 0)
        fprintf(stderr, "llm-bench: -fitt %d: -ngl %d\n", t->fit_target, llm_context_n_gpu_layers(c));
    int32_t *tokens = malloc((size_t)(t->n_batch > 0 ? t->n_batch : 1) * sizeof *tokens);
    if (!tokens) {
        llm_context_free(c);
        tool_error("out of memory");
        return RUN_FAILED;
    }
    s->tokens = tokens;
    print_headers(s);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(res->test_time, sizeof res->test_time, "%Y-%m-%dT%H:%M:%SZ", &tm);
    llm_kv_clear(c);
    int rc = s->p->delay > 0 ? sleep_s(s->p->delay) : RUN_OK;
    if (rc == RUN_OK)
        rc = measure(s, c, t, samples, tok);
    res->n_stats = llm_context_stats(c, res->stats, LLM_BACKEND_MAX_STATS);
    res->n_splits = llm_context_n_splits(c);
    record_ranks(c, res);
    res->copy_bytes_per_token = llm_context_copy_bytes_per_token(c);
    llm_context_free(c);
    if (s->prof)
        res->profile = profile_json(s->prof);
    free(tokens);
    s->tokens = NULL;
    res->inst = *t;
    res->model_type = s->model->desc;
    res->model_size = s->model->n_bytes;
    res->model_n_params = s->model->n_params;
    res->samples_ns = samples;
    res->token_ns = tok.ns;
    res->token_depth = tok.depth;
    res->n_samples = s->p->reps > 0 ? (size_t)s->p->reps : 0;
    res->n_tokens = (uint64_t)res->n_samples * (uint64_t)(t->n_depth + t->n_prompt + t->n_gen) +
                    (s->p->no_warmup ? 0 : (uint64_t)t->n_prompt + (t->n_gen > 0));
    return rc;
}

/* Parameters that only multiply the matrices of the token embedding / output projection once per
 * test (pp tests compute the logits of the last token only). */
static double non_embedding_params(const struct llm_model *m)
{
    double n = (double)m->n_params;
    if (m->tok_embd)
        n -= (double)llm_nelements(m->tok_embd);
    if (m->output && m->output != m->tok_embd)
        n -= (double)llm_nelements(m->output);
    return n;
}

/* -v with --token-times: TTFT (pg tests) and the inter-token latency percentiles (tg and pg tests). */
static void print_latency(const char *name, const struct bench_result *r)
{
    struct latency_summary ls;
    if (bench_latency(r, &ls) != 0 || ls.n_itl == 0)
        return;
    fprintf(stderr, "llm-bench: %s: ", name);
    if (ls.has_ttft)
        fprintf(stderr, "TTFT %.3f ms (mean of %zu), ", ls.ttft_ms, r->n_samples);
    fprintf(stderr, "inter-token latency over %zu decode steps: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n",
            ls.n_itl, ls.itl_p50_ms, ls.itl_p90_ms, ls.itl_p99_ms, ls.itl_max_ms);
}

/* -v / --roofline lines on stderr for one finished test. */
static void print_extras(const struct bench_state *s, const struct bench_result *r)
{
    char name[64];
    bench_test_name(&r->inst, name, sizeof name);
    if (s->p->verbose) {
        const double n = r->n_tokens ? (double)r->n_tokens : 1.0;
        fprintf(stderr, "llm-bench: %s: device %s, acl_graph %s, npu launch cost %d us", name,
                bench_dev_name(r->inst.device), r->inst.acl_graph ? "on" : "off", r->inst.launch_us);
        print_backend_stats(stderr, r->stats, r->n_stats, n);
    }
    if (s->p->verbose && r->token_ns)
        print_latency(name, r);
    if (s->prof)
        profile_print_table(stderr, "llm-bench: ", s->prof, bench_dev_name(r->inst.device),
                            s->have_roofline ? &s->roof : NULL, r->inst.n_threads);
    if (!s->have_roofline || r->n_samples == 0)
        return;
    double *ts = malloc(r->n_samples * sizeof *ts);
    if (!ts)
        return;
    bench_samples_ts(r, ts);
    double avg = bench_avg_ts(ts, r->n_samples);
    free(ts);
    if (r->inst.n_gen == 0) {
        double nemb = non_embedding_params(s->model);
        double peak = roofline_peak_gflops(&s->roof, r->inst.n_threads);
        double gflops = 2.0 * nemb * avg / 1e9;
        fprintf(stderr,
                "llm-bench: roofline: %s: %.2f GFLOP/s = %.1f%% of FMA peak %.2f GFLOP/s (%d threads; "
                "2 x %.2f M non-embedding params x %.2f t/s)\n",
                name, gflops, 100.0 * gflops / peak, peak, r->inst.n_threads, nemb / 1e6, avg);
    } else if (r->inst.n_prompt == 0) {
        double gbs = (double)r->model_size * avg / 1e9;
        fprintf(stderr,
                "llm-bench: roofline: %s: %.2f GB/s = %.1f%% of read bandwidth %.2f GB/s (%.2f MiB x %.2f t/s)\n",
                name, gbs, 100.0 * gbs / s->roof.read_gbs, s->roof.read_gbs,
                (double)r->model_size / 1024.0 / 1024.0, avg);
    }
}

/* --token-times: buffers for the largest test of the plan, allocated once before anything is timed. */
static int alloc_token_log(const struct bench_state *s, const struct bench_instance *plan, size_t n_samples,
                           struct token_log *tok)
{
    size_t most = 1;
    for (size_t i = 0; i < s->count; i++)
        most = bench_token_count(&plan[i]) > most ? bench_token_count(&plan[i]) : most;
    tok->ns = calloc(most * n_samples, sizeof *tok->ns);
    tok->depth = calloc(most * n_samples, sizeof *tok->depth);
    return tok->ns && tok->depth ? 0 : -1;
}

static int run_all(struct bench_state *s, const struct bench_instance *plan)
{
    size_t n_samples = s->p->reps > 0 ? (size_t)s->p->reps : 1;
    uint64_t *samples = calloc(n_samples, sizeof *samples);
    struct token_log tok = { 0 };
    if (!samples || (s->p->token_times && alloc_token_log(s, plan, n_samples, &tok) != 0)) {
        free(samples);
        free(tok.ns);
        free(tok.depth);
        tool_error("out of memory");
        return RUN_FAILED;
    }
    int rc = RUN_OK;
    for (size_t i = 0; rc == RUN_OK && i < s->count; i++) {
        s->index = i;
        struct bench_result res = { 0 };
        rc = run_test(s, &plan[i], &res, samples, tok);
        if (rc != RUN_OK)
            break;
        for (int k = 0; k < s->n_prs; k++)
            if (bench_print_test(&s->prs[k], s->env, &res) != 0) {
                tool_error("out of memory");
                rc = RUN_FAILED;
            }
        print_extras(s, &res);
        free((char *)res.profile);
    }
    free(samples);
    free(tok.ns);
    free(tok.depth);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    struct bench_defaults d = bench_system_defaults();
    struct bench_params p;
    char msg[512], prog[128];
    tool_prog_name(argv[0], prog, sizeof prog);
    enum bench_parse_status ps = bench_parse(argc, argv, &d, &p, msg, sizeof msg);
    if (ps != BENCH_PARSE_OK) {
        bench_params_free(&p);
        if (ps == BENCH_PARSE_HELP) {
            bench_usage(stdout, prog, &d);
            return 0;
        }
        if (ps == BENCH_PARSE_LIST_DEVICES) {
            bench_list_devices(stdout);
            return 0;
        }
        if (ps == BENCH_PARSE_NOMEM || ps == BENCH_PARSE_REFUSED) {
            tool_error("%s", ps == BENCH_PARSE_NOMEM ? "out of memory" : msg);
            return 1;
        }
        fputs(msg, stderr);
        bench_usage(stdout, prog, &d);
        return 1;
    }
    struct bench_instance *plan = NULL;
    struct bench_state s = { .p = &p };
    struct llm_error err = { 0 };
    if (bench_validate(&p, msg, sizeof msg) != 0) {
        tool_error("%s (try '%s -h')", msg, prog);
        bench_params_free(&p);
        return 1;
    }
    if (p.prio != LLM_PRIO_NORMAL && tool_set_priority(p.prio) != 0) {
        bench_params_free(&p);
        return 1;
    }
    tool_numa_note(p.numa, p.verbose, "llm-bench");
    if (bench_plan(&p, &plan, &s.count) != 0) {
        tool_error("out of memory");
        bench_params_free(&p);
        return 1;
    }
    if (p.trace && !(s.trace = llm_trace_open(p.trace, &err))) {
        tool_error("%s", err.msg);
        free(plan);
        bench_params_free(&p);
        return 1;
    }
    if (p.profile && !(s.prof = malloc(sizeof *s.prof))) {
        tool_error("out of memory");
        llm_trace_close(s.trace, &err);
        free(plan);
        bench_params_free(&p);
        return 1;
    }
    if (p.verbose)
        llm_log_set_level(LLM_LOG_INFO);
    if (p.roofline || p.verbose || p.profile) {
        long n_cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (roofline_measure(&s.roof, ROOFLINE_THREADS, ROOFLINE_BYTES, n_cores > 0 ? (int)n_cores : 1) == 0) {
            s.have_roofline = true;
            fprintf(stderr,
                    "llm-bench: roofline: read bandwidth %.2f GB/s (%d threads, %zu MiB), FP32 FMA peak "
                    "%.2f GFLOP/s (1 thread), %.2f GFLOP/s (%d threads), %s kernels\n",
                    s.roof.read_gbs, s.roof.bw_threads, s.roof.bw_bytes >> 20, s.roof.fma_gflops_1,
                    s.roof.fma_gflops_n, s.roof.n_cores, s.roof.kernel);
        } else {
            fprintf(stderr, "llm-bench: roofline: could not measure (no memory or threads)\n");
        }
    }
    char cpu_info[256];
    read_cpu_info(cpu_info, sizeof cpu_info);
    struct bench_env env = { .build_commit = LLM_BUILD_COMMIT, .build_number = LLM_BUILD_NUMBER,
                             .cpu_info = cpu_info, .gpu_info = "", .backends = "CPU" };
    struct bench_printer prs[2];
    int n_prs = 0;
    if (p.output != BENCH_OUT_NONE)
        prs[n_prs++] = (struct bench_printer){ .fmt = p.output, .out = stdout, .params = &p, .defaults = &d };
    if (p.output_err != BENCH_OUT_NONE)
        prs[n_prs++] = (struct bench_printer){ .fmt = p.output_err, .out = stderr, .params = &p, .defaults = &d };

    struct sigaction sa = { 0 }, old;
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C kills at once */
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old);

    s.prs = prs;
    s.n_prs = n_prs;
    s.env = &env;
    int rc = run_all(&s, plan);
    /* the tests that finished stay a complete document, also after Ctrl-C or an error */
    for (int k = 0; s.header_done && k < n_prs; k++)
        bench_print_footer(&prs[k], &env);
    if (rc == RUN_INTERRUPTED)
        fprintf(stderr, "llm-bench: interrupted\n");

    sigaction(SIGINT, &old, NULL);
    if (llm_trace_close(s.trace, &err) != 0 && rc == RUN_OK) {
        tool_error("%s", err.msg);
        rc = RUN_FAILED;
    }
    free(s.prof);
    if (s.model)
        llm_model_free(s.model);
    free(plan);
    bench_params_free(&p);
    return rc == RUN_OK ? 0 : rc == RUN_INTERRUPTED ? 130 : 1;
}
