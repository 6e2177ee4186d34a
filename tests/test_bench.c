/* llm-bench in-process (tools/bench.h): llama-bench's option parsing (lists, repeated flags, ranges,
 * its exact error lines), the test order, the statistics, and the printers against
 * ../shared/ref/llama-bench/: fed the samples recorded in the json/jsonl references, our json and
 * jsonl output must equal them byte for byte once our appended fields are taken out; csv, sql and md
 * must match in field names, order, quoting and number formats. Also the roofline measurement. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>

#include "../tools/bench.h"
#include "../tools/roofline.h"
#include "harness.h"

static const struct bench_defaults defaults = { .n_threads = 2, .acl_graph = true };

/* Parse a space-separated command line; msg gets the error text. */
static enum bench_parse_status parse(const char *line, struct bench_params *p, char *msg, size_t cap)
{
    char buf[1024], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "llm-bench %s", line);
    for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    return bench_parse(argc, argv, &defaults, p, msg, cap);
}

static bool ints_are(const struct bench_ints *l, const int *want, int n)
{
    if (l->n != n)
        return false;
    for (int i = 0; i < n; i++)
        if (l->v[i] != want[i])
            return false;
    return true;
}

#define CHECK_LIST(line, field, ...)                                                           \
    do {                                                                                       \
        struct bench_params p_;                                                                \
        char m_[256];                                                                          \
        const int w_[] = { __VA_ARGS__ };                                                      \
        CHECK(parse(line, &p_, m_, sizeof m_) == BENCH_PARSE_OK, "%s: %s", line, m_);          \
        CHECK(ints_are(&p_.field, w_, (int)(sizeof w_ / sizeof w_[0])), "%s: %s", line, #field); \
        bench_params_free(&p_);                                                                \
    } while (0)

#define CHECK_ERROR(line, want)                                                                \
    do {                                                                                       \
        struct bench_params p_;                                                                \
        char m_[256];                                                                          \
        CHECK(parse(line, &p_, m_, sizeof m_) == BENCH_PARSE_INVALID, "%s", line);             \
        CHECK(strcmp(m_, want) == 0, "%s: got \"%s\"", line, m_);                              \
        bench_params_free(&p_);                                                                \
    } while (0)

static void test_parse(void)
{
    CHECK_LIST("-p 1-4", n_prompt, 1, 2, 3, 4);
    CHECK_LIST("-p 64-512*2", n_prompt, 64, 128, 256, 512);
    CHECK_LIST("-t 1-16+4", n_threads, 1, 5, 9, 13);
    CHECK_LIST("-p 128,256 -p 512", n_prompt, 128, 256, 512);
    CHECK_LIST("-n 1-3,8,16-64*4", n_gen, 1, 2, 3, 8, 16, 64);
    CHECK_LIST("-p 1,", n_prompt, 1);
    CHECK_LIST("-p 4-1", n_prompt, 512); /* empty list gets the default */
    CHECK_LIST("-p 0 -n 0", n_prompt, 0);
    CHECK_LIST("-ngl -1", n_gpu_layers, -1);
    CHECK_LIST("-ngl 0-2", n_gpu_layers, 0, 1, 2);
    CHECK_LIST("--n_prompt 16 --n-gen 8", n_prompt, 16);
    CHECK_LIST("--threads 3 -ub 64,128 -b 256", n_ubatch, 64, 128);
    CHECK_LIST("-pg 16,8 -pg 512,128", n_pg, 16, 8, 512, 128);
    CHECK_LIST("-fa on,off,auto,1,0,-1,enabled,disabled,true,false", flash_attn, 1, 0, -1, 1, 0, -1, 1, 0, 1, 0);
    CHECK_LIST("-ctk f32,f16 -ctv f32", type_k, BENCH_KV_F32, BENCH_KV_F16);
    CHECK_LIST("-ctk q8_0", type_k, BENCH_KV_Q8_0); /* known to llama-bench; bench.c rejects it */
    CHECK_LIST("-dev cpu,npu", devices, BENCH_DEV_CPU, BENCH_DEV_NPU);
    CHECK_LIST("-g on,off --acl-graph 0,1", acl_graph, 1, 0, 0, 1);
    CHECK_LIST("-d 0,512", n_depth, 0, 512);

    CHECK_ERROR("-p 1-4*1", "error: invalid range\nerror: invalid parameter for argument: -p\n");
    CHECK_ERROR("-p 5-5+0", "error: invalid range\nerror: invalid parameter for argument: -p\n");
    CHECK_ERROR("-p 0-8*2", "error: invalid range\nerror: invalid parameter for argument: -p\n");
    CHECK_ERROR("-p 12abc", "error: invalid range format\nerror: invalid parameter for argument: -p\n");
    CHECK_ERROR("-n 1-4+", "error: invalid range format\nerror: invalid parameter for argument: -n\n");
    CHECK_ERROR("-t -1", "error: invalid range format\nerror: invalid parameter for argument: -t\n");
    CHECK_ERROR("-p 1-4|2", "error: invalid range format\nerror: invalid parameter for argument: -p\n");
    CHECK_ERROR("-p 99999999999", "error: stoi\nerror: invalid parameter for argument: -p\n");
    CHECK_ERROR("--frobnicate", "error: invalid parameter for argument: --frobnicate\n");
    CHECK_ERROR("--n_promptx 4", "error: invalid parameter for argument: --n-promptx\n");
    CHECK_ERROR("-nkvo 2", "error: invalid parameter for argument: -nkvo\n");
    CHECK_ERROR("-ot ffn=", "error: invalid parameter for argument: -ot\n");
    CHECK_ERROR("-ot a=cpu;=npu", "error: invalid parameter for argument: -ot\n");
    CHECK_ERROR("-sm diagonal", "error: invalid parameter for argument: -sm\n");
    CHECK_ERROR("-lm mmap+dio", "error: invalid parameter for argument: -lm\n");
    CHECK_ERROR("--numa all", "error: invalid parameter for argument: --numa\n");
    CHECK_ERROR("-ts 1/x", "error: invalid parameter for argument: -ts\n");
    CHECK_ERROR("-dev npu/tpu", "error: invalid device: npu/tpu\nerror: invalid parameter for argument: -dev\n");
    CHECK_ERROR("-m x.gguf -p", "error: invalid parameter for argument: -p\n");
    CHECK_ERROR("-r abc", "error: stoi\nerror: invalid parameter for argument: -r\n");
    CHECK_ERROR("-pg 16", "error: invalid parameter for argument: -pg\n");
    CHECK_ERROR("-pg 16,8,4", "error: invalid parameter for argument: -pg\n");
    CHECK_ERROR("-pg x,8", "error: stoi\nerror: invalid parameter for argument: -pg\n");
    CHECK_ERROR("-o xml", "error: invalid parameter for argument: -o\n");
    CHECK_ERROR("-ctk q9_9", "error: invalid parameter for argument: -ctk\n");
    CHECK_ERROR("-fa maybe", "error: invalid parameter for argument: -fa\n");
    CHECK_ERROR("-dev tpu", "error: invalid device: tpu\nerror: invalid parameter for argument: -dev\n");
    CHECK_ERROR("-g maybe", "error: invalid parameter for argument: -g\n");

    struct bench_params p;
    char msg[256];
    CHECK(parse("-p 16 -h --frobnicate", &p, msg, sizeof msg) == BENCH_PARSE_HELP);
    bench_params_free(&p);

    /* defaults: llama-bench's, threads and acl_graph from the machine / environment */
    CHECK(parse("", &p, msg, sizeof msg) == BENCH_PARSE_OK);
    CHECK(p.model.n == 1 && !strcmp(p.model.v[0], "models/7B/ggml-model-q4_0.gguf"));
    CHECK(ints_are(&p.n_prompt, (int[]){ 512 }, 1) && ints_are(&p.n_gen, (int[]){ 128 }, 1));
    CHECK(p.n_pg.n == 0 && ints_are(&p.n_depth, (int[]){ 0 }, 1));
    CHECK(ints_are(&p.n_batch, (int[]){ 2048 }, 1) && ints_are(&p.n_ubatch, (int[]){ 512 }, 1));
    CHECK(ints_are(&p.n_threads, (int[]){ 2 }, 1) && ints_are(&p.flash_attn, (int[]){ -1 }, 1));
    CHECK(ints_are(&p.n_gpu_layers, (int[]){ -1 }, 1) && ints_are(&p.acl_graph, (int[]){ 1 }, 1));
    CHECK(ints_are(&p.devices, (int[]){ BENCH_DEV_AUTO }, 1) && !p.devices_given && !p.acl_graph_given);
    CHECK(p.reps == 5 && p.delay == 0 && p.output == BENCH_OUT_MD && p.output_err == BENCH_OUT_NONE);
    CHECK(!p.verbose && !p.progress && !p.no_warmup && !p.roofline);
    CHECK(!bench_param_differs(&p, &defaults, "n_threads") && !bench_param_differs(&p, &defaults, "n_batch"));
    bench_params_free(&p);

    CHECK(parse("-m a.gguf,b.gguf -m c.gguf -r 3 --delay 1 -o jsonl -oe md -v --progress --no-warmup --roofline "
                "-t 2 -b 2048,2048 -fa 1 -dev cpu",
                &p, msg, sizeof msg) == BENCH_PARSE_OK, "%s", msg);
    CHECK(p.model.n == 3 && !strcmp(p.model.v[1], "b.gguf") && !strcmp(p.model.v[2], "c.gguf"));
    CHECK(p.reps == 3 && p.delay == 1 && p.output == BENCH_OUT_JSONL && p.output_err == BENCH_OUT_MD);
    CHECK(p.verbose && p.progress && p.no_warmup && p.roofline);
    CHECK(!bench_param_differs(&p, &defaults, "n_threads"), "-t at its default value");
    CHECK(bench_param_differs(&p, &defaults, "n_batch"), "two values");
    CHECK(bench_param_differs(&p, &defaults, "flash_attn") && !bench_param_differs(&p, &defaults, "type_k"));
    CHECK(bench_param_differs(&p, &defaults, "devices") && !bench_param_differs(&p, &defaults, "acl_graph"));
    CHECK(!bench_param_differs(&p, &defaults, "npu_launch_us"));
    bench_params_free(&p);

    /* --npu-launch-us: a range list like -t, shown in md only when it differs from the default */
    CHECK(parse("--npu-launch-us 0,5,10-20+10", &p, msg, sizeof msg) == BENCH_PARSE_OK, "%s", msg);
    CHECK(ints_are(&p.launch_us, (int[]){ 0, 5, 10, 20 }, 4));
    CHECK(bench_param_differs(&p, &defaults, "npu_launch_us"));
    bench_params_free(&p);
    CHECK(parse("", &p, msg, sizeof msg) == BENCH_PARSE_OK && ints_are(&p.launch_us, (int[]){ 0 }, 1));
    bench_params_free(&p);
    CHECK(parse("--npu-launch-us -5", &p, msg, sizeof msg) == BENCH_PARSE_INVALID);
    bench_params_free(&p);
}

/* Test names of the plan of a command line, joined by "|". */
static void plan_names(const char *line, char *out, size_t cap)
{
    struct bench_params p;
    char msg[256];
    out[0] = '\0';
    if (parse(line, &p, msg, sizeof msg) != BENCH_PARSE_OK) {
        bench_params_free(&p);
        snprintf(out, cap, "parse error: %s", msg);
        return;
    }
    struct bench_instance *t;
    size_t n;
    CHECK(bench_plan(&p, &t, &n) == 0);
    for (size_t i = 0; i < n; i++) {
        char name[64];
        bench_test_name(&t[i], name, sizeof name);
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", i ? "|" : "", name);
    }
    free(t);
    bench_params_free(&p);
}

static void test_plan(void)
{
    char names[1024];
    plan_names("-p 512 -n 128 -d 0,512", names, sizeof names);
    CHECK_STR(names, "pp512|tg128|pp512 @ d512|tg128 @ d512");
    plan_names("-p 16 -n 8 -pg 16,8 -d 0,32", names, sizeof names);
    CHECK_STR(names, "pp16|tg8|pp16+tg8|pp16 @ d32|tg8 @ d32|pp16+tg8 @ d32");
    plan_names("-p 0 -n 0 -pg 0,0", names, sizeof names);
    CHECK_STR(names, "");
    plan_names("-p 0 -n 16,0,32 -pg 0,4 -pg 8,0", names, sizeof names);
    CHECK_STR(names, "tg16|tg32|tg4|pp8");
    plan_names("-p 64,128 -n 0", names, sizeof names);
    CHECK_STR(names, "pp64|pp128");

    /* nesting order: model, ngl, dev, acl_graph, npu_launch_us, batch, ubatch, type_k, type_v, fa,
     * threads, depth */
    struct bench_params p;
    char msg[256];
    CHECK(parse("-m a,b -ngl 1,2 -dev cpu,npu -g on,off -b 64,128 -ub 32,16 -ctk f16,f32 -ctv f32,f16 "
                "-fa 0,1 -t 1,2 -d 0,8 -p 4 -n 2 --npu-launch-us 0,20",
                &p, msg, sizeof msg) == BENCH_PARSE_OK, "%s", msg);
    struct bench_instance *t;
    size_t n;
    CHECK(bench_plan(&p, &t, &n) == 0);
    CHECK_EQ_INT(n, 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2);
    if (n == 8192) {
        /* index bits, most significant first, follow the loop order; the last bit is pp/tg */
        for (size_t i = 0; i < n; i += 37) {
            const struct bench_instance *x = &t[i];
            size_t b = i;
            CHECK(x->n_prompt == ((b & 1) ? 0 : 4) && x->n_gen == ((b & 1) ? 2 : 0));
            CHECK(x->n_depth == (int)((b >> 1) & 1) * 8);
            CHECK(x->n_threads == (int)((b >> 2) & 1) + 1);
            CHECK(x->flash_attn == (int)((b >> 3) & 1));
            CHECK(x->type_v == (((b >> 4) & 1) ? BENCH_KV_F16 : BENCH_KV_F32));
            CHECK(x->type_k == (((b >> 5) & 1) ? BENCH_KV_F32 : BENCH_KV_F16));
            CHECK(x->n_ubatch == (((b >> 6) & 1) ? 16 : 32));
            CHECK(x->n_batch == (((b >> 7) & 1) ? 128 : 64));
            CHECK(x->launch_us == (int)((b >> 8) & 1) * 20);
            CHECK(x->acl_graph == (((b >> 9) & 1) ? 0 : 1));
            CHECK(x->device == (((b >> 10) & 1) ? BENCH_DEV_NPU : BENCH_DEV_CPU));
            CHECK(x->n_gpu_layers == (int)((b >> 11) & 1) + 1);
            CHECK_STR(x->model, ((b >> 12) & 1) ? "b" : "a");
        }
    }
    free(t);
    bench_params_free(&p);
}

static void test_stats(void)
{
    CHECK_EQ_INT(bench_avg_ns((uint64_t[]){ 10, 20, 30 }, 3), 20);
    CHECK_EQ_INT(bench_stdev_ns((uint64_t[]){ 10, 20, 30 }, 3), 10);
    /* integer division everywhere: mean 1, 5/1 - 1*1*2/1 = 3, sqrt -> 1 */
    CHECK_EQ_INT(bench_avg_ns((uint64_t[]){ 1, 2 }, 2), 1);
    CHECK_EQ_INT(bench_stdev_ns((uint64_t[]){ 1, 2 }, 2), 1);
    CHECK_EQ_INT(bench_stdev_ns((uint64_t[]){ 1000 }, 1), 0);
    CHECK_EQ_INT(bench_avg_ns(NULL, 0), 0);
    CHECK(fabs(bench_avg_ts((double[]){ 1, 2, 3 }, 3) - 2) < 1e-12);
    CHECK(fabs(bench_stdev_ts((double[]){ 1, 2, 3 }, 3) - 1) < 1e-12);
    CHECK(bench_stdev_ts((double[]){ 5 }, 1) == 0);
    /* the sample (n-1) deviation, not the population one */
    CHECK(fabs(bench_stdev_ts((double[]){ 2, 4 }, 2) - sqrt(2.0)) < 1e-12);

    struct bench_result r = { .inst = { .n_prompt = 16, .n_gen = 8 } };
    uint64_t ns[] = { 1000000, 2000000 };
    double ts[2];
    r.samples_ns = ns;
    r.n_samples = 2;
    bench_samples_ts(&r, ts);
    CHECK(fabs(ts[0] - 24000) < 1e-9 && fabs(ts[1] - 12000) < 1e-9, "pg counts prompt and generated tokens");
}

/* ---- printers against the references ---- */

/* Remove every occurrence of needle from s; returns how many. */
static int strip_all(char *s, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (char *p; len && (p = strstr(s, needle)) != NULL; n++)
        memmove(p, p + len, strlen(p + len) + 1);
    return n;
}

static const struct bench_env ref_env = {
    .build_commit = "unknown", .build_number = 0, .cpu_info = "AMD EPYC", .gpu_info = "", .backends = "CPU",
};

struct fixture {
    struct bench_params p;
    struct bench_instance *t;
    size_t n;
    uint64_t samples[8][8];
    struct bench_result r[8];
};

/* The tests of a reference command line, as results with the given samples (or 1 ms per token). */
static bool fixture_init(struct fixture *fx, const char *line, cJSON *ref_objects)
{
    char msg[256];
    memset(fx, 0, sizeof *fx);
    if (parse(line, &fx->p, msg, sizeof msg) != BENCH_PARSE_OK || bench_plan(&fx->p, &fx->t, &fx->n) != 0 ||
        fx->n > 8) {
        CHECK(0, "fixture %s: %s", line, msg);
        return false;
    }
    for (size_t i = 0; i < fx->n; i++) {
        struct bench_result *r = &fx->r[i];
        r->inst = fx->t[i];
        r->model_type = "llama ?B (guessed) all F32";
        r->model_size = 1171200;
        r->model_n_params = 292800;
        snprintf(r->test_time, sizeof r->test_time, "2026-11-21T23:31:27Z");
        r->samples_ns = fx->samples[i];
        r->n_samples = (size_t)fx->p.reps;
        cJSON *obj = ref_objects ? cJSON_GetArrayItem(ref_objects, (int)i) : NULL;
        cJSON *arr = obj ? cJSON_GetObjectItem(obj, "samples_ns") : NULL;
        for (int k = 0; k < fx->p.reps; k++)
            fx->samples[i][k] = arr ? (uint64_t)cJSON_GetArrayItem(arr, k)->valuedouble
                                    : (uint64_t)(r->inst.n_prompt + r->inst.n_gen) * 1000000u + (uint64_t)k * 7919u;
    }
    return true;
}

static char *print_all(struct fixture *fx, enum bench_output fmt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    struct bench_printer pr = { .fmt = fmt, .out = m, .params = &fx->p, .defaults = &defaults };
    bench_print_header(&pr, &ref_env);
    for (size_t i = 0; i < fx->n; i++)
        CHECK(bench_print_test(&pr, &ref_env, &fx->r[i]) == 0);
    bench_print_footer(&pr, &ref_env);
    fclose(m);
    return buf;
}

static void fixture_free(struct fixture *fx)
{
    free(fx->t);
    bench_params_free(&fx->p);
}

static const char *const extra_names[] = { "acl_graph", "graph_captures", "graph_replays", "graph_hits",
                                           "graph_misses", "graph_evictions", "eager_launches", "npu_launch_us",
                                           "ops_replayed", "host_launch_us_per_token", "host_match_us_per_token",
                                           "host_serial_us_per_token", "device_us_per_token", "host_waits",
                                           "host_waits_shared_cpu", "n_splits", "copy_bytes_per_token",
                                           "n_ranks", "ranks_split", "use_mmap", "operator_fusion",
                                           "launches_per_token", "launches_per_token_unfused" };

static void test_json_exact(void)
{
    char *ref = test_read_file(test_path("ref/llama-bench/stories260K.p16.n8.r2.t1.json"), NULL);
    CHECK(ref != NULL, "missing reference json");
    if (!ref)
        return;
    cJSON *objs = cJSON_Parse(ref);
    struct fixture fx;
    if (objs && fixture_init(&fx, "-m stories260K.gguf -p 16 -n 8 -r 2 -t 1 -o json", objs)) {
        char *out = print_all(&fx, BENCH_OUT_JSON);
        CHECK(cJSON_GetArraySize(objs) == 2);
        cJSON *mine = cJSON_Parse(out);
        CHECK(mine != NULL, "our json does not parse");
        cJSON_Delete(mine);
        int n = strip_all(out, "    \"acl_graph\": true,\n    \"graph_captures\": 0,\n    \"graph_replays\": 0,\n"
                               "    \"graph_hits\": 0,\n    \"graph_misses\": 0,\n    \"graph_evictions\": 0,\n"
                               "    \"eager_launches\": 0,\n    \"npu_launch_us\": 0,\n    \"ops_replayed\": 0,\n"
                               "    \"host_launch_us_per_token\": 0.000000,\n    \"host_match_us_per_token\": 0.000000,\n"
                               "    \"host_serial_us_per_token\": 0.000000,\n    \"device_us_per_token\": 0.000000,\n"
                               "    \"host_waits\": 0,\n    \"host_waits_shared_cpu\": 0,\n"
                               "    \"n_splits\": 0,\n    \"copy_bytes_per_token\": 0.000000,\n"
                               "    \"n_ranks\": 0,\n    \"ranks_split\": \"\",\n"
                               "    \"use_mmap\": true,\n    \"operator_fusion\": false,\n"
                               "    \"launches_per_token\": 0.000000,\n    \"launches_per_token_unfused\": 0.000000,\n"
                               "    \"samples_ns\"");
        CHECK_EQ_INT(n, 2);
        strip_all(ref, "    \"samples_ns\"");
        CHECK(strcmp(out, ref) == 0, "json differs:\n%s\n--- want ---\n%s", out, ref);
        free(out);
        fixture_free(&fx);
    }
    cJSON_Delete(objs);
    free(ref);
}

static void test_jsonl_exact(void)
{
    char *ref = test_read_file(test_path("ref/llama-bench/stories260K.p16.n8.r2.t1.jsonl"), NULL);
    CHECK(ref != NULL, "missing reference jsonl");
    if (!ref)
        return;
    /* the samples of each line, gathered into one array for the fixture */
    cJSON *objs = cJSON_CreateArray();
    for (char *line = ref, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        char save = nl ? *nl : 0;
        if (nl)
            *nl = 0;
        cJSON_AddItemToArray(objs, cJSON_Parse(line));
        if (nl)
            *nl = save;
    }
    struct fixture fx;
    if (fixture_init(&fx, "-m stories260K.gguf -p 16 -n 8 -r 2 -t 1 -o jsonl", objs)) {
        char *out = print_all(&fx, BENCH_OUT_JSONL);
        int n = strip_all(out, "\"acl_graph\": true, \"graph_captures\": 0, \"graph_replays\": 0, \"graph_hits\": 0, "
                               "\"graph_misses\": 0, \"graph_evictions\": 0, \"eager_launches\": 0, \"npu_launch_us\": 0, "
                               "\"ops_replayed\": 0, \"host_launch_us_per_token\": 0.000000, "
                               "\"host_match_us_per_token\": 0.000000, \"host_serial_us_per_token\": 0.000000, "
                               "\"device_us_per_token\": 0.000000, \"host_waits\": 0, \"host_waits_shared_cpu\": 0, "
                               "\"n_splits\": 0, \"copy_bytes_per_token\": 0.000000, \"n_ranks\": 0, \"ranks_split\": \"\", \"use_mmap\": true, "
                               "\"operator_fusion\": false, \"launches_per_token\": 0.000000, "
                               "\"launches_per_token_unfused\": 0.000000, ");
        CHECK_EQ_INT(n, 2);
        CHECK(strcmp(out, ref) == 0, "jsonl differs:\n%s\n--- want ---\n%s", out, ref);
        free(out);
        fixture_free(&fx);
    }
    cJSON_Delete(objs);
    free(ref);
}

static bool is_uint(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* "%f": digits, a point, six digits. */
static bool is_fixed6(const char *s)
{
    const char *dot = strchr(s, '.');
    if (!dot || dot == s || strlen(dot + 1) != 6)
        return false;
    for (const char *p = s; *p; p++)
        if (p != dot && !isdigit((unsigned char)*p))
            return false;
    return true;
}

/* Split one csv line of quoted fields ("" inside) into values; returns the count or -1. */
static int csv_split(const char *line, char vals[][128], int max)
{
    int n = 0;
    const char *p = line;
    while (*p && *p != '\n') {
        if (*p != '"' || n == max)
            return -1;
        size_t k = 0;
        for (p++; *p && !(p[0] == '"' && p[1] != '"'); p++) {
            if (p[0] == '"')
                p++;
            if (k < 127)
                vals[n][k++] = *p;
        }
        if (*p != '"')
            return -1;
        vals[n++][k] = 0;
        p++;
        if (*p == ',')
            p++;
    }
    return n;
}

static bool is_timing(const char *name)
{
    return !strcmp(name, "avg_ns") || !strcmp(name, "stddev_ns") || !strcmp(name, "avg_ts") ||
           !strcmp(name, "stddev_ts");
}

static void test_csv(void)
{
    char *ref = test_read_file(test_path("ref/llama-bench/stories260K.p16.n8.r2.t1.csv"), NULL);
    CHECK(ref != NULL, "missing reference csv");
    struct fixture fx;
    if (!ref || !fixture_init(&fx, "-m stories260K.gguf -p 16 -n 8 -r 2 -t 1 -o csv", NULL)) {
        free(ref);
        return;
    }
    char *out = print_all(&fx, BENCH_OUT_CSV);
    /* header: llama-bench's names, then ours */
    size_t hl = strcspn(ref, "\n");
    char extras[512] = "";
    for (size_t i = 0; i < sizeof extra_names / sizeof extra_names[0]; i++)
        snprintf(extras + strlen(extras), sizeof extras - strlen(extras), ",%s", extra_names[i]);
    CHECK(strncmp(out, ref, hl) == 0 && strncmp(out + hl, extras, strlen(extras)) == 0 &&
              out[hl + strlen(extras)] == '\n',
          "csv header: %.*s", (int)strcspn(out, "\n"), out);
    char names[64][128], want[64][128], got[64][128];
    int n_names = 0;
    for (const char *p = ref; p < ref + hl; n_names++) {
        size_t k = strcspn(p, ",\n");
        snprintf(names[n_names], sizeof names[0], "%.*s", (int)k, p);
        p += k + 1;
    }
    const char *rl = ref + hl + 1, *ol = strchr(out, '\n') + 1;
    for (int row = 0; row < 2; row++) {
        int nw = csv_split(rl, want, 64), ng = csv_split(ol, got, 64);
        const int n_extra = (int)(sizeof extra_names / sizeof extra_names[0]);
        CHECK(nw == n_names && ng == n_names + n_extra, "row %d: %d / %d values", row, nw, ng);
        for (int i = 0; i < nw && i < ng; i++) {
            if (!is_timing(names[i]))
                CHECK(!strcmp(want[i], got[i]), "%s: \"%s\" != \"%s\"", names[i], got[i], want[i]);
            else if (strstr(names[i], "_ns"))
                CHECK(is_uint(got[i]) && is_uint(want[i]), "%s: %s", names[i], got[i]);
            else
                CHECK(is_fixed6(got[i]) && is_fixed6(want[i]), "%s: %s", names[i], got[i]);
        }
        for (int i = nw; i < ng; i++) /* on cpu: acl_graph 1, counters 0, per-token times 0, no ranks; mapped */
            CHECK(!strcmp(got[i], i == nw || !strcmp(extra_names[i - nw], "use_mmap") ? "1"
                                  : strstr(extra_names[i - nw], "_per_token")          ? "0.000000"
                                  : !strcmp(extra_names[i - nw], "ranks_split")        ? ""
                                                                                       : "0"),
                  "%s = %s", extra_names[i - nw], got[i]);
        rl = strchr(rl, '\n') + 1;
        ol = strchr(ol, '\n') + 1;
    }
    CHECK(*rl == 0 && *ol == 0, "trailing lines");
    free(out);
    free(ref);
    fixture_free(&fx);
}

/* In every INSERT, check the formats of avg_ns, stddev_ns, avg_ts, stddev_ts (values 36..39) and
 * replace them by 'T'. */
static void sql_mask_timing(char *s)
{
    for (char *v = strstr(s, "VALUES ("); v; v = strstr(v, "VALUES (")) {
        char *p = v + 8;
        for (int idx = 0; *p == '\''; idx++) {
            char *end = strchr(p + 1, '\'');
            if (!end)
                return;
            if (idx >= 36 && idx <= 39) {
                char val[64];
                snprintf(val, sizeof val, "%.*s", (int)(end - p - 1), p + 1);
                CHECK(idx < 38 ? is_uint(val) : is_fixed6(val), "sql value %d: %s", idx, val);
                memmove(p + 2, end, strlen(end) + 1);
                p[1] = 'T';
                end = p + 2;
            }
            p = end + 1;
            if (strncmp(p, ", ", 2) != 0)
                break;
            p += 2;
        }
        v = p;
    }
}

/* Our companion tables, after llama-bench's CREATE TABLE: llm_bench_extra (its columns never
 * change) and those linked through it. */
static const char sql_extra_create[] =
    "CREATE TABLE IF NOT EXISTS llm_bench_extra (\n  llama_bench_rowid INTEGER,\n  test_time TEXT,\n  avg_ns INTEGER,\n"
    "  acl_graph INTEGER,\n  graph_captures INTEGER,\n  graph_replays INTEGER,\n  graph_hits INTEGER,\n"
    "  graph_misses INTEGER,\n  graph_evictions INTEGER,\n  eager_launches INTEGER,\n  npu_launch_us INTEGER,\n"
    "  ops_replayed INTEGER,\n  host_launch_us_per_token REAL,\n  host_match_us_per_token REAL,\n"
    "  host_serial_us_per_token REAL,\n  device_us_per_token REAL,\n  host_waits INTEGER,\n"
    "  host_waits_shared_cpu INTEGER\n);\n\n"
    "CREATE TABLE IF NOT EXISTS llm_bench_splits (\n  llama_bench_rowid INTEGER,\n  test_time TEXT,\n  avg_ns INTEGER,\n"
    "  n_splits INTEGER,\n  copy_bytes_per_token REAL,\n  n_ranks INTEGER,\n  ranks_split TEXT\n);\n\n"
    "CREATE TABLE IF NOT EXISTS llm_bench_load (\n  llama_bench_rowid INTEGER,\n  test_time TEXT,\n  avg_ns INTEGER,\n"
    "  use_mmap INTEGER\n);\n\n"
    "CREATE TABLE IF NOT EXISTS llm_bench_fusion (\n  llama_bench_rowid INTEGER,\n  test_time TEXT,\n  avg_ns INTEGER,\n"
    "  operator_fusion INTEGER,\n  launches_per_token REAL,\n  launches_per_token_unfused REAL\n);\n\n";

/* sql: llama-bench's text exactly (timings masked), with our CREATE TABLE after its own and, after each
 * of its INSERTs, ours: linked to the new rowid only if that row has the test's test_time and avg_ns. */
static void test_sql(void)
{
    char *ref = test_read_file(test_path("ref/llama-bench/stories260K.p16.n8.r2.t1.sql"), NULL);
    CHECK(ref != NULL, "missing reference sql");
    struct fixture fx;
    if (!ref || !fixture_init(&fx, "-m stories260K.gguf -p 16 -n 8 -r 2 -t 1 -o sql", NULL)) {
        free(ref);
        return;
    }
    char *out = print_all(&fx, BENCH_OUT_SQL);
    char *want = NULL;
    size_t want_len = 0, row = 0;
    bool created = false;
    FILE *m = open_memstream(&want, &want_len);
    for (const char *line = ref; *line;) {
        size_t n = strcspn(line, "\n");
        fprintf(m, "%.*s\n", (int)n, line);
        if (n == 0 && !created) { /* the blank line after llama-bench's CREATE TABLE */
            fputs(sql_extra_create, m);
            created = true;
        }
        if (!strncmp(line, "INSERT INTO llama_bench (", 25) && row < fx.n) {
            const struct bench_result *r = &fx.r[row++];
            fprintf(m, "INSERT INTO llm_bench_extra (llama_bench_rowid, test_time, avg_ns, acl_graph, graph_captures, "
                       "graph_replays, graph_hits, graph_misses, graph_evictions, eager_launches, npu_launch_us, "
                       "ops_replayed, host_launch_us_per_token, host_match_us_per_token, host_serial_us_per_token, "
                       "device_us_per_token, host_waits, host_waits_shared_cpu) SELECT rowid, "
                       "test_time, avg_ns, '1', '0', '0', '0', '0', '0', '0', '0', '0', '0.000000', '0.000000', '0.000000', "
                       "'0.000000', '0', '0' FROM llama_bench WHERE rowid = "
                       "last_insert_rowid() AND test_time = '%s' AND avg_ns = '%" PRIu64 "';\n",
                    r->test_time, bench_avg_ns(r->samples_ns, r->n_samples));
            fprintf(m, "INSERT INTO llm_bench_splits (llama_bench_rowid, test_time, avg_ns, n_splits, copy_bytes_per_token, "
                       "n_ranks, ranks_split) SELECT e.llama_bench_rowid, e.test_time, e.avg_ns, '0', '0.000000', '0', '' "
                       "FROM (SELECT llama_bench_rowid, test_time, avg_ns FROM llm_bench_extra WHERE test_time = '%s' AND "
                       "avg_ns = '%" PRIu64 "' ORDER BY rowid DESC LIMIT 1) AS e;\n",
                    r->test_time, bench_avg_ns(r->samples_ns, r->n_samples));
            fprintf(m, "INSERT INTO llm_bench_load (llama_bench_rowid, test_time, avg_ns, use_mmap) SELECT "
                       "e.llama_bench_rowid, e.test_time, e.avg_ns, '1' FROM (SELECT llama_bench_rowid, test_time, avg_ns "
                       "FROM llm_bench_extra WHERE test_time = '%s' AND avg_ns = '%" PRIu64 "' ORDER BY rowid DESC "
                       "LIMIT 1) AS e;\n",
                    r->test_time, bench_avg_ns(r->samples_ns, r->n_samples));
            fprintf(m, "INSERT INTO llm_bench_fusion (llama_bench_rowid, test_time, avg_ns, operator_fusion, "
                       "launches_per_token, launches_per_token_unfused) SELECT e.llama_bench_rowid, e.test_time, "
                       "e.avg_ns, '0', '0.000000', '0.000000' FROM (SELECT llama_bench_rowid, test_time, avg_ns FROM "
                       "llm_bench_extra WHERE test_time = '%s' AND avg_ns = '%" PRIu64 "' ORDER BY rowid DESC LIMIT 1) "
                       "AS e;\n",
                    r->test_time, bench_avg_ns(r->samples_ns, r->n_samples));
        }
        line += n + (line[n] == '\n');
    }
    fclose(m);
    CHECK_EQ_INT(row, 2);
    sql_mask_timing(out);
    sql_mask_timing(want);
    CHECK(strcmp(out, want) == 0, "sql differs:\n%s\n--- want ---\n%s", out, want);
    free(want);
    free(out);
    free(ref);
    fixture_free(&fx);
}

/* " %21s |" holding "<d>.<dd> ± <d>.<dd>", right-aligned. */
static bool is_ts_cell(const char *c)
{
    const char *p = c + 1;
    while (*p == ' ')
        p++;
    for (int part = 0; part < 2; part++) {
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
        if (p[0] != '.' || !isdigit((unsigned char)p[1]) || !isdigit((unsigned char)p[2]))
            return false;
        p += 3;
        if (part == 0 && strncmp(p, " \u00b1 ", 4) != 0)
            return false;
        p += part == 0 ? 4 : 0;
    }
    return c[0] == ' ' && c[1] == ' ' && strcmp(p, " |") == 0;
}

/* md: every line equal except the t/s cells, which must keep the width and "%.2f ± %.2f". */
static void check_md(const char *ref_name, const char *line)
{
    char path[256];
    snprintf(path, sizeof path, "ref/llama-bench/%s", ref_name);
    char *ref = test_read_file(test_path(path), NULL);
    CHECK(ref != NULL, "missing %s", ref_name);
    struct fixture fx;
    if (!ref || !fixture_init(&fx, line, NULL)) {
        free(ref);
        return;
    }
    char *out = print_all(&fx, BENCH_OUT_MD);
    int n = 0;
    for (const char *o = out, *r = ref; *o || *r; n++) {
        char ol[512], rl[512];
        size_t on = strcspn(o, "\n"), rn = strcspn(r, "\n");
        snprintf(ol, sizeof ol, "%.*s", (int)on, o);
        snprintf(rl, sizeof rl, "%.*s", (int)rn, r);
        o += on + (o[on] == '\n');
        r += rn + (r[rn] == '\n');
        /* a row's last cell is " %21s |": right-aligned "%.2f ± %.2f" ("±" is two bytes) */
        if (n >= 2 && strstr(rl, "\u00b1") && on == rn && on > 24) {
            CHECK(strncmp(ol, rl, on - 24) == 0, "md row:\n%s\n--- want ---\n%s", ol, rl);
            CHECK(is_ts_cell(ol + on - 24) && is_ts_cell(rl + rn - 24), "t/s cell: %s", ol);
        } else {
            CHECK(strcmp(ol, rl) == 0, "md line %d:\n%s\n--- want ---\n%s", n, ol, rl);
        }
    }
    free(out);
    free(ref);
    fixture_free(&fx);
}

static void test_md(void)
{
    check_md("stories260K.p16.n8.r2.t1.md", "-m stories260K.gguf -p 16 -n 8 -r 2 -t 1");
    check_md("stories260K.p16.n8.pg16-8.d0-32.r2.t1.md", "-m stories260K.gguf -p 16 -n 8 -pg 16,8 -d 0,32 -r 2 -t 1");

    /* conditional columns: given values, in llama-bench's order, ours after dev */
    struct fixture fx;
    if (fixture_init(&fx, "-m m.gguf -p 16 -n 0 -r 1 -b 64 -ub 32 -ctk f32 -ctv f32 -fa 1 -dev cpu -g off", NULL)) {
        fx.r[0].model_size = 3ull << 30;
        fx.r[0].model_n_params = 1100048384;
        char *out = print_all(&fx, BENCH_OUT_MD);
        const char *want_hdr =
            "| model                          |       size |     params | backend    | threads | n_batch | n_ubatch "
            "| type_k | type_v |  fa | dev          |  acl_graph |            test |                  t/s |\n"
            "| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------: | -------: "
            "| -----: | -----: | --: | ------------ | ---------: | --------------: | -------------------: |\n"
            "| llama ?B (guessed) all F32     |   3.00 GiB |     1.10 B | CPU        |       2 |      64 |       32 "
            "|    f32 |    f32 |   1 | cpu          |          0 |            pp16 |";
        CHECK(strncmp(out, want_hdr, strlen(want_hdr)) == 0, "md columns:\n%s", out);
        free(out);
        fixture_free(&fx);
    }
}

/* Occurrences of needle in s. */
static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* pp2, tg2, pp2+tg2 x 2 repetitions with fixed per-token times: decode steps 1..4 ms in each of
 * tg2 and pp2+tg2, prompts 5 and 6 ms. */
static const uint64_t tok_pp[] = { 5000000, 6000000 };
static const uint64_t tok_tg[] = { 1000000, 2000000, 3000000, 4000000 };
static const uint64_t tok_pg[] = { 5000000, 1000000, 2000000, 6000000, 3000000, 4000000 };
static const int32_t depth_pg[] = { 0, 2, 3, 0, 2, 3 };

static bool token_fixture(struct fixture *fx, bool flag)
{
    if (!fixture_init(fx, "-m stories260K.gguf -p 2 -n 2 -pg 2,2 -r 2 -t 1", NULL) || fx->n != 3)
        return false;
    fx->p.token_times = flag;
    const uint64_t *ns[] = { tok_pp, tok_tg, tok_pg };
    for (int i = 0; i < 3; i++) {
        fx->r[i].token_ns = ns[i];
        fx->r[i].token_depth = depth_pg; /* only pg's are printed as depths below */
    }
    return true;
}

/* --token-times in json/jsonl: token_ns per repetition, TTFT for pg, the inter-token percentiles
 * for tg and pg (nearest rank of 1..4 ms: p50 2, p90 4); nothing of it without the flag, and csv
 * and md never carry it. */
static void test_token_times(void)
{
    struct fixture off, on;
    if (!token_fixture(&off, false) || !token_fixture(&on, true)) {
        CHECK(0, "token fixture");
        return;
    }
    char *json = print_all(&on, BENCH_OUT_JSON), *json_off = print_all(&off, BENCH_OUT_JSON);
    CHECK(strstr(json, "    \"n_gen\": 2,") != NULL);
    CHECK(strstr(json, "    \"ttft_ms\": 7.500000,\n    \"itl_p50_ms\": 2.000000,\n    \"itl_p90_ms\": 4.000000,\n"
                       "    \"itl_p99_ms\": 4.000000,\n    \"itl_max_ms\": 4.000000,\n    \"token_ns\": [ [ 5000000, "
                       "1000000, 2000000 ], [ 6000000, 3000000, 4000000 ] ],\n    \"samples_ns\": ") != NULL,
          "pg json:\n%s", json);
    CHECK(strstr(json, "    \"token_ns\": [ [ 5000000 ], [ 6000000 ] ],\n    \"samples_ns\": ") != NULL, "pp json");
    CHECK(strstr(json, "    \"itl_max_ms\": 4.000000,\n    \"token_ns\": [ [ 1000000, 2000000 ], [ 3000000, 4000000 ] ],")
              != NULL, "tg json");
    CHECK(count_of(json, "\"token_ns\"") == 3 && count_of(json, "\"ttft_ms\"") == 1 &&
          count_of(json, "\"itl_p50_ms\"") == 2 && count_of(json, "\"itl_p99_ms\"") == 2);
    cJSON *doc = cJSON_Parse(json);
    CHECK(doc && cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(doc, 2), "token_ns")) == 2,
          "json with token_ns does not parse");
    cJSON_Delete(doc);
    CHECK(count_of(json_off, "token_ns") == 0 && count_of(json_off, "ttft") == 0 && count_of(json_off, "itl_") == 0);
    /* without the flag, byte for byte what a result without token times prints */
    for (size_t i = 0; i < off.n; i++)
        off.r[i].token_ns = NULL;
    char *json_none = print_all(&off, BENCH_OUT_JSON);
    CHECK(strcmp(json_off, json_none) == 0, "json without --token-times changed");
    free(json_none);
    free(json_off);
    free(json);

    char *jsonl = print_all(&on, BENCH_OUT_JSONL);
    CHECK(strstr(jsonl, "\"copy_bytes_per_token\": 0.000000, \"n_ranks\": 0, \"ranks_split\": \"\", \"use_mmap\": true, "
                        "\"operator_fusion\": false, \"launches_per_token\": 0.000000, "
                        "\"launches_per_token_unfused\": 0.000000, \"ttft_ms\": 7.500000, \"itl_p50_ms\": 2.000000, \"itl_p90_ms\": "
                        "4.000000, \"itl_p99_ms\": 4.000000, \"itl_max_ms\": 4.000000, \"token_ns\": [ [ 5000000, 1000000, "
                        "2000000 ], [ 6000000, 3000000, 4000000 ] ], \"samples_ns\": [ ") != NULL, "pg jsonl:\n%s", jsonl);
    CHECK(count_of(jsonl, "\"token_ns\"") == 3 && count_of(jsonl, "\"ttft_ms\"") == 1 && count_of(jsonl, "\n") == 3);
    free(jsonl);
    jsonl = print_all(&off, BENCH_OUT_JSONL);
    CHECK(count_of(jsonl, "token_ns") == 0 && count_of(jsonl, "itl_") == 0);
    free(jsonl);

    for (enum bench_output f = BENCH_OUT_MD; f <= BENCH_OUT_CSV; f++) {
        char *a = print_all(&on, f), *b = print_all(&off, f);
        CHECK(strcmp(a, b) == 0, "format %d carries token times", (int)f);
        free(a);
        free(b);
    }

    /* sql: the table, then one INSERT per repetition after each test's llm_bench_extra row */
    char *sql = print_all(&on, BENCH_OUT_SQL);
    CHECK(strstr(sql, "CREATE TABLE IF NOT EXISTS llm_bench_tokens (\n  llama_bench_rowid INTEGER,\n  test_time TEXT,\n"
                      "  avg_ns INTEGER,\n  repetition INTEGER,\n  token_index INTEGER,\n  ns INTEGER,\n  depth INTEGER\n"
                      ");\n") != NULL, "sql create:\n%s", sql);
    CHECK(count_of(sql, "INSERT INTO llm_bench_tokens") == 6);
    CHECK(strstr(sql, "(VALUES (1, 0, 6000000, 0), (1, 1, 3000000, 2), (1, 2, 4000000, 3)) AS t;\n") != NULL,
          "sql pg rows");
    free(sql);
    sql = print_all(&off, BENCH_OUT_SQL);
    CHECK(count_of(sql, "llm_bench_tokens") == 0);
    free(sql);
    fixture_free(&on);
    fixture_free(&off);
}

static void test_roofline(void)
{
    struct roofline r;
    CHECK(roofline_measure(&r, 2, 64u << 20, 2) == 0);
    CHECK(r.read_gbs > 0.1 && r.read_gbs < 10000, "bandwidth %.2f GB/s", r.read_gbs);
    CHECK(r.fma_gflops_1 > 0.1 && r.fma_gflops_n > 0.1, "peak %.2f / %.2f", r.fma_gflops_1, r.fma_gflops_n);
    CHECK(roofline_peak_gflops(&r, 1) <= r.fma_gflops_1 + 1e-9);
    CHECK(roofline_peak_gflops(&r, 8) <= r.fma_gflops_n + 1e-9);
}

int main(void)
{
    test_parse();
    test_plan();
    test_stats();
    test_json_exact();
    test_jsonl_exact();
    test_csv();
    test_sql();
    test_md();
    test_token_times();
    test_roofline();
    return test_done("test_bench");
}
