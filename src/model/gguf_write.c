/* GGUF v3 writer: metadata is serialized into memory as it is added; tensor data is written
 * straight from the caller's buffers through one large stdio buffer into a temporary file that is
 * renamed over the destination only when everything succeeded. */
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Growable byte buffer; `oom` sticks after the first failed allocation. */
struct buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
};

struct wkv {
    char *key;       /* copy of the key (may hold any bytes when copied from a file) */
    size_t key_len;
    enum gguf_vtype type;
    struct buf value; /* serialized value, array header included */
};

struct wtensor {
    char name[GGUF_MAX_NAME + 1];
    enum llm_type type;
    uint32_t n_dims;
    int64_t ne[LLM_MAX_DIMS];
    const void *data; /* caller's memory */
    uint64_t nbytes;
};

struct gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    int code;      /* first error of an add_* call, reported by gguf_writer_write */
    char msg[256];
};

__attribute__((format(printf, 3, 4)))
static void record_error(struct gguf_writer *w, enum llm_status code, const char *fmt, ...)
{
    if (w->code)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->code = code;
}

/* Grows *arr (of *cap elements of size es) so that it holds n + 1 elements. */
static bool reserve(void **arr, size_t *cap, size_t n, size_t es)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = c > SIZE_MAX / es ? NULL : realloc(*arr, c * es);
    if (!p)
        return false;
    *arr = p;
    *cap = c;
    return true;
}

static void put(struct buf *b, const void *src, size_t n)
{
    if (b->oom || n == 0)
        return;
    if (n > b->cap - b->n) {
        size_t c = b->cap ? b->cap : 64;
        while (c - b->n < n && c <= SIZE_MAX / 2)
            c *= 2;
        uint8_t *p = c - b->n >= n ? realloc(b->p, c) : NULL;
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = c;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v) { put(b, &v, sizeof v); }
static void put_u64(struct buf *b, uint64_t v) { put(b, &v, sizeof v); }

static void put_str(struct buf *b, const char *s, uint64_t len)
{
    put_u64(b, len);
    put(b, s, len);
}

/* Appends an entry; takes ownership of value. */
static void add_value(struct gguf_writer *w, const char *key, size_t key_len, enum gguf_vtype type,
                      struct buf value)
{
    char *k = malloc(key_len + 1);
    if (value.oom || !k || !reserve((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
        free(k);
        free(value.p);
        record_error(w, LLM_ERR_NOMEM, "out of memory adding key '%.*s'", (int)key_len, key);
        return;
    }
    memcpy(k, key, key_len);
    k[key_len] = '\0';
    w->kv[w->n_kv++] = (struct wkv){ .key = k, .key_len = key_len, .type = type, .value = value };
}

struct gguf_writer *gguf_writer_new(void)
{
    return calloc(1, sizeof(struct gguf_writer));
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value.p);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

static void add_scalar_n(struct gguf_writer *w, const char *key, size_t key_len, enum gguf_vtype type,
                         const void *v)
{
    size_t size = gguf_vtype_size(type);
    if (size == 0) {
        record_error(w, LLM_ERR_ARG, "key '%.*s': %s is not a fixed-size type", (int)key_len, key,
                     gguf_vtype_name(type));
        return;
    }
    struct buf b = { 0 };
    put(&b, v, size);
    add_value(w, key, key_len, type, b);
}

void gguf_writer_add_scalar(struct gguf_writer *w, const char *key, enum gguf_vtype type, const void *v)
{
    add_scalar_n(w, key, strlen(key), type, v);
}

void gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
    gguf_writer_add_scalar(w, key, GGUF_U32, &v);
}

void gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v)
{
    gguf_writer_add_scalar(w, key, GGUF_I32, &v);
}

void gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v)
{
    gguf_writer_add_scalar(w, key, GGUF_U64, &v);
}

void gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v)
{
    gguf_writer_add_scalar(w, key, GGUF_F32, &v);
}

void gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    gguf_writer_add_scalar(w, key, GGUF_BOOL, &b);
}

static void add_str_n(struct gguf_writer *w, const char *key, size_t key_len, struct gguf_str v)
{
    struct buf b = { 0 };
    put_str(&b, v.ptr, v.len);
    add_value(w, key, key_len, GGUF_STRING, b);
}

void gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v)
{
    add_str_n(w, key, strlen(key), (struct gguf_str){ v, strlen(v) });
}

