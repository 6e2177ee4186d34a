/* Generated vocabularies for synthetic models: small but valid for the SPM and BPE tokenizers. */
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab.h"

#define TOK_MAX 24 /* bytes per generated token text, NUL included */

struct toks {
    char (*text)[TOK_MAX];
    int32_t *type;
    float *score;
    uint32_t n, cap;
};

static void add(struct toks *t, const char *s, int32_t type, float score)
{
    snprintf(t->text[t->n], TOK_MAX, "%s", s);
    t->type[t->n] = type;
    t->score[t->n] = score;
    t->n++;
}

static size_t utf8_put(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* GPT-2's byte → code point map: printable Latin-1 bytes stand for themselves, the others are
 * numbered from 256 up in byte order. Tokens are listed printable bytes first, as GPT-2 does. */
static void add_bpe_bytes(struct toks *t)
{
    char s[4];
    for (int pass = 0; pass < 2; pass++) {
        unsigned extra = 0;
        for (unsigned b = 0; b < 256; b++) {
            bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
            unsigned cp = printable ? b : 256 + extra++;
            if (printable == (pass == 0)) {
                s[utf8_put(s, cp)] = '\0';
                add(t, s, VOCAB_TT_NORMAL, 0.0f);
            }
        }
    }
}

static const char *const bpe_merges[][2] = {
    { "Ġ", "t" }, { "Ġ", "a" }, { "h", "e" }, { "i", "n" }, { "r", "e" }, { "o", "n" },
    { "Ġt", "he" }, { "e", "r" }, { "Ġ", "s" }, { "a", "n" }, { "Ġ", "w" }, { "o", "u" },
};
#define N_MERGES (sizeof bpe_merges / sizeof bpe_merges[0])

static const char *const spm_pieces[] = {
    "▁t", "▁a", "he", "in", "er", "an", "on", "▁the", "▁s", "▁w", "ou", "re", "nd", "▁b", "ed",
};
#define N_PIECES (sizeof spm_pieces / sizeof spm_pieces[0])

static void build_bpe(struct toks *t, uint32_t n_vocab, struct gguf_writer *w)
{
    add_bpe_bytes(t);
    struct gguf_str merges[N_MERGES];
    char merge_text[N_MERGES][TOK_MAX];
    for (size_t i = 0; i < N_MERGES; i++) {
        char joined[TOK_MAX];
        snprintf(joined, sizeof joined, "%s%s", bpe_merges[i][0], bpe_merges[i][1]);
        add(t, joined, VOCAB_TT_NORMAL, 0.0f);
        snprintf(merge_text[i], TOK_MAX, "%s %s", bpe_merges[i][0], bpe_merges[i][1]);
        merges[i] = (struct gguf_str){ merge_text[i], strlen(merge_text[i]) };
    }
    uint32_t eot = t->n;
    add(t, "<|endoftext|>", VOCAB_TT_CONTROL, 0.0f);
    add(t, "<|im_start|>", VOCAB_TT_CONTROL, 0.0f);
    add(t, "<|im_end|>", VOCAB_TT_CONTROL, 0.0f);
    while (t->n < n_vocab) {
        char s[TOK_MAX];
        snprintf(s, sizeof s, "[PAD%u]", t->n);
        add(t, s, VOCAB_TT_UNUSED, 0.0f);
    }
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", "qwen2");
    gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, N_MERGES);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", eot);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", eot + 2);
    gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", eot);
    gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false);
}

static void build_spm(struct toks *t, uint32_t n_vocab, struct gguf_writer *w)
{
    add(t, "<unk>", VOCAB_TT_UNKNOWN, 0.0f);
    add(t, "<s>", VOCAB_TT_CONTROL, 0.0f);
    add(t, "</s>", VOCAB_TT_CONTROL, 0.0f);
    for (unsigned b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        add(t, s, VOCAB_TT_BYTE, 0.0f);
    }
    /* Longer pieces score higher so the SPM merge prefers them. */
    for (size_t i = 0; i < N_PIECES; i++)
        add(t, spm_pieces[i], VOCAB_TT_NORMAL, -1.0f - (float)i);
    add(t, "▁", VOCAB_TT_NORMAL, -100.0f);
    for (char c = 33; c < 127; c++) {
        char s[2] = { c, '\0' };
        add(t, s, VOCAB_TT_NORMAL, -101.0f - (float)(c - 33));
    }
    while (t->n < n_vocab) {
        char s[TOK_MAX];
        snprintf(s, sizeof s, "[PAD%u]", t->n);
        add(t, s, VOCAB_TT_UNUSED, -1000.0f);
    }
    gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", false);
}

int llm_synth_vocab(struct gguf_writer *w, bool qwen2, uint32_t n_vocab, struct llm_error *err)
{
    if (n_vocab < 512)
        return llm_fail(err, LLM_ERR_ARG, "synth: a generated vocabulary needs >= 512 tokens (got %u)",
                        n_vocab);
    struct toks t = { llm_calloc(n_vocab, TOK_MAX), llm_calloc(n_vocab, sizeof(int32_t)),
                      llm_calloc(n_vocab, sizeof(float)), 0, n_vocab };
    struct gguf_str *strs = llm_calloc(n_vocab, sizeof *strs);
    int rc = 0;
    if (!t.text || !t.type || !t.score || !strs) {
        rc = llm_fail(err, LLM_ERR_NOMEM, "synth: out of memory for the vocabulary");
        goto out;
    }
    if (qwen2)
        build_bpe(&t, n_vocab, w);
    else
        build_spm(&t, n_vocab, w);
    for (uint32_t i = 0; i < n_vocab; i++)
        strs[i] = (struct gguf_str){ t.text[i], strlen(t.text[i]) };
    gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", strs, n_vocab);
    if (!qwen2)
        gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_F32, t.score, n_vocab);
    gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_I32, t.type, n_vocab);
out:
    free(t.text);
    free(t.type);
    free(t.score);
    free(strs);
    return rc;
}
