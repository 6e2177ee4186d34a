/* Pipeline stages over the ranks of an MPI job (mpirun -np K llm-run ...). Each rank runs a
 * contiguous range of layers in a context of its own: rank 0 the first (with the token embedding;
 * it tokenizes, samples and prints), the last rank the last (with the output layer). A decode flows
 * micro-batch by micro-batch: rank r receives the residual stream of rank r-1 into its fixed input
 * buffer, runs its layers and sends its residual to rank r+1, so while rank r+1 works on micro-batch
 * i, rank r works on i+1; the last rank sends the logits back to rank 0, or only the token it
 * drew when rank 0 asks for a draw (llm_decode_next) and needs no logits. Rank 0's context drives
 * the others through messages (open a stage, decode, clear, close, report, stop); the other ranks
 * only serve them. The transport is src/mpi/link.h; nothing here calls MPI. */
#ifndef LLM_PIPELINE_H
#define LLM_PIPELINE_H

#include "context.h"
#include "mpi/link.h"

/* Layers per rank: rank r gets [first[r], end[r]). spec "a/b/..." gives K shares (as -ts: any
 * non-negative numbers, not all zero), NULL or "" equal ones; boundaries round to the nearest
 * layer. Errors: more ranks than layers, a share list of another length or a bad number, a rank
 * left without a layer. */
int llm_pipe_split(int32_t n_layer, int n_ranks, const char *spec, int32_t *first, int32_t *end,
                   struct llm_error *err);

struct llm_pipe;

/* Rank 0: split m's layers over the job's ranks (p->ranks_split), open a stage with p's settings on
 * every other rank (each loads the same model path) and wait until each has reported; the first
 * rank that failed is named in the error. *end is rank 0's own last layer (its first is 0). */
int llm_pipe_open(struct llm_link *link, const struct llm_model *m, const struct llm_context_params *p,
                  struct llm_pipe **out, int32_t *end, struct llm_error *err);
/* The first stage's transport (begin, send, finish). */
const struct llm_stage_io *llm_pipe_io(struct llm_pipe *pp);
/* Does the last rank draw llm_decode_next's tokens (p->sampler without a repeat penalty, at most 32
 * banned tokens), so that only their ids come back? */
bool llm_pipe_draws(const struct llm_pipe *pp);
/* Every rank forgets its cached tokens. */
int llm_pipe_clear(struct llm_pipe *pp, struct llm_error *err);
/* The stages and their resident memory (rank 0's own measured here). */
int llm_pipe_ranks(const struct llm_pipe *pp, struct llm_rank_info *out, int cap);
/* Close the stages on the other ranks; NULL is ignored. */
void llm_pipe_close(struct llm_pipe *pp);

/* Ranks 1..K-1: serve rank 0's messages until it stops the job. An error here (a stage that fails
 * after it opened, a neighbour gone silent) leaves the job unusable: it is reported to rank 0 (which
 * names this rank and ends the job) before this returns it, and the caller then aborts the job. */
int llm_pipe_serve(struct llm_link *link, struct llm_error *err);
/* Rank 0, at exit: tell every other rank to stop serving; an error names a rank that took nothing. */
int llm_pipe_stop(struct llm_link *link, struct llm_error *err);

/* Seconds a rank waits for a message before it names the silent rank in an error:
 * LLM_MPI_TIMEOUT (default 300). */
double llm_pipe_timeout_s(void);

#endif
