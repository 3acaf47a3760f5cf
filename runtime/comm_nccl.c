/* Collectives on CUDA tensors through NCCL: one GPU per process (the local
 * rank's), one NCCL communicator per runtime, created on the first CUDA
 * collective from a unique id that rank 0 broadcasts over MPI. NCCL itself
 * lives in a module loaded then (nccl_module.h), so builds with NCCL cost
 * runs that never reduce a GPU tensor nothing. Before a collective the
 * device is synchronised (the tensor's producer may be any stream of the
 * backend); the collective runs on the communicator's own stream and is
 * polled against the same deadline as the MPI collectives, aborting the
 * communicator when it passes. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "comm_nccl.h"

struct RtNccl {
    const CtNcclModule *m;
    CtNcclComm *comm; /* NULL once aborted */
};

#define TRY(expr)                                                                        \
    do {                                                                                 \
        CtStatus try_st_ = (expr);                                                       \
        if (try_st_ != CT_OK) return try_st_;                                            \
    } while (0)

bool rt_nccl_datatype(CtDType dt, int *out)
{
    switch (dt) {
    case CT_F32: *out = RT_NCCL_FLOAT32; return true;
    case CT_F64: *out = RT_NCCL_FLOAT64; return true;
    case CT_BF16: *out = RT_NCCL_BFLOAT16; return true;
    case CT_F16: *out = RT_NCCL_FLOAT16; return true;
    case CT_I64: *out = RT_NCCL_INT64; return true;
    case CT_I32: *out = RT_NCCL_INT32; return true;
    case CT_U8:
    case CT_BOOL: *out = RT_NCCL_UINT8; return true;
    default: return false;
    }
}

bool rt_nccl_op(RuntimeReduceOp op, int *out)
{
    switch (op) {
    case RUNTIME_REDUCE_SUM: *out = RT_NCCL_SUM; return true;
    case RUNTIME_REDUCE_MEAN: *out = RT_NCCL_AVG; return true;
    case RUNTIME_REDUCE_MAX: *out = RT_NCCL_MAX; return true;
    case RUNTIME_REDUCE_MIN: *out = RT_NCCL_MIN; return true;
    default: return false;
    }
}

static CtStatus open_nccl(Runtime *rt)
{
    const CtNcclModule *m = rt_nccl_module(rt->rank);
    CtNcclId id = {0};
    CtStatus st = m ? CT_OK : ct_last_status();
    if (st == CT_OK && rt->rank == 0) st = m->unique_id(rt->device.index, &id);
    /* every rank takes part in the broadcast, also after a local failure,
     * so no rank is left waiting */
    CtStatus bst = rt_comm_bcast(rt, &id, sizeof id, 0);
    if (st == CT_OK) st = bst;
    RtNccl *n = st == CT_OK ? calloc(1, sizeof *n) : NULL;
    if (st == CT_OK && !n)
        st = ct_error(CT_ERR_OOM, "rank %d: NCCL: out of memory", rt->rank);
    /* all ranks open the communicator, or none: a rank waits in its
     * creation for every other, with no deadline to stop it */
    int32_t failed = st != CT_OK;
    CtStatus ast = rt_comm_allreduce(rt, &failed, 1, CT_I32, RUNTIME_REDUCE_MAX);
    if (st == CT_OK && ast != CT_OK) st = ast;
    if (st == CT_OK && failed)
        st = ct_error(CT_ERR_BACKEND,
                      "rank %d: NCCL: another rank could not set up its communicator "
                      "(its own error says why)",
                      rt->rank);
    if (st == CT_OK)
        st = m->open(rt->device.index, rt->world_size, rt->rank, &id, &n->comm);
    if (st != CT_OK) {
        free(n);
        return st;
    }
    n->m = m;
    rt->nccl = n;
    return CT_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for the collective (and the communicator's async errors) until the
 * deadline; a failure or the deadline aborts the communicator. */
static CtStatus wait_done(Runtime *rt, CtStatus started, const char *what)
{
    RtNccl *n = rt->nccl;
    double start = now_s();
    CtStatus st = started;
    for (bool done = false; st == CT_OK;) {
        st = n->m->query(n->comm, &done);
        if (st == CT_OK && done) return CT_OK;
        if (st == CT_OK && now_s() - start > rt->timeout_s)
            st = ct_error(CT_ERR_BACKEND,
                          "rank %d: NCCL %s did not complete within %g s "
                          "(CTRAINER_COLLECTIVE_TIMEOUT): another rank died, failed, or "
                          "stopped calling the same collectives",
                          rt->rank, what, rt->timeout_s);
        if (st == CT_OK) nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
    }
    n->m->comm_abort(n->comm);
    n->comm = NULL;
    return st;
}

/* Opens the communicator on first use. */
static CtStatus begin(Runtime *rt, const char *what)
{
    if (!rt->nccl) TRY(open_nccl(rt));
    if (!rt->nccl->comm)
        return ct_error(CT_ERR_STATE,
                        "rank %d: NCCL %s after an earlier collective failed: the "
                        "communicator was aborted",
                        rt->rank, what);
    return CT_OK;
}

CtStatus rt_nccl_allreduce(Runtime *rt, void *buf, int64_t n, CtDType dt,
                           RuntimeReduceOp op)
{
    int type, nop;
    if (!rt_nccl_datatype(dt, &type) || !rt_nccl_op(op, &nop))
        return ct_error(CT_ERR_DTYPE,
                        "rank %d: NCCL all-reduce of %s (op %d) is not supported",
                        rt->rank, ct_dtype_name(dt), (int)op);
    TRY(begin(rt, "all-reduce"));
    RtNccl *c = rt->nccl;
    return wait_done(rt, c->m->all_reduce(c->comm, buf, (size_t)n, type, nop),
                     "all-reduce");
}

CtStatus rt_nccl_bcast(Runtime *rt, void *buf, int64_t bytes, int root)
{
    TRY(begin(rt, "broadcast"));
    RtNccl *c = rt->nccl;
    return wait_done(rt, c->m->broadcast(c->comm, buf, (size_t)bytes, root), "broadcast");
}

CtStatus rt_nccl_allgather(Runtime *rt, const void *send, void *recv, int64_t bytes)
{
    TRY(begin(rt, "gather"));
    RtNccl *c = rt->nccl;
    return wait_done(rt, c->m->all_gather(c->comm, send, recv, (size_t)bytes), "gather");
}

void rt_nccl_close(Runtime *rt)
{
    RtNccl *n = rt->nccl;
    if (!n) return;
    if (n->comm) n->m->close(n->comm);
    free(n);
    rt->nccl = NULL;
}
