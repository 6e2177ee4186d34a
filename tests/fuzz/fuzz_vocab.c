/* libFuzzer target: vocab_load on the tokenizer.ggml.* keys of arbitrary GGUF bytes must fail
 * cleanly (no vocabulary, a message) or give a vocabulary that stays inside its own memory after
 * the file is gone (the GGUF file is closed before any use: ASan sees a pointer kept into it) and
 * whose tokenizer, detokenizer and pieces keep their contracts on fixed texts and on text taken
 * from the input itself. Any violated contract aborts, which libFuzzer reports as a finding. */
#include "model/gguf.h"
#include "model/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

/* A broken contract: say which, then abort (libFuzzer keeps the input as a crash artifact). */
#define FINDING(what)                                                                   \
    do {                                                                                \
        fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, "fuzz_vocab", what);             \
        abort();                                                                        \
    } while (0)

static void touch(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sink += (unsigned char)p[i];
}

/* Tokenize with every flag combination; check the count contract, the id range and that the
 * detokenized text has the length it announced. */
static void exercise_text(const struct vocab *v, const char *text, size_t len)
{
    const int32_t n_tokens = vocab_n_tokens(v);
    for (int flags = 0; flags < 4; flags++) {
        const bool add_special = flags & 1, parse_special = flags & 2;
        int32_t probe[2];
        int64_t n = vocab_tokenize(v, text, len, add_special, parse_special, probe, 2);
        if (n < 0)
            FINDING("only allocation failure or an oversized text may give -1");
        int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
        if (!ids)
            FINDING("out of memory for the ids");
        if (vocab_tokenize(v, text, len, add_special, parse_special, ids, n) != n)
            FINDING("the second call must agree with the count of the first");
        for (int64_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= n_tokens)
                FINDING("token id out of range");
        for (int special = 0; special < 2; special++) {
            size_t want = vocab_detokenize(v, ids, n, special, NULL, 0);
            if (want == SIZE_MAX)
                continue; /* allocation failure in the clean-up: allowed with a short buffer */
            char *buf = malloc(want + 1);
            if (!buf)
                FINDING("out of memory for the text");
            if (vocab_detokenize(v, ids, n, special, buf, want) != want)
                FINDING("detokenize length differs with room for all of it");
            touch(buf, want);
            char small[3];
            size_t got = vocab_detokenize(v, ids, n, special, small, sizeof small);
            if (got != want && got != SIZE_MAX)
                FINDING("detokenize into a short buffer does not report the full length");
            free(buf);
        }
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    if (gguf_parse(data, size, "fuzz.gguf", &f, &err) != LLM_OK)
        return 0;
    struct vocab *v = (struct vocab *)1;
    err.msg[0] = '\0';
    int rc = vocab_load(f, &v, &err);
    gguf_close(f); /* the vocabulary owns copies of everything it needs */
    if (rc != 0) {
        if (v || err.msg[0] == '\0')
            FINDING("failure must leave no vocabulary and say why");
        return 0;
    }
    const int32_t n = vocab_n_tokens(v);
    if (n <= 0 || vocab_bos(v) < -1 || vocab_bos(v) >= n || vocab_eos(v) < -1 || vocab_eos(v) >= n)
        FINDING("token count, BOS or EOS out of range");
    /* every token (up to a bound): text, type, end-of-generation, piece with and without room */
    for (int32_t id = -1; id <= n && id < 4096; id++) {
        size_t len = 0;
        const char *t = vocab_token_text(v, id, &len);
        if (t)
            touch(t, len + 1); /* NUL-terminated copy */
        else if (id >= 0 && id < n)
            FINDING("no text for a token in range");
        sink += (unsigned)vocab_token_type(v, id); /* UNDEFINED out of range */
        if (id < 0 || id >= n)
            continue;
        sink += vocab_is_eog(v, id);
        for (int special = 0; special < 2; special++) {
            char piece[512], tiny[1];
            size_t plen = vocab_token_to_piece(v, id, special, piece, sizeof piece);
            if (vocab_token_to_piece(v, id, special, tiny, 0) != plen ||
                vocab_token_to_piece(v, id, special, tiny, sizeof tiny) != plen)
                FINDING("the full length whatever the room");
            touch(piece, plen < sizeof piece ? plen : sizeof piece);
        }
    }
    static const char *const texts[] = {
        "Hello world! It's 12345 o'clock.\n\n  \t done",
        " leading   spaces and trailing ",
        "<s></s><unk><|im_start|>user\nHi<|im_end|><|endoftext|>",
        "\xc3\xa9t\xc3\xa9 \xe2\x96\x81 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\xa6\x99 \xc2\xbd",
        "\xff\xfe\x80\xc3 \xe2\x96 \xf4\x90\x80\x80 bad utf-8",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        exercise_text(v, texts[i], strlen(texts[i]));
    /* the input's own tail as text, so the fuzzer steers the tokenizer too */
    size_t tail = size < 256 ? size : 256;
    exercise_text(v, (const char *)data + size - tail, tail);
    vocab_free(v);
    return 0;
}
