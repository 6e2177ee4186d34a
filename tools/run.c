/* llm-run: generate text from a prompt (llama-cli / llama-simple style). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "cpu_opts.h"
#include "latency.h"
#include "log.h"
#include "model/context.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/vocab.h"
#include "profile.h"
#include "profile_print.h"
#include "roofline.h"
#include "stats_print.h"
#include "thread_policy.h"
#include "trace.h"

static const struct tool_alias run_aliases[] = {
    { "-ub", "--ubatch-size" }, { "-ctk", "--cache-type-k" }, { "-ctv", "--cache-type-v" },
    { "-dev", "--device" }, { "-ngl", "--n-gpu-layers" }, { "--gpu-layers", "--n-gpu-layers" },
    { "-fa", "--flash-attn" }, { "-nkvo", "--no-kv-offload" }, { "-nopo", "--no-op-offload" }, { "-ot", "--override-tensor" },
    { "-dio", "--direct-io" }, { "-sm", "--split-mode" }, { "-ts", "--tensor-split" }, { "-mg", "--main-gpu" }, { "-no-cnv", "--no-conversation" }, { "-sp", "--special" }, { "--predict", "--n-predict" },
};

/* llama.cpp options (llama-cli / llama-completion) that have no counterpart here: named in a
 * "not supported" error instead of argtable's "invalid option". */
static const char *const unsupported[] = {
    "-cnv", "--conversation", "-i", "--interactive", "-if", "--interactive-first", "-r", "--reverse-prompt",
    "-sys", "--system-prompt", "--chat-template", "--chat-template-file", "--jinja", "-st", "--single-turn",
    "-co", "--color", "--in-prefix", "--in-suffix", "--in-prefix-bos", "--multiline-input", "--simple-io",
    "--verbose-prompt", "--keep", "--prompt-cache", "--prompt-cache-all", "--prompt-cache-ro",
    "-tb", "--threads-batch", "-Cr", "--cpu-range",
    "-cmoe", "--cpu-moe", "-ncmoe", "--n-cpu-moe", "--lora", "--lora-scaled", "--control-vector",
    "--control-vector-scaled", "-md", "--model-draft", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file",
    "-mu", "--model-url", "--grammar", "--grammar-file", "-j", "--json-schema", "--samplers",
    "--sampling-seq", "--mirostat", "--mirostat-lr", "--mirostat-ent", "--typical", "--dynatemp-range",
    "--dynatemp-exp", "--presence-penalty", "--frequency-penalty", "--dry-multiplier", "--dry-base",
    "--dry-allowed-length", "--dry-penalty-last-n", "--xtc-probability", "--xtc-threshold", "--top-nsigma",
    "-l", "--logit-bias", "--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale",
    "--yarn-orig-ctx", "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast",
    "-np", "--parallel", "-cb", "--cont-batching", "--cache-reuse", "-kvu", "--kv-unified", "--swa-full",
    "--log-file", "--log-colors", "--log-disable", "--perf", "--no-perf", "-lv", "--verbosity",
    "--log-verbosity", "-gan", "--grp-attn-n", "-gaw", "--grp-attn-w", "--embd-normalize", "--embedding",
};

struct run_opts {
    const char *model, *device, *dump_logits;
    char *tensor_overrides; /* every -ot value, joined by ',' (NULL: none) */
    char *ranks_split;    /* --ranks-split a/b/... (NULL: equal shares) */
    char *prompt;
    FILE *dump;           /* dump_logits + ".tmp", opened before any work */
    struct llm_trace *trace; /* --trace FILE, opened before any work */
    bool profile;         /* --profile */
    int n_predict, n_ctx, n_batch, n_ubatch, n_threads, n_gpu_layers;
    struct llm_sampler_params sp;
    enum llm_type type_k, type_v;
    int flash_attn;
    bool display_prompt, special, verbose, seed_given, parse_special, ignore_eos, no_kv_offload, no_op_offload;
    enum gguf_load_mode load_mode; /* --no-mmap, --mlock, -dio */
    struct llm_thread_policy threads; /* -C, --cpu-strict, --poll, --prio */
    const char *numa;     /* --numa, "" when not given */
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* The whole file, NUL-terminated; NULL with errno set when it cannot be read (a directory opens on
 * Linux but fails to read with EISDIR: that is an error, not an empty prompt). */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[65536];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    int e = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (e) {
        free(buf);
        errno = e;
        return NULL;
    }
    if (!buf)
        buf = calloc(1, 1);
    else
        buf[len] = '\0';
    return buf;
}

/* llama.cpp's -e: \n \r \t \' \" \\ and \xHH become the characters; any other backslash stays. */
static void process_escapes(char *s)
{
    char *out = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) {
            *out++ = *p;
            continue;
        }
        const char *named = strchr("nrt'\"\\", p[1]);
        if (named) {
            *out++ = p[1] == 'n' ? '\n' : p[1] == 'r' ? '\r' : p[1] == 't' ? '\t' : p[1];
            p++;
        } else if (p[1] == 'x' && isxdigit((unsigned char)p[2]) && isxdigit((unsigned char)p[3])) {
            char hex[3] = { p[2], p[3], 0 };
            *out++ = (char)strtoul(hex, NULL, 16);
            p += 3;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
}

/* The prompt's logits go to "<path>.tmp", renamed at the end: open it now, so that a directory, a
 * missing folder or a read-only place fails before the model is even loaded. */
static int open_dump(struct run_opts *o)
{
    struct stat st;
    if (stat(o->dump_logits, &st) == 0 && S_ISDIR(st.st_mode)) {
        tool_error("cannot write --dump-logits '%s': it is a directory", o->dump_logits);
        return 1;
    }
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", o->dump_logits) >= sizeof tmp) {
        tool_error("--dump-logits path is too long");
        return 1;
    }
    o->dump = fopen(tmp, "wb");
    if (!o->dump) {
        tool_error("cannot write --dump-logits '%s': %s", o->dump_logits, strerror(errno));
        return 1;
    }
    return 0;
}

