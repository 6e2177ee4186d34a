/* GGUF reader (read-only mmap, every size checked against the mapping) and writer.
 *
 * Reader contract: gguf_open() maps the file and validates the whole header, every metadata
 * entry and every tensor info before returning; after a successful open every accessor below is
 * safe (no further bounds checks can fail). Strings are (pointer, length) views into the mapping,
 * not NUL-terminated. Keys and tensor names never contain a NUL byte (such files are rejected), so
 * they can be compared with C strings. Errors name the file, the key or tensor, and the byte offset. */
#ifndef LLM_GGUF_H
#define LLM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tensor.h"

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_VTYPE_COUNT
};

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 64   /* tensor names longer than this are rejected */

struct gguf_str {
    const char *ptr; /* into the mapping (or caller memory for the writer) */
    uint64_t len;
};

struct gguf_kv {
    struct gguf_str key;
    enum gguf_vtype type;     /* value type; GGUF_ARRAY for arrays         */
    enum gguf_vtype arr_type; /* element type when type == GGUF_ARRAY      */
    uint64_t arr_n;           /* element count when type == GGUF_ARRAY     */
    const uint8_t *value;     /* first byte of the value: after the array header for arrays, the
                                 u64 length prefix for a STRING (read it with gguf_get_str) */
    uint64_t offset;          /* file offset of the entry, for messages    */
    const struct gguf_str *strs; /* arr_n views when arr_type == GGUF_STRING, else NULL */
};

struct gguf_tensor_info {
    struct gguf_str name;
    uint32_t n_dims;
    int64_t ne[LLM_MAX_DIMS]; /* missing dims are 1                                    */
    enum llm_type type;
    uint64_t offset;          /* relative to the data section                           */
    uint64_t nbytes;
    const void *data;         /* into the mapping                                        */
};

/* A file as fstat(2) saw it when it was opened. */
struct gguf_file_id {
    uint64_t dev, ino, size, mtime_s, mtime_ns;
};

struct stat;
/* The identity a stat(2) result gives a file. */
struct gguf_file_id gguf_file_id_of(const struct stat *st);

struct gguf_file {
    char *path;
    const uint8_t *base;  /* start of the mapping                        */
    size_t size;          /* file size                                   */
    uint32_t version;     /* 2 or 3                                      */
    uint32_t alignment;
    uint64_t n_kv;
    struct gguf_kv *kv;
    uint64_t n_tensors;
    struct gguf_tensor_info *tensors;
    uint64_t data_offset; /* file offset of the data section (== size for vocab-only files) */
    size_t map_len;       /* bytes of the mapping base is in (file or anonymous), 0: caller memory */
    bool locked;          /* the mapping is locked in RAM (mlock)                                 */
    bool mapped;          /* base maps the file itself (the mmap modes), not a copy read into memory */
    struct gguf_file_id id; /* all zero for bytes parsed from memory (gguf_parse)                  */
};

/* How gguf_open_mode() brings a file into memory: llama-bench's -lm values (its "auto" is mmap). */
enum gguf_load_mode {
    GGUF_LOAD_MMAP,       /* map the file; pages are read on first touch                        */
    GGUF_LOAD_READ,       /* "none": read() into anonymous memory                               */
    GGUF_LOAD_MLOCK,      /* read() into anonymous memory, then lock it                         */
    GGUF_LOAD_MMAP_MLOCK, /* map the file and lock the mapping (every page read now)            */
    GGUF_LOAD_DIRECT,     /* "dio": O_DIRECT reads into page-aligned anonymous memory, bypassing
                             the page cache                                                     */
    GGUF_LOAD_COUNT
};

/* Map and parse a file. On success *out owns the mapping; free with gguf_close(). */
int gguf_open(const char *path, struct gguf_file **out, struct llm_error *err);

/* gguf_open with the file brought into memory as mode says (gguf_load.c). A lock that the
 * RLIMIT_MEMLOCK refuses, and a file system that refuses O_DIRECT, are warnings (llm_log): the file
 * is then used unlocked, or read through the page cache, as llama.cpp does. */
int gguf_open_mode(const char *path, enum gguf_load_mode mode, struct gguf_file **out, struct llm_error *err);

