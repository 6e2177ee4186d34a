/* GGUF reader and writer: every fixture under models/ loads with known facts, the writer round-trips
 * every value type and tensor layout, and corrupted files fail cleanly with a message that says
 * what and where. */
#include "harness.h"
#include "model/gguf.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static const char *tmp_file(const char *name)
{
    static char buf[sizeof tmpdir + 512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return x + (a - x % a) % a;
}

static bool str_is(struct gguf_str s, const char *c)
{
    return gguf_str_eq(s, c);
}

/* ---- (a) fixtures ------------------------------------------------------------------------ */

/* Layout facts that hold for every file llama.cpp writes: tensors back to back, padded to the
 * alignment, the last padded tensor ending the file; vocab-only files end after the metadata. */
static void check_layout(const struct gguf_file *f)
{
    CHECK_EQ_INT(f->version, 3);
    CHECK_EQ_INT(f->alignment, 32);
    uint64_t off = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor_info *t = &f->tensors[i];
        CHECK(t->offset == off, "%s: tensor %" PRIu64 " offset", f->path, i);
        CHECK(t->data == f->base + f->data_offset + t->offset, "%s", f->path);
        off += align_up(t->nbytes, f->alignment);
    }
    if (f->n_tensors)
        CHECK(f->data_offset + off == f->size, "%s: data ends at %" PRIu64 ", size %zu", f->path,
              f->data_offset + off, f->size);
    else
        CHECK(f->data_offset == f->size, "%s: vocab-only data_offset", f->path);
}

static int open_dir_fixtures(const char *rel)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", test_path(rel));
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot list %s", dir);
    if (!d)
        return 0;
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".gguf") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct gguf_file *f = NULL;
        struct llm_error err = { 0 };
        int rc = gguf_open(path, &f, &err);
        CHECK(rc == 0, "%s: %s", path, err.msg);
        if (rc == 0) {
            check_layout(f);
            count++;
        }
        gguf_close(f);
    }
    closedir(d);
    return count;
}

static struct gguf_file *open_fixture(const char *rel)
{
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    int rc = gguf_open(test_path(rel), &f, &err);
    CHECK(rc == 0, "%s: %s", rel, err.msg);
    return f;
}

static void test_stories(void)
{
    struct gguf_file *f = open_fixture("models/stories260K.gguf");
    if (!f)
        return;
    struct llm_error err = { 0 };
    CHECK_EQ_INT(f->n_tensors, 48);
    CHECK_EQ_INT(f->n_kv, 19);
    struct gguf_str s;
    CHECK(gguf_get_str(f, "general.architecture", &s, &err) == 1 && str_is(s, "llama"),
          "in %s", __func__);
    const struct gguf_tensor_info *t = gguf_find_tensor(f, "token_embd.weight");
    CHECK(t != NULL, "in %s", __func__);
    if (t) {
        CHECK_EQ_INT(t->type, LLM_TYPE_F32);
        CHECK_EQ_INT(t->n_dims, 2);
        CHECK(t->ne[0] == 64 && t->ne[1] == 512 && t->ne[2] == 1 && t->ne[3] == 1,
              "in %s", __func__);
        CHECK_EQ_INT(t->nbytes, 64 * 512 * 4);
    }
    CHECK(gguf_find_tensor(f, "blk.5.attn_q.weight") == NULL, "in %s", __func__);
    CHECK(gguf_find_tensor(f, "blk.4.ffn_down.weight") != NULL, "in %s", __func__);

    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    CHECK(gguf_get_uint(f, "llama.block_count", &u, &err) == 1 && u == 5, "in %s", __func__);
    CHECK(gguf_get_uint(f, "tokenizer.ggml.seperator_token_id", &u, &err) == 1 && u == 0xFFFFFFFFu,
          "in %s", __func__);
    CHECK(gguf_get_int(f, "llama.embedding_length", &i, &err) == 1 && i == 64, "in %s", __func__);
    CHECK(gguf_get_float(f, "llama.attention.layer_norm_rms_epsilon", &d, &err) == 1 &&
          fabs(d - 1e-5) < 1e-12, "in %s", __func__);
    CHECK(gguf_get_uint(f, "llama.rope.freq_base", &u, &err) == 0, "absent key");
    CHECK(gguf_get_uint(f, "general.file_type", &u, &err) == 0, "absent key");

    /* wrong type: the message names the key and both types */
    err.msg[0] = '\0';
    CHECK(gguf_get_str(f, "llama.block_count", &s, &err) < 0, "in %s", __func__);
    CHECK(strstr(err.msg, "llama.block_count") && strstr(err.msg, "u32") && strstr(err.msg, "string"),
          "%s", err.msg);
    CHECK(gguf_get_float(f, "general.name", &d, &err) < 0 && strstr(err.msg, "general.name"),
          "in %s", __func__);
    bool b;
    CHECK(gguf_get_bool(f, "llama.block_count", &b, &err) < 0, "in %s", __func__);

    const struct gguf_kv *kv = NULL;
    CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &kv, &err) == 1, "in %s", __func__);
    if (kv) {
        CHECK_EQ_INT(kv->arr_n, 512);
        CHECK(kv->strs && str_is(kv->strs[0], "<unk>") && str_is(kv->strs[3], "<0x00>"),
              "in %s", __func__);
    }
    CHECK(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_I32, &kv, &err) < 0, "in %s", __func__);
    CHECK(strstr(err.msg, "tokenizer.ggml.scores") && strstr(err.msg, "array of f32"), "%s", err.msg);
    CHECK(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VTYPE_COUNT, &kv, &err) == 1,
          "in %s", __func__);
    if (kv) {
        CHECK_EQ_INT(kv->arr_type, GGUF_I32);
        CHECK_EQ_INT(gguf_arr_i64(kv, 0), 2); /* <unk> is UNKNOWN */
        CHECK_EQ_INT(gguf_arr_i64(kv, 3), 6); /* byte tokens are BYTE */
        CHECK(gguf_arr_f64(kv, 1) == 3.0, "in %s", __func__);    /* <s> is CONTROL */
        CHECK(isnan(gguf_arr_f64(kv, 512)), "out of range");
    }
    CHECK(gguf_get_arr(f, "llama.block_count", GGUF_VTYPE_COUNT, &kv, &err) < 0, "in %s", __func__);
    gguf_close(f);
}

