/* The repack cache (repack_cache.h): one file per entry, a header page then the repacked memory
 * byte for byte. The data starts at a page boundary so that it maps straight from the page cache. */
#include "repack_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "hash.h"
#include "log.h"
#include "ops/types/repack.h"
#include "tensor.h"

#define MAGIC "LLMRPK1\n"
#define ENTRY_SUFFIX ".rpk"
#define WRITE_CHUNK ((size_t)64 << 20)
#define STALE_TEMP_SECONDS (24 * 3600) /* a temporary file this old was left by a process that died */

struct header {
    char magic[8];
    uint64_t data_offset; /* where the repacked memory starts: a multiple of the page size */
    uint64_t data_bytes;
    uint64_t key;         /* layout, repack code fingerprint and identity, hashed: the entry's name */
    uint64_t layout;
    struct gguf_file_id source; /* the GGUF file it was made from, as opened */
    char path[3072];      /* the GGUF file's path, NUL-terminated: for removing stale entries */
};

/* The cache's directory in buf, or false when the cache is off. */
static bool cache_dir(char *buf, size_t n)
{
    const char *env = getenv("LLM_REPACK_CACHE");
    if (env)
        return strcmp(env, "0") != 0 && strcmp(env, "off") != 0 && env[0] &&
               (size_t)snprintf(buf, n, "%s", env) < n;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        return (size_t)snprintf(buf, n, "%s/llm/repack", xdg) < n;
    return home && home[0] && (size_t)snprintf(buf, n, "%s/.cache/llm/repack", home) < n;
}

/* The file at path now, for the clean-up of other files' entries. */
static bool identity_of(const char *path, struct gguf_file_id *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    *id = gguf_file_id_of(&st);
    return true;
}

/* Was f opened from a file (its id, as opened, is what the load parsed), not parsed from memory? */
static bool opened(const struct gguf_file *f)
{
    return f->id.dev || f->id.ino;
}

/* A hash of what llm_repack_groups writes for every repackable type on a fixed input, with a tail
 * group and a tail of blocks: a change to any layout changes it, so entries of another build's
 * layouts are misses. Computed once per process (fingerprint_once). */
static uint64_t fingerprint;
static pthread_once_t fingerprint_once = PTHREAD_ONCE_INIT;

static uint64_t code_fingerprint(void)
{
    uint64_t h = llm_fnv_feed(LLM_FNV_SEED, MAGIC, 8);
    for (int t = 0; t < LLM_TYPE_COUNT; t++) {
        const struct llm_type_info *ti = llm_type_info(t);
        if (!ti || !llm_repack_type_ok((enum llm_type)t))
            continue;
        const int64_t K = 9 * ti->blck_size, M = LLM_REPACK_ROWS + 1;
        const size_t stride = llm_row_size((enum llm_type)t, K), out = llm_repack_size((enum llm_type)t, K, M);
        unsigned char *src = malloc(stride * (size_t)M), *dst = calloc(1, out);
        if (!src || !dst) {
            free(src), free(dst);
            return 0; /* matches no entry's key but this run's own */
        }
        for (size_t i = 0; i < stride * (size_t)M; i++)
            src[i] = (unsigned char)(i * 131 + 7);
        llm_repack_groups((enum llm_type)t, K, M, src, stride, 0, (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, dst);
        h = llm_fnv_feed(llm_fnv_feed(h, &t, sizeof t), dst, out);
        free(src), free(dst);
    }
    return h;
}

static void compute_fingerprint(void)
{
    fingerprint = code_fingerprint();
}

static uint64_t key_of(uint64_t layout, const struct gguf_file_id *id)
{
    pthread_once(&fingerprint_once, compute_fingerprint);
    uint64_t h = llm_fnv_feed(LLM_FNV_SEED, &fingerprint, sizeof fingerprint);
    h = llm_fnv_feed(h, &layout, sizeof layout);
    return llm_fnv_feed(h, id, sizeof *id);
}

static size_t data_offset(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return sizeof(struct header) <= page ? page : (sizeof(struct header) + page - 1) / page * page;
}

static bool entry_path(char *buf, size_t n, const char *dir, uint64_t key)
{
    return (size_t)snprintf(buf, n, "%s/%016" PRIx64 ENTRY_SUFFIX, dir, key) < n;
}

/* Reads the header of the open entry fd; false unless it is whole, the file holds its data, and
 * the file is ours alone to write (an entry another user could write would choose our weights). */
static bool read_header(int fd, struct header *h)
{
    struct stat st;
    if (pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h || memcmp(h->magic, MAGIC, 8) != 0 || fstat(fd, &st) != 0 ||
        st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return false;
    h->path[sizeof h->path - 1] = '\0';
    return h->data_offset == data_offset() && h->data_bytes <= (uint64_t)st.st_size &&
           (uint64_t)st.st_size - h->data_bytes == h->data_offset;
}

void *repack_cache_map(const struct gguf_file *f, uint64_t layout, size_t bytes)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (!cache_dir(dir, sizeof dir) || !opened(f))
        return NULL;
    const uint64_t key = key_of(layout, &f->id);
    if (!entry_path(path, sizeof path, dir, key))
        return NULL;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct header h;
    void *mem = MAP_FAILED;
    if (read_header(fd, &h) && h.key == key && h.layout == layout && h.data_bytes == bytes &&
        memcmp(&h.source, &f->id, sizeof f->id) == 0)
        mem = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, (off_t)h.data_offset);
    close(fd);
    if (mem == MAP_FAILED) {
        llm_log(LLM_LOG_INFO, "repack cache: %s does not match %s: repacking", path, f->path);
        return NULL;
    }
    llm_log(LLM_LOG_INFO, "repack cache: %s mapped (%.1f MiB)", path, (double)bytes / (1024.0 * 1024.0));
    return mem;
}

