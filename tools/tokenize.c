/* llm tokenize: show how a model's vocabulary tokenizes a text (like llama-tokenize). */
#include <argtable2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/vocab.h"

static void print_tokens(const struct vocab *v, const int32_t *ids, int64_t n, bool ids_only)
{
    if (ids_only) {
        putchar('[');
        for (int64_t i = 0; i < n; i++)
            printf(i ? ", %d" : "%d", ids[i]);
        puts("]");
        return;
    }
    char small[256];
    for (int64_t i = 0; i < n; i++) {
        size_t len = vocab_token_to_piece(v, ids[i], true, small, sizeof small);
        char *piece = len <= sizeof small ? small : malloc(len);
        if (piece != small && piece)
            vocab_token_to_piece(v, ids[i], true, piece, len);
        printf("%6d -> '", ids[i]);
        if (piece) { /* a token's text comes from the file: controls are shown escaped */
            size_t cap = 4 * len + 8;
            char *shown = malloc(cap);
            if (shown) {
                llm_escape(shown, cap, piece, len, len, LLM_ESC_QUOTES);
                fputs(shown, stdout);
                free(shown);
            }
        }
        puts("'");
        if (piece != small)
            free(piece);
    }
}

int cmd_tokenize(int argc, char **argv)
{
    struct arg_str *model = arg_str1("m", "model", "MODEL", "GGUF file whose vocabulary to use");
    struct arg_str *prompt = arg_str1("p", "prompt", "TEXT", "text to tokenize");
    struct arg_lit *no_bos = arg_lit0(NULL, "no-bos", "do not add BOS even if the vocabulary adds it");
    struct arg_lit *parse_special = arg_lit0(NULL, "parse-special",
                                             "match control tokens written in the text (<|im_end|>, </s>, ...): the default");
    struct arg_lit *no_parse = arg_lit0(NULL, "no-parse-special", "take control tokens' text as plain text");
    struct arg_lit *ids_only = arg_lit0(NULL, "ids", "print only the ids, as [id, id, ...]");
    struct arg_lit *help = arg_lit0("h", "help", "show this help");
    struct arg_end *end = arg_end(10);
    void *table[] = { help, model, prompt, no_bos, parse_special, no_parse, ids_only, end };
    int status = 1;
    struct gguf_file *f = NULL;
    struct vocab *v = NULL;
    struct llm_error err = { 0 };
    int32_t *ids = NULL;

    int pr = tool_parse_args(table, argc, argv,
                             "Tokenize text with a model's vocabulary. Special tokens written in the text\n"
                             "(<|im_end|>, </s>, ...) are read as those tokens, as llm-run and llama.cpp do;\n"
                             "--no-parse-special takes them as plain text. Pieces are shown with control\n"
                             "characters escaped.");
    if (pr != 0) {
        status = pr > 0 ? 0 : 1;
        goto done;
    }
    if (parse_special->count && no_parse->count) {
        tool_error("give --parse-special or --no-parse-special, not both");
        goto done;
    }
    const bool special = !no_parse->count;
    if (gguf_open(model->sval[0], &f, &err) != 0 || vocab_load(f, &v, &err) != 0) {
        tool_error("%s", err.msg);
        goto done;
    }
    const char *text = prompt->sval[0];
    bool add_special = !no_bos->count;
    int64_t n = vocab_tokenize(v, text, strlen(text), add_special, special, NULL, 0);
    ids = n >= 0 ? malloc(((size_t)n + 1) * sizeof *ids) : NULL;
    if (!ids) {
        tool_error("out of memory tokenizing");
        goto done;
    }
    n = vocab_tokenize(v, text, strlen(text), add_special, special, ids, n);
    print_tokens(v, ids, n, ids_only->count > 0);
    status = 0;
done:
    free(ids);
    vocab_free(v);
    gguf_close(f);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return status;
}
