#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRACE_BUFFER (1 << 16) /* the bound on what the trace holds in memory */
#define EVENT_MAX 1536         /* one event's text at most (its args are dropped beyond) */

/* Events are formatted whole and reach the file with write(2) only as whole events, so the file
 * always ends between two events, whenever the process stops. Two buffers: threads append to one
 * while the thread that filled the other writes it out with the lock released, so a write stalls
 * only that thread (others wait only if the second buffer fills too: memory stays 2 x 64 KiB). */
struct llm_trace {
    int fd;
    char *buf;             /* events being appended */
    char *spare;           /* the other buffer: being written, or empty */
    size_t len;            /* bytes in buf */
    pthread_mutex_t mu;    /* guards every field but fd and t0 */
    pthread_cond_t idle;   /* signalled when a write ends */
    bool writing;          /* a thread is writing spare */
    double t0;             /* llm_now_us() at open */
    bool first;            /* no comma before the first event */
    bool failed;           /* a write failed */
};

static bool write_all(int fd, const char *p, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        off += (size_t)w;
    }
    return true;
}

/* Write out every event appended so far (called with the lock held; returns with it held). Writes
 * run one at a time, each after the previous one ended, so the file holds the events in the order
 * they were appended; the lock is released during the write so other threads keep appending. */
static void drain(struct llm_trace *t)
{
    while (t->writing)
        pthread_cond_wait(&t->idle, &t->mu);
    if (t->len == 0)
        return;
    char *full = t->buf;
    size_t len = t->len;
    t->buf = t->spare;
    t->spare = full;
    t->len = 0;
    t->writing = true;
    pthread_mutex_unlock(&t->mu);
    bool ok = write_all(t->fd, full, len);
    pthread_mutex_lock(&t->mu);
    t->writing = false;
    t->failed |= !ok;
    pthread_cond_broadcast(&t->idle);
}

/* Append with the lock held; drain releases it, so others may append first (the loop re-checks). */
static void put(struct llm_trace *t, const char *s, size_t n)
{
    while (t->len + n > TRACE_BUFFER)
        drain(t);
    memcpy(t->buf + t->len, s, n);
    t->len += n;
}

struct llm_trace *llm_trace_open(const char *path, struct llm_error *err)
{
    struct llm_trace *t = calloc(1, sizeof *t);
    char *buf = malloc(TRACE_BUFFER), *spare = malloc(TRACE_BUFFER);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!t || !buf || !spare || fd < 0) {
        llm_fail(err, fd < 0 ? LLM_ERR_IO : LLM_ERR_NOMEM, "cannot write the trace %s: %s", path,
                 fd < 0 ? strerror(errno) : "out of memory");
        if (fd >= 0)
            close(fd);
        free(buf);
        free(spare);
        free(t);
        return NULL;
    }
    t->fd = fd;
    t->buf = buf;
    t->spare = spare;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->idle, NULL);
    t->t0 = llm_now_us();
    t->first = true;
    memcpy(buf, "[\n", 2);
    t->len = 2;
    return t;
}

void llm_trace_flush(struct llm_trace *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    drain(t);
    pthread_mutex_unlock(&t->mu);
}

int llm_trace_close(struct llm_trace *t, struct llm_error *err)
{
    if (!t)
        return LLM_OK;
    pthread_mutex_lock(&t->mu);
    put(t, "\n]\n", 3);
    drain(t);
    pthread_mutex_unlock(&t->mu);
    bool failed = t->failed || close(t->fd) != 0;
    pthread_cond_destroy(&t->idle);
    pthread_mutex_destroy(&t->mu);
    free(t->buf);
    free(t->spare);
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
    char ename[256], ecat[64], buf[EVENT_MAX];
    char *text = buf + 2; /* room for the ",\n" that separates it from the previous event */
    const size_t cap = sizeof buf - 2;
    llm_trace_escape(ename, sizeof ename, name);
    llm_trace_escape(ecat, sizeof ecat, cat ? cat : "");
    int n = snprintf(text, cap, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%c\",\"ts\":%.3f", ename, ecat, ph,
                     ph == 'M' ? 0.0 : ts - t->t0);
    if (ph == 'X')
        n += snprintf(text + n, cap - (size_t)n, ",\"dur\":%.3f", dur > 0 ? dur : 0.0);
    n += snprintf(text + n, cap - (size_t)n, ",\"pid\":1,\"tid\":%d%s", tid, ph == 'i' ? ",\"s\":\"t\"" : "");
    if (args && (size_t)n + strlen(args) + 10 < cap)
        n += snprintf(text + n, cap - (size_t)n, ",\"args\":%s", args);
    text[n++] = '}';
    buf[0] = ',';
    buf[1] = '\n';
    pthread_mutex_lock(&t->mu);
    bool first = t->first;
    t->first = false; /* before put, which may let other threads in */
    put(t, first ? text : buf, (size_t)n + (first ? 0 : 2));
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