static void add_arr_n(struct gguf_writer *w, const char *key, size_t key_len, enum gguf_vtype elem,
                      const void *data, uint64_t n)
{
    size_t es = gguf_vtype_size(elem);
    if (es == 0 || n > SIZE_MAX / es) {
        record_error(w, LLM_ERR_ARG, "key '%.*s': bad array of %" PRIu64 " %s", (int)key_len, key, n,
                     gguf_vtype_name(elem));
        return;
    }
    struct buf b = { 0 };
    put_u32(&b, elem);
    put_u64(&b, n);
    put(&b, data, (size_t)n * es);
    add_value(w, key, key_len, GGUF_ARRAY, b);
}

void gguf_writer_add_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem,
                         const void *data, uint64_t n)
{
    add_arr_n(w, key, strlen(key), elem, data, n);
}

static void add_arr_str_n(struct gguf_writer *w, const char *key, size_t key_len,
                          const struct gguf_str *strs, uint64_t n)
{
    struct buf b = { 0 };
    put_u32(&b, GGUF_STRING);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++)
        put_str(&b, strs[i].ptr, strs[i].len);
    add_value(w, key, key_len, GGUF_ARRAY, b);
}

void gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const struct gguf_str *strs,
                             uint64_t n)
{
    add_arr_str_n(w, key, strlen(key), strs, n);
}

void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        struct wkv *kv = &w->kv[i];
        if (kv->type == GGUF_U32 && strcmp(kv->key, "general.alignment") == 0) {
            memcpy(kv->value.p, &alignment, sizeof alignment);
            return;
        }
    }
    gguf_writer_add_u32(w, "general.alignment", alignment);
}

void gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv)
{
    const char *key = kv->key.ptr;
    size_t key_len = (size_t)kv->key.len;
    if (kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING) {
        add_arr_str_n(w, key, key_len, kv->strs, kv->arr_n);
    } else if (kv->type == GGUF_ARRAY) {
        add_arr_n(w, key, key_len, kv->arr_type, kv->value, kv->arr_n);
    } else if (kv->type == GGUF_STRING) {
        struct gguf_str s;
        memcpy(&s.len, kv->value, sizeof s.len);
        s.ptr = (const char *)kv->value + sizeof s.len;
        add_str_n(w, key, key_len, s);
    } else {
        add_scalar_n(w, key, key_len, kv->type, kv->value);
    }
}

void gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum llm_type type,
                            uint32_t n_dims, const int64_t *ne, const void *data)
{
    const struct llm_type_info *tt = llm_type_info((int)type);
    if (strlen(name) > GGUF_MAX_NAME || n_dims < 1 || n_dims > LLM_MAX_DIMS || !tt) {
        record_error(w, LLM_ERR_ARG, "tensor '%.64s': bad name length, n_dims %" PRIu32 " or type %d",
                     name, n_dims, (int)type);
        return;
    }
    struct wtensor t = { .type = type, .n_dims = n_dims, .data = data };
    strcpy(t.name, name);
    int64_t nel = 1;
    for (uint32_t d = 0; d < LLM_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0 || (t.ne[d] && __builtin_mul_overflow(nel, t.ne[d], &nel))) {
            record_error(w, LLM_ERR_ARG, "tensor '%s': bad dimension %" PRId64, name, t.ne[d]);
            return;
        }
    }
    uint64_t nb = (uint64_t)(t.ne[0] / tt->blck_size);
    if (t.ne[0] % tt->blck_size != 0 || __builtin_mul_overflow(nb, (uint64_t)tt->type_size, &nb) ||
        __builtin_mul_overflow(nb, (uint64_t)(t.ne[1] * t.ne[2] * t.ne[3]), &nb) ||
        (nb && !data)) {
        record_error(w, LLM_ERR_ARG, "tensor '%s': ne[0] = %" PRId64 " not a multiple of the %s "
                     "block size, size overflow or no data", name, t.ne[0], tt->name);
        return;
    }
    t.nbytes = nb;
    if (!reserve((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t)) {
        record_error(w, LLM_ERR_NOMEM, "out of memory adding tensor '%s'", name);
        return;
    }
    w->t[w->n_t++] = t;
}

/* ---- writing ----------------------------------------------------------------------------- */

