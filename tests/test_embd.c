/* Issue 28: -embd makes the context keep each output row's hidden state after the output norm
 * (llama.cpp's embeddings with "last" pooling) instead of its logits: on the cpu and the npu, the
 * output matrix applied to each row's state gives the logits a context without -embd computes
 * (stories260K, all F32: the same sums in another order, within 1e-4 of the logit range). */
#include "harness.h"
#include "model/context.h"
#include "model/model.h"

static struct llm_context *decode(struct llm_model *m, enum llm_device dev, bool embd, const int32_t *toks, int n)
{
    struct llm_context_params cp = llm_context_default_params();
    cp.n_ctx = 64;
    cp.device = dev;
    cp.embeddings = embd;
    struct llm_context *c = NULL;
    struct llm_error err = { 0 };
    CHECK(llm_context_new(m, &cp, &c, &err) == 0, "%s", err.msg);
    if (c)
        CHECK(llm_decode(c, toks, n, true, &err) == 0, "%s", err.msg);
    return c;
}

int main(void)
{
    struct llm_error err = { 0 };
    struct llm_model *m = NULL;
    CHECK(llm_model_load(test_path("models/stories260K.gguf"), &m, &err) == 0, "%s", err.msg);
    if (!m)
        return test_done("test_embd");
    CHECK(m->output->type == LLM_TYPE_F32, "stories260K's output matrix is F32");
    const int32_t toks[] = { 1, 403, 407, 261, 356, 347 };
    const int n_embd = (int)m->hp.n_embd, n_vocab = (int)m->hp.n_vocab;
    const enum llm_device devs[] = { LLM_DEVICE_CPU, LLM_DEVICE_NPU };
    for (int d = 0; d < 2; d++) {
        struct llm_context *lc = decode(m, devs[d], false, toks, 6), *ec = decode(m, devs[d], true, toks, 6);
        CHECK(ec && !llm_get_logits(ec, 0) && lc && !llm_get_embeddings(lc, 0), "one kind of row per context");
        for (int row = 0; row < 6; row++) { /* every position's row, each at its own place */
            const float *logits = lc ? llm_get_logits(lc, row) : NULL, *e = ec ? llm_get_embeddings(ec, row) : NULL;
            CHECK(logits && e, "device %d row %d: logits %p, embeddings %p", d, row, (const void *)logits,
                  (const void *)e);
            if (!logits || !e)
                continue;
            float lo = logits[0], hi = logits[0], worst = 0;
            for (int v = 0; v < n_vocab; v++) {
                const float *w = (const float *)((const char *)m->output->data + (size_t)v * m->output->nb[1]);
                double dot = 0;
                for (int k = 0; k < n_embd; k++)
                    dot += (double)w[k] * e[k];
                worst = fmaxf(worst, fabsf((float)dot - logits[v]));
                lo = fminf(lo, logits[v]);
                hi = fmaxf(hi, logits[v]);
            }
            CHECK(worst <= 1e-4f * (hi - lo), "device %d row %d: output x embeddings differs from logits by %g (range %g)",
                  d, row, worst, hi - lo);
        }
        llm_context_free(lc);
        llm_context_free(ec);
    }
    llm_model_free(m);
    return test_done("test_embd");
}
