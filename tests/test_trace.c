/* Profiles and traces (src/profile.h, src/trace.h) of real runs of stories260K: the trace is JSON
 * that a real parser reads (also when the run stopped before closing it), every span has a
 * non-negative duration, and its events count what the run did: one host launch span per eager
 * launch, one capture per miss, one ExecuteAsync per replay, cache hit / miss instants matching
 * the statistics, one device span per executed node and one RoPE table fill per graph run; the profile's per-token node counts equal on
 * cpu and npu (eager or replayed) and are whole numbers of graphs. Threads emitting at once while
 * the buffers are written out (outside the lock) lose, repeat and reorder none of their events. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "model/context.h"
#include "model/model.h"
#include "npu_harness.h"
#include "profile.h"
#include "trace.h"

#define N_STEPS 20
#define N_EMITTERS 4     /* threads besides the main one */
#define N_EVENTS 6000    /* per thread: ~3 MB in all, some 50 writes of a 64 KiB buffer */

struct counts {
    int spans, negative, launches, captures, executes, hits, misses, worker0_nodes, rope_fills, tracks;
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
            c->rope_fills += tid == LLM_TRACE_WORKER && !strcmp(name, "rope cache");
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
                struct llm_npu_stats *st)
{
    struct llm_error err;
    struct llm_trace *trace = llm_trace_open(path, &err);
    CHECK(trace != NULL, "%s", err.msg);
    struct llm_context_params p = llm_context_default_params();
    p.n_ctx = 64;
    p.device = dev;
    struct llm_backend_option npu_opts[2];
    test_npu_options(&p, npu_opts, graph, 0);
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
        test_npu_stats(c, st);
    llm_context_free(c);
    CHECK(llm_trace_close(trace, &err) == 0, "%s", err.msg);
    return ok;
}