static void test_vocab_only(void)
{
    struct gguf_file *f = open_fixture("models/vocab/ggml-vocab-gpt-2.gguf");
    if (!f)
        return;
    struct llm_error err = { 0 };
    CHECK_EQ_INT(f->n_tensors, 0);
    CHECK(f->data_offset == f->size, "in %s", __func__);
    const struct gguf_kv *kv = NULL;
    CHECK(gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_STRING, &kv, &err) == 1 && kv->arr_n == 50000,
          "in %s", __func__);
    CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &kv, &err) == 1 && kv->arr_n == 50257,
          "in %s", __func__);
    struct gguf_str s;
    CHECK(gguf_get_str(f, "tokenizer.ggml.model", &s, &err) == 1 && str_is(s, "gpt2"),
          "in %s", __func__);
    gguf_close(f);
}

static void test_quant_fixture(void)
{
    struct gguf_file *f = open_fixture("models/quant/Q4_K.gguf");
    if (!f)
        return;
    CHECK_EQ_INT(f->n_tensors, 2);
    const struct gguf_tensor_info *q = gguf_find_tensor(f, "q");
    const struct gguf_tensor_info *r = gguf_find_tensor(f, "ref");
    CHECK(q && r, "in %s", __func__);
    if (q && r) {
        CHECK_EQ_INT(q->type, LLM_TYPE_Q4_K);
        CHECK(q->ne[0] == 512 && q->ne[1] == 8 && q->n_dims == 2, "in %s", __func__);
        CHECK_EQ_INT(q->nbytes, 2 * 144 * 8);
        CHECK_EQ_INT(r->type, LLM_TYPE_F32);
        CHECK_EQ_INT(r->nbytes, 512 * 8 * 4);
    }
    struct gguf_str s;
    struct llm_error err = { 0 };
    CHECK(gguf_get_str(f, "quant_test.type", &s, &err) == 1 && str_is(s, "Q4_K"),
          "in %s", __func__);
    gguf_close(f);

    f = open_fixture("models/qwen2-tiny-q8_0.gguf");
    if (f) {
        CHECK_EQ_INT(f->n_tensors, 26);
        CHECK(gguf_find_tensor(f, "output.weight") == NULL, "tied embeddings");
        const struct gguf_tensor_info *t = gguf_find_tensor(f, "blk.1.attn_k.bias");
        CHECK(t && t->type == LLM_TYPE_F32, "in %s", __func__);
        gguf_close(f);
    }
}

static void test_fixtures(void)
{
    int n = open_dir_fixtures("models") + open_dir_fixtures("models/quant") +
            open_dir_fixtures("models/vocab");
    CHECK(n >= 34, "only %d fixtures opened", n);
    test_stories();
    test_vocab_only();
    test_quant_fixture();
}

/* ---- (b) writer round trip ---------------------------------------------------------------- */

struct tspec {
    const char *name;
    enum llm_type type;
    uint32_t n_dims;
    int64_t ne[4];
};

static const struct tspec tensors[] = {
    { "f32.odd", LLM_TYPE_F32, 2, { 3, 5 } },
    { "f16.vec", LLM_TYPE_F16, 1, { 7 } },
    { "q8_0", LLM_TYPE_Q8_0, 2, { 64, 3 } },
    { "empty", LLM_TYPE_F32, 2, { 0, 4 } },
    { "q4_k", LLM_TYPE_Q4_K, 2, { 256, 2 } },
    { "i32.4d", LLM_TYPE_I32, 4, { 1, 1, 1, 5 } },
    { "bf16.3d", LLM_TYPE_BF16, 3, { 5, 3, 2 } },
    { "q4_0", LLM_TYPE_Q4_0, 1, { 32 } },
    { "a_name_that_is_exactly_sixty_four_bytes_long_0123456789abcdefghi", LLM_TYPE_Q6_K, 1, { 256 } },
};
#define N_TENSORS (sizeof tensors / sizeof tensors[0])

static size_t spec_bytes(const struct tspec *t)
{
    int64_t rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        rows *= t->ne[d];
    return llm_row_size(t->type, t->ne[0]) * (size_t)rows;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 31 + seed * 7 + 1);
}

