/* GGUF reader. The file is untrusted: every byte is read through the cursor helpers below, which
 * check the length against the end of the mapping first, and every size is computed with
 * overflow checks. After a successful parse the accessors need no further checks. */
#include "gguf.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Smallest possible encodings, used to reject counts that cannot fit in the remaining bytes before
 * allocating arrays of that size. */
#define MIN_KV_BYTES 14     /* u64 key length, 1-byte key, u32 value type, 1-byte value */
#define MIN_TENSOR_BYTES 24 /* u64 name length, empty name, u32 n_dims, u32 type, u64 offset */
#define GGUF_MIN_ALIGNMENT 8 /* power of two and multiple of 8: every element type's own alignment */

/* Read position over the whole file plus what is needed to say where a failure happened. */
struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    const char *file;
    char what[128];  /* "header", "key 'general.name'", "tensor 'output.weight'": message prefix */
    int code;        /* status of the first failure */
    struct llm_error *err;
};

/* Records a failure at file offset `off`; always returns false so callers can `return fail(...)`. */
__attribute__((format(printf, 4, 5)))
static bool fail(struct cursor *c, enum llm_status code, uint64_t off, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->code = llm_fail(c->err, code, "%s: %s at offset %" PRIu64 ": %s", c->file, c->what, off, msg);
    return false;
}

/* Names from the file go into messages escaped and shortened: they may hold any bytes. */
static void set_what(struct cursor *c, const char *kind, struct gguf_str s)
{
    char name[80]; /* room for 70 bytes, one more escape (4) and "..." */
    size_t n = 0;
    uint64_t i = 0;
    for (; i < s.len && n <= 70; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\')
            name[n++] = (char)ch;
        else
            n += (size_t)snprintf(name + n, sizeof name - n, "\\x%02x", ch);
    }
    if (i < s.len)
        n += (size_t)snprintf(name + n, sizeof name - n, "...");
    name[n] = '\0';
    snprintf(c->what, sizeof c->what, "%s '%s'", kind, name);
}

static bool need(struct cursor *c, uint64_t n, const char *field)
{
    if (n <= c->size - c->pos)
        return true;
    return fail(c, LLM_ERR_FORMAT, c->pos, "%s needs %" PRIu64 " bytes but only %" PRIu64
                " are left (file truncated?)", field, n, c->size - c->pos);
}

static bool skip(struct cursor *c, uint64_t n, const char *field)
{
    if (!need(c, n, field))
        return false;
    c->pos += n;
    return true;
}

static bool read_raw(struct cursor *c, void *v, size_t n, const char *field)
{
    if (!need(c, n, field))
        return false;
    memcpy(v, c->base + c->pos, n);
    c->pos += n;
    return true;
}

static bool read_u32(struct cursor *c, uint32_t *v, const char *field)
{
    return read_raw(c, v, sizeof *v, field);
}

static bool read_u64(struct cursor *c, uint64_t *v, const char *field)
{
    return read_raw(c, v, sizeof *v, field);
}

/* u64 length + bytes; the view points into the mapping. */
static bool read_str(struct cursor *c, struct gguf_str *s, const char *field)
{
    uint64_t at = c->pos;
    if (!read_u64(c, &s->len, field))
        return false;
    if (s->len > c->size - c->pos) {
        c->pos = at;
        return fail(c, LLM_ERR_FORMAT, at, "%s of %" PRIu64 " bytes runs past end of file (%"
                    PRIu64 " bytes left)", field, s->len, c->size - at - 8);
    }
    s->ptr = (const char *)c->base + c->pos;
    c->pos += s->len;
    return true;
}

