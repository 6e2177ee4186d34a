/* A build without MPI: one process, and a clear error when started by mpirun anyway. */
#include "link.h"

#include <stdlib.h>

bool llm_link_built(void)
{
    return false;
}

struct llm_link *llm_link_open(double startup_timeout_s, llm_give_up_fn give_up, struct llm_error *err)
{
    (void)startup_timeout_s;
    (void)give_up;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("PMIX_RANK");
    if (rank && atoi(rank) > 0) /* every process fails; rank 0's is the one line */
        return llm_fail(err, LLM_ERR_UNSUPPORTED, "%s", ""), NULL;
    if (rank || getenv("OMPI_COMM_WORLD_SIZE"))
        return llm_fail(err, LLM_ERR_UNSUPPORTED, "started by mpirun, but this llm was built without MPI "
                        "(install libopenmpi-dev and rebuild)"), NULL;
    if (err)
        *err = (struct llm_error){ .code = LLM_OK };
    return NULL;
}

void llm_link_close(struct llm_link *l)
{
    (void)l;
}

int llm_link_rank(const struct llm_link *l)
{
    (void)l;
    return 0;
}

int llm_link_size(const struct llm_link *l)
{
    (void)l;
    return 1;
}

int llm_link_send(struct llm_link *l, int to, int tag, const void *buf, size_t bytes, double timeout_s,
                  struct llm_error *err)
{
    (void)l, (void)tag, (void)buf, (void)bytes, (void)timeout_s;
    return llm_fail(err, LLM_ERR_UNSUPPORTED, "no rank %d: built without MPI", to);
}

int llm_link_recv(struct llm_link *l, int from, int tag, void *buf, size_t bytes, double timeout_s,
                  struct llm_error *err)
{
    (void)l, (void)tag, (void)buf, (void)bytes, (void)timeout_s;
    return llm_fail(err, LLM_ERR_UNSUPPORTED, "no rank %d: built without MPI", from);
}

void llm_link_report(struct llm_link *l, const char *msg)
{
    (void)l, (void)msg;
}

void llm_link_abort(struct llm_link *l, int code)
{
    (void)l;
    exit(code);
}
