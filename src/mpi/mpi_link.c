/* The transport on Open MPI: MPI_COMM_WORLD with MPI_ERRORS_RETURN, receives polled against a
 * deadline (MPI has no receive timeout of its own), and while a rank waits it looks every
 * CHECK_S seconds at the process of the rank it waits for when that rank is on its machine: a
 * process gone ends the wait at once, naming the rank, instead of after the whole timeout. */
#include "link.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* Failure notes use a tag of their own, above every tag the callers use. */
#define LINK_TAG_FAIL 32000

/* Where a rank runs: its machine (host name and pid namespace, so containers on one host differ)
 * and its process id there. */
struct place {
    char machine[96];
    int32_t pid;
};

struct llm_link {
    int rank, size;
    struct place *places; /* of every rank, gathered at open */
    double checked_s;     /* when the local ranks' processes were last looked at */
};

/* How often a waiting rank looks at the process of the rank it waits for: well inside the second
 * mpirun leaves between a rank's death and its SIGTERM to the others. */
#define CHECK_S 0.1

/* Rank 0 in a job of several ranks: mpirun's SIGTERM (it ends the job because a rank died, or it
 * was cancelled) is turned into an error line instead of a silent death. */
static volatile sig_atomic_t terminated;
static void on_sigterm(int sig)
{
    terminated = sig;
}

bool llm_link_built(void)
{
    return true;
}

static int mpi_fail(struct llm_error *err, int rc, const char *what, int peer)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        len = 0;
    text[len] = '\0';
    return llm_fail(err, LLM_ERR_PEER, "rank %d: %s failed: %s", peer, what, text);
}

struct llm_link *llm_link_open(double startup_timeout_s, llm_give_up_fn give_up, struct llm_error *err)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK")) {
        if (err)
        *err = (struct llm_error){ .code = LLM_OK };
        return NULL; /* not started by mpirun: one process, no MPI at all */
    }
    struct llm_link *l = calloc(1, sizeof *l);
    if (!l)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory"), NULL;
    int provided = 0;
    struct llm_startup_watch *watch = llm_startup_watch_start(startup_timeout_s, give_up);
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        llm_startup_watch_stop(watch);
        free(l);
        return llm_fail(err, LLM_ERR_PEER, "MPI_Init failed"), NULL;
    }
    /* a peer's failure must come back as an error we can report, not abort us silently */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &l->size);
    struct place me = { .pid = (int32_t)getpid() };
    char host[64] = "", ns[32] = "";
    gethostname(host, sizeof host - 1);
    if (readlink("/proc/self/ns/pid", ns, sizeof ns - 1) < 0)
        ns[0] = '\0';
    snprintf(me.machine, sizeof me.machine, "%s %s", host, ns);
    if (!(l->places = calloc((size_t)l->size, sizeof *l->places)) ||
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, l->places, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
        llm_startup_watch_stop(watch);
        free(l->places);
        free(l);
        return llm_fail(err, LLM_ERR_PEER, "MPI_Allgather of the ranks' processes failed"), NULL;
    }
    llm_startup_watch_stop(watch); /* from here every wait has its own deadline and watch */
    if (l->rank == 0 && l->size > 1)
        sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_sigterm, .sa_flags = SA_RESTART }, NULL);
    return l;
}

void llm_link_close(struct llm_link *l)
{
    if (!l)
        return;
    MPI_Finalize();
    free(l->places);
    free(l);
}

int llm_link_rank(const struct llm_link *l)
{
    return l ? l->rank : 0;
}

int llm_link_size(const struct llm_link *l)
{
    return l ? l->size : 1;
}

/* Sleep between polls after a short spin, growing to 250 us: a busy poll would take a core from the
 * ranks that compute (ranks share cores on one machine), a longer sleep would add to every hop. */
#define SPIN_S 50e-6
static void back_off(long *ns)
{
    struct timespec ts = { 0, *ns };
    nanosleep(&ts, NULL);
    *ns = *ns * 2 < 250000 ? *ns * 2 : 250000;
}

/* On rank 0: another rank's failure note, received into err (true when there was one). */
static bool failure_noted(struct llm_error *err)
{
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, LINK_TAG_FAIL, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag)
        return false;
    char msg[sizeof err->msg];
    int len = 0;
    MPI_Get_count(&st, MPI_CHAR, &len);
    if (len < 0 || len >= (int)sizeof msg)
        len = (int)sizeof msg - 1;
    MPI_Recv(msg, len, MPI_CHAR, st.MPI_SOURCE, LINK_TAG_FAIL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    msg[len] = '\0';
    llm_fail(err, LLM_ERR_PEER, "%s", msg);
    return true;
}