const char *gguf_vtype_name(enum gguf_vtype t)
{
    static const char *const names[GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return (unsigned)t < GGUF_VTYPE_COUNT ? names[t] : "?";
}

size_t gguf_vtype_size(enum gguf_vtype t)
{
    static const size_t sizes[GGUF_VTYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return (unsigned)t < GGUF_VTYPE_COUNT ? sizes[t] : 0;
}

bool gguf_str_eq(struct gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

static bool parse_array(struct cursor *c, struct gguf_kv *kv)
{
    uint64_t at = c->pos;
    uint32_t et;
    if (!read_u32(c, &et, "array element type") || !read_u64(c, &kv->arr_n, "array length"))
        return false;
    if (et == GGUF_ARRAY)
        return fail(c, LLM_ERR_FORMAT, at, "nested arrays are not supported");
    if (et >= GGUF_VTYPE_COUNT)
        return fail(c, LLM_ERR_FORMAT, at, "unknown array element type %" PRIu32, et);
    kv->arr_type = (enum gguf_vtype)et;
    kv->value = c->base + c->pos;
    uint64_t left = c->size - c->pos;
    if (et != GGUF_STRING) {
        uint64_t es = gguf_vtype_size(kv->arr_type);
        if (kv->arr_n > left / es)
            return fail(c, LLM_ERR_FORMAT, at + 4, "array of %" PRIu64 " %s runs past end of file "
                        "(%" PRIu64 " bytes left)", kv->arr_n, gguf_vtype_name(kv->arr_type), left);
        c->pos += kv->arr_n * es;
        return true;
    }
    if (kv->arr_n > left / 8)
        return fail(c, LLM_ERR_FORMAT, at + 4, "array of %" PRIu64 " strings cannot fit in the %"
                    PRIu64 " bytes left", kv->arr_n, left);
    struct gguf_str *strs = llm_calloc(kv->arr_n, sizeof *strs);
    if (!strs)
        return fail(c, LLM_ERR_NOMEM, at, "out of memory for %" PRIu64 " strings", kv->arr_n);
    kv->strs = strs;
    for (uint64_t i = 0; i < kv->arr_n; i++)
        if (!read_str(c, &strs[i], "array string"))
            return false;
    return true;
}

static bool parse_kv(struct cursor *c, struct gguf_kv *kv, uint64_t index)
{
    kv->offset = c->pos;
    snprintf(c->what, sizeof c->what, "metadata entry %" PRIu64, index);
    if (!read_str(c, &kv->key, "key"))
        return false;
    set_what(c, "key", kv->key);
    if (kv->key.len == 0)
        return fail(c, LLM_ERR_FORMAT, kv->offset, "empty key");
    if (memchr(kv->key.ptr, '\0', kv->key.len))
        return fail(c, LLM_ERR_FORMAT, kv->offset, "key contains a NUL byte");
    uint64_t at = c->pos;
    uint32_t t;
    if (!read_u32(c, &t, "value type"))
        return false;
    if (t >= GGUF_VTYPE_COUNT)
        return fail(c, LLM_ERR_FORMAT, at, "unknown value type %" PRIu32, t);
    kv->type = (enum gguf_vtype)t;
    if (kv->type == GGUF_ARRAY)
        return parse_array(c, kv);
    kv->value = c->base + c->pos;
    if (kv->type == GGUF_STRING) {
        struct gguf_str s;
        return read_str(c, &s, "string value");
    }
    return skip(c, gguf_vtype_size(kv->type), "value");
}

static int cmp_str_ptr(const void *a, const void *b)
{
    const struct gguf_str *x = *(const struct gguf_str *const *)a;
    const struct gguf_str *y = *(const struct gguf_str *const *)b;
    uint64_t n = x->len < y->len ? x->len : y->len;
    int r = n ? memcmp(x->ptr, y->ptr, n) : 0;
    if (r)
        return r;
    return (x->len > y->len) - (x->len < y->len);
}

/* Fails when two of the n names (views at arr + i * stride + field) are equal, naming the later
 * one. Sorting keeps this O(n log n) even for hostile counts. */
static bool check_unique(struct cursor *c, const void *arr, size_t stride, size_t field, uint64_t n,
                         const char *kind, const char *problem)
{
    if (n < 2)
        return true;
    const struct gguf_str **v = llm_calloc(n, sizeof *v);
    if (!v) {
        snprintf(c->what, sizeof c->what, "%s names", kind);
        return fail(c, LLM_ERR_NOMEM, 0, "out of memory");
    }
    for (uint64_t i = 0; i < n; i++)
        v[i] = (const struct gguf_str *)((const char *)arr + i * stride + field);
    qsort(v, n, sizeof *v, cmp_str_ptr);
    const struct gguf_str *dup = NULL;
    for (uint64_t i = 1; i < n && !dup; i++)
        if (cmp_str_ptr(&v[i - 1], &v[i]) == 0)
            dup = v[i - 1]->ptr > v[i]->ptr ? v[i - 1] : v[i];
    free(v);
    if (!dup)
        return true;
    set_what(c, kind, *dup);
    return fail(c, LLM_ERR_FORMAT, (uint64_t)((const uint8_t *)dup->ptr - c->base) - 8, "%s", problem);
}

static bool check_alignment(struct cursor *c, struct gguf_file *f)
{
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_find_key(f, "general.alignment");
    if (i < 0)
        return true;
    const struct gguf_kv *kv = &f->kv[i];
    set_what(c, "key", kv->key);
    if (kv->type != GGUF_U32)
        return fail(c, LLM_ERR_FORMAT, kv->offset, "must be u32, found %s", gguf_vtype_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->value, sizeof a);
    if (a == 0 || (a & (a - 1)) != 0)
        return fail(c, LLM_ERR_FORMAT, kv->offset, "alignment %" PRIu32 " is not a power of two", a);
    /* The GGUF spec asks for a multiple of 8; below that, F32 (and I64/F64) tensor data would sit at
     * addresses the kernels may not read (misaligned loads are undefined behaviour in C). */
    if (a < GGUF_MIN_ALIGNMENT)
        return fail(c, LLM_ERR_FORMAT, kv->offset, "alignment %" PRIu32 " is below %d (the GGUF spec "
                    "requires a multiple of 8)", a, GGUF_MIN_ALIGNMENT);
    f->alignment = a;
    return true;
}

static bool parse_tensor_info(struct cursor *c, struct gguf_tensor_info *ti, uint64_t index,
                              uint32_t alignment)
{
    uint64_t at = c->pos;
    snprintf(c->what, sizeof c->what, "tensor info %" PRIu64, index);
    if (!read_str(c, &ti->name, "tensor name"))
        return false;
    set_what(c, "tensor", ti->name);
    if (ti->name.len > GGUF_MAX_NAME)
        return fail(c, LLM_ERR_FORMAT, at, "name is %" PRIu64 " bytes long (at most %d allowed)",
                    ti->name.len, GGUF_MAX_NAME);
    if (memchr(ti->name.ptr, '\0', ti->name.len))
        return fail(c, LLM_ERR_FORMAT, at, "name contains a NUL byte");

    at = c->pos;
    if (!read_u32(c, &ti->n_dims, "n_dims"))
        return false;
    if (ti->n_dims > LLM_MAX_DIMS)
        return fail(c, LLM_ERR_FORMAT, at, "n_dims %" PRIu32 " exceeds %d", ti->n_dims, LLM_MAX_DIMS);
    uint64_t dims_at = c->pos;
    for (uint32_t d = 0; d < LLM_MAX_DIMS; d++) {
        uint64_t v = 1;
        at = c->pos;
        if (d < ti->n_dims && !read_u64(c, &v, "dimension"))
            return false;
        if (v > INT64_MAX)
            return fail(c, LLM_ERR_FORMAT, at, "dimension %" PRIu32 " is %" PRIu64
                        " (negative as int64)", d, v);
        ti->ne[d] = (int64_t)v;
    }
    /* Zero dims are skipped so that any sub-product a consumer may form (e.g. ne1*ne2*ne3) fits
     * int64 as well. */
    int64_t nel = 1;
    for (int d = 0; d < LLM_MAX_DIMS; d++)
        if (ti->ne[d] != 0 && __builtin_mul_overflow(nel, ti->ne[d], &nel))
            return fail(c, LLM_ERR_FORMAT, dims_at, "element count of [%" PRId64 ", %" PRId64 ", %"
                        PRId64 ", %" PRId64 "] overflows int64", ti->ne[0], ti->ne[1], ti->ne[2],
                        ti->ne[3]);
    int64_t rows = ti->ne[1] * ti->ne[2] * ti->ne[3];

    at = c->pos;
    uint32_t type;
    if (!read_u32(c, &type, "tensor type"))
        return false;
    const struct llm_type_info *tt = type < LLM_TYPE_COUNT ? llm_type_info((int)type) : NULL;
    if (!tt)
        return fail(c, LLM_ERR_UNSUPPORTED, at, "unknown tensor type id %" PRIu32, type);
    ti->type = (enum llm_type)type;
    if (ti->ne[0] % tt->blck_size != 0)
        return fail(c, LLM_ERR_FORMAT, at, "ne[0] = %" PRId64 " is not a multiple of the %s block "
                    "size %" PRId64, ti->ne[0], tt->name, tt->blck_size);
    uint64_t nb = (uint64_t)(ti->ne[0] / tt->blck_size);
    if (__builtin_mul_overflow(nb, (uint64_t)tt->type_size, &nb) ||
        __builtin_mul_overflow(nb, (uint64_t)rows, &nb))
        return fail(c, LLM_ERR_FORMAT, at, "byte size overflows");
    ti->nbytes = nb;

    at = c->pos;
    if (!read_u64(c, &ti->offset, "tensor data offset"))
        return false;
    if (ti->offset % alignment != 0)
        return fail(c, LLM_ERR_FORMAT, at, "data offset %" PRIu64 " is not a multiple of the "
                    "alignment %" PRIu32, ti->offset, alignment);
    return true;
}

/* Alignment a tensor's first byte needs: an element's (or block's) alignment divides its size and
 * is at most 8, so the largest power of two dividing both is enough (F32 4, F16 2, Q8_0 2, Q8_K 4). */
static size_t elem_align(enum llm_type t)
{
    size_t size = llm_type_info((int)t)->type_size, a = 8;
    while (size % a)
        a /= 2;
    return a;
}

/* Tensors must follow each other in order, each padded to the alignment, inside the file. */
static bool check_layout(struct cursor *c, struct gguf_file *f)
{
    uint64_t expect = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor_info *ti = &f->tensors[i];
        uint64_t at = (uint64_t)((const uint8_t *)ti->name.ptr - f->base) - 8;
        set_what(c, "tensor", ti->name);
        if (ti->offset != expect)
            return fail(c, LLM_ERR_FORMAT, at, "data offset %" PRIu64 ", expected %" PRIu64
                        " (tensors must be stored in order, back to back)", ti->offset, expect);
        uint64_t room = f->size - f->data_offset;
        if (ti->offset > room || ti->nbytes > room - ti->offset)
            return fail(c, LLM_ERR_FORMAT, at, "data extends past end of file (%" PRIu64 " bytes at "
                        "file offset %" PRIu64 ", file size %zu)", ti->nbytes,
                        f->data_offset + ti->offset, f->size);
        ti->data = f->base + f->data_offset + ti->offset;
        /* gguf_parse() takes any buffer: data must still sit where its elements may be read */
        if ((uintptr_t)ti->data % elem_align(ti->type) != 0)
            return fail(c, LLM_ERR_FORMAT, at, "data at address %p is not aligned to %zu bytes for %s "
                        "(the buffer given to gguf_parse is misaligned)", ti->data,
                        elem_align(ti->type), llm_type_name(ti->type));
        /* nbytes <= size, so neither the padding nor the sum can overflow */
        expect += ti->nbytes + (f->alignment - ti->nbytes % f->alignment) % f->alignment;
    }
    return true;
}

static bool parse_header(struct cursor *c, struct gguf_file *f)
{
    snprintf(c->what, sizeof c->what, "header");
    if (!need(c, 4, "magic"))
        return false;
    if (memcmp(c->base, "GGUF", 4) != 0)
        return fail(c, LLM_ERR_FORMAT, 0, "not a GGUF file (bad magic)");
    c->pos = 4;
    if (!read_u32(c, &f->version, "version"))
        return false;
    if (f->version != 0 && (f->version & 0xffff) == 0)
        return fail(c, LLM_ERR_UNSUPPORTED, 4, "version 0x%08" PRIx32 " looks byte-swapped: "
                    "big-endian files are not supported", f->version);
    if (f->version == 1)
        return fail(c, LLM_ERR_UNSUPPORTED, 4, "GGUF version 1 is not supported (need 2 or 3)");
    if (f->version < 2 || f->version > 3)
        return fail(c, LLM_ERR_UNSUPPORTED, 4, "unsupported GGUF version %" PRIu32 " (need 2 or 3)",
                    f->version);
    if (!read_u64(c, &f->n_tensors, "tensor count") || !read_u64(c, &f->n_kv, "metadata count"))
        return false;
    uint64_t left = c->size - c->pos;
    if (f->n_kv > left / MIN_KV_BYTES)
        return fail(c, LLM_ERR_FORMAT, 16, "metadata count %" PRIu64 " cannot fit in the %" PRIu64
                    " bytes left", f->n_kv, left);
    left -= f->n_kv * MIN_KV_BYTES;
    if (f->n_tensors > left / MIN_TENSOR_BYTES)
        return fail(c, LLM_ERR_FORMAT, 8, "tensor count %" PRIu64 " cannot fit in the %" PRIu64
                    " bytes left", f->n_tensors, left);
    return true;
}

static bool parse_all(struct cursor *c, struct gguf_file *f)
{
    if (!parse_header(c, f))
        return false;

    f->kv = llm_calloc(f->n_kv, sizeof *f->kv);
    f->tensors = llm_calloc(f->n_tensors, sizeof *f->tensors);
    if (!f->kv || !f->tensors)
        return fail(c, LLM_ERR_NOMEM, 16, "out of memory for %" PRIu64 " entries and %" PRIu64
                    " tensors", f->n_kv, f->n_tensors);
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!parse_kv(c, &f->kv[i], i))
            return false;
    if (!check_unique(c, f->kv, sizeof *f->kv, offsetof(struct gguf_kv, key), f->n_kv, "key",
                      "duplicate key"))
        return false;
    if (!check_alignment(c, f))
        return false;

    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!parse_tensor_info(c, &f->tensors[i], i, f->alignment))
            return false;
    if (!check_unique(c, f->tensors, sizeof *f->tensors, offsetof(struct gguf_tensor_info, name),
                      f->n_tensors, "tensor", "duplicate tensor name"))
        return false;

    /* Padding before the data section exists only when there are tensors (vocab-only files end
     * right after the metadata). */
    f->data_offset = c->pos;
    if (f->n_tensors == 0)
        return true;
    f->data_offset += (f->alignment - c->pos % f->alignment) % f->alignment;
    if (f->data_offset > f->size) {
        snprintf(c->what, sizeof c->what, "data section");
        return fail(c, LLM_ERR_FORMAT, c->pos, "starts at %" PRIu64 ", past end of file (size %zu)",
                    f->data_offset, f->size);
    }
    return check_layout(c, f);
}