static void discard_dump(struct run_opts *o)
{
    if (!o->dump)
        return;
    fclose(o->dump);
    o->dump = NULL;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->dump_logits);
    remove(tmp);
}

static int parse_cache_type(const char *opt, const char *s, enum llm_type *out)
{
    const int t = llm_kv_cache_type_from_name(s);
    if (t < 0) {
        tool_error("unsupported KV cache type '%s' for %s (use f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1)",
                   s, opt);
        return 1;
    }
    *out = (enum llm_type)t;
    return 0;
}

static int parse_on_off(const char *s, int *out)
{
    if (!strcmp(s, "on") || !strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "enabled")) {
        *out = 1;
    } else if (!strcmp(s, "off") || !strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "disabled")) {
        *out = 0;
    } else if (!strcmp(s, "auto") || !strcmp(s, "-1")) {
        *out = 1;
    } else {
        tool_error("invalid value '%s' for -fa (use on, off or auto)", s);
        return 1;
    }
    return 0;
}

/* One integer option against its range: an error line naming the option. */
static bool in_range(const char *opt, int v, int lo, int hi)
{
    if (v >= lo && v <= hi)
        return true;
    if (hi == INT_MAX)
        tool_error("invalid value %d for %s: must be >= %d", v, opt, lo);
    else
        tool_error("invalid value %d for %s: must be between %d and %d", v, opt, lo, hi);
    return false;
}

/* A finite number, above lo (strict) or at least lo; lo = -INFINITY: any finite number. */
static bool finite_at_least(const char *opt, double v, double lo, bool strict)
{
    if (isfinite(v) && (strict ? v > lo : v >= lo))
        return true;
    if (isinf(lo))
        tool_error("invalid value %g for %s: must be a finite number", v, opt);
    else
        tool_error("invalid value %g for %s: must be a number %s %g", v, opt, strict ? ">" : ">=", lo);
    return false;
}

/* Every value's range, each option named on its own (checked before anything is loaded). */
static bool check_ranges(const struct run_opts *o)
{
    return in_range("-n", o->n_predict, -1, INT_MAX) && in_range("-c", o->n_ctx, 0, INT_MAX) &&
           in_range("-b", o->n_batch, 1, INT_MAX) && in_range("-ub", o->n_ubatch, 1, INT_MAX) &&
           in_range("-t", o->n_threads, 1, TOOL_MAX_THREADS) && in_range("--top-k", o->sp.top_k, 0, INT_MAX) &&
           in_range("--repeat-last-n", o->sp.repeat_last_n, 0, INT_MAX) &&
           finite_at_least("--temp", o->sp.temp, -INFINITY, false) &&
           finite_at_least("--top-p", o->sp.top_p, 0, false) && finite_at_least("--min-p", o->sp.min_p, 0, false) &&
           finite_at_least("--repeat-penalty", o->sp.repeat_penalty, 0, true);
}

/* -ot may be given several times, each a ','-list: all of them, in order, as one list. */
static int join_overrides(const struct arg_str *ot, struct run_opts *o)
{
    size_t len = 1;
    for (int i = 0; i < ot->count; i++)
        len += strlen(ot->sval[i]) + 1;
    if (ot->count == 0)
        return 0;
    if (!(o->tensor_overrides = calloc(1, len))) {
        tool_error("out of memory");
        return -1;
    }
    for (int i = 0; i < ot->count; i++) {
        if (i)
            strcat(o->tensor_overrides, ",");
        strcat(o->tensor_overrides, ot->sval[i]);
    }
    return 0;
}

/* --seed N: 0..4294967295; -1 (and 4294967295, llama.cpp's LLAMA_DEFAULT_SEED) mean random. */
static bool parse_seed(const char *s, struct run_opts *o)
{
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 0);
    if (errno || *e || !*s || v < -1 || v > 0xFFFFFFFFll) {
        tool_error("invalid value '%s' for --seed: must be -1 (random) or 0..4294967295", s);
        return false;
    }
    o->seed_given = v != -1 && v != 0xFFFFFFFFll;
    o->sp.seed = (uint32_t)v;
    return true;
}

/* -C, --cpu-strict, --poll, --prio and --numa into o (llama-cli's ranges); an error line and -1 when
 * one is out of range. */
static int parse_threads(const struct arg_str *mask, const struct arg_int *strict, const struct arg_int *poll,
                         const struct arg_int *prio, const struct arg_str *numa, struct run_opts *o)
{
    o->threads = llm_thread_policy_default();
    if (mask->count && (llm_cpu_mask_parse(mask->sval[0], o->threads.mask) != 0 ||
                        !llm_cpu_mask_usable(o->threads.mask))) {
        tool_error("invalid value '%s' for -C: not a hex mask of cpus this process may run on", mask->sval[0]);
        return -1;
    }
    o->threads.strict = strict->count && strict->ival[0];
    o->threads.poll = poll->count ? poll->ival[0] : 50;
    o->threads.prio = prio->count ? prio->ival[0] : LLM_PRIO_NORMAL;
    o->numa = numa->count ? (*numa->sval[0] ? numa->sval[0] : "distribute") : "";
    if ((strict->count && !in_range("--cpu-strict", strict->ival[0], 0, 1)) ||
        !in_range("--poll", o->threads.poll, 0, 100) || !in_range("--prio", o->threads.prio, -1, 3))
        return -1;
    if (*o->numa && strcmp(o->numa, "distribute") && strcmp(o->numa, "isolate") && strcmp(o->numa, "numactl")) {
        tool_error("invalid value '%s' for --numa (use distribute, isolate or numactl)", o->numa);
        return -1;
    }
    return 0;
}

