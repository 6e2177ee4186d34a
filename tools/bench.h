/* llm-bench internals: llama-bench's parameters and their parser, the test plan (Cartesian product
 * in llama-bench's loop order), the statistics and the five printers (md, csv, json, jsonl, sql).
 * Behaviour follows llama-bench's (tools/README.md: llm-bench); bench.c runs the tests. */
#ifndef LLM_TOOLS_BENCH_H
#define LLM_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "latency.h"

/* A growable list of ints; the parser appends, an empty list later gets its default. */
struct bench_ints {
    int *v;
    int n, cap;
};

struct bench_strs {
    char **v; /* owned copies */
    int n, cap;
};

enum bench_output { BENCH_OUT_NONE, BENCH_OUT_MD, BENCH_OUT_CSV, BENCH_OUT_JSON, BENCH_OUT_JSONL, BENCH_OUT_SQL };

/* KV cache types by llama-bench's names, every one a cache type of our context. */
enum bench_kv { BENCH_KV_F32, BENCH_KV_F16, BENCH_KV_BF16, BENCH_KV_Q8_0, BENCH_KV_Q4_0, BENCH_KV_Q4_1,
                BENCH_KV_Q5_0, BENCH_KV_Q5_1, BENCH_KV_IQ4_NL, BENCH_KV_COUNT };
const char *bench_kv_name(int kv);
/* The enum llm_type of a bench_kv, or -1 for none. */
int bench_kv_type(int kv);

/* -dev values: "auto" (default, runs on cpu), cpu, npu (the emulated Ascend NPU; also by its
 * --list-devices name CANN0), none (the cpu alone); an item may join devices with '/', and runs on
 * the npu when it names it. */
enum bench_dev { BENCH_DEV_AUTO, BENCH_DEV_CPU, BENCH_DEV_NPU, BENCH_DEV_NONE }; /* none: the cpu alone */
const char *bench_dev_name(int dev);

/* -sm values by llama-bench's names; row and tensor need two devices, we have one. */
enum bench_sm { BENCH_SM_NONE, BENCH_SM_LAYER, BENCH_SM_ROW, BENCH_SM_TENSOR, BENCH_SM_COUNT };
const char *bench_sm_name(int sm);

/* -lm values by llama-bench's names (-mmp 0|1 and -dio 0|1 add none|mmap and mmap|dio); "auto"
 * loads as mmap and is recorded as "auto", as llama-bench records it. */
enum bench_lm { BENCH_LM_AUTO, BENCH_LM_NONE, BENCH_LM_MMAP, BENCH_LM_MLOCK, BENCH_LM_MMAP_MLOCK, BENCH_LM_DIO,
                BENCH_LM_COUNT };
const char *bench_lm_name(int lm);

struct bench_params {
    struct bench_strs model;        /* -m                                         */
    struct bench_strs overrides;    /* -ot alternatives, each "PAT=DEV;..."        */
    struct bench_ints n_prompt;     /* -p                                         */
    struct bench_ints n_gen;        /* -n                                         */
    struct bench_ints n_pg;         /* -pg pairs, flattened: pp0, tg0, pp1, tg1   */
    struct bench_ints n_depth;      /* -d                                         */
    struct bench_ints n_batch;      /* -b                                         */
    struct bench_ints n_ubatch;     /* -ub                                        */
    struct bench_ints type_k;       /* -ctk (enum bench_kv)                       */
    struct bench_ints type_v;       /* -ctv                                       */
    struct bench_ints n_threads;    /* -t                                         */
    struct bench_ints n_gpu_layers; /* -ngl: layers on the npu, from the last      */
    struct bench_ints flash_attn;   /* -fa: -1 auto, 0 off, 1 on                  */
    struct bench_ints devices;      /* -dev (enum bench_dev)                      */
    struct bench_strs devices_text; /* -dev items as given, recorded in devices   */
    struct bench_ints n_cpu_moe;    /* -ncmoe: recorded (no MoE architecture here) */
    struct bench_ints split_mode;   /* -sm (enum bench_sm)                        */
    struct bench_ints main_gpu;     /* -mg: 0, the one device                     */
    struct bench_strs tensor_split; /* -ts: llama-bench's "%.2f/..." of each item */
    struct bench_ints embeddings;   /* -embd 0|1                                  */
    struct bench_ints no_op_offload; /* -nopo 0|1                                 */
    struct bench_ints no_host;      /* --no-host 0|1: recorded                    */
    struct bench_ints fit_target;   /* -fitt MiB: the npu keeps this much free (0: off) */
    struct bench_ints fit_min_ctx;  /* -fitc: recorded                            */
    struct bench_ints acl_graph;    /* -g/--acl-graph: 0 off, 1 on                */
    struct bench_ints no_kv_offload; /* -nkvo: 1 keeps the KV cache in host memory */
    struct bench_ints launch_us;    /* --npu-launch-us: npu host µs per eager launch */
    struct bench_ints load_mode;    /* -lm, -mmp, -dio (enum bench_lm)            */
    struct bench_strs cpu_mask;     /* -C: hex masks, as given                    */
    struct bench_ints cpu_strict;   /* --cpu-strict 0|1                           */
    struct bench_ints poll;         /* --poll 0..100                              */
    bool devices_given, acl_graph_given; /* md shows dev / acl_graph only then    */
    int reps;                       /* -r                                         */
    int delay;                      /* --delay seconds before each test           */
    int prio;                       /* --prio -1..3 (enum llm_prio)               */
    char numa[16];                  /* --numa distribute|isolate|numactl, "" off  */
    enum bench_output output, output_err; /* -o (stdout), -oe (stderr)            */
    bool verbose, progress, no_warmup, roofline;
    bool profile;                   /* --profile: per-op table per test, `profile` field in records */
    bool token_times;               /* --token-times: per-token times and latency summaries         */
    char *trace;                    /* --trace FILE: one Chrome trace of the whole run, or NULL   */
    char *ranks_split;              /* --ranks-split a/b/...: layer shares per MPI rank, or NULL  */
    char empty[96];                 /* "-p '5-1'": the first value that gave no items (llama-bench
                                       then runs the default; bench_validate refuses it), or "" */
};