int gguf_parse(const void *buf, size_t size, const char *name, struct gguf_file **out,
               struct llm_error *err)
{
    *out = NULL;
    struct gguf_file *f = calloc(1, sizeof *f);
    char *path = strdup(name);
    if (!f || !path) {
        free(f);
        free(path);
        return llm_fail(err, LLM_ERR_NOMEM, "%s: out of memory", name);
    }
    f->path = path;
    f->base = buf;
    f->size = size;
    struct cursor c = { .base = buf, .size = size, .file = name, .err = err };
    if (!parse_all(&c, f)) {
        gguf_close(f);
        return c.code;
    }
    *out = f;
    return LLM_OK;
}

void gguf_close(struct gguf_file *f)
{
    if (!f)
        return;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++)
            free((void *)f->kv[i].strs);
    free(f->kv);
    free(f->tensors);
    if (f->map_len)
        munmap((void *)f->base, f->map_len);
    free(f->path);
    free(f);
}

int64_t gguf_find_key(const struct gguf_file *f, const char *key)
{
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key))
            return (int64_t)i;
    return -1;
}

const struct gguf_tensor_info *gguf_find_tensor(const struct gguf_file *f, const char *name)
{
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

/* ---- typed access ------------------------------------------------------------------------- */

/* Integer at p of type t: signed types in *s, unsigned in *u (with *is_unsigned set). False for
 * non-integer types. */
static bool load_int(enum gguf_vtype t, const uint8_t *p, int64_t *s, uint64_t *u, bool *is_unsigned)
{
    *is_unsigned = true;
    switch (t) {
    case GGUF_U8: { uint8_t v; memcpy(&v, p, 1); *u = v; return true; }
    case GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *u = v; return true; }
    case GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *u = v; return true; }
    case GGUF_U64: { uint64_t v; memcpy(&v, p, 8); *u = v; return true; }
    default: break;
    }
    *is_unsigned = false;
    switch (t) {
    case GGUF_I8: { int8_t v; memcpy(&v, p, 1); *s = v; return true; }
    case GGUF_I16: { int16_t v; memcpy(&v, p, 2); *s = v; return true; }
    case GGUF_I32: { int32_t v; memcpy(&v, p, 4); *s = v; return true; }
    case GGUF_I64: { int64_t v; memcpy(&v, p, 8); *s = v; return true; }
    default: return false;
    }
}

