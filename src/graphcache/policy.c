/* The GGML_CANN_* switches of ACL graph mode (src/graphcache/README.md: the switches): booleans
 * parsed like ggml-cann's parse_bool, the LRU capacity (clamped to >= 1 where upstream would crash
 * on 0 or go unbounded on a negative value), and the query length that tells a decode graph from a
 * prefill one. */
#include "graphcache.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ASCII only, so the answer does not depend on the locale. */
static bool lower_equals(const char *value, const char *word)
{
    for (; *value && *word; value++, word++) {
        char c = *value >= 'A' && *value <= 'Z' ? (char)(*value - 'A' + 'a') : *value;
        if (c != *word)
            return false;
    }
    return *value == *word;
}

bool llm_env_bool(const char *value)
{
    static const char *const truthy[] = { "on", "1", "yes", "y", "enable", "true" };
    if (!value)
        return false;
    for (size_t i = 0; i < sizeof truthy / sizeof *truthy; i++)
        if (lower_equals(value, truthy[i]))
            return true;
    return false;
}

bool llm_env_flag(const char *name, bool dflt)
{
    const char *v = getenv(name);
    return v ? llm_env_bool(v) : dflt;
}

#define SHOWN_MAX 64 /* bytes of a bad value quoted in a warning */

/* The value for a log line: printable ASCII kept, other bytes as \xNN (so the warning stays one
 * line), cut after SHOWN_MAX bytes (so the log's line buffer never cuts the end of the warning). */
static void quote_value(char buf[SHOWN_MAX * 4 + 4], const char *v)
{
    int i = 0;
    for (; v[i] && i < SHOWN_MAX; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
            *buf++ = (char)c;
        else
            buf += sprintf(buf, "\\x%02x", c);
    }
    strcpy(buf, v[i] ? "..." : "");
}

int llm_graph_cache_capacity(const char *value)
{
    if (!value)
        return LLM_GRAPH_CACHE_DEFAULT_CAPACITY;
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (end != value && *end == '\0' && errno == 0 && v >= 1 && v <= INT_MAX)
        return (int)v;
    char shown[SHOWN_MAX * 4 + 4];
    quote_value(shown, value);
    llm_log(LLM_LOG_WARN, "GGML_CANN_GRAPH_CACHE_CAPACITY=\"%s\" is not an integer >= 1; using 1",
            shown);
    return 1;
}

int64_t llm_graph_query_len(const struct llm_graph *g)
{
    const struct llm_tensor *soft_max = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct llm_tensor *t = g->nodes[i];
        if (t->op == LLM_OP_FLASH_ATTN)
            return t->src[0]->ne[1];
        if (t->op == LLM_OP_SOFT_MAX && !soft_max)
            soft_max = t;
    }
    return soft_max ? soft_max->src[0]->ne[1] : 1;
}