/* -sm, -ts, -mg as llama-cli takes them, with one device beside the cpu: none or layer (the same),
 * one share, device 0. An error line and -1 otherwise. */
static int check_split(const struct arg_str *sm, const struct arg_str *ts, const struct arg_int *mg)
{
    if (sm->count && strcmp(sm->sval[0], "none") && strcmp(sm->sval[0], "layer")) {
        if (!strcmp(sm->sval[0], "row") || !strcmp(sm->sval[0], "tensor"))
            tool_error("-sm %s splits tensors over several devices; there is one (use none or layer)", sm->sval[0]);
        else
            tool_error("invalid value '%s' for -sm (use none or layer)", sm->sval[0]);
        return -1;
    }
    if (mg->count && mg->ival[0] != 0) {
        tool_error("-mg %d: there is one device beside the cpu, 0", mg->ival[0]);
        return -1;
    }
    int shares = 0;
    for (const char *p = ts->count ? ts->sval[0] : ""; *p;) {
        char *end;
        const double v = strtod(p, &end);
        if (end == p || !(v >= 0) || (*end && !strchr(",/;", *end))) {
            tool_error("invalid value '%s' for -ts (shares separated by ',' or '/')", ts->sval[0]);
            return -1;
        }
        shares += v > 0;
        p = *end ? end + 1 : end;
    }
    if (shares > 1) {
        tool_error("-ts %s: there is one device beside the cpu, it takes one share", ts->sval[0]);
        return -1;
    }
    return 0;
}