/* Numeric value (integers, floats, bool) at p of type t as double; NAN for other types. */
static double load_f64(enum gguf_vtype t, const uint8_t *p)
{
    int64_t s;
    uint64_t u;
    bool is_unsigned;
    if (load_int(t, p, &s, &u, &is_unsigned))
        return is_unsigned ? (double)u : (double)s;
    switch (t) {
    case GGUF_F32: { float v; memcpy(&v, p, 4); return v; }
    case GGUF_F64: { double v; memcpy(&v, p, 8); return v; }
    case GGUF_BOOL: return p[0] != 0;
    default: return NAN;
    }
}

static int type_error(const struct gguf_file *f, const struct gguf_kv *kv, const char *key,
                      const char *expected, struct llm_error *err)
{
    if (kv->type == GGUF_ARRAY)
        return -llm_fail(err, LLM_ERR_FORMAT, "%s: key '%s' at offset %" PRIu64 ": expected %s, "
                         "found array of %s", f->path, key, kv->offset, expected,
                         gguf_vtype_name(kv->arr_type));
    return -llm_fail(err, LLM_ERR_FORMAT, "%s: key '%s' at offset %" PRIu64 ": expected %s, found %s",
                     f->path, key, kv->offset, expected, gguf_vtype_name(kv->type));
}

