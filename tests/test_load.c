/* Issue 28: the load modes (llama-bench's -lm, llama-cli's --no-mmap, --mlock, -dio) each do what
 * they say, seen from outside: the bytes are the file's; mmap modes live in a mapping of the file and
 * the others in anonymous memory (/proc/self/maps); the mlock modes are locked (/proc/self/smaps);
 * O_DIRECT reads leave the page cache alone while plain reads fill it (mincore). */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "model/gguf.h"
#include "model/model.h"

/* The /proc/self/smaps entry holding addr: its path ("" when anonymous) and its Locked: kB. */
static bool find_mapping(const void *addr, char *path, size_t cap, long *locked_kb)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[4096];
    bool in = false, found = false;
    *locked_kb = -1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char name[4096] = "";
        const bool header = (line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f');
        if (header && sscanf(line, "%lx-%lx %*s %*s %*s %*s %4095[^\n]", &lo, &hi, name) >= 2) {
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            if (in) {
                snprintf(path, cap, "%s", name);
                found = true;
            }
        } else if (in && sscanf(line, "Locked: %ld kB", locked_kb) == 1) {
            in = false;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* VmLck of /proc/self/status: kB this process has locked, -1 when unknown. */
static long locked_total_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        sscanf(line, "VmLck: %ld kB", &kb);
    if (f)
        fclose(f);
    return kb;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

static void test_names(void)
{
    for (int m = 0; m < GGUF_LOAD_COUNT; m++)
        CHECK_EQ_INT(gguf_load_mode_parse(gguf_load_mode_name((enum gguf_load_mode)m)), m);
    CHECK_EQ_INT(gguf_load_mode_parse("auto"), GGUF_LOAD_MMAP);
    CHECK_EQ_INT(gguf_load_mode_parse("mmap+dio"), -1);
    CHECK(gguf_load_mode_name(GGUF_LOAD_COUNT) == NULL, "a name past the table");
}

/* Every mode: the file's bytes, in the memory the mode promises, locked when asked. */
static void test_modes(void)
{
    const char *path = test_path("models/stories260K.gguf");
    struct llm_error err = { 0 };
    struct gguf_file *ref = NULL;
    CHECK(gguf_open(path, &ref, &err) == LLM_OK, "%s", err.msg);
    if (!ref)
        return;
    for (int m = 0; m < GGUF_LOAD_COUNT; m++) {
        const char *name = gguf_load_mode_name((enum gguf_load_mode)m);
        struct gguf_file *f = NULL;
        CHECK(gguf_open_mode(path, (enum gguf_load_mode)m, &f, &err) == LLM_OK, "%s: %s", name, err.msg);
        if (!f)
            continue;
        CHECK(f->size == ref->size && !memcmp(f->base, ref->base, f->size), "%s: other bytes than the file's", name);
        CHECK(f->n_tensors == ref->n_tensors, "%s: %llu tensors", name, (unsigned long long)f->n_tensors);
        char where[4096] = "";
        long locked_kb;
        CHECK(find_mapping(f->base, where, sizeof where, &locked_kb), "%s: no mapping holds the data", name);
        const bool mapped = m == GGUF_LOAD_MMAP || m == GGUF_LOAD_MMAP_MLOCK;
        if (mapped)
            CHECK(ends_with(where, "stories260K.gguf"), "%s: data in '%s', not in a mapping of the file", name, where);
        else
            CHECK(where[0] == '\0', "%s: data in a mapping of '%s', not anonymous memory", name, where);
        const bool lock = m == GGUF_LOAD_MLOCK || m == GGUF_LOAD_MMAP_MLOCK;
        /* smaps' Locked: is proportional (the reference maps the same pages): VmLck counts them whole */
        const long total_kb = locked_total_kb();
        if (lock && !f->locked)
            SKIP("%s: mlock refused here (RLIMIT_MEMLOCK)", name);
        else
            CHECK(lock ? locked_kb > 0 && total_kb >= (long)(f->size / 1024) : locked_kb == 0 && total_kb == 0,
                  "%s: %ld kB of the mapping and %ld kB in all locked, for %zu bytes", name, locked_kb, total_kb,
                  f->size);
        CHECK(f->locked == (lock && locked_kb > 0), "%s: locked flag %d", name, f->locked);
        gguf_close(f);
        CHECK(locked_total_kb() == 0, "%s: %ld kB still locked after gguf_close", name, locked_total_kb());
    }
    gguf_close(ref);
}

/* Pages of the file at path resident in the page cache, or -1. */
static long cached_pages(const char *path, long *total)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    long n = -1;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        const long page = sysconf(_SC_PAGESIZE);
        *total = (long)((st.st_size + page - 1) / page);
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *vec = malloc((size_t)*total);
        if (map != MAP_FAILED && vec && mincore(map, (size_t)st.st_size, vec) == 0) {
            n = 0;
            for (long i = 0; i < *total; i++)
                n += vec[i] & 1;
        }
        free(vec);
        if (map != MAP_FAILED)
            munmap(map, (size_t)st.st_size);
    }
    if (fd >= 0)
        close(fd);
    return n;
}