/* Parse the command line into o; returns -1 to continue, else the exit status. */
static int parse_args(int argc, char **argv, struct run_opts *o)
{
    struct arg_file *model = arg_file0("m", "model", "FILE", "GGUF model to run");
    struct arg_str *prompt = arg_str0("p", "prompt", "TEXT", "prompt text");
    struct arg_file *file = arg_file0("f", "file", "FILE", "read the prompt from a file");
    struct arg_int *n_predict = arg_int0("n", "n-predict", "N", "tokens to generate (default -1: until end of generation or context full)");
    struct arg_int *n_ctx = arg_int0("c", "ctx-size", "N", "context size (default: min(model's, 4096))");
    struct arg_int *n_batch = arg_int0("b", "batch-size", "N", "logical batch size (default 2048)");
    struct arg_int *n_ubatch = arg_int0(NULL, "ubatch-size", "N", "-ub: physical batch size (default 512)");
    struct arg_int *threads = arg_int0("t", "threads", "N", "threads, 1..512 (default 2)");
    struct arg_dbl *temp = arg_dbl0(NULL, "temp", "T", "temperature (default 0.8; 0 = greedy)");
    struct arg_int *top_k = arg_int0(NULL, "top-k", "N", "top-k (default 40; 0 = off)");
    struct arg_dbl *top_p = arg_dbl0(NULL, "top-p", "P", "top-p (default 0.95; 1 = off)");
    struct arg_dbl *min_p = arg_dbl0(NULL, "min-p", "P", "min-p (default 0.05; 0 = off)");
    struct arg_dbl *rep_pen = arg_dbl0(NULL, "repeat-penalty", "X", "repeat penalty (default 1.0 = off)");
    struct arg_int *rep_n = arg_int0(NULL, "repeat-last-n", "N", "tokens the penalty looks back (default 64)");
    struct arg_str *seed = arg_str0("s", "seed", "N", "random seed (default -1: random)");
    struct arg_str *ctk = arg_str0(NULL, "cache-type-k", "TYPE", "-ctk: K cache type f32|f16|bf16|q8_0|q4_0|q4_1|iq4_nl|q5_0|q5_1 (default f16)");
    struct arg_str *ctv = arg_str0(NULL, "cache-type-v", "TYPE", "-ctv: V cache type, as -ctk; a quantized one needs -fa on (default f16)");
    struct arg_str *fa = arg_str0(NULL, "flash-attn", "on|off|auto", "-fa: fused attention (default auto = on)");
    struct arg_str *dev = arg_str0(NULL, "device", "cpu|npu", "-dev: backend (default cpu)");
    struct arg_int *ngl = arg_int0(NULL, "n-gpu-layers", "N", "-ngl: layers on the device, from the last (output = one; default -1: all)");
    struct arg_lit *nkvo = arg_lit0(NULL, "no-kv-offload", "-nkvo: keep every layer's KV cache in host memory");
    struct arg_lit *nopo = arg_lit0(NULL, "no-op-offload", "-nopo: batches over host weights stay on the cpu");
    struct arg_lit *mmap_on = arg_lit0(NULL, "mmap", "map the model file (the default)");
    struct arg_lit *mmap_off = arg_lit0(NULL, "no-mmap", "read the model into memory instead of mapping it");
    struct arg_lit *mlock = arg_lit0(NULL, "mlock", "lock the model in RAM");
    struct arg_lit *dio = arg_lit0(NULL, "direct-io", "-dio: read the model with O_DIRECT, past the page cache");
    struct arg_str *cpu_mask = arg_str0("C", "cpu-mask", "HEX", "cpus the threads run on (default: all)");
    struct arg_int *cpu_strict = arg_int0(NULL, "cpu-strict", "0|1", "each thread on one cpu of the mask (default 0)");
    struct arg_int *poll = arg_int0(NULL, "poll", "0..100", "busy-wait before sleeping (default 50; 0: none)");
    struct arg_int *prio = arg_int0(NULL, "prio", "-1..3", "process/thread priority (default 0; 2, 3 need root)");
    struct arg_str *numa = arg_str0(NULL, "numa", "MODE", "distribute|isolate|numactl (one NUMA node: no effect)");
    struct arg_str *sm = arg_str0(NULL, "split-mode", "none|layer", "-sm: one device, the same either way");
    struct arg_str *ts = arg_str0(NULL, "tensor-split", "N", "-ts: one device, one share");
    struct arg_int *mg = arg_int0(NULL, "main-gpu", "0", "-mg: the one device, 0");
    struct arg_str *ot = arg_strn(NULL, "override-tensor", "PAT=DEV,...", 0, 16,
                                  "-ot: weights whose names match the regex PAT live on DEV (cpu or npu)");
    struct arg_str *rsplit = arg_str0(NULL, "ranks-split", "a/b/...", "under mpirun -np K: shares of layers per rank (default equal)");
    struct arg_lit *no_display = arg_lit0(NULL, "no-display-prompt", "print only the generated text");
    struct arg_lit *special = arg_lit0(NULL, "special", "-sp: print control tokens' text");
    struct arg_lit *no_parse = arg_lit0(NULL, "no-parse-special", "take <|im_end|>, </s>, ... in the prompt as plain text");
    struct arg_lit *escape = arg_lit0("e", "escape", "turn \\n \\r \\t \\' \\\" \\\\ \\xHH in -p into the characters");
    struct arg_lit *no_escape = arg_lit0(NULL, "no-escape", "leave backslashes in -p as they are (default)");
    struct arg_lit *ignore_eos = arg_lit0(NULL, "ignore-eos", "never sample end-of-generation tokens");
    struct arg_lit *no_cnv = arg_litn(NULL, "no-conversation", 0, 64, "-no-cnv: accepted (there is no chat mode)");
    struct arg_lit *no_warmup = arg_litn(NULL, "no-warmup", 0, 64, "accepted (llm-run does no warm-up run)");
    struct arg_file *dump = arg_file0(NULL, "dump-logits", "FILE", "write the prompt's logits (float32 rows of n_vocab)");
    struct arg_lit *verbose = arg_lit0("v", "verbose", "print settings and statistics");
    struct arg_lit *profile = arg_lit0(NULL, "profile", "print a per-op profile of prefill and decode at the end");
    struct arg_file *trace = arg_file0(NULL, "trace", "FILE", "write a Chrome trace (Perfetto) of every op and host step");
    struct arg_lit *help = arg_lit0("h", "help", "print this help");
    struct arg_end *end = arg_end(5);
    void *table[] = { help, model, prompt, file, n_predict, n_ctx, n_batch, n_ubatch, threads, temp, top_k,
                      top_p, min_p, rep_pen, rep_n, seed, ctk, ctv, fa, dev, ngl, nkvo, nopo, mmap_on, mmap_off, mlock, dio, cpu_mask, cpu_strict, poll, prio, numa, sm, ts, mg, ot, rsplit, no_display, special,
                      no_parse, escape, no_escape, ignore_eos, no_cnv, no_warmup, dump, verbose, profile, trace, end };
    const int n_table = sizeof table / sizeof table[0];
    int rc = -1;

    if (arg_nullcheck(table) != 0) {
        tool_error("out of memory");
        rc = 1;
        goto out;
    }
    const char *unsup = tool_find_option(table, argc, argv, unsupported, sizeof unsupported / sizeof unsupported[0]);
    if (unsup) {
        char prog[128];
        tool_error("option '%s' is a llama.cpp option that %s does not support (try '%s -h')", unsup,
                   tool_prog_name(argv[0], prog, sizeof prog), prog);
        rc = 1;
        goto out;
    }
    int pr = tool_parse_args(table, argc, argv,
                             "Generate text from a prompt with a GGUF model.\n"
                             "Special tokens written in the prompt (<|im_end|>, </s>, ...) are read as those tokens,\n"
                             "as llama.cpp and 'llm tokenize' do; --no-parse-special takes them as plain text.");
    if (pr != 0) {
        rc = pr > 0 ? 0 : 1;
        goto out;
    }
    if (!model->count) {
        tool_error("no model given (-m FILE)");
        rc = 1;
        goto out;
    }
    o->model = strdup(model->filename[0]);
    if (prompt->count && file->count) {
        tool_error("give the prompt with -p or -f, not both");
        rc = 1;
        goto out;
    }
    o->n_predict = n_predict->count ? n_predict->ival[0] : -1;
    o->n_ctx = n_ctx->count ? n_ctx->ival[0] : 0;
    o->n_batch = n_batch->count ? n_batch->ival[0] : 2048;
    o->n_ubatch = n_ubatch->count ? n_ubatch->ival[0] : 512;
    o->n_threads = threads->count ? threads->ival[0] : 2;
    o->sp = llm_sampler_default_params();
    if (temp->count)
        o->sp.temp = (float)temp->dval[0];
    if (top_k->count)
        o->sp.top_k = top_k->ival[0];
    if (top_p->count)
        o->sp.top_p = (float)top_p->dval[0];
    if (min_p->count)
        o->sp.min_p = (float)min_p->dval[0];
    if (rep_pen->count)
        o->sp.repeat_penalty = (float)rep_pen->dval[0];
    if (rep_n->count)
        o->sp.repeat_last_n = rep_n->ival[0];
    o->type_k = o->type_v = LLM_TYPE_F16;
    o->flash_attn = 1;
    o->device = dev->count ? dev->sval[0] : "cpu";
    o->n_gpu_layers = ngl->count ? ngl->ival[0] : -1;
    o->no_kv_offload = nkvo->count > 0;
    o->no_op_offload = nopo->count > 0;
    if ((rsplit->count && !(o->ranks_split = strdup(rsplit->sval[0]))) || join_overrides(ot, o) != 0) {
        rc = 1;
        goto out;
    }
    (void)no_cnv;
    (void)no_warmup;
    o->display_prompt = !no_display->count;
    o->special = special->count > 0;
    o->parse_special = !no_parse->count;
    o->ignore_eos = ignore_eos->count > 0;
    o->verbose = verbose->count > 0;
    if ((seed->count && !parse_seed(seed->sval[0], o)) || !check_ranges(o) ||
        (ctk->count && parse_cache_type("-ctk", ctk->sval[0], &o->type_k)) ||
        (ctv->count && parse_cache_type("-ctv", ctv->sval[0], &o->type_v)) ||
        (fa->count && parse_on_off(fa->sval[0], &o->flash_attn))) {
        rc = 1;
        goto out;
    }
    if (llm_device_from_name(o->device) < 0) {
        tool_error("invalid device: %s (-dev: cpu or npu)", o->device);
        rc = 1;
        goto out;
    }
    /* pairs of flags that contradict each other (llama-bench's -lm has no dio+mlock either) */
    const struct { const struct arg_lit *a, *b; const char *names; } exclusive[] = {
        { escape, no_escape, "-e or --no-escape" }, { mmap_on, mmap_off, "--mmap or --no-mmap" },
        { mlock, dio, "--mlock or -dio" },
    };
    for (size_t i = 0; i < sizeof exclusive / sizeof exclusive[0]; i++)
        if (exclusive[i].a->count && exclusive[i].b->count) {
            tool_error("give %s, not both", exclusive[i].names);
            rc = 1;
            goto out;
        }
    if (parse_threads(cpu_mask, cpu_strict, poll, prio, numa, o) != 0 || check_split(sm, ts, mg) != 0) {
        rc = 1;
        goto out;
    }
    o->load_mode = dio->count ? GGUF_LOAD_DIRECT
                   : mmap_off->count ? (mlock->count ? GGUF_LOAD_MLOCK : GGUF_LOAD_READ)
                                     : (mlock->count ? GGUF_LOAD_MMAP_MLOCK : GGUF_LOAD_MMAP);
    /* inputs and outputs last: every value is known good before a file is touched */
    if (file->count) {
        o->prompt = read_file(file->filename[0]);
        if (!o->prompt) {
            tool_error("cannot read prompt file '%s': %s", file->filename[0], strerror(errno));
            rc = 1;
            goto out;
        }
    } else {
        o->prompt = strdup(prompt->count ? prompt->sval[0] : "");
        if (o->prompt && escape->count)
            process_escapes(o->prompt);
    }
    if (dump->count)
        o->dump_logits = strdup(dump->filename[0]);
    if (!o->model || !o->prompt || (dump->count && !o->dump_logits)) {
        tool_error("out of memory");
        rc = 1;
    } else if (o->dump_logits && open_dump(o) != 0) {
        rc = 1;
    } else if (trace->count) {
        struct llm_error err;
        if (!(o->trace = llm_trace_open(trace->filename[0], &err))) {
            tool_error("%s", err.msg);
            rc = 1;
        }
    }
    o->profile = profile->count > 0;
out:
    arg_freetable(table, (size_t)n_table);
    return rc;
}

