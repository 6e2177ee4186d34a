#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRACE_BUFFER (1 << 16) /* stdio buffer: the bound on what the trace holds in memory */

struct llm_trace {
    FILE *f;
    char *buf;
    pthread_mutex_t mu;
    double t0; /* llm_now_us() at open */
    bool first;  /* no comma before the first event */
    bool failed; /* a write failed */
};

double llm_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct llm_trace *llm_trace_open(const char *path, struct llm_error *err)
{
    struct llm_trace *t = calloc(1, sizeof *t);
    if (!t) {
        llm_fail(err, LLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->f = fopen(path, "w");
    t->buf = malloc(TRACE_BUFFER);
    if (!t->f || !t->buf) {
        llm_fail(err, LLM_ERR_IO, "cannot write the trace %s: %s", path, t->f ? "out of memory" : strerror(errno));
        if (t->f)
            fclose(t->f);
        free(t->buf);
        free(t);
        return NULL;
    }
    setvbuf(t->f, t->buf, _IOFBF, TRACE_BUFFER);
    pthread_mutex_init(&t->mu, NULL);
    t->t0 = llm_now_us();
    t->first = true;
    t->failed = fputs("[\n", t->f) < 0;
    return t;
}

void llm_trace_flush(struct llm_trace *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->failed |= fflush(t->f) != 0;
    pthread_mutex_unlock(&t->mu);
}

int llm_trace_close(struct llm_trace *t, struct llm_error *err)
{
    if (!t)
        return LLM_OK;
    bool failed = t->failed || fputs("\n]\n", t->f) < 0;
    failed |= fclose(t->f) != 0;
    pthread_mutex_destroy(&t->mu);
    free(t->buf);
    free(t);
    return failed ? llm_fail(err, LLM_ERR_IO, "writing the trace failed") : LLM_OK;
}

size_t llm_trace_escape(char *buf, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            n += (size_t)snprintf(buf + n, cap - n, "\\%c", c);
        else if (c < 0x20)
            n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", c);
        else
            buf[n++] = (char)c;
    }
    if (cap)
        buf[n < cap ? n : cap - 1] = '\0';
    return n;
}

/* One event: {"name":..,"cat":..,"ph":..,"ts":..,["dur":..,]"pid":1,"tid":..[,"s":"t"][,"args":..]} */
static void event(struct llm_trace *t, char ph, int tid, const char *name, const char *cat, double ts, double dur,
                  const char *args)
{
    char ename[256], ecat[64];
    llm_trace_escape(ename, sizeof ename, name);
    llm_trace_escape(ecat, sizeof ecat, cat ? cat : "");
    pthread_mutex_lock(&t->mu);
    int rc = fprintf(t->f, "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%c\",\"ts\":%.3f", t->first ? "" : ",\n",
                     ename, ecat, ph, ph == 'M' ? 0.0 : ts - t->t0);
    if (rc >= 0 && ph == 'X')
        rc = fprintf(t->f, ",\"dur\":%.3f", dur > 0 ? dur : 0.0);
    if (rc >= 0)
        rc = fprintf(t->f, ",\"pid\":1,\"tid\":%d%s%s%s}", tid, ph == 'i' ? ",\"s\":\"t\"" : "", args ? ",\"args\":" : "",
                     args ? args : "");
    t->first = false;
    t->failed |= rc < 0;
    pthread_mutex_unlock(&t->mu);
}

void llm_trace_track(struct llm_trace *t, int tid, const char *name)
{
    if (!t)
        return;
    char args[300], ename[256];
    llm_trace_escape(ename, sizeof ename, name);
    snprintf(args, sizeof args, "{\"name\":\"%s\"}", ename);
    event(t, 'M', tid, "thread_name", "", 0.0, 0.0, args);
}

void llm_trace_span(struct llm_trace *t, int tid, const char *name, const char *cat, double ts, double dur,
                    const char *args)
{
    if (t)
        event(t, 'X', tid, name, cat, ts, dur, args);
}

void llm_trace_instant(struct llm_trace *t, int tid, const char *name, const char *cat, double ts,
                       const char *args)
{
    if (t)
        event(t, 'i', tid, name, cat, ts, 0.0, args);
}