static void test_roundtrip(void)
{
    const uint8_t u8 = 200, au8[] = { 1, 2, 255 };
    const int8_t i8 = -100, ai8[] = { -128, 0, 127 };
    const uint16_t u16 = 60000, au16[] = { 0, 65535 };
    const int16_t i16 = -30000, ai16[] = { -32768, 32767, 5 };
    const uint32_t au32[] = { 0, 4000000000u };
    const int32_t ai32[] = { -2000000000, 7 };
    const float af32[] = { 1.5f, -0.25f, 1e30f };
    const uint8_t abool[] = { 1, 0, 1, 1 };
    const uint64_t au64[] = { UINT64_MAX, 0, 12345678901234ull };
    const int64_t i64 = -1234567890123, ai64[] = { INT64_MIN, INT64_MAX };
    const double f64 = 3.141592653589793, af64[] = { 2.5, -1e300 };
    const struct gguf_str strs[] = { { "first", 5 }, { "", 0 }, { "\xc3\xa9t\xc3\xa9 \n\t", 8 },
                                     { "x\0y", 3 } };
    uint8_t *data[N_TENSORS];

    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_set_alignment(w, 16);
    gguf_writer_add_str(w, "general.architecture", "test");
    gguf_writer_add_scalar(w, "v.u8", GGUF_U8, &u8);
    gguf_writer_add_scalar(w, "v.i8", GGUF_I8, &i8);
    gguf_writer_add_scalar(w, "v.u16", GGUF_U16, &u16);
    gguf_writer_add_scalar(w, "v.i16", GGUF_I16, &i16);
    gguf_writer_add_u32(w, "v.u32", 4000000000u);
    gguf_writer_add_i32(w, "v.i32", -7);
    gguf_writer_add_f32(w, "v.f32", 0.125f);
    gguf_writer_add_bool(w, "v.bool", true);
    gguf_writer_add_bool(w, "v.false", false);
    gguf_writer_add_str(w, "v.str", "hello, world");
    gguf_writer_add_str(w, "v.empty", "");
    gguf_writer_add_u64(w, "v.u64", UINT64_MAX);
    gguf_writer_add_scalar(w, "v.i64", GGUF_I64, &i64);
    gguf_writer_add_scalar(w, "v.f64", GGUF_F64, &f64);
    gguf_writer_add_arr(w, "a.u8", GGUF_U8, au8, 3);
    gguf_writer_add_arr(w, "a.i8", GGUF_I8, ai8, 3);
    gguf_writer_add_arr(w, "a.u16", GGUF_U16, au16, 2);
    gguf_writer_add_arr(w, "a.i16", GGUF_I16, ai16, 3);
    gguf_writer_add_arr(w, "a.u32", GGUF_U32, au32, 2);
    gguf_writer_add_arr(w, "a.i32", GGUF_I32, ai32, 2);
    gguf_writer_add_arr(w, "a.f32", GGUF_F32, af32, 3);
    gguf_writer_add_arr(w, "a.bool", GGUF_BOOL, abool, 4);
    gguf_writer_add_arr(w, "a.u64", GGUF_U64, au64, 3);
    gguf_writer_add_arr(w, "a.i64", GGUF_I64, ai64, 2);
    gguf_writer_add_arr(w, "a.f64", GGUF_F64, af64, 2);
    gguf_writer_add_arr(w, "a.none", GGUF_U32, NULL, 0);
    gguf_writer_add_arr_str(w, "a.str", strs, 4);
    gguf_writer_add_arr_str(w, "a.str0", NULL, 0);
    gguf_writer_set_alignment(w, 64); /* updates the entry added first */
    for (size_t i = 0; i < N_TENSORS; i++) {
        size_t n = spec_bytes(&tensors[i]);
        data[i] = malloc(n ? n : 1);
        fill(data[i], n, (unsigned)i);
        gguf_writer_add_tensor(w, tensors[i].name, tensors[i].type, tensors[i].n_dims, tensors[i].ne,
                               data[i]);
    }
    struct llm_error err = { 0 };
    const char *path = tmp_file("all.gguf");
    int rc = gguf_writer_write(w, path, &err);
    CHECK(rc == 0, "%s", err.msg);
    gguf_writer_free(w);

    struct gguf_file *f = NULL;
    rc = gguf_open(path, &f, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc == 0) {
        CHECK_EQ_INT(f->version, 3);
        CHECK_EQ_INT(f->alignment, 64);
        CHECK_EQ_INT(f->n_kv, 30);
        CHECK_EQ_INT(f->n_tensors, N_TENSORS);
        CHECK(str_is(f->kv[0].key, "general.alignment"), "key order follows calls");
        uint64_t u;
        int64_t i;
        double d;
        bool b;
        struct gguf_str s;
        CHECK(gguf_get_uint(f, "general.alignment", &u, &err) == 1 && u == 64, "in %s", __func__);
        CHECK(gguf_get_uint(f, "v.u8", &u, &err) == 1 && u == 200, "in %s", __func__);
        CHECK(gguf_get_int(f, "v.i8", &i, &err) == 1 && i == -100, "in %s", __func__);
        CHECK(gguf_get_uint(f, "v.i8", &u, &err) < 0 && strstr(err.msg, "v.i8"), "negative as uint");
        CHECK(gguf_get_uint(f, "v.u16", &u, &err) == 1 && u == 60000, "in %s", __func__);
        CHECK(gguf_get_int(f, "v.i16", &i, &err) == 1 && i == -30000, "in %s", __func__);
        CHECK(gguf_get_uint(f, "v.u32", &u, &err) == 1 && u == 4000000000u, "in %s", __func__);
        CHECK(gguf_get_int(f, "v.i32", &i, &err) == 1 && i == -7, "in %s", __func__);
        CHECK(gguf_get_float(f, "v.f32", &d, &err) == 1 && d == 0.125, "in %s", __func__);
        CHECK(gguf_get_bool(f, "v.bool", &b, &err) == 1 && b, "in %s", __func__);
        CHECK(gguf_get_bool(f, "v.false", &b, &err) == 1 && !b, "in %s", __func__);
        CHECK(gguf_get_str(f, "v.str", &s, &err) == 1 && str_is(s, "hello, world"),
              "in %s", __func__);
        CHECK(gguf_get_str(f, "v.empty", &s, &err) == 1 && s.len == 0, "in %s", __func__);
        CHECK(gguf_get_uint(f, "v.u64", &u, &err) == 1 && u == UINT64_MAX, "in %s", __func__);
        CHECK(gguf_get_int(f, "v.u64", &i, &err) < 0 && strstr(err.msg, "v.u64"), "u64 too big");
        CHECK(gguf_get_int(f, "v.i64", &i, &err) == 1 && i == i64, "in %s", __func__);
        CHECK(gguf_get_float(f, "v.f64", &d, &err) == 1 && d == f64, "in %s", __func__);
        CHECK(gguf_get_float(f, "v.i64", &d, &err) < 0 && strstr(err.msg, "i64"),
              "in %s", __func__);
        CHECK(gguf_get_uint(f, "a.u8", &u, &err) < 0 && strstr(err.msg, "array of u8"), "%s", err.msg);
        CHECK(gguf_arr_f64(&f->kv[gguf_find_key(f, "v.f32")], 0) == 0.125, "in %s", __func__);
        CHECK(gguf_arr_i64(&f->kv[gguf_find_key(f, "v.i8")], 0) == -100, "in %s", __func__);
        CHECK(gguf_arr_i64(&f->kv[gguf_find_key(f, "v.u64")], 0) == INT64_MAX, "saturates");

        const struct gguf_kv *kv;
#define ARR_EQ(key, vt, arr)                                                                 \
        do {                                                                                 \
            kv = NULL;                                                                       \
            CHECK(gguf_get_arr(f, key, vt, &kv, &err) == 1, "%s", err.msg);                  \
            if (kv) {                                                                        \
                CHECK_EQ_INT(kv->arr_n, sizeof arr / sizeof arr[0]);                         \
                for (uint64_t k = 0; k < kv->arr_n && k < sizeof arr / sizeof arr[0]; k++) { \
                    CHECK(gguf_arr_f64(kv, k) == (double)arr[k], "%s[%d]", key, (int)k);     \
                    if (vt != GGUF_F32 && vt != GGUF_F64 && vt != GGUF_U64)                   \
                        CHECK(gguf_arr_i64(kv, k) == (int64_t)arr[k], "%s[%d]", key, (int)k); \
                }                                                                            \
            }                                                                                \
        } while (0)
        ARR_EQ("a.u8", GGUF_U8, au8);
        ARR_EQ("a.i8", GGUF_I8, ai8);
        ARR_EQ("a.u16", GGUF_U16, au16);
        ARR_EQ("a.i16", GGUF_I16, ai16);
        ARR_EQ("a.u32", GGUF_U32, au32);
        ARR_EQ("a.i32", GGUF_I32, ai32);
        ARR_EQ("a.f32", GGUF_F32, af32);
        ARR_EQ("a.bool", GGUF_BOOL, abool);
        ARR_EQ("a.u64", GGUF_U64, au64);
        ARR_EQ("a.i64", GGUF_I64, ai64);
        ARR_EQ("a.f64", GGUF_F64, af64);
#undef ARR_EQ
        CHECK(gguf_get_arr(f, "a.none", GGUF_U32, &kv, &err) == 1 && kv->arr_n == 0,
              "in %s", __func__);
        CHECK(gguf_get_arr(f, "a.str0", GGUF_STRING, &kv, &err) == 1 && kv->arr_n == 0,
              "in %s", __func__);
        CHECK(gguf_get_arr(f, "a.str", GGUF_STRING, &kv, &err) == 1 && kv->arr_n == 4,
              "in %s", __func__);
        for (int k = 0; k < 4 && kv->arr_n == 4; k++)
            CHECK(kv->strs[k].len == strs[k].len && memcmp(kv->strs[k].ptr, strs[k].ptr, strs[k].len) == 0,
                  "a.str[%d]", k);

        CHECK_EQ_INT(f->data_offset % 64, 0);
        for (size_t k = 0; k < N_TENSORS; k++) {
            const struct tspec *ts = &tensors[k];
            const struct gguf_tensor_info *t = gguf_find_tensor(f, ts->name);
            CHECK(t != NULL, "%s", ts->name);
            if (!t)
                continue;
            CHECK(t == &f->tensors[k], "tensor order follows calls");
            CHECK_EQ_INT(t->type, ts->type);
            CHECK_EQ_INT(t->n_dims, ts->n_dims);
            for (uint32_t dd = 0; dd < 4; dd++)
                CHECK_EQ_INT(t->ne[dd], dd < ts->n_dims ? ts->ne[dd] : 1);
            CHECK_EQ_INT(t->nbytes, spec_bytes(ts));
            CHECK_EQ_INT(t->offset % 64, 0);
            CHECK(memcmp(t->data, data[k], t->nbytes) == 0, "%s data", ts->name);
        }
        CHECK_EQ_INT(f->size % 64, 0);
        gguf_close(f);
    }
    for (size_t k = 0; k < N_TENSORS; k++)
        free(data[k]);
}

