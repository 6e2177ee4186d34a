/* Vocabulary and tokenizers read from GGUF: SentencePiece ("llama") and byte-level BPE ("gpt2"
 * with pre-tokenizers gpt-2, qwen2, llama-bpe/llama3, default). Behaviour follows llama.cpp
 * (src/model/README.md: tokenizers). The vocab owns copies of everything it needs; the GGUF file may
 * be closed after vocab_load(). */
#ifndef LLM_VOCAB_H
#define LLM_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"

enum vocab_kind { VOCAB_SPM, VOCAB_BPE };

enum vocab_token_type {
    VOCAB_TT_UNDEFINED = 0, VOCAB_TT_NORMAL = 1, VOCAB_TT_UNKNOWN = 2, VOCAB_TT_CONTROL = 3,
    VOCAB_TT_USER_DEFINED = 4, VOCAB_TT_UNUSED = 5, VOCAB_TT_BYTE = 6,
};

struct vocab;

/* Build the vocabulary from tokenizer.ggml.* keys (the file may be closed afterwards).
 * Defaults follow llama.cpp: SPM bos 1, eos 2, unk 0, add_bos, add_space_prefix; BPE bos = eos =
 * 11, no BOS unless the pre-tokenizer is llama3; GGUF keys override; a special-token id outside
 * the vocabulary keeps its default. Tokens whose text marks end of turn / FIM (<|im_end|>,
 * <|fim_prefix|>, </s>, ...) become CONTROL and join the end-of-generation set as in llama.cpp.
 * Errors: no tokenizer.ggml.model (no vocabulary) or tokens array, ill-typed or mis-sized arrays,
 * unknown tokenizer model or pre-tokenizer, gpt2 without merges, out of memory. */
int vocab_load(const struct gguf_file *f, struct vocab **out, struct llm_error *err);
void vocab_free(struct vocab *v);

enum vocab_kind vocab_kind(const struct vocab *v);
int32_t vocab_n_tokens(const struct vocab *v);
int32_t vocab_bos(const struct vocab *v);   /* -1 when none */
int32_t vocab_eos(const struct vocab *v);   /* -1 when none */
bool vocab_add_bos(const struct vocab *v);
bool vocab_is_eog(const struct vocab *v, int32_t id); /* end-of-generation token */
int vocab_token_type(const struct vocab *v, int32_t id); /* VOCAB_TT_*; UNDEFINED out of range */
/* Token text as stored in the file (the vocab keeps a NUL-terminated copy); NULL and *len = 0
 * for an id out of range. */
const char *vocab_token_text(const struct vocab *v, int32_t id, size_t *len);

/* Tokenize len bytes of text like llama_tokenize. add_special: BOS (and EOS) when the vocab adds
 * them; parse_special: also match CONTROL/UNKNOWN token texts in the input (USER_DEFINED ones are
 * always matched). Writes up to cap ids and returns the total count (which may exceed cap: call
 * again with a larger buffer), or -1 on allocation failure or when len > VOCAB_MAX_TEXT. */
#define VOCAB_MAX_TEXT ((size_t)1 << 28) /* keeps internal 32-bit offsets safe */
int64_t vocab_tokenize(const struct vocab *v, const char *text, size_t len, bool add_special,
                       bool parse_special, int32_t *ids, int64_t cap);

/* Bytes of one token as printed (llama_token_to_piece, lstrip 0): SPM ▁ → space and <0xXX> byte
 * tokens → the raw byte; BPE text mapped back through the GPT-2 byte table; USER_DEFINED tokens
 * as their text; CONTROL/UNKNOWN tokens give their text only when special, else nothing; unused
 * tokens nothing. A piece may be a partial UTF-8 sequence. Writes up to cap bytes and returns
 * the full length. */
size_t vocab_token_to_piece(const struct vocab *v, int32_t id, bool special, char *buf, size_t cap);

/* llama_detokenize(remove_special = false, unparse_special = special): the pieces concatenated,
 * except that for SPM vocabs (add_space_prefix) one leading space of the first token's piece is
 * dropped; when the first token is BOS its (empty or "<s>") piece absorbs that rule, so
 * [BOS, "▁Hello"] gives " Hello". BPE vocabs other than qwen2 also drop a space before
 * , . ! ? 's 'm 're 've (clean_up_tokenization_spaces). Writes up to cap bytes, returns the full
 * length; SIZE_MAX on allocation failure (possible only in that clean-up when cap is too small). */
size_t vocab_detokenize(const struct vocab *v, const int32_t *ids, int64_t n, bool special,
                        char *buf, size_t cap);

#endif