/* Is this process gone (no such pid, or a zombie its parent has not reaped yet)? */
static bool process_gone(int32_t pid)
{
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
        char path[64], stat[256];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
        if (f)
            fclose(f);
        stat[n] = '\0';
        const char *state = strrchr(stat, ')'); /* "pid (comm) S ...": comm may hold anything */
        return state && (state[2] == 'Z' || state[2] == 'X');
    }
    return true;
}

/* Is peer on this machine with its process gone? Its error then. (Only the rank waited for is
 * watched: a rank told to stop may end while another is still waited for.) */
static bool peer_gone(const struct llm_link *l, int peer, struct llm_error *err)
{
    const struct place *p = &l->places[peer];
    if (strcmp(p->machine, l->places[l->rank].machine) || !process_gone(p->pid))
        return false;
    llm_fail(err, LLM_ERR_PEER, "rank %d died: its process (pid %d) is gone: it was killed or crashed", peer, (int)p->pid);
    return true;
}

/* Complete req (a send to or receive from peer) by the deadline, polling; peer's process gone (when
 * it is on this machine) ends the wait, and on rank 0 so do a failure note from any rank (that
 * rank's error) and mpirun's SIGTERM. */
static int await(struct llm_link *l, MPI_Request *req, MPI_Status *st, int peer, bool sending,
                 double timeout_s, struct llm_error *err)
{
    const double start = (llm_now_us() / 1e6), deadline = timeout_s > 0 ? start + timeout_s : 0;
    long pause_ns = 20000;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, st);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, sending ? "send" : "receive", peer);
        if (done)
            return LLM_OK;
        const double t = (llm_now_us() / 1e6);
        if (terminated || t - l->checked_s >= CHECK_S) {
            l->checked_s = t;
            if (peer_gone(l, peer, err)) {
                MPI_Cancel(req);
                return LLM_ERR_PEER;
            }
        }
        if (l->rank == 0 && err && failure_noted(err)) {
            MPI_Cancel(req);
            return LLM_ERR_PEER;
        }
        if (terminated) {
            MPI_Cancel(req);
            return llm_fail(err, LLM_ERR_PEER, "mpirun ended the job (SIGTERM) while this rank waited for rank %d: "
                            "a rank on another machine died, or the job was cancelled", peer);
        }
        if (deadline && t > deadline) {
            MPI_Cancel(req);
            return llm_fail(err, LLM_ERR_PEER, "rank %d did not %s for %.0f s (it died or hangs)", peer,
                            sending ? "take a message" : "answer", timeout_s);
        }
        if (t - start > SPIN_S)
            back_off(&pause_ns);
    }
}

int llm_link_send(struct llm_link *l, int to, int tag, const void *buf, size_t bytes, double timeout_s,
                  struct llm_error *err)
{
    if (bytes > (size_t)INT_MAX)
        return llm_fail(err, LLM_ERR_ARG, "message of %zu bytes to rank %d is too large", bytes, to);
    MPI_Request req;
    MPI_Status st;
    int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "send", to);
    return await(l, &req, &st, to, true, timeout_s, err);
}

int llm_link_recv(struct llm_link *l, int from, int tag, void *buf, size_t bytes, double timeout_s,
                  struct llm_error *err)
{
    if (bytes > (size_t)INT_MAX)
        return llm_fail(err, LLM_ERR_ARG, "message of %zu bytes from rank %d is too large", bytes, from);
    MPI_Request req;
    MPI_Status st;
    int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, tag, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "receive", from);
    rc = await(l, &req, &st, from, false, timeout_s, err);
    if (rc)
        return rc;
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if ((size_t)got != bytes)
        return llm_fail(err, LLM_ERR_PEER, "rank %d sent %d bytes where %zu were expected", from, got, bytes);
    return LLM_OK;
}

void llm_link_report(struct llm_link *l, const char *msg)
{
    if (l->rank == 0)
        return;
    MPI_Request req;
    MPI_Status st;
    if (MPI_Isend(msg, (int)strlen(msg), MPI_CHAR, 0, LINK_TAG_FAIL, MPI_COMM_WORLD, &req) == MPI_SUCCESS)
        await(l, &req, &st, 0, true, 5.0, NULL);
}

void llm_link_abort(struct llm_link *l, int code)
{
    (void)l;
    MPI_Abort(MPI_COMM_WORLD, code);
}