static const struct gguf_kv *lookup(const struct gguf_file *f, const char *key)
{
    int64_t i = gguf_find_key(f, key);
    return i < 0 ? NULL : &f->kv[i];
}

int gguf_get_uint(const struct gguf_file *f, const char *key, uint64_t *out, struct llm_error *err)
{
    const struct gguf_kv *kv = lookup(f, key);
    if (!kv)
        return 0;
    int64_t s;
    uint64_t u;
    bool is_unsigned;
    if (kv->type == GGUF_ARRAY || !load_int(kv->type, kv->value, &s, &u, &is_unsigned))
        return type_error(f, kv, key, "an unsigned integer", err);
    if (!is_unsigned && s < 0)
        return -llm_fail(err, LLM_ERR_FORMAT, "%s: key '%s' at offset %" PRIu64 ": expected a "
                         "non-negative value, found %" PRId64, f->path, key, kv->offset, s);
    *out = is_unsigned ? u : (uint64_t)s;
    return 1;
}

int gguf_get_int(const struct gguf_file *f, const char *key, int64_t *out, struct llm_error *err)
{
    const struct gguf_kv *kv = lookup(f, key);
    if (!kv)
        return 0;
    int64_t s;
    uint64_t u;
    bool is_unsigned;
    if (kv->type == GGUF_ARRAY || !load_int(kv->type, kv->value, &s, &u, &is_unsigned))
        return type_error(f, kv, key, "an integer", err);
    if (is_unsigned && u > INT64_MAX)
        return -llm_fail(err, LLM_ERR_FORMAT, "%s: key '%s' at offset %" PRIu64 ": value %" PRIu64
                         " does not fit int64", f->path, key, kv->offset, u);
    *out = is_unsigned ? (int64_t)u : s;
    return 1;
}

