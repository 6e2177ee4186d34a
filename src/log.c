#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static enum llm_log_level max_level = LLM_LOG_WARN;
static llm_log_sink current_sink;
static void *sink_user;

void llm_log_set_level(enum llm_log_level max)
{
    max_level = max;
}

void llm_log_set_sink(llm_log_sink sink, void *user)
{
    current_sink = sink;
    sink_user = user;
}

bool llm_log_wanted(enum llm_log_level level)
{
    return level <= max_level;
}

void llm_log(enum llm_log_level level, const char *fmt, ...)
{
    if (!llm_log_wanted(level))
        return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (current_sink)
        current_sink(level, text, sink_user);
    else
        fprintf(stderr, "llm: %s%s\n", level == LLM_LOG_WARN ? "warning: " : "", text);
}
