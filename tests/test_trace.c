/* Profiles and traces (src/profile.h, src/trace.h) of real runs of stories260K: the trace is JSON
 * that a real parser reads (also when the run stopped before closing it), every span has a
 * non-negative duration, and its events count what the run did: one host launch span per eager
 * launch, one capture per miss, one ExecuteAsync per replay, cache hit / miss instants matching
 * the statistics, one device span per executed node; the profile's per-token node counts equal on
 * cpu and npu (eager or replayed) and are whole numbers of graphs. */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "harness.h"
#include "model/context.h"
#include "model/model.h"
#include "profile.h"
#include "trace.h"

#define N_STEPS 20

struct counts {
    int spans, negative, launches, captures, executes, hits, misses, worker0_nodes, tracks;
};

/* Count the events of a trace file (closed, or cut after its last event when `unclosed`). */
static bool count_events(const char *path, bool unclosed, struct counts *c)
{
    size_t len = 0;
    char *text = test_read_file(path, &len);
    if (!text)
        return false;
    if (unclosed) { /* what a viewer does with a file whose run stopped: close the array */
        char *t2 = realloc(text, len + 3);
        if (!t2) {
            free(text);
            return false;
        }
        text = t2;
        memcpy(text + len, "]\n", 3);
    }
    cJSON *arr = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return false;
    }
    memset(c, 0, sizeof *c);
    cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
        int tid = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "tid"));
        if (!ph || !name || !cat)
            continue;
        if (!strcmp(ph, "M")) {
            c->tracks++;
        } else if (!strcmp(ph, "X")) {
            c->spans++;
            c->negative += cJSON_GetNumberValue(cJSON_GetObjectItem(e, "dur")) < 0 ||
                           cJSON_GetNumberValue(cJSON_GetObjectItem(e, "ts")) < 0;
            c->launches += !strcmp(cat, "launch");
            c->captures += !strcmp(name, "aclmdlRICaptureBegin");
            c->executes += !strcmp(name, "aclmdlRIExecuteAsync");
            c->worker0_nodes += tid == LLM_TRACE_WORKER && strcmp(name, "rope cache") != 0;
        } else if (!strcmp(ph, "i")) {
            c->hits += !strcmp(name, "cache hit");
            c->misses += !strcmp(name, "cache miss");
        }
    }
    cJSON_Delete(arr);
    return true;
}

static uint64_t profile_nodes(const struct llm_profile *p, enum llm_phase ph)
{
    uint64_t n = 0;
    for (int op = 0; op < LLM_OP_COUNT; op++)
        for (int t = 0; t < LLM_TYPE_COUNT; t++)
            n += p->op[ph][op][t].count;
    return n;
}

/* Prompt then N_STEPS decoded tokens on dev, profiled and traced into path. */
static bool run(struct llm_model *m, enum llm_device dev, int graph, const char *path, struct llm_profile *prof,
                struct llm_graph_stats *st)
{
    struct llm_error err;
    struct llm_trace *trace = llm_trace_open(path, &err);
    CHECK(trace != NULL, "%s", err.msg);
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = 64;
    p.device = dev;
    p.acl_graph = graph;
    p.npu_launch_us = 0;
    p.profile = prof;
    p.trace = trace;
    struct llm_context *c = NULL;
    bool ok = llm_context_new(m, &p, &c, &err) == 0;
    const int32_t prompt[] = { 1, 403, 407, 261, 378 };
    ok = ok && llm_decode(c, prompt, 5, false, &err) == 0;
    for (int i = 0; ok && i < N_STEPS; i++) {
        int32_t t = (int32_t)(i * 7 % 500 + 1);
        ok = llm_decode(c, &t, 1, false, &err) == 0;
    }
    CHECK(ok, "%s", err.msg);
    if (c)
        llm_context_stats(c, st);
    llm_context_free(c);
    CHECK(llm_trace_close(trace, &err) == 0, "%s", err.msg);
    return ok;
}

