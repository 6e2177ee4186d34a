#include "pipeline.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

#define MAX_RANKS 64
#define MAX_STAGES 16 /* contexts a serving rank holds at once */
#define MAX_MODELS 4
#define MAX_OPTS 16
#define MAX_BANNED 32 /* tokens the last rank's sampler never draws; more: rank 0 draws */

/* Message tags: one per kind, so a rank can wait for exactly the message it needs next. */
enum { TAG_CMD = 1, TAG_OPEN, TAG_STATUS, TAG_ACT, TAG_LOGITS, TAG_TOKEN };
enum { CMD_OPEN, CMD_DECODE, CMD_CLEAR, CMD_CLOSE, CMD_REPORT, CMD_STOP };
/* What a decode's last rank sends back: the logits of every row (else of the last one, unless it
 * draws), and the token it draws. */
enum { OUT_ALL = 1, OUT_DRAW = 2 };

struct pipe_cmd {
    int32_t op, stage, n_tokens, out;
};

/* A stage's settings as they travel: the context parameters without pointers. */
struct pipe_open {
    char path[4096];
    char overrides[1024];
    struct { int32_t device; char name[32]; double value; } opts[MAX_OPTS];
    int32_t n_opts;
    int32_t n_ctx, n_batch, n_ubatch, n_threads, type_k, type_v, flash_attn, device, n_gpu_layers;
    int32_t no_kv_offload, no_op_offload, first, end;
    int32_t draws; /* the last rank draws each llm_decode_next's token with this sampler */
    struct llm_sampler_params sampler;
    int32_t banned[MAX_BANNED + 1];
};

/* Where a rank's decode time went (see llm_rank_info): [0] prompts, [1] single tokens. */
struct timing {
    double busy_us[2], wait_us[2];
    double back_bytes[2], decodes[2]; /* rank 0: what the last rank sent back (logits or a token) */
    double start_us, waited_us; /* of the decode in progress */
    int phase;
};

struct pipe_status {
    int32_t code;
    double rss_bytes;
    struct timing timing;
    char msg[512];
};

struct llm_pipe {
    struct llm_link *link;
    int n_ranks;
    int32_t stage;                      /* this context's number on every rank */
    int32_t first[MAX_RANKS], end[MAX_RANKS];
    int32_t n_vocab;
    bool draws;
    struct llm_stage_io io;
    struct timing timing;
};

double llm_pipe_timeout_s(void)
{
    const char *s = getenv("LLM_MPI_TIMEOUT");
    char *e;
    double v = s ? strtod(s, &e) : 0;
    return s && *s && !*e && v > 0 && isfinite(v) ? v : 300.0;
}

/* ---- the split ------------------------------------------------------------------------------- */

static int parse_shares(const char *spec, int n_ranks, double *share, struct llm_error *err)
{
    int k = 0;
    for (const char *p = spec; *p;) {
        char *e;
        errno = 0;
        double v = strtod(p, &e);
        if (e == p || errno || !isfinite(v) || v < 0 || (*e && *e != '/'))
            return llm_fail(err, LLM_ERR_ARG, "--ranks-split '%s': shares are non-negative numbers separated by '/'",
                            spec);
        if (k == n_ranks)
            return llm_fail(err, LLM_ERR_ARG, "--ranks-split '%s' has more shares than the %d ranks", spec, n_ranks);
        share[k++] = v;
        p = *e ? e + 1 : e;
    }
    if (k != n_ranks)
        return llm_fail(err, LLM_ERR_ARG, "--ranks-split '%s' gives %d shares for %d ranks", spec, k, n_ranks);
    return LLM_OK;
}

