/* BPE pre-tokenizers: llama.cpp's regular expressions, hand-coded on code points with category
 * flags. Each *_word() returns the end of the word that starts at i within the segment [i, e);
 * the alternatives are tried in the regex's order with its leftmost-first semantics.
 *
 *   gpt-2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   qwen2   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *           |\s*[\r\n]+|\s+(?!\S)|\s+
 *   llama3  as qwen2 with \p{N}{1,3}
 *   default the four expressions [\p{P}\$\+<=>\^`\|]+, then gpt-2, then \p{N}+, then [0-9]{3},
 *           each splitting the pieces of the previous one (text between matches is a piece too) */
#include <stdlib.h>

#include "unicode.h"
#include "vocab_impl.h"

typedef size_t (*word_fn)(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e);

static bool is_other(uint8_t f) { return !(f & (UCAT_LETTER | UCAT_NUMBER | UCAT_SPACE)); }
static bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }
static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static size_t run_flag(const uint8_t *fl, size_t i, size_t e, uint8_t flag)
{
    while (i < e && (fl[i] & flag))
        i++;
    return i;
}

static size_t run_other(const uint8_t *fl, size_t i, size_t e)
{
    while (i < e && is_other(fl[i]))
        i++;
    return i;
}

/* 's 't 're 've 'm 'll 'd at i: end of the contraction, or 0. */
static size_t contraction(const uint32_t *cp, size_t i, size_t e, bool any_case)
{
    if (cp[i] != '\'' || i + 1 >= e)
        return 0;
    uint32_t c1 = any_case ? ascii_lower(cp[i + 1]) : cp[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
        return i + 2;
    if (i + 2 >= e)
        return 0;
    uint32_t c2 = any_case ? ascii_lower(cp[i + 2]) : cp[i + 2];
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return i + 3;
    return 0;
}

/* \s+(?!\S) then \s+: a run of whitespace leaves its last character to the next word unless
 * the run ends the segment. */
static size_t space_run(const uint8_t *fl, size_t i, size_t e)
{
    size_t r = run_flag(fl, i, e, UCAT_SPACE);
    if (r == i)
        return i + 1; /* not whitespace: nothing matched, one code point */
    return r < e && r - i > 1 ? r - 1 : r;
}

static size_t gpt2_word(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e)
{
    size_t j = contraction(cp, i, e, false);
    if (j)
        return j;
    /* " ?X+" for X = letters, numbers, other: an optional leading space joins the run */
    size_t s = cp[i] == ' ' && i + 1 < e && !(fl[i + 1] & UCAT_SPACE) ? i + 1 : i;
    if (fl[s] & UCAT_LETTER)
        return run_flag(fl, s, e, UCAT_LETTER);
    if (fl[s] & UCAT_NUMBER)
        return run_flag(fl, s, e, UCAT_NUMBER);
    if (is_other(fl[s]))
        return run_other(fl, s, e);
    return space_run(fl, i, e);
}

static size_t llama3_like_word(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e,
                               size_t max_digits)
{
    size_t j = contraction(cp, i, e, true);
    if (j)
        return j;
    uint32_t c = cp[i];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!is_crlf(c) && !(fl[i] & UCAT_NUMBER)) {
        if (fl[i] & UCAT_LETTER)
            return run_flag(fl, i, e, UCAT_LETTER);
        if (i + 1 < e && (fl[i + 1] & UCAT_LETTER))
            return run_flag(fl, i + 1, e, UCAT_LETTER);
    }
    /* \p{N}{1,max} */
    if (fl[i] & UCAT_NUMBER) {
        for (j = i + 1; j < e && (fl[j] & UCAT_NUMBER) && j - i < max_digits; j++)
            ;
        return j;
    }
    /* ' '?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t s = c == ' ' && i + 1 < e && is_other(fl[i + 1]) ? i + 1 : i;
    if (is_other(fl[s])) {
        for (j = run_other(fl, s, e); j < e && is_crlf(cp[j]); j++)
            ;
        return j;
    }
    /* \s*[\r\n]+ : through the last CR/LF of the whitespace run */
    size_t last_nl = 0;
    for (j = i; j < e && (fl[j] & UCAT_SPACE); j++)
        if (is_crlf(cp[j]))
            last_nl = j + 1;
    if (last_nl)
        return last_nl;
    return space_run(fl, i, e);
}

static size_t qwen2_word(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e)
{
    return llama3_like_word(cp, fl, i, e, 1);
}

static size_t llama3_word(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e)
{
    return llama3_like_word(cp, fl, i, e, 3);
}

/* [\p{P}\$\+<=>\^`\|]+ and the text between its matches */
static bool is_punct_like(uint32_t c, uint8_t f)
{
    return (f & UCAT_PUNCT) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
           c == '^' || c == '`' || c == '|';
}

static size_t punct_word(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e)
{
    bool in = is_punct_like(cp[i], fl[i]);
    size_t j = i + 1;
    while (j < e && is_punct_like(cp[j], fl[j]) == in)
        j++;
    return j;
}

/* \p{N}+ and the text between its matches */
static size_t number_word(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e)
{
    (void)cp;
    bool in = fl[i] & UCAT_NUMBER;
    size_t j = i + 1;
    while (j < e && (bool)(fl[j] & UCAT_NUMBER) == in)
        j++;
    return j;
}

/* [0-9][0-9][0-9] and the text between its matches */
static bool digits3(const uint32_t *cp, size_t i, size_t e)
{
    if (i + 3 > e)
        return false;
    for (size_t k = i; k < i + 3; k++)
        if (cp[k] < '0' || cp[k] > '9')
            return false;
    return true;
}

static size_t digits3_word(const uint32_t *cp, const uint8_t *fl, size_t i, size_t e)
{
    (void)fl;
    if (digits3(cp, i, e))
        return i + 3;
    size_t j = i + 1;
    while (j < e && !digits3(cp, j, e))
        j++;
    return j;
}

/* Split each segment [prev end, end) of in[0..n_in) with fn; returns the number of words. */
static size_t refine(word_fn fn, const uint32_t *cp, const uint8_t *fl, const uint32_t *in,
                     size_t n_in, uint32_t *out)
{
    size_t n = 0, start = 0;
    for (size_t k = 0; k < n_in; k++) {
        for (size_t i = start; i < in[k];) {
            i = fn(cp, fl, i, in[k]);
            out[n++] = (uint32_t)i;
        }
        start = in[k];
    }
    return n;
}

size_t pretok_split(enum vocab_pre pre, const uint32_t *cp, const uint8_t *fl, size_t n,
                    uint32_t *ends)
{
    if (n == 0)
        return 0;
    uint32_t whole = (uint32_t)n;
    switch (pre) {
    case PRE_GPT2:
        return refine(gpt2_word, cp, fl, &whole, 1, ends);
    case PRE_QWEN2:
        return refine(qwen2_word, cp, fl, &whole, 1, ends);
    case PRE_LLAMA3:
        return refine(llama3_word, cp, fl, &whole, 1, ends);
    case PRE_DEFAULT:
        break;
    }
    uint32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return SIZE_MAX;
    size_t k = refine(punct_word, cp, fl, &whole, 1, ends);
    k = refine(gpt2_word, cp, fl, ends, k, tmp);
    k = refine(number_word, cp, fl, tmp, k, ends);
    k = refine(digits3_word, cp, fl, ends, k, tmp);
    for (size_t i = 0; i < k; i++)
        ends[i] = tmp[i];
    free(tmp);
    return k;
}
