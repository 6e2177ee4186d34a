/* llm-run: generate text from a prompt (llama-cli / llama-simple style). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "commands.h"
#include "model/context.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/vocab.h"
#include "log.h"

static const struct tool_alias run_aliases[] = {
    { "-ub", "--ubatch-size" }, { "-ctk", "--cache-type-k" }, { "-ctv", "--cache-type-v" },
    { "-dev", "--device" }, { "-ngl", "--n-gpu-layers" }, { "-fa", "--flash-attn" },
};

struct run_opts {
    const char *model, *prompt_file, *device, *dump_logits;
    char *prompt;
    int n_predict, n_ctx, n_batch, n_ubatch, n_threads;
    struct llm_sampler_params sp;
    enum llm_type type_k, type_v;
    int flash_attn;
    bool display_prompt, special, verbose, seed_given;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

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
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (!buf)
        buf = calloc(1, 1);
    else
        buf[len] = '\0';
    return buf;
}

static int parse_cache_type(const char *s, enum llm_type *out)
{
    if (!strcmp(s, "f16")) {
        *out = LLM_TYPE_F16;
    } else if (!strcmp(s, "f32")) {
        *out = LLM_TYPE_F32;
    } else {
        tool_error("unsupported KV cache type '%s' (use f16 or f32)", s);
        return 1;
    }
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
    struct arg_int *threads = arg_int0("t", "threads", "N", "threads (default 2)");
    struct arg_dbl *temp = arg_dbl0(NULL, "temp", "T", "temperature (default 0.8; 0 = greedy)");
    struct arg_int *top_k = arg_int0(NULL, "top-k", "N", "top-k (default 40; 0 = off)");
    struct arg_dbl *top_p = arg_dbl0(NULL, "top-p", "P", "top-p (default 0.95; 1 = off)");
    struct arg_dbl *min_p = arg_dbl0(NULL, "min-p", "P", "min-p (default 0.05; 0 = off)");
    struct arg_dbl *rep_pen = arg_dbl0(NULL, "repeat-penalty", "X", "repeat penalty (default 1.0 = off)");
    struct arg_int *rep_n = arg_int0(NULL, "repeat-last-n", "N", "tokens the penalty looks back (default 64)");
    struct arg_str *seed = arg_str0("s", "seed", "N", "random seed (default: random)");
    struct arg_str *ctk = arg_str0(NULL, "cache-type-k", "TYPE", "-ctk: K cache type f16|f32 (default f16)");
    struct arg_str *ctv = arg_str0(NULL, "cache-type-v", "TYPE", "-ctv: V cache type f16|f32 (default f16)");
    struct arg_str *fa = arg_str0(NULL, "flash-attn", "on|off|auto", "-fa: fused attention (default auto = on)");
    struct arg_str *dev = arg_str0(NULL, "device", "cpu|npu", "-dev: backend (default cpu)");
    struct arg_int *ngl = arg_int0(NULL, "n-gpu-layers", "N", "-ngl: layers offloaded to the device");
    struct arg_lit *no_display = arg_lit0(NULL, "no-display-prompt", "print only the generated text");
    struct arg_lit *special = arg_lit0(NULL, "special", "print control tokens' text");
    struct arg_file *dump = arg_file0(NULL, "dump-logits", "FILE", "write the prompt's logits (float32 rows of n_vocab)");
    struct arg_lit *verbose = arg_lit0("v", "verbose", "print settings and statistics");
    struct arg_lit *help = arg_lit0("h", "help", "print this help");
    struct arg_end *end = arg_end(5);
    void *table[] = { help, model, prompt, file, n_predict, n_ctx, n_batch, n_ubatch, threads, temp, top_k,
                      top_p, min_p, rep_pen, rep_n, seed, ctk, ctv, fa, dev, ngl, no_display, special,
                      dump, verbose, end };
    const int n_table = sizeof table / sizeof table[0];
    int rc = -1;

    int pr = tool_parse_args(table, argc, argv, "Generate text from a prompt with a GGUF model.");
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
    if (file->count) {
        o->prompt = read_file(file->filename[0]);
        if (!o->prompt) {
            tool_error("cannot read prompt file '%s': %s", file->filename[0], strerror(errno));
            rc = 1;
            goto out;
        }
    } else {
        o->prompt = strdup(prompt->count ? prompt->sval[0] : "");
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
    o->seed_given = seed->count > 0;
    if (seed->count) {
        char *e;
        errno = 0;
        unsigned long v = strtoul(seed->sval[0], &e, 0);
        if (errno || *e || !*seed->sval[0] || v > 0xFFFFFFFFul) {
            tool_error("invalid seed '%s'", seed->sval[0]);
            rc = 1;
            goto out;
        }
        o->sp.seed = (uint32_t)v;
        o->seed_given = v != 0xFFFFFFFFul;
    }
    o->type_k = o->type_v = LLM_TYPE_F16;
    o->flash_attn = 1;
    if ((ctk->count && parse_cache_type(ctk->sval[0], &o->type_k)) ||
        (ctv->count && parse_cache_type(ctv->sval[0], &o->type_v)) ||
        (fa->count && parse_on_off(fa->sval[0], &o->flash_attn))) {
        rc = 1;
        goto out;
    }
    o->device = dev->count ? dev->sval[0] : "cpu";
    if (llm_device_from_name(o->device) < 0) {
        tool_error("unknown device '%s' (use cpu or npu)", o->device);
        rc = 1;
        goto out;
    }
    (void)ngl; /* -dev npu runs every layer on the npu; mixed placement comes with the scheduler */
    o->display_prompt = !no_display->count;
    o->special = special->count > 0;
    o->verbose = verbose->count > 0;
    o->dump_logits = dump->count ? strdup(dump->filename[0]) : NULL;
    if (o->n_batch < 1 || o->n_ubatch < 1 || o->n_threads < 1 || o->n_ctx < 0 || o->n_predict < -1 ||
        o->sp.top_k < 0 || o->sp.repeat_last_n < 0) {
        tool_error("invalid value: -b, -ub, -t must be >= 1, -c >= 0, -n >= -1, --top-k and --repeat-last-n >= 0");
        rc = 1;
    } else if (!isfinite(o->sp.temp) || !isfinite(o->sp.top_p) || !(o->sp.top_p >= 0) ||
               !isfinite(o->sp.min_p) || !(o->sp.min_p >= 0) || !isfinite(o->sp.repeat_penalty) ||
               !(o->sp.repeat_penalty > 0)) {
        tool_error("invalid sampling value: --temp, --top-p, --min-p must be finite numbers, --top-p and "
                   "--min-p >= 0, --repeat-penalty > 0");
        rc = 1;
    }
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

