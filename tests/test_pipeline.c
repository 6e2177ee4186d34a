/* Pipeline stages (issue 31) without MPI: llm_pipe_split's layer ranges and errors, and a model
 * run as two or three stages in one process, chained through an in-memory transport, whose logits
 * must equal the whole model's bit for bit (stories260K; prompts longer than a micro-batch, then
 * decoded tokens; cpu and npu stages); llm_decode_next's draws against a sampler on the logits. */
#include "harness.h"

#include "model/context.h"
#include "model/pipeline.h"
#include "ops/types/repack.h"

static void test_split(void)
{
    int32_t f[8], e[8];
    struct llm_error err;
    CHECK(llm_pipe_split(5, 2, NULL, f, e, &err) == 0, "%s", err.msg);
    CHECK(f[0] == 0 && e[0] == 3 && f[1] == 3 && e[1] == 5, "equal 5/2: [%d,%d) [%d,%d)", f[0], e[0], f[1], e[1]);
    CHECK(llm_pipe_split(5, 3, "", f, e, &err) == 0, "%s", err.msg);
    CHECK(e[0] == 2 && e[1] == 3 && e[2] == 5, "equal 5/3: %d %d %d", e[0], e[1], e[2]);
    CHECK(llm_pipe_split(4, 2, "1/3", f, e, &err) == 0, "%s", err.msg);
    CHECK(e[0] == 1 && f[1] == 1 && e[1] == 4, "1/3 of 4: %d %d", e[0], e[1]);
    CHECK(llm_pipe_split(32, 4, "0.5/1/1/1.5", f, e, &err) == 0, "%s", err.msg);
    CHECK(e[0] == 4 && e[1] == 12 && e[2] == 20 && e[3] == 32, "32 by 0.5/1/1/1.5: %d %d %d %d", e[0], e[1], e[2], e[3]);
    CHECK(llm_pipe_split(2, 2, NULL, f, e, &err) == 0 && e[0] == 1, "one layer each");
    CHECK(llm_pipe_split(2, 3, NULL, f, e, &err) == LLM_ERR_ARG && strstr(err.msg, "3 ranks but the model has 2"),
          "%s", err.msg);
    CHECK(llm_pipe_split(5, 2, "1/2/3", f, e, &err) == LLM_ERR_ARG && strstr(err.msg, "more shares"), "%s", err.msg);
    CHECK(llm_pipe_split(5, 3, "1/2", f, e, &err) == LLM_ERR_ARG && strstr(err.msg, "gives 2 shares for 3"), "%s", err.msg);
    CHECK(llm_pipe_split(5, 2, "0/1", f, e, &err) == LLM_ERR_ARG && strstr(err.msg, "rank 0 without a layer"), "%s",
          err.msg);
    CHECK(llm_pipe_split(5, 2, "1/x", f, e, &err) == LLM_ERR_ARG, "a share that is no number");
    CHECK(llm_pipe_split(5, 2, "1/-1", f, e, &err) == LLM_ERR_ARG, "a negative share");
    CHECK(llm_pipe_split(5, 2, "0/0", f, e, &err) == LLM_ERR_ARG && strstr(err.msg, "add up to 0"), "%s", err.msg);
    CHECK(llm_pipe_split(9, 4, "1/100/1/1", f, e, &err) == LLM_ERR_ARG && strstr(err.msg, "without a layer"),
          "a share too small to round to a layer: %s", err.msg);
}

/* A FIFO of bytes between two stages of one process. */
struct fifo {
    unsigned char *buf;
    size_t head, tail;
};

/* A stage reads from in (the previous stage's fifo) and writes to out. */
struct ends {
    struct fifo *in, *out;
};

static int fifo_send(void *user, const void *src, size_t bytes, struct llm_error *err)
{
    struct fifo *q = ((struct ends *)user)->out;
    unsigned char *nb = realloc(q->buf, q->tail + bytes);
    if (!nb)
        return llm_fail(err, LLM_ERR_NOMEM, "fifo");
    q->buf = nb;
    memcpy(q->buf + q->tail, src, bytes);
    q->tail += bytes;
    return LLM_OK;
}