int gguf_get_float(const struct gguf_file *f, const char *key, double *out, struct llm_error *err)
{
    const struct gguf_kv *kv = lookup(f, key);
    if (!kv)
        return 0;
    if (kv->type != GGUF_F32 && kv->type != GGUF_F64)
        return type_error(f, kv, key, "f32 or f64", err);
    *out = load_f64(kv->type, kv->value);
    return 1;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out, struct llm_error *err)
{
    const struct gguf_kv *kv = lookup(f, key);
    if (!kv)
        return 0;
    if (kv->type != GGUF_BOOL)
        return type_error(f, kv, key, "bool", err);
    *out = kv->value[0] != 0;
    return 1;
}

int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out, struct llm_error *err)
{
    const struct gguf_kv *kv = lookup(f, key);
    if (!kv)
        return 0;
    if (kv->type != GGUF_STRING)
        return type_error(f, kv, key, "string", err);
    memcpy(&out->len, kv->value, sizeof out->len);
    out->ptr = (const char *)kv->value + sizeof out->len;
    return 1;
}

int gguf_get_arr(const struct gguf_file *f, const char *key, enum gguf_vtype elem,
                 const struct gguf_kv **out, struct llm_error *err)
{
    const struct gguf_kv *kv = lookup(f, key);
    if (!kv)
        return 0;
    if (kv->type != GGUF_ARRAY || (elem != GGUF_VTYPE_COUNT && kv->arr_type != elem)) {
        char expected[32];
        snprintf(expected, sizeof expected, "array of %s",
                 elem == GGUF_VTYPE_COUNT ? "any type" : gguf_vtype_name(elem));
        return type_error(f, kv, key, expected, err);
    }
    *out = kv;
    return 1;
}