static int dump_logits(const char *path, const struct llm_context *ctx, int32_t rows, int32_t n_vocab)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        tool_error("cannot write '%s': %s", path, strerror(errno));
        return 1;
    }
    bool ok = true;
    for (int32_t r = 0; r < rows && ok; r++)
        ok = fwrite(llm_get_logits(ctx, r), sizeof(float), (size_t)n_vocab, f) == (size_t)n_vocab;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        tool_error("cannot write '%s': %s", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* Graph cache and launch statistics of the run (npu), per token where that is what matters. */
static void print_stats(const struct llm_context *ctx, int n_prompt, int n_gen)
{
    struct llm_graph_stats st;
    llm_context_stats(ctx, &st);
    const int n_tok = n_prompt + n_gen > 0 ? n_prompt + n_gen : 1;
    fprintf(stderr, "llm-run: graph captures %llu, replays %llu, hits %llu, misses %llu, evictions %llu, "
            "eager graphs %llu, eager launches %llu, ops replayed %llu\n",
            (unsigned long long)st.captures, (unsigned long long)st.replays, (unsigned long long)st.hits,
            (unsigned long long)st.misses, (unsigned long long)st.evictions, (unsigned long long)st.eager_graphs,
            (unsigned long long)st.eager_launches, (unsigned long long)st.ops_replayed);
    fprintf(stderr, "llm-run: host launch %.1f us, host match %.1f us, host serial %.1f us, device %.1f us "
            "(per token of %d: %.2f / %.2f / %.2f / %.2f us)\n",
            st.host_launch_us, st.host_match_us, st.host_serial_us, st.device_us, n_tok, st.host_launch_us / n_tok,
            st.host_match_us / n_tok, st.host_serial_us / n_tok, st.device_us / n_tok);
}

static int generate(struct run_opts *o)
{
    struct llm_error err = { 0 };
    struct llm_model *model = NULL;
    struct llm_context *ctx = NULL;
    struct llm_sampler *smpl = NULL;
    int32_t *tokens = NULL;
    int rc = 1;

    const double t0 = now_ms();
    if (llm_model_load(o->model, &model, &err)) {
        tool_error("%s", err.msg);
        return 1;
    }
    const double t_load = now_ms() - t0;
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

    const size_t plen = strlen(o->prompt);
    int64_t n_prompt = vocab_tokenize(voc, o->prompt, plen, true, true, NULL, 0);
    if (n_prompt < 0 || !(tokens = malloc(((size_t)n_prompt + 1) * sizeof *tokens))) {
        tool_error("out of memory while tokenizing the prompt");
        goto out;
    }
    vocab_tokenize(voc, o->prompt, plen, true, true, tokens, n_prompt);
    if (n_prompt == 0) {
        tool_error("the prompt is empty (give one with -p or -f)");
        goto out;
    }
    if (n_prompt > cp.n_ctx) {
        tool_error("the prompt is too long: %lld tokens, context size %d (raise -c)", (long long)n_prompt, cp.n_ctx);
        goto out;
    }
    if (o->dump_logits && n_prompt > cp.n_batch) {
        tool_error("--dump-logits needs the whole prompt in one batch: %lld tokens > -b %d",
                   (long long)n_prompt, cp.n_batch);
        goto out;
    }
    if (!o->seed_given)
        o->sp.seed = (uint32_t)time(NULL) ^ (uint32_t)(now_ms() * 1000.0);
    if (o->verbose)
        llm_log_set_level(LLM_LOG_INFO);
    if (llm_context_new(model, &cp, &ctx, &err)) {
        tool_error("%s", err.msg);
        goto out;
    }
    smpl = llm_sampler_new(&o->sp, n_vocab);
    if (!smpl) {
        tool_error("out of memory");
        goto out;
    }
    if (o->verbose)
        fprintf(stderr, "llm-run: model %s (%s), n_ctx %d, n_batch %d, n_ubatch %d, threads %d, "
                "kv %s/%s, flash_attn %s, seed %u, temp %.2f top_k %d top_p %.2f min_p %.2f\n",
                o->model, model->desc, cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads,
                llm_type_name(cp.type_k), llm_type_name(cp.type_v), cp.flash_attn ? "on" : "off",
                o->sp.seed, o->sp.temp, o->sp.top_k, o->sp.top_p, o->sp.min_p);

    if (o->display_prompt) {
        fputs(o->prompt, stdout);
        fflush(stdout);
    }
    const double t1 = now_ms();
    for (int64_t done = 0; done < n_prompt;) {
        int32_t n = (int32_t)(n_prompt - done < cp.n_batch ? n_prompt - done : cp.n_batch);
        if (llm_decode(ctx, tokens + done, n, o->dump_logits != NULL, &err)) {
            tool_error("%s", err.msg);
            goto out;
        }
        done += n;
    }
    for (int64_t i = 0; i < n_prompt; i++)
        llm_sampler_accept(smpl, tokens[i]);
    const double t_prompt = now_ms() - t1;
    if (o->dump_logits && dump_logits(o->dump_logits, ctx, (int32_t)n_prompt, n_vocab))
        goto out;

    /* Generation: sample from the last row, stop at end of generation, -n, or a full context. */
    struct utf8_out u = { .n = 0 };
    const float *logits = llm_get_logits(ctx, o->dump_logits ? (int32_t)n_prompt - 1 : 0);
    int n_gen = 0;
    bool ctx_full = false;
    const double t2 = now_ms();
    while (o->n_predict < 0 || n_gen < o->n_predict) {
        int32_t tok = llm_sampler_sample(smpl, logits);
        llm_sampler_accept(smpl, tok);
        n_gen++;
        if (vocab_is_eog(voc, tok))
            break;
        char piece[256];
        size_t len = vocab_token_to_piece(voc, tok, o->special, piece, sizeof piece);
        utf8_write(&u, piece, len < sizeof piece ? len : sizeof piece);
        if (o->n_predict >= 0 && n_gen == o->n_predict)
            break;
        if (llm_n_past(ctx) >= llm_n_ctx(ctx)) {
            ctx_full = true;
            break;
        }
        if (llm_decode(ctx, &tok, 1, false, &err)) {
            utf8_flush(&u);
            tool_error("%s", err.msg);
            goto out;
        }
        logits = llm_get_logits(ctx, 0);
    }
    utf8_flush(&u);
    const double t_gen = now_ms() - t2;
    if (o->display_prompt || n_gen > 0)
        fputc('\n', stdout);
    fprintf(stderr, "\nllm-run: load %.2f ms | prompt %lld tokens, %.2f ms, %.2f t/s | generated %d tokens, %.2f ms, %.2f t/s%s\n",
            t_load, (long long)n_prompt, t_prompt, n_prompt / (t_prompt / 1e3), n_gen, t_gen,
            t_gen > 0 ? n_gen / (t_gen / 1e3) : 0.0, ctx_full ? " (stopped: context full)" : "");
    fprintf(stderr, "llm-run: backend %s, %d threads\n", llm_context_backend_name(ctx), cp.n_threads);
    if (o->verbose)
        print_stats(ctx, (int)n_prompt, n_gen);
    rc = 0;
out:
    free(tokens);
    llm_sampler_free(smpl);
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
    if (rc < 0)
        rc = generate(&o);
    free(args);
    free(o.prompt);
    free((char *)o.model);
    free((char *)o.dump_logits);
    return rc;
}