/* Prints bytes, holding back an incomplete UTF-8 sequence until its last byte arrives. */
struct utf8_out {
    char pending[8];
    int n;
};

static int utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

static void utf8_write(struct utf8_out *u, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool cont = (c & 0xC0) == 0x80;
        if (u->n > 0 && !cont) { /* a new character starts: the pending one was cut short */
            fwrite(u->pending, 1, (size_t)u->n, stdout);
            u->n = 0;
        }
        if (u->n == (int)sizeof u->pending) {
            fwrite(u->pending, 1, (size_t)u->n, stdout);
            u->n = 0;
        }
        u->pending[u->n++] = (char)c;
        if (u->n >= utf8_len((unsigned char)u->pending[0])) {
            fwrite(u->pending, 1, (size_t)u->n, stdout);
            u->n = 0;
        }
    }
    fflush(stdout);
}

static void utf8_flush(struct utf8_out *u)
{
    fwrite(u->pending, 1, (size_t)u->n, stdout);
    u->n = 0;
    fflush(stdout);
}

/* Writes the rows into the temporary file opened by open_dump() and renames it into place. */
static int dump_logits(struct run_opts *o, const struct llm_context *ctx, int32_t rows, int32_t n_vocab)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->dump_logits);
    bool ok = true;
    for (int32_t r = 0; r < rows && ok; r++)
        ok = fwrite(llm_get_logits(ctx, r), sizeof(float), (size_t)n_vocab, o->dump) == (size_t)n_vocab;
    ok = (fclose(o->dump) == 0) && ok;
    o->dump = NULL;
    if (!ok || rename(tmp, o->dump_logits) != 0) {
        int e = errno;
        remove(tmp);
        tool_error("cannot write '%s': %s", o->dump_logits, strerror(e));
        return 1;
    }
    return 0;
}

/* What a run did, for the summary and -v. Times in ms. */
struct run_stats {
    double t_load, t_tokenize, t_context, t_prompt, t_gen, t_sample;
    int64_t n_prompt, n_prompt_done;
    int n_gen;
    const char *stop; /* why generation ended early, or "" */
    uint64_t *tok_ns; /* -v: the prompt, then the time to each generated token (NULL without -v) */
    size_t n_tok, cap_tok;
};

/* Graph cache and launch statistics of the run (npu), per token where that is what matters. */
/* -v: the device's own figures (the npu's graph cache and launches); none on the cpu alone. */
static void print_device_stats(const struct llm_context *ctx, int n_tok)
{
    struct llm_backend_stat st[LLM_BACKEND_MAX_STATS];
    const int n = llm_context_stats(ctx, st, LLM_BACKEND_MAX_STATS);
    if (!n)
        return;
    fprintf(stderr, "llm-run: %s", llm_context_backend_name(ctx));
    print_backend_stats(stderr, st, n, n_tok);
}

static double per_s(double n, double ms)
{
    return ms > 0 ? n / (ms / 1e3) : 0.0;
}

/* -v: TTFT (prompt plus the first token's sampling) and the nearest-rank inter-token latency
 * percentiles over the intervals between generated tokens (decode, printing and sampling). */