/* "mmap", "none", "mlock", "mmap+mlock", "dio"; NULL for other values. */
const char *gguf_load_mode_name(enum gguf_load_mode mode);
/* The mode named s (those names, "auto" = mmap), or -1. */
int gguf_load_mode_parse(const char *s);

/* Parse a buffer that stays owned by the caller (used by the fuzzer and tests); `name` is used in
 * messages. The buffer must outlive the returned file. */
int gguf_parse(const void *buf, size_t size, const char *name, struct gguf_file **out,
               struct llm_error *err);

void gguf_close(struct gguf_file *f);

/* Index of key, or -1. */
int64_t gguf_find_key(const struct gguf_file *f, const char *key);
const struct gguf_tensor_info *gguf_find_tensor(const struct gguf_file *f, const char *name);

/* Typed getters. Each returns false (leaving *out untouched) when the key is absent; when the key
 * exists with an incompatible type they fail with an error naming the key.
 * gguf_get_uint accepts any integer type holding a non-negative value; gguf_get_float accepts
 * F32/F64; gguf_get_str returns a view into the mapping. Return: 1 found, 0 absent, <0 error. */
int gguf_get_uint(const struct gguf_file *f, const char *key, uint64_t *out, struct llm_error *err);
int gguf_get_int(const struct gguf_file *f, const char *key, int64_t *out, struct llm_error *err);
int gguf_get_float(const struct gguf_file *f, const char *key, double *out, struct llm_error *err);
int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out, struct llm_error *err);
int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out, struct llm_error *err);
/* Array: 1 found (sets *kv), 0 absent, <0 when not an array of `elem` (pass GGUF_VTYPE_COUNT for any). */
int gguf_get_arr(const struct gguf_file *f, const char *key, enum gguf_vtype elem,
                 const struct gguf_kv **kv, struct llm_error *err);

/* Scalar element i of a numeric array or scalar value (i == 0), converted. Numeric means integer,
 * float or bool. Out of range i or a non-numeric type gives NAN / 0; gguf_arr_i64 saturates u64
 * values above INT64_MAX and truncates floats toward zero (0 when out of int64 range). */
double gguf_arr_f64(const struct gguf_kv *kv, uint64_t i);
int64_t gguf_arr_i64(const struct gguf_kv *kv, uint64_t i);

const char *gguf_vtype_name(enum gguf_vtype t);
size_t gguf_vtype_size(enum gguf_vtype t); /* 0 for STRING/ARRAY */

/* Compare a view with a C string. */
bool gguf_str_eq(struct gguf_str s, const char *c);

/* ---- writer ---------------------------------------------------------------------------------
 * Collects metadata and tensors in memory order of calls and writes GGUF v3. Values are copied;
 * tensor data pointers must stay valid until gguf_writer_write(). Keys and tensor names must be
 * unique (a duplicate is an error at write time). The add functions do not fail: a bad argument
 * (unknown type, ne[0] not a multiple of the block size, name over GGUF_MAX_NAME, ...) or an
 * allocation failure is remembered and returned by gguf_writer_write(). The alignment is the value
 * of a `general.alignment` u32 entry (however it was added, e.g. copied), else 32. */
struct gguf_writer;

struct gguf_writer *gguf_writer_new(void); /* NULL when out of memory */
void gguf_writer_free(struct gguf_writer *w);
/* Sets (or updates) the `general.alignment` key; must be a power of two. */
void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment);
/* Scalar of any fixed-size type (not STRING/ARRAY); v points to gguf_vtype_size(type) bytes. */
void gguf_writer_add_scalar(struct gguf_writer *w, const char *key, enum gguf_vtype type, const void *v);
void gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v);
void gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v);
void gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v);
void gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v);
void gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (n × gguf_vtype_size(elem) bytes at data). */
void gguf_writer_add_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem,
                         const void *data, uint64_t n);
void gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const struct gguf_str *strs,
                             uint64_t n);
/* Copy one metadata entry (any type) from a parsed file. */
void gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv);
/* n_dims 1..4; data holds the tensor's bytes (may be NULL when it has 0 bytes). */
void gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum llm_type type,
                            uint32_t n_dims, const int64_t *ne, const void *data);
/* Write to path (via a temporary file renamed into place, so no partial file is left). */
int gguf_writer_write(struct gguf_writer *w, const char *path, struct llm_error *err);

#endif
