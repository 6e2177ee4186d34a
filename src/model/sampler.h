/* Token sampling with llama.cpp's default chain: repeat penalty -> top-k -> top-p -> min-p ->
 * temperature -> random draw (mt19937). temp <= 0 is greedy: the highest logit, ties to the lower id. */
#ifndef LLM_SAMPLER_H
#define LLM_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

struct llm_sampler_params {
    float temp;            /* 0.8; <= 0 greedy                                 */
    int32_t top_k;         /* 40; <= 0 disabled                                */
    float top_p;           /* 0.95; >= 1 disabled                              */
    float min_p;           /* 0.05; <= 0 disabled                              */
    float repeat_penalty;  /* 1.0 = off                                        */
    int32_t repeat_last_n; /* 64; tokens of history the penalty looks at       */
    uint32_t seed;
};

struct llm_sampler_params llm_sampler_default_params(void);

struct llm_sampler;

struct llm_sampler *llm_sampler_new(const struct llm_sampler_params *p, int32_t n_vocab);
void llm_sampler_free(struct llm_sampler *s);

/* Tokens never to be drawn (--ignore-eos: the end-of-generation tokens), -1 terminated, copied;
 * ids outside the vocabulary are ignored. False when out of memory. */
bool llm_sampler_ban(struct llm_sampler *s, const int32_t *tokens);
/* Pick the next token from n_vocab logits (not modified). */
int32_t llm_sampler_sample(struct llm_sampler *s, const float *logits);
/* Record a token (prompt or generated) in the penalty history. */
void llm_sampler_accept(struct llm_sampler *s, int32_t token);

/* Index of the largest value, ties to the lower index. */
int32_t llm_argmax(const float *x, int32_t n);

#endif