static void print_latency(const struct run_stats *rs)
{
    struct latency_summary ls;
    if (!rs->tok_ns || rs->n_tok < 2 || latency_summarize(rs->tok_ns, 1, rs->n_tok, 2, 2, &ls) != 0)
        return;
    fprintf(stderr, "llm-run: latency: TTFT %.3f ms", ls.ttft_ms);
    if (ls.n_itl)
        fprintf(stderr, ", inter-token over %zu tokens: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms",
                ls.n_itl, ls.itl_p50_ms, ls.itl_p90_ms, ls.itl_p99_ms, ls.itl_max_ms);
    fputc('\n', stderr);
}

/* -v: the schedule of the last graph (a decode step, unless the run stopped after the prompt):
 * each split's backend, nodes and the inputs it copies from another backend. */
static void print_splits(const struct llm_context *ctx)
{
    const int n = llm_context_n_splits(ctx);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        struct llm_split_info si;
        llm_context_split(ctx, i, &si);
        bytes += si.input_bytes;
    }
    double us;
    int64_t graphs;
    llm_context_schedule_time(ctx, &us, &graphs);
    fprintf(stderr, "llm-run: schedule: %lld graphs scheduled in %.1f us; splits %d of the last graph, %zu bytes "
            "copied between backends per graph%s\n", (long long)graphs, us, n, bytes, n ? ":" : "");
    for (int i = 0; i < n; i++) {
        struct llm_split_info si;
        llm_context_split(ctx, i, &si);
        fprintf(stderr, "llm-run:   %s nodes %d-%d, %d inputs copied in (%zu bytes)\n", si.backend, si.first,
                si.end - 1, si.n_inputs, si.input_bytes);
    }
}

/* -v under mpirun: each rank's layers, resident memory and where its decode time went. */
static void print_ranks(const struct llm_context *ctx, uint32_t n_layer)
{
    struct llm_rank_info ri[64];
    const int n = llm_context_ranks(ctx, ri, 64);
    if (n < 2)
        return;
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "llm-run: rank %d of %d: layers %d-%d%s%s, resident %.1f MiB\n", ri[i].rank, n, ri[i].first,
                ri[i].end - 1, ri[i].first == 0 ? " + token embedding" : "",
                ri[i].end == (int32_t)n_layer ? " + output" : "", ri[i].rss_bytes / 1048576.0);
        static const char *const phase[2] = { "prompt", "generation" };
        for (int ph = 0; ph < 2; ph++) {
            const double all = ri[i].busy_ms[ph] + ri[i].wait_ms[ph];
            if (all > 0)
                fprintf(stderr, "llm-run:   %s: computing %.2f ms, waiting %.2f ms (bubble %.0f%%)\n", phase[ph],
                        ri[i].busy_ms[ph], ri[i].wait_ms[ph], 100.0 * ri[i].wait_ms[ph] / all);
            if (ri[i].back_bytes[ph] > 0)
                fprintf(stderr, "llm-run:   %s: %.0f bytes back from rank %d per decode\n", phase[ph],
                        ri[i].back_bytes[ph], n - 1);
        }
    }
}

/* -v: time per phase, tokens, KV cache use, the schedule, then the npu's graph statistics. */
static void print_stats(const struct run_stats *rs, const struct llm_context *ctx, const struct llm_model *m,
                        const struct llm_context_params *cp)
{
    const double total = rs->t_load + rs->t_tokenize + rs->t_context + rs->t_prompt + rs->t_gen;
    fprintf(stderr, "llm-run: time: load %.2f ms, tokenize %.2f ms, context %.2f ms, prompt %.2f ms, "
            "generation %.2f ms (sampling %.2f ms), total %.2f ms\n", rs->t_load, rs->t_tokenize, rs->t_context,
            rs->t_prompt, rs->t_gen, rs->t_sample, total);
    fprintf(stderr, "llm-run: tokens: prompt %lld (%.2f ms/token), generated %d (%.2f ms/token)\n",
            (long long)rs->n_prompt_done, rs->n_prompt_done ? rs->t_prompt / (double)rs->n_prompt_done : 0.0,
            rs->n_gen, rs->n_gen ? rs->t_gen / rs->n_gen : 0.0);
    print_latency(rs);
    const struct llm_hparams *hp = &m->hp;
    const int64_t cells = ((int64_t)cp->n_ctx + LLM_KV_PAD - 1) / LLM_KV_PAD * LLM_KV_PAD;
    const size_t cell = llm_context_kv_cell_bytes(ctx);
    const int32_t used = llm_n_past(ctx);
    fprintf(stderr,
            "llm-run: kv cache: %d of %d tokens used (%.1f%%), %lld cells x %u layers, %s/%s, %zu bytes a cell, "
            "%.2f MiB\n",
            used, cp->n_ctx, cp->n_ctx ? 100.0 * used / cp->n_ctx : 0.0, (long long)cells, hp->n_layer,
            llm_type_name(cp->type_k), llm_type_name(cp->type_v), cell, (double)cell * (double)cells / 1048576.0);
    print_splits(ctx);
    print_ranks(ctx, hp->n_layer);
    if (strcmp(llm_context_backend_name(ctx), "cpu") != 0) /* the cpu has no graph cache */
        print_device_stats(ctx, (int)(rs->n_prompt_done + rs->n_gen));
}

static void print_summary(const struct run_stats *rs, const struct llm_context *ctx, int n_threads)
{
    fprintf(stderr, "\nllm-run: load %.2f ms | prompt %lld tokens, %.2f ms, %.2f t/s | generated %d tokens, %.2f ms, "
            "%.2f t/s%s\n", rs->t_load, (long long)rs->n_prompt_done, rs->t_prompt,
            per_s((double)rs->n_prompt_done, rs->t_prompt), rs->n_gen, rs->t_gen, per_s(rs->n_gen, rs->t_gen),
            rs->stop);
    fprintf(stderr, "llm-run: backend %s, %d threads\n", llm_context_backend_name(ctx), n_threads);
}

