/* libFuzzer target: llm_model_load on arbitrary bytes written to a file (a memfd, opened through
 * /proc/self/fd, so the real path-based loader with its mmap runs) must fail cleanly (no model, a
 * message) or give a model the rest of the program can use as it is: every bound weight readable
 * for its whole extent (a weight past the end of the mapping faults) with a shape consistent with
 * the hyper-parameters, a first row that dequantizes, a tokenizer whose ids all index rows of the
 * token embedding, and a context that decodes a short prompt and one more token (plain or fused
 * attention, by the input's length) with logits for them. Any violated contract aborts: a finding. */
#include "model/context.h"
#include "model/model.h"
#include "ops/types/types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];
static volatile unsigned sink;

/* A broken contract: say which, then abort (libFuzzer keeps the input as a crash artifact). */
#define FINDING(what)                                                                   \
    do {                                                                                \
        fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, "fuzz_model", what);             \
        abort();                                                                        \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fd = memfd_create("fuzz_model.gguf", MFD_CLOEXEC);
    if (fd < 0) {
        perror("fuzz_model: memfd_create");
        abort();
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

static bool write_all(const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0)
        return false;
    for (size_t off = 0; off < size;) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0)
            return false;
        off += (size_t)w;
    }
    return true;
}

/* Reads the first and last byte of every row of t and dequantizes row 0. */
static void touch_tensor(const struct llm_tensor *t, int64_t ne0, int64_t ne1)
{
    if (!t)
        return;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        FINDING("bound with a shape other than the hyper-parameters say");
    const struct llm_type_traits *tt = llm_type_traits(t->type);
    if (!tt || !tt->to_float)
        FINDING("the loader promises a type with kernels");
    if (t->ne[0] <= 0 || t->ne[1] <= 0)
        FINDING("a bound weight with no elements");
    const size_t row = llm_row_size(t->type, t->ne[0]);
    if (row == 0 || t->nb[1] != row)
        FINDING("row stride is not the row size");
    const unsigned char *d = t->data;
    for (int64_t r = 0; r < t->ne[1]; r++)
        sink += d[(size_t)r * row] + d[(size_t)r * row + row - 1];
    float *x = malloc((size_t)t->ne[0] * sizeof *x);
    if (!x)
        FINDING("out of memory for one row");
    tt->to_float(d, x, t->ne[0]);
    sink += (unsigned)(x[0] == x[t->ne[0] - 1]);
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!write_all(data, size))
        FINDING("cannot write the input to the memfd");
    struct llm_model *m = (struct llm_model *)1;
    struct llm_error err = { 0 };
    if (llm_model_load(path, &m, &err) != 0) {
        if (m || err.msg[0] == '\0')
            FINDING("failure must leave no model and say why");
        return 0;
    }
    const struct llm_hparams *hp = &m->hp;
    if (hp->n_layer == 0 || hp->n_layer > LLM_MAX_LAYERS || hp->n_head == 0 || hp->n_head_kv == 0 ||
        hp->n_head % hp->n_head_kv != 0 || hp->n_embd_head_k == 0 || hp->n_rot > hp->n_embd_head_k)
        FINDING("the graph divides by these");
    const int64_t d = hp->n_embd, hd = hp->n_embd_head_k, ff = hp->n_ff, nv = hp->n_vocab;
    const int64_t q = hd * hp->n_head, kv = hd * hp->n_head_kv;
    touch_tensor(m->tok_embd, d, nv);
    touch_tensor(m->output, d, nv);
    touch_tensor(m->output_norm, d, 1);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct llm_layer *L = &m->layers[il];
        touch_tensor(L->attn_norm, d, 1);
        touch_tensor(L->wq, d, q);
        touch_tensor(L->wk, d, kv);
        touch_tensor(L->wv, d, kv);
        touch_tensor(L->wo, q, d);
        touch_tensor(L->ffn_norm, d, 1);
        touch_tensor(L->ffn_gate, d, ff);
        touch_tensor(L->ffn_up, d, ff);
        touch_tensor(L->ffn_down, ff, d);
        touch_tensor(L->bq, q, 1);
        touch_tensor(L->bk, kv, 1);
        touch_tensor(L->bv, kv, 1);
        if (!L->attn_norm || !L->wq || !L->wk || !L->wv || !L->wo || !L->ffn_norm || !L->ffn_gate ||
            !L->ffn_up || !L->ffn_down)
            FINDING("required weights");
    }
    if (!m->tok_embd || !m->output || !m->output_norm)
        FINDING("token_embd, output or output_norm not bound");
    /* the token embedding must have a row for every id the tokenizer can produce */
    const int32_t n_tokens = vocab_n_tokens(m->vocab);
    if (n_tokens > m->tok_embd->ne[1] || n_tokens > m->output->ne[1])
        FINDING("more tokens in the vocabulary than rows in token_embd/output");
    static const char text[] = "Hello world <|im_end|> \xc3\xa9t\xc3\xa9 12345";
    int32_t ids[256];
    int64_t n = vocab_tokenize(m->vocab, text, sizeof text - 1, true, true, ids, 256);
    if (n < 0 || n > 256)
        FINDING("tokenize count out of range");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->tok_embd->ne[1])
            FINDING("token id without a token_embd row");
    sink += (unsigned)strlen(m->desc) + (unsigned)m->n_params;

    /* a model that loads must run: a small context, the prompt's first ids, then one more token */
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = 16;
    p.n_batch = 16;
    p.n_ubatch = 16;
    p.n_threads = 1;
    p.flash_attn = (size & 1) != 0;
    struct llm_context *c = NULL;
    if (llm_context_new(m, &p, &c, &err) == 0) {
        const int32_t k = n < 8 ? (int32_t)n : 8;
        if (k > 0 && llm_decode(c, ids, k, true, &err) == 0) {
            const float *first = llm_get_logits(c, 0), *last = llm_get_logits(c, k - 1);
            if (!first || !last)
                FINDING("decode succeeded without logits");
            sink += (unsigned)(first[0] == last[hp->n_vocab - 1]);
            if (llm_decode(c, &ids[0], 1, false, &err) == 0) {
                const float *next = llm_get_logits(c, 0);
                if (!next)
                    FINDING("decode succeeded without logits");
                sink += (unsigned)(next[hp->n_vocab - 1] > 0);
            }
        }
        llm_context_free(c);
    } else if (err.msg[0] == '\0') {
        FINDING("context creation failed without a message");
    }
    llm_model_free(m);
    return 0;
}
