/* llm info: a GGUF file's header, metadata, tensors and, for llama/qwen2 models, the
 * hyper-parameters and llama-bench's model/size/params, as text or one JSON object. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <argtable2.h>
#include <cjson/cJSON.h>

#include "commands.h"
#include "model/gguf.h"
#include "model/model.h"

#define ARR_SHOWN 3     /* arrays longer than ARR_FULL show their first ARR_SHOWN items */
#define ARR_FULL 8
#define STR_SHOWN 100   /* text output cuts longer strings */

/* ---- scalar values ----------------------------------------------------------------------------- */

static struct gguf_str str_at(const uint8_t *p)
{
    struct gguf_str s;
    memcpy(&s.len, p, sizeof s.len);
    s.ptr = (const char *)p + sizeof s.len;
    return s;
}

/* Element i of kv (the value itself for scalars): pointer to its bytes, or the string view. */
static const uint8_t *elem_ptr(const struct gguf_kv *kv, uint64_t i)
{
    if (kv->type != GGUF_ARRAY)
        return kv->value;
    return kv->value + i * gguf_vtype_size(kv->arr_type);
}

static struct gguf_str elem_str(const struct gguf_kv *kv, uint64_t i)
{
    return kv->type == GGUF_ARRAY ? kv->strs[i] : str_at(kv->value);
}

/* Shortest %g that reads back as the same float. */
static void fmt_float(char *buf, size_t cap, double v, bool is_f32)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (is_f32 ? (float)back == (float)v : back == v)
            return;
    }
}

static void fmt_number(char *buf, size_t cap, enum gguf_vtype t, const uint8_t *p)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32;
            uint64_t u64; int64_t i64; double f64; } v;
    memcpy(&v, p, gguf_vtype_size(t));
    switch (t) {
    case GGUF_U8: snprintf(buf, cap, "%u", v.u8); break;
    case GGUF_I8: snprintf(buf, cap, "%d", v.i8); break;
    case GGUF_U16: snprintf(buf, cap, "%u", v.u16); break;
    case GGUF_I16: snprintf(buf, cap, "%d", v.i16); break;
    case GGUF_U32: snprintf(buf, cap, "%" PRIu32, v.u32); break;
    case GGUF_I32: snprintf(buf, cap, "%" PRId32, v.i32); break;
    case GGUF_U64: snprintf(buf, cap, "%" PRIu64, v.u64); break;
    case GGUF_I64: snprintf(buf, cap, "%" PRId64, v.i64); break;
    case GGUF_F32: fmt_float(buf, cap, v.f32, true); break;
    case GGUF_F64: fmt_float(buf, cap, v.f64, false); break;
    case GGUF_BOOL: snprintf(buf, cap, "%s", v.u8 ? "true" : "false"); break;
    default: snprintf(buf, cap, "?"); break;
    }
}

/* ---- text output ------------------------------------------------------------------------------- */

/* A file's string between double quotes, escaped (controls, quotes, bytes that are not UTF-8), cut
 * after max bytes with its full length. */
static void print_quoted(FILE *out, struct gguf_str s, uint64_t max)
{
    size_t n = s.len < max ? (size_t)s.len : (size_t)max;
    size_t cap = 4 * n + 8;
    char *buf = malloc(cap);
    fputc('"', out);
    if (buf) {
        llm_escape(buf, cap, s.ptr, n, n, LLM_ESC_QUOTES);
        fputs(buf, out);
        free(buf);
    }
    fputc('"', out);
    if (n < s.len)
        fprintf(out, "... (%" PRIu64 " bytes)", s.len);
}

/* A key or tensor name for a table cell: escaped, so no file can break the table's lines. */
static const char *cell(char *buf, size_t cap, struct gguf_str s)
{
    llm_escape(buf, cap, s.ptr, (size_t)s.len, 200, 0);
    return buf;
}

static void print_elem(FILE *out, const struct gguf_kv *kv, enum gguf_vtype t, uint64_t i)
{
    if (t == GGUF_STRING) {
        print_quoted(out, elem_str(kv, i), STR_SHOWN);
    } else {
        char buf[64];
        fmt_number(buf, sizeof buf, t, elem_ptr(kv, i));
        fputs(buf, out);
    }
}