/* mkdir -p, mode 0700 for the directories it makes. */
static bool make_dirs(const char *dir)
{
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s", dir) >= sizeof p)
        return false;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return false;
        *s = '/';
    }
    return mkdir(p, 0700) == 0 || errno == EEXIST;
}

static bool write_all(int fd, const void *buf, size_t n, uint64_t at)
{
    const char *p = buf;
    while (n > 0) {
        const ssize_t w = pwrite(fd, p, n < WRITE_CHUNK ? n : WRITE_CHUNK, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            errno = w == 0 ? EIO : errno; /* a write of nothing sets no errno of its own */
            return false;
        }
        p += w, n -= (size_t)w, at += (uint64_t)w;
    }
    return true;
}

/* Is the entry in dir named `name` stale: made from the file `id` names (an earlier version of it,
 * or another layout), or from a file that is gone or has changed since? Temporary files count as
 * stale once a day old. */
static bool stale(const char *dir, const char *name, const struct gguf_file_id *id, const char *keep)
{
    char path[PATH_MAX + 256];
    if (strcmp(name, keep) == 0 || (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return false;
    const size_t len = strlen(name), suffix = strlen(ENTRY_SUFFIX);
    if (strstr(name, ENTRY_SUFFIX ".tmp.")) {
        struct stat st;
        return stat(path, &st) == 0 && time(NULL) - st.st_mtime > STALE_TEMP_SECONDS;
    }
    if (len <= suffix || strcmp(name + len - suffix, ENTRY_SUFFIX) != 0)
        return false;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct header h;
    struct gguf_file_id now;
    const bool ok = read_header(fd, &h);
    close(fd);
    if (!ok)
        return true;
    if (h.source.dev == id->dev && h.source.ino == id->ino)
        return true;
    return !identity_of(h.path, &now) || memcmp(&now, &h.source, sizeof now) != 0;
}

static void remove_stale(const char *dir, const struct gguf_file_id *id, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[PATH_MAX + 256];
        if (stale(dir, e->d_name, id, keep) && (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path)
            unlink(path);
    }
    closedir(d);
}

void repack_cache_save(const struct gguf_file *f, uint64_t layout, const void *mem, size_t bytes)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], tmp[PATH_MAX + 64], source[PATH_MAX];
    struct header h = { .data_offset = data_offset(), .data_bytes = bytes, .layout = layout };
    /* the absolute path, so that a run from another directory finds the file when it cleans up */
    if (!cache_dir(dir, sizeof dir) || !opened(f) || !realpath(f->path, source) ||
        strlen(source) >= sizeof h.path)
        return;
    const uint64_t key = key_of(layout, &f->id);
    if (!entry_path(path, sizeof path, dir, key) ||
        (size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return;
    const double t0 = llm_now_us();
    memcpy(h.magic, MAGIC, 8);
    h.key = key;
    h.source = f->id;
    memcpy(h.path, source, strlen(source) + 1);
    const int fd = make_dirs(dir) ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    /* the header last and the data synced before the rename: a crash leaves no entry, not a bad one */
    const bool ok = fd >= 0 && write_all(fd, mem, bytes, h.data_offset) && write_all(fd, &h, sizeof h, 0) &&
                    fdatasync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok || rename(tmp, path) != 0) {
        const int e = errno;
        if (fd >= 0)
            unlink(tmp);
        llm_log(LLM_LOG_INFO, "repack cache: cannot write %s: %s", fd >= 0 ? tmp : dir, strerror(e));
        return;
    }
    remove_stale(dir, &f->id, strrchr(path, '/') + 1);
    llm_log(LLM_LOG_INFO, "repack cache: %s written (%.1f MiB, %.0f ms)", path, (double)bytes / (1024.0 * 1024.0),
            (llm_now_us() - t0) / 1e3);
}