int llm_pipe_split(int32_t n_layer, int n_ranks, const char *spec, int32_t *first, int32_t *end,
                   struct llm_error *err)
{
    if (n_ranks < 1 || n_ranks > MAX_RANKS)
        return llm_fail(err, LLM_ERR_ARG, "%d ranks: 1 to %d are supported", n_ranks, MAX_RANKS);
    if (n_ranks > n_layer)
        return llm_fail(err, LLM_ERR_ARG, "%d ranks but the model has %d layers: at most one rank per layer",
                        n_ranks, n_layer);
    double share[MAX_RANKS], total = 0;
    for (int r = 0; r < n_ranks; r++)
        share[r] = 1.0;
    if (spec && *spec) {
        int rc = parse_shares(spec, n_ranks, share, err);
        if (rc)
            return rc;
    }
    for (int r = 0; r < n_ranks; r++)
        total += share[r];
    if (!(total > 0))
        return llm_fail(err, LLM_ERR_ARG, "--ranks-split '%s': the shares add up to 0", spec);
    double cum = 0;
    for (int r = 0; r < n_ranks; r++) {
        cum += share[r];
        first[r] = r ? end[r - 1] : 0;
        end[r] = r == n_ranks - 1 ? n_layer : (int32_t)floor(n_layer * cum / total + 0.5);
        if (end[r] <= first[r])
            return llm_fail(err, LLM_ERR_ARG, "--ranks-split '%s' leaves rank %d without a layer (%d layers)",
                            spec ? spec : "", r, n_layer);
    }
    return LLM_OK;
}

/* ---- memory and time ------------------------------------------------------------------------- */

static void decode_begins(struct timing *t, int32_t n_tokens)
{
    t->phase = n_tokens > 1 ? 0 : 1;
    t->start_us = llm_now_us();
    t->waited_us = 0;
}

static void decode_ends(struct timing *t)
{
    const double total = llm_now_us() - t->start_us;
    t->busy_us[t->phase] += total - t->waited_us;
    t->wait_us[t->phase] += t->waited_us;
}

/* A send or receive of the decode in progress, counted as waiting. */
static int timed(struct timing *t, double t0, int rc)
{
    t->waited_us += llm_now_us() - t0;
    return rc;
}

static double resident_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024.0;
}

/* ---- rank 0 ---------------------------------------------------------------------------------- */

static int send_cmd(struct llm_pipe *pp, int to, int op, int32_t n, int32_t out, struct llm_error *err)
{
    const struct pipe_cmd cmd = { op, pp->stage, n, out };
    return llm_link_send(pp->link, to, TAG_CMD, &cmd, sizeof cmd, llm_pipe_timeout_s(), err);
}

static int to_all(struct llm_pipe *pp, int op, int32_t n, int32_t out, struct llm_error *err)
{
    for (int r = 1; r < pp->n_ranks; r++) {
        int rc = send_cmd(pp, r, op, n, out, err);
        if (rc)
            return rc;
    }
    return LLM_OK;
}

static int first_begin(void *user, int32_t n, bool logits_all, bool draw, struct llm_error *err)
{
    struct llm_pipe *pp = user;
    decode_begins(&pp->timing, n);
    return to_all(pp, CMD_DECODE, n, (logits_all ? OUT_ALL : 0) | (draw ? OUT_DRAW : 0), err);
}

static int first_send(void *user, const void *src, size_t bytes, struct llm_error *err)
{
    struct llm_pipe *pp = user;
    const double t0 = llm_now_us();
    return timed(&pp->timing, t0, llm_link_send(pp->link, 1, TAG_ACT, src, bytes, llm_pipe_timeout_s(), err));
}

static int first_finish(void *user, float *logits, int32_t rows, int32_t *token, struct llm_error *err)
{
    struct llm_pipe *pp = user;
    const double t0 = llm_now_us();
    /* twice a hop's limit: the rank next to a silent one notices first and names it to us */
    int rc = rows ? llm_link_recv(pp->link, pp->n_ranks - 1, TAG_LOGITS, logits,
                                  (size_t)rows * (size_t)pp->n_vocab * sizeof(float), 2 * llm_pipe_timeout_s(), err)
                  : LLM_OK;
    if (!rc && token)
        rc = llm_link_recv(pp->link, pp->n_ranks - 1, TAG_TOKEN, token, sizeof *token, 2 * llm_pipe_timeout_s(), err);
    timed(&pp->timing, t0, rc);
    pp->timing.back_bytes[pp->timing.phase] += (double)rows * pp->n_vocab * sizeof(float) + (token ? sizeof *token : 0);
    pp->timing.decodes[pp->timing.phase]++;
    decode_ends(&pp->timing);
    return rc;
}

