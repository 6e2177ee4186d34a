/* Diagnostics the library emits besides errors: warnings (a bad environment value, say) and, when
 * asked, information lines (execution mode, statistics). They go to a sink the tools may replace;
 * the default writes "llm: warning: <text>" / "llm: <text>" lines on stderr. */
#ifndef LLM_LOG_H
#define LLM_LOG_H

#include <stdbool.h>

enum llm_log_level { LLM_LOG_WARN = 0, LLM_LOG_INFO = 1 };

typedef void (*llm_log_sink)(enum llm_log_level level, const char *text, void *user);

/* Messages above max are dropped (default LLM_LOG_WARN: warnings only). */
void llm_log_set_level(enum llm_log_level max);
/* Replace the sink (NULL restores the default stderr sink). */
void llm_log_set_sink(llm_log_sink sink, void *user);
void llm_log(enum llm_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Would a message of this level be written? (To skip work done only for a message.) */
bool llm_log_wanted(enum llm_log_level level);

#endif
