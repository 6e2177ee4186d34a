/* Writes a tiny GGUF seed for the fuzzer: one entry of every value type and a few tensor types. */
#include "model/gguf.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: seed_gguf OUT.gguf\n");
        return 2;
    }
    static unsigned char data[2 * 144];
    const uint8_t u8 = 7;
    const int8_t i8 = -7;
    const uint16_t u16 = 700;
    const int16_t i16 = -700;
    const int64_t i64 = -70000;
    const double f64 = 0.5;
    const uint32_t au32[] = { 1, 2, 3 };
    const struct gguf_str strs[] = { { "a", 1 }, { "bc", 2 }, { "", 0 } };
    struct gguf_writer *w = gguf_writer_new();
    if (!w)
        return 1;
    gguf_writer_add_str(w, "general.architecture", "llama");
    gguf_writer_set_alignment(w, 16);
    gguf_writer_add_scalar(w, "u8", GGUF_U8, &u8);
    gguf_writer_add_scalar(w, "i8", GGUF_I8, &i8);
    gguf_writer_add_scalar(w, "u16", GGUF_U16, &u16);
    gguf_writer_add_scalar(w, "i16", GGUF_I16, &i16);
    gguf_writer_add_u32(w, "u32", 70);
    gguf_writer_add_i32(w, "i32", -70);
    gguf_writer_add_f32(w, "f32", 1.5f);
    gguf_writer_add_bool(w, "bool", true);
    gguf_writer_add_u64(w, "u64", 1u << 20);
    gguf_writer_add_scalar(w, "i64", GGUF_I64, &i64);
    gguf_writer_add_scalar(w, "f64", GGUF_F64, &f64);
    gguf_writer_add_arr(w, "arr", GGUF_U32, au32, 3);
    gguf_writer_add_arr_str(w, "strs", strs, 3);
    gguf_writer_add_tensor(w, "a", LLM_TYPE_F32, 2, (const int64_t[]){ 3, 2 }, data);
    gguf_writer_add_tensor(w, "b", LLM_TYPE_Q8_0, 1, (const int64_t[]){ 32 }, data);
    gguf_writer_add_tensor(w, "c", LLM_TYPE_Q4_K, 2, (const int64_t[]){ 256, 2 }, data);
    struct llm_error err;
    int rc = gguf_writer_write(w, argv[1], &err);
    gguf_writer_free(w);
    if (rc)
        fprintf(stderr, "seed_gguf: %s\n", err.msg);
    return rc ? 1 : 0;
}
