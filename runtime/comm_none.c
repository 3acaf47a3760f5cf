/* The process group of a build without MPI: one process. runtime_create
 * refuses WORLD_SIZE > 1 before any of these could be reached with more
 * than one rank. */
#include "runtime_internal.h"

static CtStatus no_mpi(const char *what)
{
    return ct_error(CT_ERR_UNSUPPORTED,
                    "runtime: %s needs several processes, and this build of ctrainer "
                    "has no MPI (rebuild with CTRAINER_MPI=ON)",
                    what);
}

bool rt_comm_launched(void)
{
    return false;
}
CtStatus rt_comm_open(Runtime *rt)
{
    return no_mpi("joining a process group");
}
void rt_comm_close(Runtime *rt) {}
void rt_comm_abort(Runtime *rt, int code) {}
CtStatus rt_comm_allreduce(Runtime *rt, void *buf, int64_t n, CtDType dt,
                           RuntimeReduceOp op)
{
    return no_mpi("all-reduce");
}
CtStatus rt_comm_allgatherv(Runtime *rt, const void *send, void *recv,
                            const int64_t *counts)
{
    return no_mpi("gather");
}
CtStatus rt_comm_bcast(Runtime *rt, void *buf, int64_t bytes, int root)
{
    return no_mpi("broadcast");
}
CtStatus rt_comm_barrier(Runtime *rt)
{
    return no_mpi("barrier");
}