/* Defaults that depend on the machine and the environment. */
struct bench_defaults {
    int n_threads;  /* llama-bench: number of physical ("math") cores */
    bool acl_graph; /* GGML_CANN_ACL_GRAPH as a bool, else on        */
    int launch_us;  /* LLM_NPU_LAUNCH_US rounded to an integer, else 0 */
};

/* Physical cores (distinct thread-sibling sets in sysfs, else online CPUs) and the env switches. */
struct bench_defaults bench_system_defaults(void);

enum bench_parse_status { BENCH_PARSE_OK, BENCH_PARSE_HELP, BENCH_PARSE_LIST_DEVICES, BENCH_PARSE_INVALID,
                          BENCH_PARSE_NOMEM, BENCH_PARSE_REFUSED };

/* --list-devices: llama-bench's list of the devices beside the cpu, on out. */
void bench_list_devices(FILE *out);

/* Parse argv (argv[0] = program name) as llama-bench does; empty lists get their defaults. An option
 * this tool has no counterpart for (-hf..., --offline, -rpc) is BENCH_PARSE_REFUSED with one line in
 * msg (no "error:" prefix) saying what to do instead. On
 * BENCH_PARSE_INVALID, msg receives the exact stderr text ("error: invalid range\n" lines then
 * "error: invalid parameter for argument: X\n"); the caller prints it and the usage, and exits 1.
 * "--a_b" is read as "--a-b". p must be freed with bench_params_free() whatever the result. */
enum bench_parse_status bench_parse(int argc, char **argv, const struct bench_defaults *d,
                                    struct bench_params *p, char *msg, size_t msg_cap);
void bench_params_free(struct bench_params *p);

/* Checks llama-bench leaves to run time, all before anything runs, each naming its option: a
 * value that gave no items, -r >= 1, --delay >= 0, -p/-n/-d/-pg >= 0 and their sum (the context)
 * within int, -b/-ub >= 1, -t 1..TOOL_MAX_THREADS, --npu-launch-us <= 1e6, KV types f16/f32.
 * Returns 0, or -1 with the reason in msg (no "error:" prefix). */
int bench_validate(const struct bench_params *p, char *msg, size_t cap);

/* Is list l different from the default list (more than one value or another value)? md shows the
 * column then. name is the field name ("n_batch"). */
bool bench_param_differs(const struct bench_params *p, const struct bench_defaults *d, const char *name);

/* llama-bench's usage text on out. */
void bench_usage(FILE *out, const char *prog, const struct bench_defaults *d);

/* One test of the plan. */
struct bench_instance {
    const char *model; /* points into bench_params.model */
    int n_prompt, n_gen, n_depth;
    int n_batch, n_ubatch, type_k, type_v, n_threads, n_gpu_layers, flash_attn, device, acl_graph, launch_us;
    int no_kv_offload;
    int load_mode;         /* enum bench_lm */
    const char *cpu_mask;  /* -C as given ("0x0": no mask), points into bench_params.cpu_mask */
    const char *devices_text; /* -dev item as given ("auto" by default)                   */
    const char *tensor_split; /* -ts item, formatted as llama-bench records it ("0.00")   */
    int n_cpu_moe, split_mode, main_gpu, embeddings, no_op_offload, no_host, fit_target, fit_min_ctx;
    int cpu_strict, poll;
    const char *overrides; /* -ot: one alternative of bench_params.overrides, NULL: none */
};