/* Can the last rank draw with p's sampler? Not when the repeat penalty needs the tokens decoded
 * (only rank 0 sees them), nor with more banned tokens than the message holds. */
static bool last_rank_draws(const struct llm_context_params *p, int32_t *banned)
{
    if (!p->sampler || p->sampler->repeat_penalty != 1.0f)
        return false;
    int n = 0;
    for (; p->sampler_banned && p->sampler_banned[n] >= 0; n++)
        if (n == MAX_BANNED)
            return false;
        else
            banned[n] = p->sampler_banned[n];
    banned[n] = -1;
    return true;
}

static void fill_open(struct pipe_open *o, const char *path, const struct llm_context_params *p)
{
    snprintf(o->path, sizeof o->path, "%s", path);
    snprintf(o->overrides, sizeof o->overrides, "%s", p->tensor_overrides ? p->tensor_overrides : "");
    o->n_opts = p->n_backend_options < MAX_OPTS ? p->n_backend_options : MAX_OPTS;
    for (int i = 0; i < o->n_opts; i++) {
        o->opts[i].device = (int32_t)p->backend_options[i].device;
        snprintf(o->opts[i].name, sizeof o->opts[i].name, "%s", p->backend_options[i].name);
        o->opts[i].value = p->backend_options[i].value;
    }
    o->n_ctx = p->n_ctx, o->n_batch = p->n_batch, o->n_ubatch = p->n_ubatch, o->n_threads = p->n_threads;
    o->type_k = (int32_t)p->type_k, o->type_v = (int32_t)p->type_v, o->flash_attn = p->flash_attn;
    o->device = (int32_t)p->device, o->n_gpu_layers = p->n_gpu_layers, o->no_kv_offload = p->no_kv_offload;
    o->no_op_offload = p->no_op_offload;
    if ((o->draws = last_rank_draws(p, o->banned)))
        o->sampler = *p->sampler;
}

/* Wait for one status from rank r: its error becomes ours, named with the rank. */
static int await_status(struct llm_pipe *pp, int r, struct pipe_status *st, struct llm_error *err)
{
    int rc = llm_link_recv(pp->link, r, TAG_STATUS, st, sizeof *st, llm_pipe_timeout_s(), err);
    if (!rc && st->code) {
        st->msg[sizeof st->msg - 1] = '\0';
        rc = llm_fail(err, (enum llm_status)st->code, "rank %d: %s", r, st->msg);
    }
    return rc;
}

int llm_pipe_open(struct llm_link *link, const struct llm_model *m, const struct llm_context_params *p,
                  struct llm_pipe **out, int32_t *end, struct llm_error *err)
{
    static int32_t next_stage; /* numbers stay unique for the process's lifetime */
    *out = NULL;
    struct llm_pipe *pp = calloc(1, sizeof *pp);
    struct pipe_open *o = calloc(1, sizeof *o);
    int rc = pp && o ? LLM_OK : llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    if (!rc) {
        *pp = (struct llm_pipe){ .link = link, .n_ranks = llm_link_size(link), .stage = next_stage++,
                                 .n_vocab = (int32_t)m->hp.n_vocab };
        pp->io = (struct llm_stage_io){ .begin = first_begin, .send = first_send, .finish = first_finish,
                                        .user = pp };
        rc = llm_pipe_split((int32_t)m->hp.n_layer, pp->n_ranks, p->ranks_split, pp->first, pp->end, err);
    }
    if (!rc) {
        fill_open(o, m->file->path, p);
        pp->draws = o->draws;
        rc = to_all(pp, CMD_OPEN, 0, 0, err);
    }
    for (int r = 1; !rc && r < pp->n_ranks; r++) {
        o->first = pp->first[r], o->end = pp->end[r];
        rc = llm_link_send(link, r, TAG_OPEN, o, sizeof *o, llm_pipe_timeout_s(), err);
    }
    /* every rank answers, so none is left behind waiting when one failed */
    struct pipe_status st;
    for (int r = 1; !rc && r < pp->n_ranks; r++) {
        int rc_r = await_status(pp, r, &st, rc ? NULL : err);
        rc = rc ? rc : rc_r;
    }
    free(o);
    if (rc) {
        llm_pipe_close(pp);
        return rc;
    }
    *end = pp->end[0];
    *out = pp;
    return LLM_OK;
}