/* The end-of-generation tokens (for --ignore-eos), -1 terminated; NULL when out of memory. */
static int32_t *eog_tokens(const struct vocab *voc)
{
    int32_t n = vocab_n_tokens(voc), k = 0;
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids)
        return NULL;
    for (int32_t i = 0; i < n; i++)
        if (vocab_is_eog(voc, i))
            ids[k++] = i;
    ids[k] = -1;
    return ids;
}

/* Evaluate the prompt in batches of n_batch (stops early on Ctrl-C); the last batch draws the
 * first token into *next. */
static int eval_prompt(struct llm_context *ctx, const int32_t *tokens, struct run_stats *rs, int32_t n_batch,
                       bool logits_all, int32_t *next)
{
    struct llm_error err = { 0 };
    const double t = (llm_now_us() / 1e3);
    while (rs->n_prompt_done < rs->n_prompt && !interrupted) {
        int64_t left = rs->n_prompt - rs->n_prompt_done;
        int32_t n = (int32_t)(left < n_batch ? left : n_batch);
        const int32_t *batch = tokens + rs->n_prompt_done;
        if (n == left ? llm_decode_next(ctx, batch, n, logits_all, next, &err)
                      : llm_decode(ctx, batch, n, logits_all, &err)) {
            tool_error("%s", err.msg);
            return 1;
        }
        rs->n_prompt_done += n;
    }
    rs->t_prompt = (llm_now_us() / 1e3) - t;
    return 0;
}

/* -v: room for the prompt entry and every token the generation can draw (at most -n, or until the
 * context is full), allocated before generating so that the loop only stores. */
static int alloc_token_times(struct run_stats *rs, int n_predict, int32_t n_ctx)
{
    const int64_t most = n_predict >= 0 ? n_predict : (int64_t)n_ctx - rs->n_prompt_done + 1;
    rs->cap_tok = (size_t)(most > 0 ? most : 0) + 1;
    if (!(rs->tok_ns = malloc(rs->cap_tok * sizeof *rs->tok_ns))) {
        tool_error("out of memory");
        return 1;
    }
    rs->tok_ns[rs->n_tok++] = (uint64_t)(rs->t_prompt * 1e6);
    return 0;
}

/* Print tok (drawn after the prompt), then decode and draw until end of generation, -n, a full
 * context or Ctrl-C. */
static int eval_gen(const struct run_opts *o, struct llm_context *ctx, const struct vocab *voc, int32_t tok,
                    struct run_stats *rs)
{
    struct llm_error err = { 0 };
    struct utf8_out u = { .n = 0 };
    int rc = 0;
    const double t = (llm_now_us() / 1e3);
    double last = t; /* -v: when the previous token was drawn */
    while ((o->n_predict < 0 || rs->n_gen < o->n_predict) && !interrupted) {
        rs->n_gen++;
        if (rs->n_tok < rs->cap_tok) {
            const double drawn = (llm_now_us() / 1e3);
            rs->tok_ns[rs->n_tok++] = (uint64_t)((drawn - last) * 1e6);
            last = drawn;
        }
        if (vocab_is_eog(voc, tok))
            break;
        char piece[256];
        size_t len = vocab_token_to_piece(voc, tok, o->special, piece, sizeof piece);
        utf8_write(&u, piece, len < sizeof piece ? len : sizeof piece);
        if (o->n_predict >= 0 && rs->n_gen == o->n_predict)
            break;
        if (llm_n_past(ctx) >= llm_n_ctx(ctx)) {
            rs->stop = " (stopped: context full)";
            break;
        }
        if (llm_decode_next(ctx, &tok, 1, false, &tok, &err)) {
            utf8_flush(&u);
            tool_error("%s", err.msg);
            rc = 1;
            break;
        }
    }
    utf8_flush(&u);
    rs->t_gen = (llm_now_us() / 1e3) - t;
    rs->t_sample = llm_draw_ms(ctx);
    return rc;
}

/* The profile table, beside the machine's limits measured now (about two seconds). */
static void print_profile(const struct llm_profile *prof, const struct llm_context *ctx,
                          const struct llm_context_params *cp)
{
    struct roofline roof;
    long n_cores = sysconf(_SC_NPROCESSORS_ONLN);
    bool have = roofline_measure(&roof, cp->n_threads, (size_t)256 << 20, n_cores > 0 ? (int)n_cores : 1) == 0;
    profile_print_table(stderr, "llm-run: ", prof, llm_context_backend_name(ctx), have ? &roof : NULL, cp->n_threads);
}