/* Copying every entry and tensor of stories260K gives the same metadata and data; since llama.cpp
 * lays files out the same way, the bytes are identical too. */
static void test_copy_stories(void)
{
    struct gguf_file *src = open_fixture("models/stories260K.gguf");
    if (!src)
        return;
    struct gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < src->n_kv; i++)
        gguf_writer_copy_kv(w, &src->kv[i]);
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const struct gguf_tensor_info *t = &src->tensors[i];
        char name[GGUF_MAX_NAME + 1];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
    }
    struct llm_error err = { 0 };
    const char *path = tmp_file("copy.gguf");
    CHECK(gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);

    struct gguf_file *f = NULL;
    CHECK(gguf_open(path, &f, &err) == 0, "%s", err.msg);
    if (f) {
        CHECK_EQ_INT(f->n_kv, src->n_kv);
        for (uint64_t i = 0; i < f->n_kv && i < src->n_kv; i++) {
            const struct gguf_kv *a = &src->kv[i], *b = &f->kv[i];
            CHECK(a->key.len == b->key.len && memcmp(a->key.ptr, b->key.ptr, a->key.len) == 0,
                  "in %s", __func__);
            CHECK(a->type == b->type && a->arr_type == b->arr_type && a->arr_n == b->arr_n,
                  "in %s", __func__);
            uint64_t end_a = i + 1 < src->n_kv ? src->kv[i + 1].offset : 0;
            uint64_t end_b = i + 1 < f->n_kv ? f->kv[i + 1].offset : 0;
            if (end_a && end_b)
                CHECK(end_a - a->offset == end_b - b->offset &&
                      memcmp(src->base + a->offset, f->base + b->offset, end_a - a->offset) == 0,
                      "entry %" PRIu64 " bytes", i);
            if (a->strs && b->strs)
                for (uint64_t k = 0; k < a->arr_n; k++)
                    CHECK(a->strs[k].len == b->strs[k].len, "string %" PRIu64, k);
        }
        CHECK_EQ_INT(f->n_tensors, src->n_tensors);
        for (uint64_t i = 0; i < f->n_tensors && i < src->n_tensors; i++) {
            const struct gguf_tensor_info *a = &src->tensors[i], *b = &f->tensors[i];
            CHECK(a->type == b->type && a->nbytes == b->nbytes && a->offset == b->offset &&
                  memcmp(a->ne, b->ne, sizeof a->ne) == 0 && memcmp(a->data, b->data, a->nbytes) == 0,
                  "tensor %" PRIu64, i);
        }
        CHECK(f->size == src->size && memcmp(f->base, src->base, f->size) == 0, "byte-identical copy");
        gguf_close(f);
    }
    gguf_close(src);
}

