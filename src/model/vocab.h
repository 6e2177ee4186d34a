/* Vocabulary and tokenizers read from GGUF: SentencePiece ("llama") and byte-level BPE ("gpt2"
 * with pre-tokenizers gpt-2, qwen2, llama-bpe/llama3, default). Behaviour follows llama.cpp
 * (../shared/spec/tokenizers.md). The vocab owns copies of everything it needs; the GGUF file may
 * be closed after vocab_load(). */
#ifndef LLM_VOCAB_H
#define LLM_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include "gguf.h"

enum vocab_kind { VOCAB_SPM, VOCAB_BPE };

enum vocab_token_type {
    VOCAB_TT_UNDEFINED = 0, VOCAB_TT_NORMAL = 1, VOCAB_TT_UNKNOWN = 2, VOCAB_TT_CONTROL = 3,
    VOCAB_TT_USER_DEFINED = 4, VOCAB_TT_UNUSED = 5, VOCAB_TT_BYTE = 6,
};

struct vocab;

/* Build the vocabulary from tokenizer.ggml.* keys. Errors: missing/ill-typed arrays, unknown
 * tokenizer model or pre-tokenizer, ids out of range. */
int vocab_load(const struct gguf_file *f, struct vocab **out, struct llm_error *err);
void vocab_free(struct vocab *v);

enum vocab_kind vocab_kind(const struct vocab *v);
int32_t vocab_n_tokens(const struct vocab *v);
int32_t vocab_bos(const struct vocab *v);   /* -1 when none */
int32_t vocab_eos(const struct vocab *v);   /* -1 when none */
bool vocab_add_bos(const struct vocab *v);
bool vocab_is_eog(const struct vocab *v, int32_t id); /* end-of-generation token */
int vocab_token_type(const struct vocab *v, int32_t id);
const char *vocab_token_text(const struct vocab *v, int32_t id, size_t *len);

/* Tokenize len bytes of text. add_special: BOS/EOS as the vocab's rules say; parse_special: match
 * CONTROL/UNKNOWN token texts in the input. Writes up to cap ids and returns the total count (which
 * may exceed cap: call again with a larger buffer), or -1 on allocation failure. */
int64_t vocab_tokenize(const struct vocab *v, const char *text, size_t len, bool add_special,
                       bool parse_special, int32_t *ids, int64_t cap);

/* Bytes of one token as printed (▁ → space for SPM, byte tokens → raw byte, GPT-2 byte mapping
 * reversed for BPE). Control/unknown tokens give nothing unless special. Writes up to cap bytes
 * and returns the full length. */
size_t vocab_token_to_piece(const struct vocab *v, int32_t id, bool special, char *buf, size_t cap);

/* llama_detokenize semantics (remove_special=false): concatenated pieces; for SPM a leading space of
 * the first token is dropped when that token is not BOS... see spec. Returns the full length. */
size_t vocab_detokenize(const struct vocab *v, const int32_t *ids, int64_t n, bool special,
                        char *buf, size_t cap);

#endif