/* Checks made once everything is known: unique keys and names, a valid alignment. */
static int validate(const struct gguf_writer *w, const char *path, uint32_t *alignment,
                    struct llm_error *err)
{
    *alignment = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        const struct wkv *kv = &w->kv[i];
        for (size_t j = 0; j < i; j++)
            if (w->kv[j].key_len == kv->key_len && memcmp(w->kv[j].key, kv->key, kv->key_len) == 0)
                return llm_fail(err, LLM_ERR_ARG, "%s: duplicate key '%s'", path, kv->key);
        if (kv->key_len == 0)
            return llm_fail(err, LLM_ERR_ARG, "%s: empty key", path);
        if (strcmp(kv->key, "general.alignment") != 0)
            continue;
        uint32_t a = 0;
        if (kv->type == GGUF_U32)
            memcpy(&a, kv->value.p, sizeof a);
        if (a == 0 || (a & (a - 1)) != 0)
            return llm_fail(err, LLM_ERR_ARG, "%s: general.alignment must be a u32 power of two",
                            path);
        *alignment = a;
    }
    for (size_t i = 0; i < w->n_t; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(w->t[j].name, w->t[i].name) == 0)
                return llm_fail(err, LLM_ERR_ARG, "%s: duplicate tensor name '%s'", path,
                                w->t[i].name);
    return LLM_OK;
}

/* Output stream that counts bytes (for padding) and remembers the first failure. */
struct out {
    FILE *fp;
    uint64_t pos;
    bool failed;
};

static void emit(struct out *o, const void *p, size_t n)
{
    if (o->failed || n == 0)
        return;
    if (fwrite(p, 1, n, o->fp) != n)
        o->failed = true;
    o->pos += n;
}

static void emit_u32(struct out *o, uint32_t v) { emit(o, &v, sizeof v); }
static void emit_u64(struct out *o, uint64_t v) { emit(o, &v, sizeof v); }

static void emit_pad(struct out *o, uint32_t alignment)
{
    static const uint8_t zeros[256];
    uint64_t pad = (alignment - o->pos % alignment) % alignment;
    while (pad > 0) {
        size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        emit(o, zeros, n);
        pad -= n;
    }
}

static void emit_file(const struct gguf_writer *w, struct out *o, uint32_t alignment)
{
    emit(o, "GGUF", 4);
    emit_u32(o, 3);
    emit_u64(o, w->n_t);
    emit_u64(o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        emit_u64(o, w->kv[i].key_len);
        emit(o, w->kv[i].key, w->kv[i].key_len);
        emit_u32(o, w->kv[i].type);
        emit(o, w->kv[i].value.p, w->kv[i].value.n);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        emit_u64(o, strlen(t->name));
        emit(o, t->name, strlen(t->name));
        emit_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            emit_u64(o, (uint64_t)t->ne[d]);
        emit_u32(o, t->type);
        emit_u64(o, offset);
        offset += t->nbytes + (alignment - t->nbytes % alignment) % alignment;
    }
    if (w->n_t == 0)
        return; /* no padding without tensors, as llama.cpp writes vocab-only files */
    emit_pad(o, alignment);
    for (size_t i = 0; i < w->n_t; i++) {
        emit(o, w->t[i].data, (size_t)w->t[i].nbytes);
        emit_pad(o, alignment);
    }
}

int gguf_writer_write(struct gguf_writer *w, const char *path, struct llm_error *err)
{
    if (w->code)
        return llm_fail(err, w->code, "%s: %s", path, w->msg);
    uint32_t alignment;
    int rc = validate(w, path, &alignment, err);
    if (rc)
        return rc;

    size_t n = strlen(path);
    char *tmp = malloc(n + sizeof ".tmp.XXXXXX");
    if (!tmp)
        return llm_fail(err, LLM_ERR_NOMEM, "%s: out of memory", path);
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return llm_fail(err, LLM_ERR_IO, "%s: cannot create temporary file: %s", path, strerror(e));
    }
    struct out o = { .fp = fdopen(fd, "wb") };
    if (!o.fp) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return llm_fail(err, LLM_ERR_IO, "%s: cannot open temporary file: %s", path, strerror(e));
    }
    /* Large buffer for the many small header writes; big tensor writes bypass it. */
    setvbuf(o.fp, NULL, _IOFBF, 1 << 20);
    fchmod(fd, 0644); /* mkstemp makes 0600; a model file is normally readable by all */
    emit_file(w, &o, alignment);
    int e = o.failed ? errno : 0;
    if (fclose(o.fp) != 0 && !e)
        e = errno ? errno : EIO;
    if (!e && !o.failed && rename(tmp, path) != 0)
        e = errno;
    if (e || o.failed) {
        unlink(tmp);
        free(tmp);
        return llm_fail(err, LLM_ERR_IO, "%s: write failed: %s", path, strerror(e ? e : EIO));
    }
    free(tmp);
    return LLM_OK;
}