static bool tmp_has_leftovers(void)
{
    DIR *d = opendir(tmpdir);
    bool found = false;
    struct dirent *de;
    while (d && (de = readdir(d)))
        found = found || strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return found;
}

static void expect_write_fails(struct gguf_writer *w, const char *name, const char *want)
{
    struct llm_error err = { 0 };
    const char *path = tmp_file(name);
    CHECK(gguf_writer_write(w, path, &err) != 0, "%s: write succeeded", name);
    CHECK(strstr(err.msg, want) != NULL, "%s: message '%s' lacks '%s'", name, err.msg, want);
    CHECK(access(path, F_OK) != 0, "%s: file left behind", name);
    CHECK(!tmp_has_leftovers(), "%s: temporary file left behind", name);
    gguf_writer_free(w);
}

static void test_writer_errors(void)
{
    static const float x[64];
    const int64_t ne[2] = { 4, 2 }, ne_q[1] = { 48 };
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_add_u32(w, "k.dup", 1);
    gguf_writer_add_str(w, "k.dup", "again");
    expect_write_fails(w, "dupkey.gguf", "k.dup");

    w = gguf_writer_new();
    gguf_writer_add_tensor(w, "t.dup", LLM_TYPE_F32, 2, ne, x);
    gguf_writer_add_tensor(w, "t.dup", LLM_TYPE_F32, 2, ne, x);
    expect_write_fails(w, "duptensor.gguf", "t.dup");

    w = gguf_writer_new();
    gguf_writer_add_tensor(w, "t.q", LLM_TYPE_Q8_0, 1, ne_q, x);
    expect_write_fails(w, "block.gguf", "t.q");

    w = gguf_writer_new();
    gguf_writer_add_tensor(w, "t.bad", (enum llm_type)4, 1, ne, x);
    expect_write_fails(w, "type4.gguf", "t.bad");

    w = gguf_writer_new();
    gguf_writer_set_alignment(w, 48);
    expect_write_fails(w, "align48.gguf", "alignment");

    w = gguf_writer_new();
    gguf_writer_add_str(w, "general.alignment", "32");
    expect_write_fails(w, "alignstr.gguf", "alignment");

    w = gguf_writer_new();
    gguf_writer_add_u32(w, "k", 1);
    expect_write_fails(w, "no/such/dir.gguf", "no/such/dir.gguf");

    /* vocab-only: no tensors, no padding, data_offset == size */
    w = gguf_writer_new();
    gguf_writer_add_str(w, "general.architecture", "x");
    struct llm_error err = { 0 };
    CHECK(gguf_writer_write(w, tmp_file("vocab.gguf"), &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    struct gguf_file *f = NULL;
    CHECK(gguf_open(tmp_file("vocab.gguf"), &f, &err) == 0, "%s", err.msg);
    if (f) {
        CHECK(f->n_tensors == 0 && f->data_offset == f->size && f->size == 24 + 8 + 20 + 4 + 8 + 1,
              "in %s", __func__);
        gguf_close(f);
    }
}

/* ---- (c) corrupted files ----------------------------------------------------------------- */

static uint8_t *base_buf;
static size_t base_n;
static struct gguf_file *base; /* parsed base_buf, for field positions */

static void make_base(void)
{
    static float t0[8], t2[3];
    static uint8_t t1[2 * 34], t3[10];
    const uint32_t arr[] = { 1, 2, 3 };
    const struct gguf_str strs[] = { { "ab", 2 }, { "cde", 3 } };
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_add_str(w, "general.architecture", "test");
    gguf_writer_set_alignment(w, 32);
    gguf_writer_add_arr(w, "a.arr", GGUF_U32, arr, 3);
    gguf_writer_add_arr_str(w, "a.strs", strs, 2);
    gguf_writer_add_u32(w, "dup.1", 1);
    gguf_writer_add_u32(w, "dup.2", 2);
    gguf_writer_add_u64(w, "a.u64", 7);
    gguf_writer_add_tensor(w, "t0", LLM_TYPE_F32, 2, (const int64_t[]){ 4, 2 }, t0);
    gguf_writer_add_tensor(w, "t1", LLM_TYPE_Q8_0, 2, (const int64_t[]){ 32, 2 }, t1);
    gguf_writer_add_tensor(w, "t2", LLM_TYPE_F32, 1, (const int64_t[]){ 3 }, t2);
    gguf_writer_add_tensor(w, "t3", LLM_TYPE_F16, 1, (const int64_t[]){ 5 }, t3);
    struct llm_error err = { 0 };
    CHECK(gguf_writer_write(w, tmp_file("base.gguf"), &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    base_buf = (uint8_t *)test_read_file(tmp_file("base.gguf"), &base_n);
    CHECK(base_buf != NULL, "in %s", __func__);
    CHECK(base_buf && gguf_parse(base_buf, base_n, "base.gguf", &base, &err) == 0, "%s", err.msg);
}

/* Parses an exact-size heap copy (so ASan sees any read past the end); expects failure with a
 * message containing each of the `want` strings. */
static void expect_fail(const uint8_t *buf, size_t n, const char *label, const char *want1,
                        const char *want2)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, buf, n);
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    int rc = gguf_parse(copy, n, label, &f, &err);
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "%s\n", err.msg);
    CHECK(rc != 0 && f == NULL, "%s: parse succeeded", label);
    CHECK(err.msg[0] != '\0' && strstr(err.msg, label) && strstr(err.msg, "offset"), "%s: message '%s'",
          label, err.msg);
    if (want1)
        CHECK(strstr(err.msg, want1) != NULL, "%s: message '%s' lacks '%s'", label, err.msg, want1);
    if (want2)
        CHECK(strstr(err.msg, want2) != NULL, "%s: message '%s' lacks '%s'", label, err.msg, want2);
    gguf_close(f);
    free(copy);
}

static uint8_t *dup_base(void)
{
    uint8_t *b = malloc(base_n);
    memcpy(b, base_buf, base_n);
    return b;
}

static void put32(uint8_t *b, uint64_t off, uint32_t v) { memcpy(b + off, &v, 4); }
static void put64(uint8_t *b, uint64_t off, uint64_t v) { memcpy(b + off, &v, 8); }

static const struct gguf_kv *bkv(const char *key)
{
    return &base->kv[gguf_find_key(base, key)];
}

static uint64_t value_pos(const char *key) /* first byte after the type (array header for arrays) */
{
    const struct gguf_kv *kv = bkv(key);
    return kv->offset + 8 + kv->key.len + 4;
}

/* Positions of the fields of a tensor info in base_buf. */
struct tpos {
    uint64_t name, n_dims, dims, type, offset;
};

static struct tpos tensor_pos(const char *name)
{
    const struct gguf_tensor_info *t = gguf_find_tensor(base, name);
    struct tpos p;
    p.name = (uint64_t)((const uint8_t *)t->name.ptr - base->base) - 8;
    p.n_dims = p.name + 8 + t->name.len;
    p.dims = p.n_dims + 4;
    p.type = p.dims + 8 * t->n_dims;
    p.offset = p.type + 4;
    return p;
}

/* One patch of a u32 or u64 field in a copy of the base, then expect failure. */
static void patch_fail(const char *label, uint64_t off, int width, uint64_t v, const char *want1,
                       const char *want2)
{
    uint8_t *b = dup_base();
    if (width == 4)
        put32(b, off, (uint32_t)v);
    else
        put64(b, off, v);
    expect_fail(b, base_n, label, want1, want2);
    free(b);
}

/* Small hand-built files for what the writer refuses to produce. */
struct bb {
    uint8_t b[512];
    size_t n;
};

static void bb_put(struct bb *b, const void *p, size_t n) { memcpy(b->b + b->n, p, n); b->n += n; }
static void bb_u32(struct bb *b, uint32_t v) { bb_put(b, &v, 4); }
static void bb_u64(struct bb *b, uint64_t v) { bb_put(b, &v, 8); }
static void bb_str(struct bb *b, const char *s) { bb_u64(b, strlen(s)); bb_put(b, s, strlen(s)); }
static void bb_header(struct bb *b, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    bb_put(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}

static void test_truncations(void)
{
    int failed_ok = 0, total = 0;
    for (size_t n = 0; n < base->data_offset; n++, total++) {
        struct gguf_file *f = NULL;
        struct llm_error err = { 0 };
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, base_buf, n);
        if (gguf_parse(copy, n, "cut.gguf", &f, &err) != 0 && err.msg[0] && strstr(err.msg, "cut.gguf"))
            failed_ok++;
        else
            fprintf(stderr, "truncation at %zu: %s\n", n, f ? "accepted" : err.msg);
        gguf_close(f);
        free(copy);
    }
    CHECK(failed_ok == total, "%d of %d truncations rejected", failed_ok, total);

    /* points of interest, with the messages they must give */
    /* With the real counts, cuts inside the metadata are already caught by the count check; with
     * the counts lowered to one entry the cut reaches the string reader. */
    uint8_t *b = dup_base();
    put64(b, 8, 0);
    put64(b, 16, 1);
    const struct gguf_kv *arch = bkv("general.architecture");
    expect_fail(b, arch->offset + 8 + 10, "cut-key.gguf", "metadata entry 0", "key of 20 bytes");
    expect_fail(b, value_pos("general.architecture") + 10, "cut-str.gguf", "general.architecture",
                "past end");
    free(b);
    expect_fail(base_buf, arch->offset + 12, "cut-count.gguf", "metadata count", NULL);
    struct tpos p = tensor_pos("t1");
    expect_fail(base_buf, p.dims + 4, "cut-info.gguf", "t1", "dimension");
    expect_fail(base_buf, p.offset + 3, "cut-off.gguf", "t1", NULL);
    const struct gguf_tensor_info *t3 = gguf_find_tensor(base, "t3");
    expect_fail(base_buf, base->data_offset, "cut-data.gguf", "t0", "past end of file");
    expect_fail(base_buf, base->data_offset + t3->offset + t3->nbytes - 1, "cut-last.gguf", "t3",
                "past end of file");
    uint64_t end_infos = tensor_pos("t3").offset + 8;
    expect_fail(base_buf, end_infos + 1, "cut-pad.gguf", "data section", NULL);
}

static void test_header_cases(void)
{
    patch_fail("magic.gguf", 0, 4, 0x46554746, "magic", NULL);
    patch_fail("v1.gguf", 4, 4, 1, "version 1", NULL);
    patch_fail("v4.gguf", 4, 4, 4, "version 4", NULL);
    patch_fail("v0.gguf", 4, 4, 0, "version 0", NULL);
    patch_fail("swapped.gguf", 4, 4, 0x03000000, "big-endian", NULL);
    patch_fail("kvcount.gguf", 16, 8, 1ull << 60, "metadata count", NULL);
    patch_fail("kvcount2.gguf", 16, 8, UINT64_MAX, "metadata count", NULL);
    patch_fail("tcount.gguf", 8, 8, 1ull << 59, "tensor count", NULL);
    patch_fail("tcount2.gguf", 8, 8, base_n / 24, "tensor count", NULL);
    expect_fail(base_buf, 0, "empty.gguf", "magic", NULL);
    expect_fail(base_buf, 3, "tiny.gguf", "magic", NULL);

    /* v2 has the same layout for what we read: accepted */
    uint8_t *b = dup_base();
    put32(b, 4, 2);
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    CHECK(gguf_parse(b, base_n, "v2.gguf", &f, &err) == 0 && f->version == 2, "%s", err.msg);
    gguf_close(f);
    free(b);
}

static void test_kv_cases(void)
{
    const struct gguf_kv *arch = bkv("general.architecture");
    patch_fail("keylen.gguf", arch->offset, 8, 1ull << 63, "key", "past end");
    patch_fail("keylen2.gguf", arch->offset, 8, base_n, "key", "past end");
    uint64_t v = value_pos("general.architecture");
    patch_fail("strlen.gguf", v, 8, UINT64_MAX, "general.architecture", "past end");
    patch_fail("strlen2.gguf", v, 8, base_n - v - 8 + 1, "general.architecture", "past end");
    patch_fail("vtype.gguf", v - 4, 4, 13, "general.architecture", "unknown value type 13");
    patch_fail("vtype2.gguf", value_pos("a.u64") - 4, 4, 0xFFFFFFFF, "a.u64", "unknown value type");
    uint64_t a = value_pos("a.arr");
    patch_fail("nested.gguf", a, 4, GGUF_ARRAY, "a.arr", "nested");
    patch_fail("elemtype.gguf", a, 4, 13, "a.arr", "element type");
    patch_fail("arrcount.gguf", a + 4, 8, 1ull << 62, "a.arr", "past end");
    patch_fail("arrcount2.gguf", a + 4, 8, UINT64_MAX / 2, "a.arr", "past end");
    uint64_t s = value_pos("a.strs");
    patch_fail("strcount.gguf", s + 4, 8, 1ull << 61, "a.strs", "strings");
    patch_fail("strcount2.gguf", s + 4, 8, 100000, "a.strs", NULL);
    patch_fail("arrstr.gguf", s + 12 + 10, 8, 1ull << 40, "a.strs", "past end");

    /* duplicate key: "dup.2" becomes "dup.1" */
    uint8_t *b = dup_base();
    b[bkv("dup.2")->offset + 8 + 4] = '1';
    expect_fail(b, base_n, "dupkey.gguf", "'dup.1'", "duplicate key");
    free(b);
    b = dup_base();
    b[bkv("dup.2")->offset + 8 + 3] = '\0';
    expect_fail(b, base_n, "nulkey.gguf", "dup\\x002", "NUL");
    free(b);

    const struct gguf_kv *al = bkv("general.alignment");
    uint64_t av = value_pos("general.alignment");
    patch_fail("align0.gguf", av, 4, 0, "general.alignment", "power of two");
    patch_fail("align48.gguf", av, 4, 48, "general.alignment", "power of two");
    patch_fail("aligntype.gguf", al->offset + 8 + al->key.len, 4, GGUF_I32, "general.alignment", "u32");

    struct bb bb;
    bb_header(&bb, 0, 1);
    bb_str(&bb, "");
    bb_u32(&bb, GGUF_U32);
    bb_u32(&bb, 1);
    expect_fail(bb.b, bb.n, "emptykey.gguf", "empty key", NULL);

    /* vocab-only: metadata only, no padding, data_offset == size */
    bb_header(&bb, 0, 2);
    bb_str(&bb, "general.architecture");
    bb_u32(&bb, GGUF_STRING);
    bb_str(&bb, "llama");
    bb_str(&bb, "b");
    bb_u32(&bb, GGUF_BOOL);
    bb_put(&bb, "\1", 1);
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    CHECK(gguf_parse(bb.b, bb.n, "vocab.gguf", &f, &err) == 0, "%s", err.msg);
    if (f) {
        CHECK(f->data_offset == bb.n && f->n_kv == 2, "in %s", __func__);
        gguf_close(f);
    }
}

static void test_tensor_cases(void)
{
    struct tpos p0 = tensor_pos("t0"), p1 = tensor_pos("t1"), p2 = tensor_pos("t2");
    uint8_t *b = dup_base();
    b[p1.name + 8 + 1] = '0';
    expect_fail(b, base_n, "duptensor.gguf", "'t0'", "duplicate tensor");
    free(b);
    b = dup_base();
    b[p1.name + 8 + 1] = '\0';
    expect_fail(b, base_n, "nulname.gguf", "t\\x00", "NUL");
    free(b);

    patch_fail("ndims.gguf", p1.n_dims, 4, 5, "t1", "n_dims");
    patch_fail("type4.gguf", p0.type, 4, 4, "t0", "unknown tensor type id 4");
    patch_fail("type31.gguf", p0.type, 4, 31, "t0", "type id 31");
    patch_fail("type99.gguf", p0.type, 4, 99, "t0", "type id 99");
    patch_fail("typebig.gguf", p0.type, 4, 0x80000000u, "t0", "type id");
    patch_fail("block.gguf", p1.dims, 8, 48, "t1", "block size");
    patch_fail("negdim.gguf", p0.dims + 8, 8, 1ull << 63, "t0", "negative");
    patch_fail("namelen.gguf", p0.name, 8, 1ull << 50, "tensor", "past end");
    b = dup_base();
    put64(b, p1.dims, 1ull << 32);
    put64(b, p1.dims + 8, 1ull << 32);
    expect_fail(b, base_n, "overflow.gguf", "t1", "overflow");
    put64(b, p1.dims, 0);
    put64(b, p1.dims + 8, 1ull << 62);
    /* 0 elements is fine, but then t2 no longer follows t1 back to back */
    expect_fail(b, base_n, "overflow0.gguf", "t2", "expected");
    free(b);
    patch_fail("bytes.gguf", p0.dims, 8, 1ull << 61, "t0", "overflow"); /* 2^62 F32 = 2^64 bytes */

    const struct gguf_tensor_info *t1 = gguf_find_tensor(base, "t1");
    const struct gguf_tensor_info *t2 = gguf_find_tensor(base, "t2");
    patch_fail("misaligned.gguf", p1.offset, 8, t1->offset + 4, "t1", "alignment");
    patch_fail("overlap.gguf", p2.offset, 8, t1->offset, "t2", "expected");
    patch_fail("gap.gguf", p2.offset, 8, t2->offset + 32, "t2", "expected");
    patch_fail("hugeoff.gguf", p2.offset, 8, UINT64_MAX - 31, "t2", "expected");
    b = dup_base();
    put64(b, p1.offset, t2->offset);
    put64(b, p2.offset, t1->offset);
    expect_fail(b, base_n, "order.gguf", "t1", "in order");
    free(b);

    /* a real element count whose data cannot be in the file */
    patch_fail("pastend.gguf", tensor_pos("t3").dims, 8, 1ull << 20, "t3", "past end of file");

    struct bb bb;
    bb_header(&bb, 1, 0);
    bb_str(&bb, "a_name_that_is_exactly_sixty_five_bytes_long_0123456789abcdefghij");
    bb_u32(&bb, 1);
    bb_u64(&bb, 1);
    bb_u32(&bb, 0);
    bb_u64(&bb, 0);
    expect_fail(bb.b, bb.n, "longname.gguf", "65 bytes", NULL);
}

static void test_open_errors(void)
{
    struct gguf_file *f = NULL;
    struct llm_error err = { 0 };
    CHECK(gguf_open(tmp_file("missing.gguf"), &f, &err) == LLM_ERR_IO && f == NULL,
          "in %s", __func__);
    CHECK(strstr(err.msg, "missing.gguf") != NULL, "%s", err.msg);
    CHECK(gguf_open(tmpdir, &f, &err) != 0 && f == NULL, "in %s", __func__);
    CHECK(strstr(err.msg, tmpdir) != NULL && strstr(err.msg, "regular"), "%s", err.msg);
    FILE *fp = fopen(tmp_file("zero.gguf"), "wb");
    if (fp)
        fclose(fp);
    CHECK(gguf_open(tmp_file("zero.gguf"), &f, &err) != 0 && f == NULL, "in %s", __func__);
    CHECK(strstr(err.msg, "zero.gguf") != NULL, "%s", err.msg);
}

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            unlink(tmp_file(de->d_name));
    if (d)
        closedir(d);
    rmdir(tmpdir);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_gguf.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fixtures();
    test_roundtrip();
    test_copy_stories();
    test_writer_errors();
    make_base();
    if (base) {
        test_truncations();
        test_header_cases();
        test_kv_cases();
        test_tensor_cases();
    }
    test_open_errors();
    gguf_close(base);
    free(base_buf);
    remove_tmpdir();
    return test_done("test_gguf");
}
