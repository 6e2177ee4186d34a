/* Timelines in the Chrome trace-event format (the JSON that Perfetto and chrome://tracing open).
 *
 * Events are written as they happen through a bounded buffer, so memory stays bounded however long
 * the run, and reach the file only as whole events: the file is a JSON array whose closing bracket
 * the format allows to be missing, so a run stopped at any point leaves a file that opens once its
 * buffer was flushed (the context flushes after every decode). Every function is safe to call from
 * several threads at once (device workers, pool threads and the host), and a NULL trace is a no-op,
 * so callers need no branch when tracing is off.
 *
 * Tracks: each event names a track id (tid); the host thread is LLM_TRACE_HOST, the threads of a
 * backend take ids from LLM_TRACE_WORKER on; llm_trace_track names a track. Times given to the
 * trace are llm_now_us() readings; the file holds them relative to when the trace was opened. */
#ifndef LLM_TRACE_H
#define LLM_TRACE_H

#include <stdbool.h>

#include "clock.h"
#include "error.h"

#define LLM_TRACE_HOST 1
#define LLM_TRACE_WORKER 100

struct llm_trace;

/* Create path (truncating it) and write the array's opening; NULL with err filled on failure. */
struct llm_trace *llm_trace_open(const char *path, struct llm_error *err);
/* Write out the buffered events (the context does it after every decode). */
void llm_trace_flush(struct llm_trace *t);
/* Close the array and the file; returns non-zero (err filled) if any write failed. */
int llm_trace_close(struct llm_trace *t, struct llm_error *err);

/* Name track tid (a "thread_name" metadata event). */
void llm_trace_track(struct llm_trace *t, int tid, const char *name);
/* A span that began at ts (an llm_now_us reading) and lasted dur µs ("X" event). args: the text of a JSON object
 * ("{\"op\":\"ADD\"}") or NULL. name and cat are escaped; args is written as given. */
void llm_trace_span(struct llm_trace *t, int tid, const char *name, const char *cat, double ts, double dur,
                    const char *args);
/* A moment (an "i" event, thread scope). */
void llm_trace_instant(struct llm_trace *t, int tid, const char *name, const char *cat, double ts,
                       const char *args);

/* Append s to buf (room cap, NUL-terminated) as the body of a JSON string (quotes, backslashes and
 * control characters escaped); returns the length written. For callers building args. */
size_t llm_trace_escape(char *buf, size_t cap, const char *s);

#endif
