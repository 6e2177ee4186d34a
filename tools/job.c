/* A command started by mpirun: rank 0 runs it, every other rank serves rank 0's pipeline stages
 * (src/model/pipeline.h) until rank 0 is done. */
#include <stdio.h>
#include <unistd.h>

#include "commands.h"
#include "model/model.h"
#include "model/pipeline.h"

static struct llm_link *job_link;

struct llm_link *tool_job_link(void)
{
    return job_link;
}

/* MPI's start-up cannot finish (the watch's thread, while MPI_Init or its first collective blocks
 * the main one): rank 0's line, and every rank ends, for under --enable-recovery mpirun would
 * leave the others waiting. */
int tool_job_load_threads(int n_threads)
{
    return llm_link_size(job_link) > 1 ? LLM_LOAD_NO_REPACK : n_threads;
}

static void give_up_start(const char *msg)
{
    if (msg[0])
        tool_error("%s", msg);
    fflush(stdout);
    _exit(1);
}

int tool_job_main(int (*cmd)(int argc, char **argv), int argc, char **argv)
{
    struct llm_error err = { 0 };
    job_link = llm_link_open(llm_pipe_timeout_s(), give_up_start, &err);
    if (!job_link && err.code) {
        if (err.msg[0]) /* empty on the other ranks of a job this build cannot run */
            tool_error("%s", err.msg);
        return 1;
    }
    if (llm_link_rank(job_link) > 0) {
        if (llm_pipe_serve(job_link, &err)) /* rank 0 has the error line: end the job, never hang */
            llm_link_abort(job_link, 1);
        llm_link_close(job_link);
        return 0;
    }
    int rc = cmd(argc, argv);
    if (llm_link_size(job_link) > 1 && (rc || llm_pipe_stop(job_link, &err))) {
        /* a rank may be dead or stuck: MPI_Finalize would wait for it */
        fflush(stdout);
        fflush(stderr);
        llm_link_abort(job_link, rc ? rc : 1);
    }
    llm_link_close(job_link);
    job_link = NULL;
    return rc;
}
