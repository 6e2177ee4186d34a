/* llm synth: write a synthetic llama/qwen2 model (exact shapes of a preset, random weights). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <argtable2.h>

#include "args.h"
#include "clock.h"
#include "commands.h"
#include "model/model.h"
#include "model/synth.h"

int cmd_synth(int argc, char **argv)
{
    struct arg_lit *help = arg_lit0("h", "help", "show this help");
    struct arg_str *arch = arg_str0(NULL, "arch", "llama|qwen2", "architecture (default: the preset's; tiny: llama)");
    struct arg_str *preset = arg_str1(NULL, "preset", "NAME", "qwen2-0.5b, qwen2-1.5b, qwen2-3b, tinyllama-1.1b, llama2-7b or tiny (d256 L2)");
    struct arg_str *type = arg_str1(NULL, "type", "TYPE",
                                    "F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K");
    struct arg_lit *pure = arg_lit0(NULL, "pure", "every matrix of TYPE (default: llama-quantize's mix)");
    struct arg_str *seed = arg_str0(NULL, "seed", "N", "random seed (default 1)");
    struct arg_file *vocab = arg_file0(NULL, "vocab-from", "MODEL", "copy the tokenizer.* keys of this GGUF");
    struct arg_int *threads = arg_int0("t", "threads", "N", "threads generating weights (default 2)");
    struct arg_file *out = arg_file1("o", NULL, "FILE", "output GGUF");
    struct arg_end *end = arg_end(10);
    void *table[] = { help, arch, preset, type, pure, seed, vocab, threads, out, end };
    int rc = 1;
    int pr = tool_parse_args(table, argc, argv, "Write a synthetic model with random weights.");
    if (pr != 0) {
        rc = pr > 0 ? 0 : 1;
        goto done;
    }
    uint64_t seed_v = 1;
    if (seed->count) {
        char *e;
        seed_v = strtoull(seed->sval[0], &e, 0);
        if (*e || !*seed->sval[0]) {
            tool_error("invalid --seed '%s'", seed->sval[0]);
            goto done;
        }
    }
    struct llm_synth_opts o = {
        .preset = preset->sval[0], .arch = arch->count ? arch->sval[0] : NULL, .type = type->sval[0],
        .pure = pure->count > 0, .seed = seed_v, .vocab_from = vocab->count ? vocab->filename[0] : NULL,
        .n_threads = threads->count ? threads->ival[0] : 2,
    };
    if (o.n_threads < 1 || o.n_threads > TOOL_MAX_THREADS) {
        tool_error("invalid value %d for -t: must be between 1 and %d", o.n_threads, TOOL_MAX_THREADS);
        goto done;
    }
    /* options and the output path first: generating a large model takes a while */
    struct llm_error err = { 0 };
    struct llm_synth_plan plan;
    if (llm_synth_plan(&o, &plan, &err) != 0) {
        tool_error("%s", err.msg);
        goto done;
    }
    if (tool_check_output("-o", out->filename[0]) != 0)
        goto done;
    double t0 = (llm_now_us() / 1e6);
    if (llm_synth_write(&o, out->filename[0], &err) != 0) {
        tool_error("%s", err.msg);
        goto done;
    }
    double dt = (llm_now_us() / 1e6) - t0;
    char size[32], params[32];
    llm_format_size(plan.n_bytes, size, sizeof size);
    llm_format_params(plan.n_params, params, sizeof params);
    fprintf(stderr, "wrote %s: %" PRId64 " tensors, %s, %s params, %s, in %.2f s\n", out->filename[0],
            plan.n_tensors, size, params, llm_ftype_name(plan.ftype), dt);
    rc = 0;
done:
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