static void print_kv(FILE *out, const struct gguf_kv *kv)
{
    char type[32];
    if (kv->type == GGUF_ARRAY)
        snprintf(type, sizeof type, "arr[%s,%" PRIu64 "]", gguf_vtype_name(kv->arr_type), kv->arr_n);
    else
        snprintf(type, sizeof type, "%s", gguf_vtype_name(kv->type));
    char key[1024];
    fprintf(out, "  %-44s %-18s ", cell(key, sizeof key, kv->key), type);
    if (kv->type != GGUF_ARRAY) {
        print_elem(out, kv, kv->type, 0);
    } else if (kv->arr_type == GGUF_ARRAY) {
        fputs("[...]", out); /* nested arrays: not shown */
    } else {
        uint64_t shown = kv->arr_n <= ARR_FULL ? kv->arr_n : ARR_SHOWN;
        fputc('[', out);
        for (uint64_t i = 0; i < shown; i++) {
            if (i)
                fputs(", ", out);
            print_elem(out, kv, kv->arr_type, i);
        }
        if (shown < kv->arr_n)
            fprintf(out, ", ... %" PRIu64 " items", kv->arr_n);
        fputc(']', out);
    }
    fputc('\n', out);
}

static void shape_text(const struct gguf_tensor_info *ti, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    uint32_t nd = ti->n_dims ? ti->n_dims : 1;
    for (uint32_t d = 0; d < nd && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, d ? ", " : "", ti->ne[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

static void print_hparams(FILE *out, const struct llm_model *m)
{
    const struct llm_hparams *hp = &m->hp;
    fprintf(out, "hyper-parameters:\n");
    fprintf(out, "  %-16s %s\n", "arch", llm_arch_name(hp->arch));
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_ctx_train", hp->n_ctx_train);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_embd", hp->n_embd);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_layer", hp->n_layer);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_ff", hp->n_ff);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_head", hp->n_head);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_head_kv", hp->n_head_kv);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_embd_head", hp->n_embd_head_k);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_rot", hp->n_rot);
    fprintf(out, "  %-16s %" PRIu32 "\n", "n_vocab", hp->n_vocab);
    fprintf(out, "  %-16s %g\n", "rms_norm_eps", (double)hp->f_norm_rms_eps);
    fprintf(out, "  %-16s %g\n", "rope_freq_base", (double)hp->rope_freq_base);
    fprintf(out, "  %-16s %g\n", "rope_freq_scale", (double)hp->rope_freq_scale);
    fprintf(out, "  %-16s %s\n", "rope_type", hp->rope_type == LLM_ROPE_NEOX ? "NEOX" : "NORMAL");
    fprintf(out, "  %-16s %s\n", "tied_output", m->output == m->tok_embd ? "yes" : "no");
    fprintf(out, "  %-16s %s\n", "qkv_bias", m->layers[0].bq ? "yes" : "no");
    fprintf(out, "  %-16s %s, %" PRId32 " tokens, bos %" PRId32 ", eos %" PRId32 "\n", "vocab",
            vocab_kind(m->vocab) == VOCAB_SPM ? "SPM" : "BPE", vocab_n_tokens(m->vocab),
            vocab_bos(m->vocab), vocab_eos(m->vocab));
    fprintf(out, "  %-16s %" PRIu64 "\n", "bytes", m->n_bytes);
    fprintf(out, "  %-16s %" PRIu64 "\n", "params", m->n_params);
    char size[32], params[32];
    llm_format_size(m->n_bytes, size, sizeof size);
    llm_format_params(m->n_params, params, sizeof params);
    fprintf(out, "model: %s, size: %s, params: %s\n", m->desc, size, params);
}

static void print_text(FILE *out, const struct gguf_file *f, const struct llm_model *m,
                       const char *note)
{
    char path[1024];
    fprintf(out, "file: %s\n", cell(path, sizeof path, (struct gguf_str){ f->path, strlen(f->path) }));
    fprintf(out, "GGUF v%" PRIu32 ", alignment %" PRIu32 ", %" PRIu64 " metadata entries, %" PRIu64
            " tensors, data at offset %" PRIu64 ", file size %zu\n", f->version, f->alignment,
            f->n_kv, f->n_tensors, f->data_offset, f->size);
    fprintf(out, "metadata:\n");
    for (uint64_t i = 0; i < f->n_kv; i++)
        print_kv(out, &f->kv[i]);
    fprintf(out, "tensors:\n");
    if (f->n_tensors)
        fprintf(out, "  %5s  %-32s %-6s %-22s %12s %12s\n", "#", "name", "type", "shape", "offset",
                "bytes");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor_info *ti = &f->tensors[i];
        char shape[96];
        shape_text(ti, shape, sizeof shape);
        char name[1024];
        fprintf(out, "  %5" PRIu64 "  %-32s %-6s %-22s %12" PRIu64 " %12" PRIu64 "\n", i,
                cell(name, sizeof name, ti->name), llm_type_name(ti->type), shape, ti->offset, ti->nbytes);
    }
    char shown[4 * sizeof ((struct llm_error *)0)->msg + 8];
    if (m)
        print_hparams(out, m);
    else
        fprintf(out, "note: not a loadable llama/qwen2 model: %s\n",
                (llm_escape(shown, sizeof shown, note, strlen(note), strlen(note), 0), shown));
}

