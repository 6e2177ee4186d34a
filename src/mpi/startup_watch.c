/* The start-up watch: a thread that looks, every CHECK_S seconds, for the job's processes on this
 * machine in /proc (a process belongs to the job when its environment carries the job's PMIX
 * namespace; its rank is in OMPI_COMM_WORLD_RANK), and gives up for the blocked start-up when one
 * is gone or the time limit passes. */
#include "startup_watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define CHECK_S 0.1
/* A rank never seen is taken for gone only this long after the watch began: mpirun starts a
 * machine's ranks together, so by then every live one has long been running. */
#define GRACE_S 3.0

struct llm_startup_watch {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    char ns[128];
    int rank, size, local_size;
    double timeout_s, start_s;
    llm_give_up_fn give_up;
    bool *seen, *live; /* by rank */
};

static int env_int(const char *a, const char *b)
{
    const char *s = getenv(a) ? getenv(a) : b ? getenv(b) : NULL;
    return s && *s ? atoi(s) : -1;
}

/* The value of name= in a NUL-separated environment block, or NULL. */
static const char *env_in(const char *block, size_t n, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < n;) {
        const char *s = block + i;
        size_t sl = strnlen(s, n - i);
        if (sl > len && !memcmp(s, name, len) && s[len] == '=')
            return s + len + 1;
        i += sl + 1;
    }
    return NULL;
}

/* Is process pid running (not a zombie)? */
static bool running(const char *pid)
{
    char path[300], stat[256];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    stat[n > 0 ? n : 0] = '\0';
    const char *state = strrchr(stat, ')'); /* "pid (comm) S ...": comm may hold anything */
    return state && state[1] && state[2] != 'Z' && state[2] != 'X';
}

/* Marks in w->live the ranks of the job running on this machine (this one included). */
static void scan(struct llm_startup_watch *w)
{
    memset(w->live, 0, (size_t)w->size * sizeof *w->live);
    w->live[w->rank] = true;
    DIR *d = opendir("/proc");
    if (!d)
        return;
    static char block[65536]; /* one watch per process: the watch's thread alone reads into it */
    const uid_t uid = getuid();
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[300];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%s", e->d_name);
        if (stat(path, &st) || st.st_uid != uid)
            continue;
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, block, sizeof block - 1);
        close(fd);
        if (n <= 0)
            continue;
        block[n] = '\0';
        const char *ns = env_in(block, (size_t)n, "PMIX_NAMESPACE");
        const char *r = env_in(block, (size_t)n, "OMPI_COMM_WORLD_RANK");
        if (!r)
            r = env_in(block, (size_t)n, "PMIX_RANK");
        int rank = r ? atoi(r) : -1;
        if (ns && r && !strcmp(ns, w->ns) && rank >= 0 && rank < w->size && running(e->d_name))
            w->live[rank] = true;
    }
    closedir(d);
}

/* Why start-up cannot finish, into msg (empty when it still may). Rank 0 looks at every rank, the
 * others at rank 0 alone: they end after rank 0 has (or at the time limit), so rank 0 never takes
 * a rank that gave up for one that died. */
static void verdict(struct llm_startup_watch *w, double now_s, char *msg, size_t cap)
{
    msg[0] = '\0';
    const bool grace_over = now_s - w->start_s > GRACE_S;
    int live_count = 0;
    for (int r = 0; r < w->size; r++) {
        live_count += w->live[r];
        const bool watched = w->rank == 0 || r == 0;
        if (watched && !w->live[r] && (w->seen[r] || (grace_over && w->local_size == w->size))) {
            snprintf(msg, cap, "rank %d ended during MPI start-up (its process is gone: it exited, was killed or "
                     "crashed before every rank had joined)", r);
            return;
        }
        w->seen[r] |= w->live[r];
    }
    if (w->rank == 0 && grace_over && w->local_size > 0 && live_count < w->local_size)
        snprintf(msg, cap, "%d of the %d ranks on this machine ended during MPI start-up", w->local_size - live_count,
                 w->local_size);
    else if (w->timeout_s > 0 && now_s - w->start_s > w->timeout_s)
        snprintf(msg, cap, "MPI start-up did not finish in %.0f s (LLM_MPI_TIMEOUT): a rank on another machine "
                 "died or cannot start", w->timeout_s);
}

static void *watch(void *arg)
{
    struct llm_startup_watch *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)(CHECK_S * 1e9);
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&w->wake, &w->lock, &until) != ETIMEDOUT || w->stop)
            continue;
        scan(w);
        char msg[256];
        verdict(w, llm_now_us() / 1e6, msg, sizeof msg);
        if (msg[0])
            w->give_up(w->rank == 0 ? msg : "");
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

struct llm_startup_watch *llm_startup_watch_start(double timeout_s, llm_give_up_fn give_up)
{
    const char *ns = getenv("PMIX_NAMESPACE");
    int rank = env_int("OMPI_COMM_WORLD_RANK", "PMIX_RANK"), size = env_int("OMPI_COMM_WORLD_SIZE", NULL);
    if (!give_up || !ns || strlen(ns) >= sizeof ((struct llm_startup_watch *)0)->ns || rank < 0 || size < 2 || rank >= size)
        return NULL;
    struct llm_startup_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    strcpy(w->ns, ns);
    w->rank = rank;
    w->size = size;
    w->local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", NULL);
    w->timeout_s = timeout_s;
    w->start_s = llm_now_us() / 1e6;
    w->give_up = give_up;
    w->seen = calloc((size_t)size, sizeof *w->seen);
    w->live = calloc((size_t)size, sizeof *w->live);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->lock, NULL);
    if (!w->seen || !w->live || pthread_create(&w->thread, NULL, watch, w)) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w->seen);
        free(w->live);
        free(w);
        return NULL;
    }
    return w;
}

void llm_startup_watch_stop(struct llm_startup_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w->seen);
    free(w->live);
    free(w);
}