const struct llm_stage_io *llm_pipe_io(struct llm_pipe *pp)
{
    return &pp->io;
}

bool llm_pipe_draws(const struct llm_pipe *pp)
{
    return pp->draws;
}

int llm_pipe_clear(struct llm_pipe *pp, struct llm_error *err)
{
    return to_all(pp, CMD_CLEAR, 0, 0, err);
}

int llm_pipe_ranks(const struct llm_pipe *pp, struct llm_rank_info *out, int cap)
{
    struct llm_pipe *mp = (struct llm_pipe *)pp;
    int n = 0;
    for (int r = 0; r < pp->n_ranks && n < cap; r++) {
        struct pipe_status st = { 0 };
        if (r == 0)
            st = (struct pipe_status){ .rss_bytes = resident_bytes(), .timing = pp->timing };
        else if (send_cmd(mp, r, CMD_REPORT, 0, 0, NULL) || await_status(mp, r, &st, NULL))
            st = (struct pipe_status){ 0 };
        out[n] = (struct llm_rank_info){ .rank = r, .first = pp->first[r], .end = pp->end[r],
                                         .rss_bytes = st.rss_bytes };
        for (int ph = 0; ph < 2; ph++) {
            out[n].busy_ms[ph] = st.timing.busy_us[ph] / 1e3;
            out[n].wait_ms[ph] = st.timing.wait_us[ph] / 1e3;
            out[n].back_bytes[ph] = st.timing.decodes[ph] > 0 ? st.timing.back_bytes[ph] / st.timing.decodes[ph] : 0;
        }
        n++;
    }
    return n;
}

void llm_pipe_close(struct llm_pipe *pp)
{
    if (!pp)
        return;
    to_all(pp, CMD_CLOSE, 0, 0, NULL);
    free(pp);
}

int llm_pipe_stop(struct llm_link *link, struct llm_error *err)
{
    const struct pipe_cmd cmd = { CMD_STOP, 0, 0, 0 };
    int rc = LLM_OK;
    for (int r = 1; r < llm_link_size(link); r++) {
        int rc_r = llm_link_send(link, r, TAG_CMD, &cmd, sizeof cmd, llm_pipe_timeout_s(), rc ? NULL : err);
        rc = rc ? rc : rc_r;
    }
    return rc;
}

/* ---- ranks 1.. ------------------------------------------------------------------------------- */

struct stage {
    int32_t id;
    struct timing timing;
    struct llm_context *ctx;
    bool last;
    char overrides[1024];
    struct llm_backend_option opts[MAX_OPTS];
    char opt_names[MAX_OPTS][32];
};

struct server {
    struct llm_link *link;
    struct stage *current;          /* the stage decoding now (its time is being counted) */
    int rank, n_ranks;
    struct stage stages[MAX_STAGES];
    struct llm_model *models[MAX_MODELS];
    struct llm_stage_io io;
};

static int later_recv(void *user, void *dst, size_t bytes, struct llm_error *err)
{
    struct server *s = user;
    const double t0 = llm_now_us();
    return timed(&s->current->timing, t0,
                 llm_link_recv(s->link, s->rank - 1, TAG_ACT, dst, bytes, llm_pipe_timeout_s(), err));
}

