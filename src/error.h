/* Errors returned by the library: a code and one line of text naming the file, key or tensor and
 * the offset. The library never prints or exits; tools/ turn an error into "llm: error: ...". */
#ifndef LLM_ERROR_H
#define LLM_ERROR_H

#include <stddef.h>

enum llm_status {
    LLM_OK = 0,
    LLM_ERR_IO,        /* open/stat/mmap/write failed            */
    LLM_ERR_FORMAT,    /* malformed or hostile file contents     */
    LLM_ERR_UNSUPPORTED, /* well-formed but not something we run   */
    LLM_ERR_ARG,       /* bad argument from the caller           */
    LLM_ERR_NOMEM,     /* allocation failed                      */
    LLM_ERR_PEER,      /* another process of the job failed or went silent */
};

struct llm_error {
    enum llm_status code;
    char msg[512];
};

/* Fill err (may be NULL) with code and a printf-style message; returns code so callers can
 * write `return llm_fail(err, LLM_ERR_FORMAT, "...")`. */
int llm_fail(struct llm_error *err, enum llm_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Allocation wrappers that return NULL on overflow of n*size (calloc semantics). */
void *llm_calloc(size_t n, size_t size);

#endif