static void test_runs(struct llm_model *m, const char *dir)
{
    char path[512];
    static struct llm_profile cpu_prof, prof;
    struct llm_graph_stats st;
    struct counts c;
    snprintf(path, sizeof path, "%s/cpu.json", dir);
    CHECK(run(m, LLM_DEVICE_CPU, 0, path, &cpu_prof, &st));
    CHECK(count_events(path, false, &c), "cpu trace does not parse");
    const uint64_t cpu_decode = profile_nodes(&cpu_prof, LLM_PHASE_DECODE);
    CHECK(cpu_prof.graphs[LLM_PHASE_PREFILL] == 1 && cpu_prof.graphs[LLM_PHASE_DECODE] == N_STEPS);
    CHECK(cpu_prof.tokens[LLM_PHASE_PREFILL] == 5 && cpu_prof.tokens[LLM_PHASE_DECODE] == N_STEPS);
    CHECK(cpu_decode > 0 && cpu_decode % N_STEPS == 0, "decode nodes %llu", (unsigned long long)cpu_decode);
    CHECK_EQ_INT(c.worker0_nodes, profile_nodes(&cpu_prof, LLM_PHASE_PREFILL) + cpu_decode);
    CHECK(c.negative == 0 && c.tracks >= 2 && c.launches == 0);

    for (int graph = 0; graph < 2; graph++) {
        memset(&prof, 0, sizeof prof);
        snprintf(path, sizeof path, "%s/npu%d.json", dir, graph);
        CHECK(run(m, LLM_DEVICE_NPU, graph, path, &prof, &st));
        CHECK(count_events(path, false, &c), "npu trace (graph %d) does not parse", graph);
        /* the same graphs, eager or replayed, run the same nodes as on cpu */
        for (int ph = 0; ph < LLM_PHASE_COUNT; ph++)
            for (int op = 0; op < LLM_OP_COUNT; op++)
                for (int t = 0; t < LLM_TYPE_COUNT; t++)
                    CHECK(prof.op[ph][op][t].count == cpu_prof.op[ph][op][t].count, "graph %d %s %s %s: %llu vs %llu",
                          graph, llm_phase_name((enum llm_phase)ph), llm_op_name((enum llm_op)op),
                          llm_type_name((enum llm_type)t), (unsigned long long)prof.op[ph][op][t].count,
                          (unsigned long long)cpu_prof.op[ph][op][t].count);
        CHECK_EQ_INT(c.worker0_nodes, profile_nodes(&prof, LLM_PHASE_PREFILL) + profile_nodes(&prof, LLM_PHASE_DECODE));
        CHECK_EQ_INT(c.launches, st.eager_launches);
        CHECK_EQ_INT(c.captures, st.captures);
        CHECK_EQ_INT(c.misses, st.misses);
        CHECK_EQ_INT(c.hits, st.hits);
        CHECK_EQ_INT(c.executes, st.replays);
        CHECK_EQ_INT(st.captures, graph ? 1 : 0);
        CHECK_EQ_INT(st.replays, graph ? N_STEPS : 0);
        CHECK(c.negative == 0);
        CHECK(prof.build_us[LLM_PHASE_PREFILL] > 0 && prof.launch_us[LLM_PHASE_PREFILL] > 0);
        CHECK(graph ? prof.match_us[LLM_PHASE_DECODE] > 0 && prof.replay_us[LLM_PHASE_DECODE] > 0
                    : prof.match_us[LLM_PHASE_DECODE] == 0 && prof.replay_us[LLM_PHASE_DECODE] == 0);
    }
}

/* A trace whose run stops before closing still opens once its array is closed by the reader. */
static void test_unclosed(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cut.json", dir);
    struct llm_error err;
    struct llm_trace *t = llm_trace_open(path, &err);
    CHECK(t != NULL, "%s", err.msg);
    if (!t)
        return;
    llm_trace_track(t, LLM_TRACE_HOST, "host \"quoted\"\n");
    llm_trace_span(t, LLM_TRACE_HOST, "a\tb", "x", llm_now_us(), 1.5, "{\"k\":1}");
    llm_trace_instant(t, LLM_TRACE_HOST, "now", "x", llm_now_us(), NULL);
    llm_trace_flush(t);
    struct counts c;
    CHECK(count_events(path, true, &c), "a flushed, unclosed trace does not parse");
    CHECK(c.spans == 1 && c.tracks == 1);
    CHECK(llm_trace_close(t, &err) == 0);
    CHECK(count_events(path, false, &c) && c.spans == 1);
    CHECK(llm_trace_open("/nonexistent-dir/x.json", &err) == NULL && err.code == LLM_ERR_IO);
}

int main(void)
{
    char dir[] = "/tmp/llm-trace-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct llm_model *m = NULL;
    struct llm_error err;
    CHECK(llm_model_load(test_path("models/stories260K.gguf"), &m, &err) == 0, "%s", err.msg);
    if (m)
        test_runs(m, dir);
    test_unclosed(dir);
    llm_model_free(m);
    const char *names[] = { "cpu.json", "npu0.json", "npu1.json", "cut.json" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return test_done("test_trace");
}