static void test_runs(struct llm_model *m, const char *dir)
{
    char path[512];
    static struct llm_profile cpu_prof, prof;
    struct llm_npu_stats st;
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
        /* the same graphs, eager or replayed, run the same nodes as on cpu: the npu's layout pass
         * (LLM_NPU_LAYOUT_ALIGN) needs no CHANNEL_NORM on stories260K, whose attention reads only
         * its K and V padded, from the padded cache */
        for (int ph = 0; ph < LLM_PHASE_COUNT; ph++)
            for (int op = 0; op < LLM_OP_COUNT; op++)
                for (int t = 0; t < LLM_TYPE_COUNT; t++)
                    CHECK(prof.op[ph][op][t].count == cpu_prof.op[ph][op][t].count,
                          "graph %d %s %s %s: %llu vs %llu",
                          graph, llm_phase_name((enum llm_phase)ph), llm_op_name((enum llm_op)op),
                          llm_type_name((enum llm_type)t), (unsigned long long)prof.op[ph][op][t].count,
                          (unsigned long long)cpu_prof.op[ph][op][t].count);
        CHECK_EQ_INT(c.worker0_nodes, profile_nodes(&prof, LLM_PHASE_PREFILL) + profile_nodes(&prof, LLM_PHASE_DECODE));
        /* one host launch span per node; a node's RoPE table fill is a kernel launch of its own */
        CHECK_EQ_INT(c.launches + st.rope_tables, st.eager_launches);
        /* one table fill per graph, launched or captured, and run once per eager graph and replay */
        CHECK_EQ_INT(st.rope_tables, st.eager_graphs + st.captures);
        CHECK_EQ_INT(c.rope_fills, st.eager_graphs + st.replays);
        CHECK_EQ_INT(c.captures, st.captures);
        CHECK_EQ_INT(c.misses, st.misses);
        CHECK_EQ_INT(c.hits, st.hits);
        CHECK_EQ_INT(c.executes, st.replays);
        CHECK_EQ_INT(st.captures, graph ? 1 : 0);
        CHECK_EQ_INT(st.replays, graph ? N_STEPS : 0);
        CHECK(c.negative == 0);
        CHECK(llm_profile_host_us(&prof, LLM_PHASE_PREFILL, "build") > 0 &&
              llm_profile_host_us(&prof, LLM_PHASE_PREFILL, "launch") > 0);
        const double match = llm_profile_host_us(&prof, LLM_PHASE_DECODE, "match"),
                     replay = llm_profile_host_us(&prof, LLM_PHASE_DECODE, "replay");
        CHECK(graph ? match > 0 && replay > 0 : match == 0 && replay == 0);
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

struct emitter {
    struct llm_trace *t;
    int tid;
};

/* N_EVENTS spans numbered in args.seq; the main thread (LLM_TRACE_HOST) also flushes now and then. */
static void *emit(void *arg)
{
    const struct emitter *e = arg;
    for (int i = 0; i < N_EVENTS; i++) {
        char args[32];
        snprintf(args, sizeof args, "{\"seq\":%d}", i);
        llm_trace_span(e->t, e->tid, "op", "seq", llm_now_us(), 1.0, args);
        if (e->tid == LLM_TRACE_HOST && i % 500 == 0)
            llm_trace_flush(e->t);
    }
    return NULL;
}

/* The trace's reader: a FIFO emptied slowly (4 KiB per 0.1 ms), so that every buffer write blocks
 * for a while and the other threads fill the second buffer meanwhile: the window in which a wrong
 * hand-over between the buffers would lose, repeat or reorder events. */
struct reader {
    const char *path;
    char *text; /* all that was read, NUL-terminated; NULL if out of memory */
    size_t len;
};

static void *slow_read(void *arg)
{
    struct reader *r = arg;
    int fd = open(r->path, O_RDONLY);
    size_t cap = 0;
    bool oom = false;
    char chunk[4096];
    for (ssize_t n = 1; fd >= 0 && n > 0;) {
        n = read(fd, chunk, sizeof chunk);
        if (n > 0 && !oom && r->len + (size_t)n >= cap) {
            char *grown = realloc(r->text, cap = 2 * cap + sizeof chunk);
            oom = !grown;
            r->text = grown ? grown : r->text;
        }
        if (n > 0 && !oom) {
            memcpy(r->text + r->len, chunk, (size_t)n);
            r->len += (size_t)n;
        }
        nanosleep(&(struct timespec){ 0, 100000 }, NULL);
    }
    if (fd >= 0)
        close(fd);
    if (oom) {
        free(r->text);
        r->text = NULL;
    } else if (r->text) {
        r->text[r->len] = '\0';
    }
    return NULL;
}

/* Every thread's events reach the file once each, in the order that thread emitted them. */
static void test_concurrent(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/conc.fifo", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    struct reader rd = { path, NULL, 0 };
    pthread_t reader;
    if (pthread_create(&reader, NULL, slow_read, &rd) != 0) {
        CHECK(false, "no reader thread");
        return;
    }
    struct llm_error err;
    struct llm_trace *t = llm_trace_open(path, &err); /* returns once the reader has opened it */
    CHECK(t != NULL, "%s", err.msg);
    struct emitter em[N_EMITTERS + 1];
    pthread_t th[N_EMITTERS];
    int started = 0;
    for (int i = 0; i <= N_EMITTERS; i++)
        em[i] = (struct emitter){ t, i == N_EMITTERS ? LLM_TRACE_HOST : LLM_TRACE_WORKER + i };
    for (; t && started < N_EMITTERS; started++)
        if (pthread_create(&th[started], NULL, emit, &em[started]) != 0)
            break;
    CHECK_EQ_INT(started, t ? N_EMITTERS : 0);
    if (t)
        emit(&em[N_EMITTERS]);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (t)
        CHECK(llm_trace_close(t, &err) == 0, "%s", err.msg);
    else
        close(open(path, O_WRONLY)); /* lets the reader see the end */
    pthread_join(reader, NULL);

    cJSON *arr = rd.text ? cJSON_Parse(rd.text) : NULL;
    free(rd.text);
    CHECK(cJSON_IsArray(arr), "the concurrent trace does not parse");
    CHECK(rd.len > 32 * 65536, "%zu bytes: too few buffer writes to test", rd.len);
    int next[N_EMITTERS + 1] = { 0 }, bad = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        int tid = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "tid"));
        int k = tid == LLM_TRACE_HOST ? N_EMITTERS : tid - LLM_TRACE_WORKER;
        const cJSON *seq = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "seq");
        if (k < 0 || k > N_EMITTERS || !cJSON_IsNumber(seq) || (int)seq->valuedouble != next[k]++)
            bad++;
    }
    cJSON_Delete(arr);
    CHECK_EQ_INT(bad, 0);
    for (int i = 0; i <= N_EMITTERS; i++)
        CHECK_EQ_INT(next[i], N_EVENTS);
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
    test_concurrent(dir);
    llm_model_free(m);
    const char *names[] = { "cpu.json", "npu0.json", "npu1.json", "cut.json", "conc.fifo" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return test_done("test_trace");
}
