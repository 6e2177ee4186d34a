/* libFuzzer target: gguf_parse on arbitrary bytes must fail cleanly or yield a file whose every
 * accessor stays inside the buffer (ASan checks each byte touched here). */
#include "model/gguf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every byte of a view so ASan sees any view that leaves the buffer. */
static unsigned touch(const void *p, uint64_t n)
{
    unsigned s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += ((const unsigned char *)p)[i];
    return s;
}

static volatile unsigned sink;

static void exercise_kv(const struct gguf_file *f, const struct gguf_kv *kv)
{
    char key[256];
    struct llm_error err;
    size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
    memcpy(key, kv->key.ptr, n);
    key[n] = '\0';
    sink += (unsigned)gguf_find_key(f, key);

    uint64_t u;
    int64_t i;
    double d;
    bool b;
    struct gguf_str s;
    const struct gguf_kv *arr;
    if (gguf_get_uint(f, key, &u, &err) < 0 || gguf_get_int(f, key, &i, &err) < 0 ||
        gguf_get_float(f, key, &d, &err) < 0 || gguf_get_bool(f, key, &b, &err) < 0)
        sink += (unsigned)strlen(err.msg);
    if (gguf_get_str(f, key, &s, &err) == 1)
        sink += touch(s.ptr, s.len);
    if (gguf_get_arr(f, key, GGUF_VTYPE_COUNT, &arr, &err) == 1 && arr->arr_type == GGUF_STRING)
        for (uint64_t k = 0; k < arr->arr_n; k++)
            sink += touch(arr->strs[k].ptr, arr->strs[k].len) + gguf_str_eq(arr->strs[k], "a");
    uint64_t count = kv->type == GGUF_ARRAY ? kv->arr_n : 1;
    for (uint64_t k = 0; k <= count && k < 4096; k++)
        sink += (unsigned)gguf_arr_i64(kv, k) + (unsigned)(gguf_arr_f64(kv, k) > 0);
    if (kv->type == GGUF_ARRAY && kv->arr_n > 0)
        sink += (unsigned)gguf_arr_i64(kv, kv->arr_n - 1);
    sink += (unsigned)gguf_vtype_size(kv->type) + (unsigned)strlen(gguf_vtype_name(kv->arr_type));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *f = NULL;
    struct llm_error err;
    if (gguf_parse(data, size, "fuzz.gguf", &f, &err) != LLM_OK) {
        if (f || err.msg[0] == '\0')
            abort(); /* failure must leave no file and say why */
        return 0;
    }
    for (uint64_t i = 0; i < f->n_kv; i++)
        exercise_kv(f, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor_info *t = &f->tensors[i];
        char name[GGUF_MAX_NAME + 1];
        memcpy(name, t->name.ptr, (size_t)t->name.len);
        name[t->name.len] = '\0';
        if (!gguf_find_tensor(f, name))
            abort();
        if (t->nbytes > 0)
            sink += ((const unsigned char *)t->data)[0] + ((const unsigned char *)t->data)[t->nbytes - 1];
    }
    gguf_close(f);
    return 0;
}
