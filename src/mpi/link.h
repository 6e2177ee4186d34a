/* The transport between the processes of one job (pipeline stages over MPI, src/model/pipeline.h):
 * numbered ranks, tagged point-to-point messages of known size, and receives that give up after a
 * time limit, so a dead peer ends the job with an error instead of a hang. Built on Open MPI when
 * mpi.h is present (mpi_link.c); otherwise no_mpi.c, where no job has more than one rank. */
#ifndef LLM_LINK_H
#define LLM_LINK_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "mpi/startup_watch.h"

struct llm_link;

/* The job this process was started in by mpirun (MPI_Init, errors returned rather than fatal).
 * NULL with err->code LLM_OK when the process was not started by mpirun (no job: one process),
 * NULL with an error when it was but MPI cannot start or this build has no MPI (then every process
 * of the job fails, and the message is empty on all but rank 0, so that the job prints one line).
 * MPI's start-up blocks with no limit: while it runs, a start-up watch (startup_watch.h) calls
 * give_up on every rank when a rank on this machine is gone or startup_timeout_s (> 0) passes. */
struct llm_link *llm_link_open(double startup_timeout_s, llm_give_up_fn give_up, struct llm_error *err);
/* MPI_Finalize; NULL is ignored. */
void llm_link_close(struct llm_link *l);

int llm_link_rank(const struct llm_link *l);
int llm_link_size(const struct llm_link *l);

/* Send bytes to rank `to` with tag (tags below 32000); returns once the buffer may be reused, or
 * with an error naming the rank when it took nothing in timeout_s seconds (<= 0: wait for ever). */
int llm_link_send(struct llm_link *l, int to, int tag, const void *buf, size_t bytes, double timeout_s,
                  struct llm_error *err);
/* Receive exactly bytes from rank `from` with tag. timeout_s <= 0 waits for ever; otherwise an
 * error naming the rank when nothing arrived in time. A message of another size is an error.
 * Every wait (send or receive) ends at once with an error naming the peer when the peer runs on
 * this machine and its process is gone (looked at every 0.1 s). On rank 0 a wait also ends when
 * another rank reports a failure (llm_link_report: err then holds that rank's message) and when
 * the process gets SIGTERM (mpirun ending the job), which the link catches on rank 0 of a job of
 * several ranks so that rank 0 can still print its line. */
int llm_link_recv(struct llm_link *l, int from, int tag, void *buf, size_t bytes, double timeout_s,
                  struct llm_error *err);
/* From a rank other than 0: tell rank 0 why this rank cannot go on (one line). */
void llm_link_report(struct llm_link *l, const char *msg);
/* End every process of the job (after an error that leaves peers waiting). */
void llm_link_abort(struct llm_link *l, int code);

/* Was this binary built with MPI? */
bool llm_link_built(void);

#endif