static int later_send(void *user, const void *src, size_t bytes, struct llm_error *err)
{
    struct server *s = user;
    const double t0 = llm_now_us();
    return timed(&s->current->timing, t0,
                 llm_link_send(s->link, s->rank + 1, TAG_ACT, src, bytes, llm_pipe_timeout_s(), err));
}

/* The model at path, loaded once per path for the life of the server. */
static int model_at(struct server *s, const char *path, struct llm_model **out, struct llm_error *err)
{
    int i = 0;
    for (; i < MAX_MODELS && s->models[i]; i++)
        if (!strcmp(s->models[i]->file->path, path)) {
            *out = s->models[i];
            return LLM_OK;
        }
    if (i == MAX_MODELS) { /* the oldest goes: no stage of it may still be open */
        llm_model_free(s->models[0]);
        memmove(s->models, s->models + 1, (MAX_MODELS - 1) * sizeof *s->models);
        i = MAX_MODELS - 1;
    }
    int rc = llm_model_load_mode(path, GGUF_LOAD_MMAP, LLM_LOAD_NO_REPACK, &s->models[i], err);
    *out = s->models[i];
    return rc;
}

static struct stage *stage_of(struct server *s, int32_t id)
{
    for (int i = 0; i < MAX_STAGES; i++)
        if (s->stages[i].ctx && s->stages[i].id == id)
            return &s->stages[i];
    return NULL;
}

static int open_stage(struct server *s, int32_t id, struct llm_error *err)
{
    struct pipe_open *o = malloc(sizeof *o);
    if (!o)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    int rc = llm_link_recv(s->link, 0, TAG_OPEN, o, sizeof *o, llm_pipe_timeout_s(), err);
    struct stage *st = NULL;
    for (int i = 0; !rc && i < MAX_STAGES && !st; i++)
        st = s->stages[i].ctx ? NULL : &s->stages[i];
    if (!rc && !st)
        rc = llm_fail(err, LLM_ERR_ARG, "more than %d contexts open at once", MAX_STAGES);
    struct llm_model *m = NULL;
    if (!rc) {
        o->path[sizeof o->path - 1] = o->overrides[sizeof o->overrides - 1] = '\0';
        rc = model_at(s, o->path, &m, err);
    }
    if (!rc) {
        struct llm_context_params p = llm_context_default_params();
        p.n_ctx = o->n_ctx, p.n_batch = o->n_batch, p.n_ubatch = o->n_ubatch, p.n_threads = o->n_threads;
        p.type_k = (enum llm_type)o->type_k, p.type_v = (enum llm_type)o->type_v, p.flash_attn = o->flash_attn;
        p.device = (enum llm_device)o->device, p.n_gpu_layers = o->n_gpu_layers;
        p.no_kv_offload = o->no_kv_offload, p.no_op_offload = o->no_op_offload;
        memcpy(st->overrides, o->overrides, sizeof st->overrides);
        p.tensor_overrides = st->overrides;
        p.n_backend_options = o->n_opts < MAX_OPTS ? o->n_opts : MAX_OPTS;
        for (int i = 0; i < p.n_backend_options; i++) {
            snprintf(st->opt_names[i], sizeof st->opt_names[i], "%s", o->opts[i].name);
            st->opts[i] = (struct llm_backend_option){ (enum llm_device)o->opts[i].device, st->opt_names[i],
                                                      o->opts[i].value };
        }
        p.backend_options = st->opts;
        p.layer_first = o->first, p.layer_end = o->end;
        p.io = &s->io;
        st->id = id;
        st->last = o->end == (int32_t)m->hp.n_layer;
        if (st->last && o->draws)
            p.sampler = &o->sampler, p.sampler_banned = o->banned;
        rc = llm_context_new(m, &p, &st->ctx, err);
    }
    free(o);
    return rc;
}

static int reply(struct server *s, const struct stage *stage, int code, const struct llm_error *e)
{
    struct pipe_status st = { .code = code, .rss_bytes = resident_bytes() };
    if (stage)
        st.timing = stage->timing;
    if (code)
        snprintf(st.msg, sizeof st.msg, "%s", e->msg);
    return llm_link_send(s->link, 0, TAG_STATUS, &st, sizeof st, llm_pipe_timeout_s(), NULL);
}