/* All tests in llama-bench's order (outermost first: model, fit_target, fit_min_ctx, n_gpu_layers, n_cpu_moe, split_mode, load_mode, main_gpu, devices,
 * tensor_split, overrides, no_host, embeddings, no_op_offload, acl_graph,
 * npu_launch_us, n_batch, n_ubatch, type_k, type_v, no_kv_offload, flash_attn, n_threads, cpu_mask, cpu_strict, n_depth, poll; innermost pp, tg, pg tests,
 * skipping 0 and (0,0)). *out is malloc'ed (free()), *n may be 0. Returns -1 on allocation failure. */
int bench_plan(const struct bench_params *p, struct bench_instance **out, size_t *n);

/* --token-times entries per repetition: the prompt as one (when n_prompt > 0), then each decode
 * step of the generation. */
size_t bench_token_count(const struct bench_instance *t);

/* "pp512", "tg128", "pp512+tg128", with " @ d<D>" when depth > 0. */
void bench_test_name(const struct bench_instance *t, char *buf, size_t cap);

/* Statistics exactly as llama-bench: means and sample standard deviations (n-1 denominator, via
 * sqrt(Σx²/(n−1) − mean²·n/(n−1)), 0 for ≤ 1 sample); the ns versions in uint64 arithmetic with
 * integer division (wrapping as llama-bench's does). Empty input gives 0. */
uint64_t bench_avg_ns(const uint64_t *v, size_t n);
uint64_t bench_stdev_ns(const uint64_t *v, size_t n);
double bench_avg_ts(const double *v, size_t n);
double bench_stdev_ts(const double *v, size_t n);

/* Run-wide facts printed in every record. */
struct bench_env {
    const char *build_commit;
    int build_number;
    const char *cpu_info, *gpu_info, *backends;
};

/* One finished test. */
struct bench_result {
    struct bench_instance inst;
    const char *model_type;     /* model description, "llama ?B all F32"      */
    uint64_t model_size;        /* bytes of all tensors                       */
    uint64_t model_n_params;    /* elements of all tensors                    */
    char test_time[32];         /* RFC 3339 UTC when the test started         */
    const uint64_t *samples_ns; /* one per repetition                         */
    size_t n_samples;
    struct llm_backend_stat stats[LLM_BACKEND_MAX_STATS]; /* the figures of the test's backends, */
    int n_stats;                  /* warm-up included (none on the cpu alone)              */
    int n_splits;                 /* the schedule of the test's last graph: its splits and the */
    double copy_bytes_per_token;  /* bytes copied between backends per token it evaluated    */
    int n_ranks;                  /* pipeline stages over MPI (1: one process) and the layers */
    char ranks_split[128];        /* of each, "3/2"                                           */
    const char *profile;          /* --profile: the test's profile as JSON text, else NULL */
    uint64_t n_tokens;            /* tokens the test evaluated, warm-up and depth included */
    const uint64_t *token_ns;     /* --token-times: n_samples rows of bench_token_count() ns, else NULL */
    const int32_t *token_depth;   /* the same layout: KV cells in use before each entry            */
};

/* --token-times summaries of r (zeroed without token_ns): pg tests' TTFT is the prompt entry plus the
 * first decode step; the inter-token latency covers every decode step of tg and pg tests (none for
 * pp tests). Returns -1 on allocation failure. */
int bench_latency(const struct bench_result *r, struct latency_summary *out);

/* r's figure called name (backend.h llm_backend_stat), 0 when its backends keep none of that name. */
double bench_stat(const struct bench_result *r, const char *name);

/* Per-sample t/s: 1e9 * (n_prompt + n_gen) / ns. ts must hold n_samples values. */
void bench_samples_ts(const struct bench_result *r, double *ts);

/* A printer of one format on one stream; md needs the params (which columns) and the defaults. */
struct bench_printer {
    enum bench_output fmt;
    FILE *out;
    const struct bench_params *params;
    const struct bench_defaults *defaults;
    bool first; /* json: no ",\n" before the first object */
};

void bench_print_header(struct bench_printer *pr, const struct bench_env *env);
/* Returns -1 on allocation failure (nothing printed). */
int bench_print_test(struct bench_printer *pr, const struct bench_env *env, const struct bench_result *r);
void bench_print_footer(struct bench_printer *pr, const struct bench_env *env);

#endif