static int fifo_recv(void *user, void *dst, size_t bytes, struct llm_error *err)
{
    struct fifo *q = ((struct ends *)user)->in;
    if (q->tail - q->head < bytes)
        return llm_fail(err, LLM_ERR_PEER, "fifo: %zu bytes wanted, %zu there", bytes, q->tail - q->head);
    memcpy(dst, q->buf + q->head, bytes);
    q->head += bytes;
    return LLM_OK;
}

#define MAX_ST 3

/* Run a 40-token prompt (every row's logits), a 24-token one (the last row's) and 4 greedy decode
 * steps through stages [bounds[i], bounds[i+1]) and through the whole model: every logits row must
 * be equal. */
static void chain(struct llm_model *m, enum llm_device dev, const int32_t *bounds, int n_st, int32_t n_ubatch)
{
    struct llm_error err = { 0 };
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = 256;
    p.n_ubatch = n_ubatch;
    p.device = dev;
    struct llm_context *whole = NULL, *st[MAX_ST] = { 0 };
    struct fifo q[MAX_ST] = { 0 };
    struct ends ends[MAX_ST];
    struct llm_stage_io io[MAX_ST];
    CHECK(llm_context_new(m, &p, &whole, &err) == 0, "%s", err.msg);
    bool ok = whole != NULL;
    for (int i = 0; i < n_st && ok; i++) {
        ends[i] = (struct ends){ .in = i ? &q[i - 1] : NULL, .out = &q[i] };
        io[i] = (struct llm_stage_io){ .recv = i ? fifo_recv : NULL, .send = i + 1 < n_st ? fifo_send : NULL,
                                       .user = &ends[i] };
        struct llm_context_params sp = p;
        sp.layer_first = bounds[i];
        sp.layer_end = bounds[i + 1];
        sp.io = &io[i];
        CHECK(llm_context_new(m, &sp, &st[i], &err) == 0, "stage %d: %s", i, err.msg);
        ok = st[i] != NULL;
    }
    const int32_t n_vocab = (int32_t)m->hp.n_vocab;
    int32_t tokens[40];
    for (int i = 0; i < 40; i++)
        tokens[i] = (i * 37 + 1) % n_vocab;
    for (int step = 0; ok && step < 6; step++) {
        /* a prompt with every row's logits, one with the last row's only, then single tokens */
        const int32_t n = step == 0 ? 40 : step == 1 ? 24 : 1;
        const bool all = step == 0;
        CHECK(llm_decode(whole, tokens, n, all, &err) == 0, "%s", err.msg);
        for (int i = 0; i < n_st && ok; i++) {
            ok = llm_decode(st[i], i ? NULL : tokens, n, all, &err) == 0;
            CHECK(ok, "stage %d step %d: %s", i, step, err.msg);
        }
        const int32_t rows = all ? n : 1;
        for (int32_t r = 0; ok && r < rows; r++) {
            const float *a = llm_get_logits(whole, r), *b = llm_get_logits(st[n_st - 1], r);
            CHECK(a && b && memcmp(a, b, (size_t)n_vocab * sizeof(float)) == 0, "step %d row %d differs", step, r);
        }
        int32_t best = 0;
        const float *l = llm_get_logits(whole, rows - 1);
        for (int32_t v = 1; l && v < n_vocab; v++)
            best = l[v] > l[best] ? v : best;
        tokens[0] = best;
    }
    for (int i = 0; i < n_st; i++) {
        llm_context_free(st[i]);
        free(q[i].buf);
    }
    llm_context_free(whole);
}

/* llm_decode_next draws what a sampler of the same settings draws from llm_get_logits after each
 * llm_decode when it has seen every decoded token (repeat penalty) and skips banned tokens; a
 * context without a sampler refuses to draw. */