static int generate(struct run_opts *o)
{
    struct llm_error err = { 0 };
    struct llm_model *model = NULL;
    struct llm_context *ctx = NULL;
    int32_t *tokens = NULL, *eog = NULL;
    struct run_stats rs = { .stop = "" };
    int rc = 1;

    llm_thread_policy_set(&o->threads);
    if (o->threads.prio != LLM_PRIO_NORMAL && tool_set_priority(o->threads.prio) != 0)
        return 1;
    tool_numa_note(o->numa, o->verbose, "llm-run");
    if (o->verbose) /* from the load on: it reports the repack cache */
        llm_log_set_level(LLM_LOG_INFO);
    double t = (llm_now_us() / 1e3);
    if (llm_model_load_mode(o->model, o->load_mode, tool_job_load_threads(o->n_threads), &model, &err)) {
        tool_error("%s", err.msg);
        return 1;
    }
    rs.t_load = (llm_now_us() / 1e3) - t;
    const struct vocab *voc = model->vocab;
    const int32_t n_vocab = (int32_t)model->hp.n_vocab;

    struct llm_context_params cp = llm_context_default_params();
    cp.n_ctx = o->n_ctx > 0 ? o->n_ctx : (int32_t)(model->hp.n_ctx_train < 4096 ? model->hp.n_ctx_train : 4096);
    cp.n_batch = o->n_batch;
    cp.n_ubatch = o->n_ubatch;
    cp.n_threads = o->n_threads;
    cp.type_k = o->type_k;
    cp.type_v = o->type_v;
    cp.flash_attn = o->flash_attn != 0;
    cp.device = (enum llm_device)llm_device_from_name(o->device);
    cp.n_gpu_layers = o->n_gpu_layers;
    cp.no_kv_offload = o->no_kv_offload;
    cp.no_op_offload = o->no_op_offload;
    cp.tensor_overrides = o->tensor_overrides;
    cp.link = tool_job_link();
    cp.ranks_split = o->ranks_split;
    static struct llm_profile prof; /* large: not on the stack */
    cp.profile = o->profile ? &prof : NULL;
    cp.trace = o->trace;

    t = (llm_now_us() / 1e3);
    const size_t plen = strlen(o->prompt);
    int64_t n_prompt = vocab_tokenize(voc, o->prompt, plen, true, o->parse_special, NULL, 0);
    if (n_prompt < 0 || !(tokens = malloc(((size_t)n_prompt + 1) * sizeof *tokens))) {
        tool_error("out of memory while tokenizing the prompt");
        goto out;
    }
    vocab_tokenize(voc, o->prompt, plen, true, o->parse_special, tokens, n_prompt);
    rs.t_tokenize = (llm_now_us() / 1e3) - t;
    rs.n_prompt = n_prompt;
    if (n_prompt == 0) {
        tool_error("the prompt is empty (give one with -p or -f)");
        goto out;
    }
    if (n_prompt > cp.n_ctx) {
        tool_error("the prompt is too long: %lld tokens, context size %d (raise -c)", (long long)n_prompt, cp.n_ctx);
        goto out;
    }
    if (o->dump && n_prompt > cp.n_batch) {
        tool_error("--dump-logits needs the whole prompt in one batch: %lld tokens > -b %d",
                   (long long)n_prompt, cp.n_batch);
        goto out;
    }
    if (!o->seed_given)
        o->sp.seed = (uint32_t)time(NULL) ^ (uint32_t)((llm_now_us() / 1e3) * 1000.0);
    if (o->ignore_eos && !(eog = eog_tokens(voc))) {
        tool_error("out of memory");
        goto out;
    }
    cp.sampler = &o->sp; /* the context draws: on the last rank of a pipeline, only the id travels */
    cp.sampler_banned = eog;
    t = (llm_now_us() / 1e3);
    if (llm_context_new(model, &cp, &ctx, &err)) {
        tool_error("%s", err.msg);
        goto out;
    }
    rs.t_context = (llm_now_us() / 1e3) - t;
    if (o->verbose)
        fprintf(stderr, "llm-run: model %s (%s), load mode %s%s, n_ctx %d, n_batch %d, n_ubatch %d, threads %d, "
                "kv %s/%s, flash_attn %s, seed %u, temp %.2f top_k %d top_p %.2f min_p %.2f\n",
                o->model, model->desc, gguf_load_mode_name(o->load_mode), model->file->locked ? " (locked)" : "", cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads,
                llm_type_name(cp.type_k), llm_type_name(cp.type_v), cp.flash_attn ? "on" : "off",
                o->sp.seed, o->sp.temp, o->sp.top_k, o->sp.top_p, o->sp.min_p);

    if (o->display_prompt) {
        fputs(o->prompt, stdout);
        fflush(stdout);
    }
    /* every prompt row kept for the dump; the first token is drawn from the last row */
    int32_t first = 0;
    if (eval_prompt(ctx, tokens, &rs, cp.n_batch, o->dump != NULL, &first))
        goto out;
    if (o->verbose && alloc_token_times(&rs, o->n_predict, cp.n_ctx) != 0)
        goto out;
    if (!interrupted && o->dump && dump_logits(o, ctx, (int32_t)n_prompt, n_vocab))
        goto out;
    if (!interrupted && eval_gen(o, ctx, voc, first, &rs))
        goto out;
    if (interrupted)
        rs.stop = " (stopped: interrupted)";
    if (o->display_prompt || rs.n_gen > 0)
        fputc('\n', stdout);
    fflush(stdout);
    print_summary(&rs, ctx, cp.n_threads);
    if (o->verbose)
        print_stats(&rs, ctx, model, &cp);
    if (o->profile)
        print_profile(&prof, ctx, &cp);
    rc = interrupted ? 130 : 0;
out:
    free(rs.tok_ns);
    free(eog);
    free(tokens);
    llm_context_free(ctx);
    llm_model_free(model);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    char **args = tool_expand_aliases(argc, argv, run_aliases, (int)(sizeof run_aliases / sizeof run_aliases[0]));
    if (!args) {
        tool_error("out of memory");
        return 1;
    }
    struct run_opts o = { 0 };
    int rc = parse_args(argc, args, &o);
    if (rc < 0) {
        /* Ctrl-C stops the run and still prints what was generated; a second one kills at once */
        struct sigaction sa = { 0 }, old;
        sa.sa_handler = on_sigint;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        interrupted = 0;
        sigaction(SIGINT, &sa, &old);
        rc = generate(&o);
        sigaction(SIGINT, &old, NULL);
    }
    discard_dump(&o);
    struct llm_error err;
    if (llm_trace_close(o.trace, &err) != 0 && rc == 0) {
        tool_error("%s", err.msg);
        rc = 1;
    }
    free(args);
    free(o.prompt);
    free((char *)o.model);
    free((char *)o.dump_logits);
    free(o.tensor_overrides);
    free(o.ranks_split);
    return rc;
}