/* ---- JSON output ------------------------------------------------------------------------------- */

/* cJSON wants NUL-terminated UTF-8: copy, replacing bytes of invalid sequences with U+FFFD. */
static cJSON *json_str(struct gguf_str s)
{
    char *buf = malloc(s.len * 3 + 1);
    if (!buf)
        return NULL;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s.ptr;
    for (uint64_t i = 0; i < s.len;) {
        unsigned c = p[i];
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && i + (uint64_t)n <= s.len && c != 0;
        for (int k = 1; ok && k < n; k++)
            ok = (p[i + k] & 0xC0) == 0x80;
        if (ok) {
            memcpy(buf + o, p + i, (size_t)n);
            o += (size_t)n;
            i += (uint64_t)n;
        } else {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    buf[o] = '\0';
    cJSON *j = cJSON_CreateString(buf);
    free(buf);
    return j;
}

/* cJSON escapes C0 controls only: give the C1 controls, the line separators and the bidi overrides
 * (all inside strings: JSON's own syntax is ASCII) their \u escapes too, so the text stays inert on
 * a terminal and decodes to the same string. */
static char *json_inert(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned cp = 0;
        size_t len = 0;
        if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) {
            cp = p[1];
            len = 2;
        } else if (p[0] == 0xE2 && p[1] == 0x80 && p[2] >= 0xA8 && p[2] <= 0xAE) {
            cp = 0x2000u + (p[2] - 0x80u);
            len = 3;
        } else if (p[0] == 0xE2 && p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9) {
            cp = 0x2040u + (p[2] - 0x80u);
            len = 3;
        }
        if (len) {
            o += sprintf(o, "\\u%04x", cp);
            p += len;
        } else {
            *o++ = (char)*p++;
        }
    }
    *o = '\0';
    return out;
}

static cJSON *json_elem(const struct gguf_kv *kv, enum gguf_vtype t, uint64_t i)
{
    if (t == GGUF_STRING)
        return json_str(elem_str(kv, i));
    if (t == GGUF_BOOL)
        return cJSON_CreateBool(elem_ptr(kv, i)[0] != 0);
    if (t == GGUF_U64) { /* beyond 2^53 a double is not exact: keep the digits */
        uint64_t v;
        memcpy(&v, elem_ptr(kv, i), 8);
        if (v > (1ull << 53)) {
            char buf[32];
            snprintf(buf, sizeof buf, "%" PRIu64, v);
            return cJSON_CreateString(buf);
        }
    }
    if (t == GGUF_F32 || t == GGUF_F64) { /* printed shortest, so 1e-05 stays 1e-05 */
        if (!isfinite(gguf_arr_f64(kv, i)))
            return cJSON_CreateNull();
        char buf[64];
        fmt_number(buf, sizeof buf, t, elem_ptr(kv, i));
        return cJSON_CreateRaw(buf);
    }
    return cJSON_CreateNumber((double)gguf_arr_i64(kv, i));
}

static cJSON *json_kv(const struct gguf_kv *kv)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "key", json_str(kv->key));
    cJSON_AddStringToObject(o, "type", gguf_vtype_name(kv->type));
    if (kv->type != GGUF_ARRAY) {
        cJSON_AddItemToObject(o, "value", json_elem(kv, kv->type, 0));
        return o;
    }
    cJSON_AddStringToObject(o, "elem_type", gguf_vtype_name(kv->arr_type));
    cJSON_AddNumberToObject(o, "count", (double)kv->arr_n);
    uint64_t shown = kv->arr_type == GGUF_ARRAY ? 0 : kv->arr_n <= ARR_FULL ? kv->arr_n : ARR_SHOWN;
    cJSON *vals = cJSON_AddArrayToObject(o, "values");
    for (uint64_t i = 0; i < shown; i++)
        cJSON_AddItemToArray(vals, json_elem(kv, kv->arr_type, i));
    cJSON_AddBoolToObject(o, "truncated", shown < kv->arr_n);
    return o;
}