static void draws(struct llm_model *m)
{
    struct llm_error err = { 0 };
    struct llm_sampler_params sp = llm_sampler_default_params();
    sp.seed = 11, sp.repeat_penalty = 1.5f;
    const int32_t banned[] = { 13, -1 };
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = 128;
    struct llm_context *plain = NULL, *drawing = NULL;
    CHECK(llm_context_new(m, &p, &plain, &err) == 0, "%s", err.msg);
    p.sampler = &sp, p.sampler_banned = banned;
    CHECK(llm_context_new(m, &p, &drawing, &err) == 0, "%s", err.msg);
    struct llm_sampler *s = llm_sampler_new(&sp, (int32_t)m->hp.n_vocab);
    if (!plain || !drawing || !s || !llm_sampler_ban(s, banned))
        goto out;
    int32_t tok = 0, next = -1;
    CHECK(llm_decode_next(plain, &tok, 1, false, &next, &err) == LLM_ERR_ARG && strstr(err.msg, "needs a sampler"),
          "a context without a sampler drew: %s", err.msg);
    int32_t prompt[24];
    for (int i = 0; i < 24; i++)
        prompt[i] = (i * 37 + 1) % (int32_t)m->hp.n_vocab;
    bool same = true, banned_drawn = false;
    for (int step = 0; step < 40 && same; step++) {
        const int32_t *in = step ? &tok : prompt;
        const int32_t n = step ? 1 : 24;
        CHECK(llm_decode(plain, in, n, false, &err) == 0, "%s", err.msg);
        for (int i = 0; i < n; i++)
            llm_sampler_accept(s, in[i]);
        const int32_t want = llm_sampler_sample(s, llm_get_logits(plain, 0));
        CHECK(llm_decode_next(drawing, in, n, false, &next, &err) == 0, "%s", err.msg);
        same = next == want;
        CHECK(same, "step %d: drew %d, the sampler on the logits %d", step, next, want);
        banned_drawn |= next == 13;
        tok = want;
    }
    CHECK(!banned_drawn, "a banned token was drawn");
out:
    llm_sampler_free(s);
    llm_context_free(plain);
    llm_context_free(drawing);
}

/* A stage's model loaded without the repack (as a rank of an MPI job loads it): the stage repacks
 * its own layers' matrices when it opens, not the others', and its logits stay those of the whole
 * model (llama-k256 Q4_K_M: its K-quant matrices are repacked on every AVX2 cpu). */
static void stage_repack(void)
{
    struct llm_model *m = NULL;
    struct llm_error err;
    const char *path = test_path("models/llama-k256-q4_k_m.gguf");
    CHECK(llm_model_load_mode(path, GGUF_LOAD_MMAP, LLM_LOAD_NO_REPACK, &m, &err) == 0, "%s: %s", path, err.msg);
    if (!m)
        return;
    const struct llm_tensor *mine = m->layers[1].ffn_down, *other = m->layers[0].ffn_down;
    const bool repacks = llm_repack_kernel(mine->type) != NULL;
    CHECK(!(mine->flags & LLM_TENSOR_REPACKED), "repacked at load");
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = 64;
    p.layer_first = 1, p.layer_end = 2;
    struct ends ends = { 0 };
    struct fifo q = { 0 };
    ends.out = &q;
    struct llm_stage_io io = { .recv = fifo_recv, .send = fifo_send, .user = &ends };
    p.io = &io;
    struct llm_context *st = NULL;
    CHECK(llm_context_new(m, &p, &st, &err) == 0, "stage: %s", err.msg);
    CHECK(((mine->flags & LLM_TENSOR_REPACKED) != 0) == repacks && !(other->flags & LLM_TENSOR_REPACKED),
          "stage [1, 2): layer 1 repacked %d (kernel %d), layer 0 %d", (mine->flags & LLM_TENSOR_REPACKED) != 0,
          repacks, (other->flags & LLM_TENSOR_REPACKED) != 0);
    llm_context_free(st);
    free(q.buf);
    chain(m, LLM_DEVICE_CPU, (const int32_t[]){ 0, 1, (int32_t)m->hp.n_layer }, 2, 16);
    llm_model_free(m);
}

int main(void)
{
    test_split();
    struct llm_model *m = NULL;
    struct llm_error err;
    const char *path = test_path("models/stories260K.gguf");
    CHECK(llm_model_load(path, &m, &err) == 0, "%s: %s", path, err.msg);
    if (m) {
        chain(m, LLM_DEVICE_CPU, (const int32_t[]){ 0, 2, 5 }, 2, 16);    /* 3 micro-batches */
        chain(m, LLM_DEVICE_CPU, (const int32_t[]){ 0, 1, 4, 5 }, 3, 512);
        chain(m, LLM_DEVICE_NPU, (const int32_t[]){ 0, 1, 5 }, 2, 512);
        chain(m, LLM_DEVICE_NPU, (const int32_t[]){ 0, 2, 3, 5 }, 3, 16);
        draws(m);
    }
    stage_repack();
    llm_model_free(m);
    return test_done("test_pipeline");
}