/* Write a private copy of the model and drop it from the page cache; false when that cannot be done. */
static bool fresh_copy(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[65536];
    size_t n;
    bool ok = in && fd >= 0;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = write(fd, buf, n) == (ssize_t)n;
    ok = ok && fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    if (in)
        fclose(in);
    if (fd >= 0)
        close(fd);
    return ok;
}

/* dio bypasses the page cache; "none" reads through it. */
static void test_direct_io(void)
{
    const char *build = getenv("TEST_BUILD");
    char copy[4096];
    snprintf(copy, sizeof copy, "%s/test_load_copy.gguf", build && *build ? build : "build");
    const char *src = test_path("models/stories260K.gguf");
    const enum gguf_load_mode modes[] = { GGUF_LOAD_DIRECT, GGUF_LOAD_READ };
    for (int i = 0; i < 2; i++) {
        const char *name = gguf_load_mode_name(modes[i]);
        long total = 0, before;
        if (!fresh_copy(src, copy) || (before = cached_pages(copy, &total)) != 0) {
            SKIP("%s: cannot drop %s from the page cache", name, copy);
            continue;
        }
        struct llm_error err = { 0 };
        struct gguf_file *f = NULL;
        CHECK(gguf_open_mode(copy, modes[i], &f, &err) == LLM_OK, "%s: %s", name, err.msg);
        long after = cached_pages(copy, &total);
        if (modes[i] == GGUF_LOAD_DIRECT)
            CHECK(after == 0, "dio: %ld of %ld pages came into the page cache", after, total);
        else
            CHECK(after == total, "none: %ld of %ld pages in the page cache after reading", after, total);
        gguf_close(f);
    }
    unlink(copy);
}

/* Bad files fail the same way in every mode, with the file named; a model loads in every mode. */
static void test_errors_and_model(void)
{
    const char *build = getenv("TEST_BUILD");
    char empty[4096];
    snprintf(empty, sizeof empty, "%s/test_load_empty.gguf", build && *build ? build : "build");
    FILE *e = fopen(empty, "wb");
    if (e)
        fclose(e);
    for (int m = 0; m < GGUF_LOAD_COUNT; m++) {
        const char *name = gguf_load_mode_name((enum gguf_load_mode)m);
        struct llm_error err = { 0 };
        struct gguf_file *f = NULL;
        CHECK(gguf_open_mode("/nonexistent/x.gguf", (enum gguf_load_mode)m, &f, &err) == LLM_ERR_IO && !f &&
                  strstr(err.msg, "/nonexistent/x.gguf: cannot open"), "%s: %s", name, err.msg);
        CHECK(gguf_open_mode(test_shared(), (enum gguf_load_mode)m, &f, &err) == LLM_ERR_IO && !f &&
                  strstr(err.msg, "not a regular file"), "%s: %s", name, err.msg);
        CHECK(gguf_open_mode(empty, (enum gguf_load_mode)m, &f, &err) == LLM_ERR_FORMAT && !f &&
                  strstr(err.msg, "file is empty"), "%s: %s", name, err.msg);
        struct llm_model *model = NULL;
        CHECK(llm_model_load_mode(test_path("models/stories260K.gguf"), (enum gguf_load_mode)m, 1, &model, &err) == 0,
              "%s: %s", name, err.msg);
        CHECK(model && model->tok_embd && (const uint8_t *)model->tok_embd->data >= model->file->base &&
                  (const uint8_t *)model->tok_embd->data < model->file->base + model->file->size,
              "%s: the weights are not in the loaded memory", name);
        llm_model_free(model);
    }
    unlink(empty);
}

int main(void)
{
    test_names();
    test_modes();
    test_direct_io();
    test_errors_and_model();
    return test_done("test_load");
}
