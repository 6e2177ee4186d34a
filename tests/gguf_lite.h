/* TEMPORARY test-only GGUF tensor finder, until the gguf branch's reader is merged.
 * Reads the whole file; assumes a well-formed fixture (no hostile-input checks). */
#ifndef LLM_TEST_GGUF_LITE_H
#define LLM_TEST_GGUF_LITE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lite_file {
    uint8_t *buf;
    size_t size;
};

static inline uint64_t lite_rd(const uint8_t **p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)(*p)[i] << (8 * i);
    *p += n;
    return v;
}

static inline size_t lite_vsize(uint32_t t)
{
    static const size_t sz[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return t < 13 ? sz[t] : 0;
}

static inline void lite_skip_value(const uint8_t **p, uint32_t t)
{
    if (t == 8) {
        uint64_t len = lite_rd(p, 8);
        *p += len;
    } else if (t == 9) {
        uint32_t et = (uint32_t)lite_rd(p, 4);
        uint64_t n = lite_rd(p, 8);
        for (uint64_t i = 0; i < n; i++)
            lite_skip_value(p, et);
    } else {
        *p += lite_vsize(t);
    }
}

/* Data of tensor `name` in file `path` (malloc'd copy), its type and element count; NULL if absent. */
static inline void *lite_tensor(const char *path, const char *name, int *type, int64_t *nelem,
                                size_t *nbytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    const uint8_t *p = buf + 8;
    uint64_t nt = lite_rd(&p, 8), nkv = lite_rd(&p, 8);
    uint64_t align = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        uint64_t klen = lite_rd(&p, 8);
        int is_align = klen == 17 && memcmp(p, "general.alignment", 17) == 0;
        p += klen;
        uint32_t t = (uint32_t)lite_rd(&p, 4);
        if (is_align)
            align = lite_rd(&p, 4);
        else
            lite_skip_value(&p, t);
    }
    uint64_t want_off = 0;
    int found = 0;
    for (uint64_t i = 0; i < nt; i++) {
        uint64_t nlen = lite_rd(&p, 8);
        int match = nlen == strlen(name) && memcmp(p, name, nlen) == 0;
        p += nlen;
        uint32_t nd = (uint32_t)lite_rd(&p, 4);
        int64_t ne = 1;
        for (uint32_t d = 0; d < nd; d++)
            ne *= (int64_t)lite_rd(&p, 8);
        uint32_t t = (uint32_t)lite_rd(&p, 4);
        uint64_t off = lite_rd(&p, 8);
        if (match) {
            found = 1;
            want_off = off;
            *type = (int)t;
            *nelem = ne;
        }
    }
    size_t data = (size_t)(p - buf);
    data = (data + align - 1) / align * align;
    void *out = NULL;
    if (found) {
        /* the tensor ends at the next tensor's start or the file end; callers know the size */
        *nbytes = (size_t)size - data - want_off;
        out = malloc(*nbytes);
        memcpy(out, buf + data + want_off, *nbytes);
    }
    free(buf);
    return out;
}

#endif
