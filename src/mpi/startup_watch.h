/* A watch over MPI's start-up (MPI_Init and the first collective), which blocks with no time limit
 * of its own: under `mpirun --enable-recovery` a rank that dies before it has joined leaves the
 * others waiting there for ever. The watch runs beside the blocked thread and gives up for it. */
#ifndef LLM_STARTUP_WATCH_H
#define LLM_STARTUP_WATCH_H

struct llm_startup_watch;

/* Called from the watch's thread when start-up cannot finish, with the reason (one line, no
 * "llm: error:" prefix); it must end the process (it must not return). */
typedef void (*llm_give_up_fn)(const char *msg);

/* Start watching this process's job (read from mpirun's environment: PMIX_NAMESPACE, PMIX_RANK,
 * OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_LOCAL_SIZE). Every CHECK period it finds the job's
 * processes on this machine (/proc, by their environment); give_up is called when one of them is
 * gone (a rank seen and then gone, or, with every rank on this machine, a rank not seen after a
 * grace period; rank 0 watches every rank, the others rank 0 alone, so that they end after it),
 * or when timeout_s (> 0) passes first (a rank on another machine). The message
 * names the rank; it is empty on every rank but 0, so the job prints one line. NULL when the
 * environment is not mpirun's, give_up is NULL or the thread cannot start (then nothing is watched). */
struct llm_startup_watch *llm_startup_watch_start(double timeout_s, llm_give_up_fn give_up);
/* Stop the watch (start-up is over) and free it; NULL is ignored. */
void llm_startup_watch_stop(struct llm_startup_watch *w);

#endif