static cJSON *json_hparams(const struct llm_model *m)
{
    const struct llm_hparams *hp = &m->hp;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "arch", llm_arch_name(hp->arch));
    cJSON_AddNumberToObject(o, "n_ctx_train", hp->n_ctx_train);
    cJSON_AddNumberToObject(o, "n_embd", hp->n_embd);
    cJSON_AddNumberToObject(o, "n_layer", hp->n_layer);
    cJSON_AddNumberToObject(o, "n_ff", hp->n_ff);
    cJSON_AddNumberToObject(o, "n_head", hp->n_head);
    cJSON_AddNumberToObject(o, "n_head_kv", hp->n_head_kv);
    cJSON_AddNumberToObject(o, "n_embd_head", hp->n_embd_head_k);
    cJSON_AddNumberToObject(o, "n_rot", hp->n_rot);
    cJSON_AddNumberToObject(o, "n_vocab", hp->n_vocab);
    cJSON_AddNumberToObject(o, "rms_norm_eps", hp->f_norm_rms_eps);
    cJSON_AddNumberToObject(o, "rope_freq_base", hp->rope_freq_base);
    cJSON_AddNumberToObject(o, "rope_freq_scale", hp->rope_freq_scale);
    cJSON_AddStringToObject(o, "rope_type", hp->rope_type == LLM_ROPE_NEOX ? "NEOX" : "NORMAL");
    cJSON_AddBoolToObject(o, "tied_output", m->output == m->tok_embd);
    cJSON_AddBoolToObject(o, "qkv_bias", m->layers[0].bq != NULL);
    cJSON_AddStringToObject(o, "vocab", vocab_kind(m->vocab) == VOCAB_SPM ? "SPM" : "BPE");
    cJSON_AddNumberToObject(o, "file_type", hp->file_type);
    return o;
}

static cJSON *json_info(const struct gguf_file *f, const struct llm_model *m, const char *note)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "file", f->path);
    cJSON_AddNumberToObject(root, "version", f->version);
    cJSON_AddNumberToObject(root, "alignment", f->alignment);
    cJSON_AddNumberToObject(root, "n_kv", (double)f->n_kv);
    cJSON_AddNumberToObject(root, "n_tensors", (double)f->n_tensors);
    cJSON_AddNumberToObject(root, "data_offset", (double)f->data_offset);
    cJSON_AddNumberToObject(root, "file_size", (double)f->size);
    cJSON *md = cJSON_AddArrayToObject(root, "metadata");
    for (uint64_t i = 0; i < f->n_kv; i++)
        cJSON_AddItemToArray(md, json_kv(&f->kv[i]));
    cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor_info *ti = &f->tensors[i];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddItemToObject(t, "name", json_str(ti->name));
        cJSON_AddStringToObject(t, "type", llm_type_name(ti->type));
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (uint32_t d = 0; d < (ti->n_dims ? ti->n_dims : 1); d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ti->ne[d]));
        cJSON_AddNumberToObject(t, "offset", (double)ti->offset);
        cJSON_AddNumberToObject(t, "bytes", (double)ti->nbytes);
        cJSON_AddItemToArray(ts, t);
    }
    if (m) {
        cJSON_AddItemToObject(root, "hparams", json_hparams(m));
        char size[32], params[32];
        llm_format_size(m->n_bytes, size, sizeof size);
        llm_format_params(m->n_params, params, sizeof params);
        cJSON_AddStringToObject(root, "model_type", m->desc);
        cJSON_AddNumberToObject(root, "model_size", (double)m->n_bytes);
        cJSON_AddNumberToObject(root, "model_n_params", (double)m->n_params);
        cJSON_AddStringToObject(root, "size", size);
        cJSON_AddStringToObject(root, "params", params);
    } else {
        cJSON_AddStringToObject(root, "note", note);
    }
    return root;
}

int cmd_info(int argc, char **argv)
{
    struct arg_lit *help = arg_lit0("h", "help", "show this help");
    struct arg_lit *json = arg_lit0(NULL, "json", "print one JSON object");
    struct arg_file *path = arg_file1(NULL, NULL, "MODEL", "GGUF file");
    struct arg_end *end = arg_end(10);
    void *table[] = { help, json, path, end };
    int rc = 1;
    struct gguf_file *f = NULL;
    struct llm_model *m = NULL;
    int pr = tool_parse_args(table, argc, argv, "Show a GGUF file: header, metadata, tensors, model.");
    if (pr != 0) {
        rc = pr > 0 ? 0 : 1;
        goto done;
    }
    struct llm_error err = { 0 };
    if (gguf_open(path->filename[0], &f, &err) != 0) {
        tool_error("%s", err.msg);
        goto done;
    }
    struct llm_error merr = { 0 };
    if (llm_model_load(path->filename[0], &m, &merr) != 0)
        m = NULL;
    if (json->count) {
        cJSON *root = json_info(f, m, merr.msg);
        char *s = cJSON_Print(root);
        cJSON_Delete(root);
        char *inert = s ? json_inert(s) : NULL;
        cJSON_free(s);
        if (!inert) {
            tool_error("out of memory");
            goto done;
        }
        puts(inert);
        free(inert);
    } else {
        print_text(stdout, f, m, merr.msg);
    }
    rc = 0;
done:
    llm_model_free(m);
    gguf_close(f);
    arg_freetable(table, sizeof table / sizeof table[0]);
    return rc;
}
