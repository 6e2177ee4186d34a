/* Bringing a GGUF file into memory before gguf_parse reads it: mapped, read into anonymous
 * memory, locked, or read with O_DIRECT (llama-bench's -lm / llama-cli's --no-mmap, --mlock). */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

/* O_DIRECT wants the buffer, the file offset and the length aligned to the device's logical block
 * size; a page covers every common one. */
#define DIO_ALIGN 4096u
/* Bytes per read() request: a multiple of DIO_ALIGN, small enough to stay interruptible. */
#define READ_CHUNK (64u << 20)

static const char *const mode_names[GGUF_LOAD_COUNT] = {
    [GGUF_LOAD_MMAP] = "mmap", [GGUF_LOAD_READ] = "none", [GGUF_LOAD_MLOCK] = "mlock",
    [GGUF_LOAD_MMAP_MLOCK] = "mmap+mlock", [GGUF_LOAD_DIRECT] = "dio",
};

const char *gguf_load_mode_name(enum gguf_load_mode mode)
{
    return (unsigned)mode < GGUF_LOAD_COUNT ? mode_names[mode] : NULL;
}

int gguf_load_mode_parse(const char *s)
{
    if (!strcmp(s, "auto"))
        return GGUF_LOAD_MMAP;
    for (int m = 0; m < GGUF_LOAD_COUNT; m++)
        if (!strcmp(s, mode_names[m]))
            return m;
    return -1;
}

static void refuse_direct(const char *path, bool *direct)
{
    llm_log(LLM_LOG_WARN, "%s: the file system refuses direct I/O; reading through the page cache", path);
    *direct = false;
}

/* pread() the whole file into buf (cap bytes, a multiple of DIO_ALIGN): every request starts and
 * ends on DIO_ALIGN, so O_DIRECT takes it; the last one comes back short at the end of the file.
 * Returns 0 or an errno value (EIO when the file is shorter than size). */
static int read_all(int fd, uint8_t *buf, size_t size, size_t cap)
{
    size_t done = 0;
    while (done < size) {
        size_t want = cap - done < READ_CHUNK ? cap - done : READ_CHUNK;
        ssize_t n = pread(fd, buf + done, want, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return EIO;
        done += (size_t)n;
    }
    return 0;
}

/* Read path (open as fd) into fresh page-aligned anonymous memory, made read-only afterwards like
 * a mapping of the file. *direct: fd has O_DIRECT; a file system that refuses such a read is read
 * again through the page cache (with a warning) and *direct becomes false. */
static int read_file(const char *path, int fd, size_t size, bool *direct, void **base, size_t *map_len,
                     struct llm_error *err)
{
    size_t cap = (size + DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN;
    void *buf = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return llm_fail(err, LLM_ERR_NOMEM, "%s: cannot allocate %zu bytes to read it into: %s", path, cap,
                        strerror(errno));
    int e = read_all(fd, buf, size, cap);
    if (e == EINVAL && *direct) {
        refuse_direct(path, direct);
        int flags = fcntl(fd, F_GETFL);
        e = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0 ? errno : read_all(fd, buf, size, cap);
    }
    if (e != 0 || mprotect(buf, cap, PROT_READ) != 0) {
        e = e ? e : errno;
        munmap(buf, cap);
        return llm_fail(err, LLM_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    *base = buf;
    *map_len = cap;
    return LLM_OK;
}

/* mlock the file's memory; a refusal (most often RLIMIT_MEMLOCK) leaves it unlocked with a warning,
 * as llama.cpp does. */
static bool lock(const char *path, const void *base, size_t len)
{
    /* the system call itself: AddressSanitizer's mlock() is a no-op that reports success */
    if (syscall(SYS_mlock, base, len) == 0)
        return true;
    int e = errno;
    struct rlimit rl;
    char limit[64] = "unknown";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
        snprintf(limit, sizeof limit, rl.rlim_cur == RLIM_INFINITY ? "unlimited" : "%llu KiB",
                 (unsigned long long)rl.rlim_cur / 1024);
    llm_log(LLM_LOG_WARN, "%s: cannot lock %.1f MiB in RAM (%s; locked-memory limit, ulimit -l: %s): it stays unlocked",
            path, (double)len / (1024.0 * 1024.0), strerror(e), limit);
    return false;
}

struct gguf_file_id gguf_file_id_of(const struct stat *st)
{
    return (struct gguf_file_id){ (uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
                                  (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec };
}

/* open() path into *fd and check it is a non-empty regular file; then *direct: set O_DIRECT on it (a
 * file system that refuses it is read through the page cache, with a warning, and *direct becomes
 * false). */
static int open_file(const char *path, bool *direct, int *fd, size_t *size, struct gguf_file_id *id,
                     struct llm_error *err)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return llm_fail(err, LLM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = LLM_OK;
    if (fstat(*fd, &st) != 0)
        rc = llm_fail(err, LLM_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = llm_fail(err, LLM_ERR_IO, "%s: not a regular file", path);
    else if (st.st_size == 0)
        rc = llm_fail(err, LLM_ERR_FORMAT, "%s: file is empty", path);
    if (rc != LLM_OK) {
        close(*fd);
        return rc;
    }
    *size = (size_t)st.st_size;
    *id = gguf_file_id_of(&st);
    int flags = fcntl(*fd, F_GETFL);
    if (*direct && (flags < 0 || fcntl(*fd, F_SETFL, flags | O_DIRECT) != 0))
        refuse_direct(path, direct);
    return LLM_OK;
}

int gguf_open_mode(const char *path, enum gguf_load_mode mode, struct gguf_file **out, struct llm_error *err)
{
    *out = NULL;
    if ((unsigned)mode >= GGUF_LOAD_COUNT)
        return llm_fail(err, LLM_ERR_ARG, "%s: unknown load mode %d", path, (int)mode);
    const bool mapped = mode == GGUF_LOAD_MMAP || mode == GGUF_LOAD_MMAP_MLOCK;
    bool direct = mode == GGUF_LOAD_DIRECT;
    size_t size = 0, map_len = 0;
    int fd;
    struct gguf_file_id id;
    int rc = open_file(path, &direct, &fd, &size, &id, err);
    if (rc != LLM_OK)
        return rc;
    void *base = NULL;
    if (mapped) {
        base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        map_len = size;
        if (base == MAP_FAILED)
            rc = llm_fail(err, LLM_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    } else {
        rc = read_file(path, fd, size, &direct, &base, &map_len, err);
    }
    close(fd);
    if (rc != LLM_OK)
        return rc;
    bool locked = (mode == GGUF_LOAD_MLOCK || mode == GGUF_LOAD_MMAP_MLOCK) && lock(path, base, map_len);
    rc = gguf_parse(base, size, path, out, err);
    if (rc != LLM_OK) {
        munmap(base, map_len);
        return rc;
    }
    (*out)->map_len = map_len;
    (*out)->locked = locked;
    (*out)->mapped = mapped;
    (*out)->id = id;
    return LLM_OK;
}

int gguf_open(const char *path, struct gguf_file **out, struct llm_error *err)
{
    return gguf_open_mode(path, GGUF_LOAD_MMAP, out, err);
}