/* Element i of an array (or the scalar itself): its type and first byte, or NULL when out of range. */
static const uint8_t *element(const struct gguf_kv *kv, uint64_t i, enum gguf_vtype *t)
{
    if (kv->type != GGUF_ARRAY) {
        *t = kv->type;
        return i == 0 ? kv->value : NULL;
    }
    *t = kv->arr_type;
    size_t es = gguf_vtype_size(kv->arr_type);
    return i < kv->arr_n && es ? kv->value + i * es : NULL;
}

double gguf_arr_f64(const struct gguf_kv *kv, uint64_t i)
{
    enum gguf_vtype t;
    const uint8_t *p = element(kv, i, &t);
    return p ? load_f64(t, p) : NAN;
}

int64_t gguf_arr_i64(const struct gguf_kv *kv, uint64_t i)
{
    enum gguf_vtype t;
    const uint8_t *p = element(kv, i, &t);
    if (!p)
        return 0;
    int64_t s;
    uint64_t u;
    bool is_unsigned;
    if (load_int(t, p, &s, &u, &is_unsigned))
        return is_unsigned ? (u > INT64_MAX ? INT64_MAX : (int64_t)u) : s;
    double d = load_f64(t, p);
    if (!(d > -9.2e18 && d < 9.2e18))
        return 0;
    return (int64_t)d;
}