static int decode(struct server *s, const struct pipe_cmd *cmd, struct llm_error *err)
{
    struct stage *st = stage_of(s, cmd->stage);
    if (!st)
        return llm_fail(err, LLM_ERR_ARG, "rank %d: decode on context %d, which is not open", s->rank, cmd->stage);
    s->current = st;
    decode_begins(&st->timing, cmd->n_tokens);
    const bool all = cmd->out & OUT_ALL, draw = st->last && (cmd->out & OUT_DRAW);
    int32_t token = 0;
    int rc = draw ? llm_decode_next(st->ctx, NULL, cmd->n_tokens, all, &token, err)
                  : llm_decode(st->ctx, NULL, cmd->n_tokens, all, err);
    decode_ends(&st->timing);
    if (rc || !st->last)
        return rc;
    const int32_t rows = all ? cmd->n_tokens : draw ? 0 : 1;
    const int32_t n_vocab = (int32_t)llm_context_model(st->ctx)->hp.n_vocab;
    if (rows)
        rc = llm_link_send(s->link, 0, TAG_LOGITS, llm_get_logits(st->ctx, 0),
                           (size_t)rows * (size_t)n_vocab * sizeof(float), llm_pipe_timeout_s(), err);
    if (!rc && draw)
        rc = llm_link_send(s->link, 0, TAG_TOKEN, &token, sizeof token, llm_pipe_timeout_s(), err);
    return rc;
}

static void serve_free(struct server *s)
{
    for (int i = 0; i < MAX_STAGES; i++)
        llm_context_free(s->stages[i].ctx);
    for (int i = 0; i < MAX_MODELS; i++)
        llm_model_free(s->models[i]);
}

int llm_pipe_serve(struct llm_link *link, struct llm_error *err)
{
    struct server *s = calloc(1, sizeof *s);
    if (!s)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    *s = (struct server){ .link = link, .rank = llm_link_rank(link), .n_ranks = llm_link_size(link) };
    s->io = (struct llm_stage_io){ .recv = later_recv, .user = s };
    if (s->rank + 1 < s->n_ranks)
        s->io.send = later_send;
    int rc = LLM_OK;
    for (bool stop = false; !rc && !stop;) {
        struct pipe_cmd cmd;
        rc = llm_link_recv(link, 0, TAG_CMD, &cmd, sizeof cmd, 0, err); /* idle for as long as rank 0 likes */
        if (rc)
            break;
        struct stage *st = stage_of(s, cmd.stage);
        struct llm_error e = { 0 };
        switch (cmd.op) {
        case CMD_OPEN: {
            int orc = open_stage(s, cmd.stage, &e);
            rc = reply(s, NULL, orc, &e);
            break;
        }
        case CMD_DECODE:
            rc = decode(s, &cmd, err);
            break;
        case CMD_CLEAR:
            if (st)
                llm_kv_clear(st->ctx);
            break;
        case CMD_CLOSE:
            if (st) {
                llm_context_free(st->ctx);
                st->ctx = NULL;
            }
            break;
        case CMD_REPORT:
            rc = reply(s, st, LLM_OK, &e);
            break;
        case CMD_STOP:
            stop = true;
            break;
        default:
            rc = llm_fail(err, LLM_ERR_PEER, "rank %d: unknown message %d from rank 0", s->rank, cmd.op);
        }
    }
    if (rc) { /* rank 0 prints the error; it then ends the job (a stop, or an abort) */
        char note[sizeof err->msg + 32];
        snprintf(note, sizeof note, "rank %d: %s", s->rank, err->msg);
        llm_link_report(link, note);
        struct pipe_cmd cmd;
        llm_link_recv(link, 0, TAG_CMD, &cmd, sizeof cmd, llm_pipe_timeout_s(), NULL);
    }
    serve_free(s);
    free(s);
    return rc;
}
