/* Collectives on CUDA tensors through NCCL: one GPU per process (the local
 * rank's), one NCCL communicator per runtime, created on the first CUDA
 * collective from a unique id that rank 0 broadcasts over MPI. Before a
 * collective the device is synchronised (the tensor's producer may be any
 * stream of the backend); the collective runs on the runtime's own stream
 * and is polled against the same deadline as the MPI collectives, aborting
 * the communicator when it passes. Builds without NCCL refuse CUDA tensors
 * with a clear error. */
#include "runtime_internal.h"

#ifdef CTRAINER_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <time.h>

#include "comm_nccl.h"

struct RtNccl {
    ncclComm_t comm;
    cudaStream_t stream;
};

#define NCCL_STATUS(call) nccl_check((call), #call, __FILE__, __LINE__)
#define CUDA_STATUS(call) cuda_check((call), #call, __FILE__, __LINE__)
#define TRY(expr)                                                                        \
    do {                                                                                 \
        CtStatus try_st_ = (expr);                                                       \
        if (try_st_ != CT_OK) return try_st_;                                            \
    } while (0)

static CtStatus nccl_check(ncclResult_t r, const char *call, const char *file, int line)
{
    if (r == ncclSuccess || r == ncclInProgress) return CT_OK;
    return ct_error(CT_ERR_BACKEND, "%s failed (%s:%d): %s", call, file, line,
                    ncclGetErrorString(r));
}

static CtStatus cuda_check(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess) return CT_OK;
    cudaGetLastError(); /* clear a non-sticky error */
    return ct_error(CT_ERR_BACKEND, "%s failed (%s:%d): %s", call, file, line,
                    cudaGetErrorString(e));
}

bool rt_nccl_datatype(CtDType dt, ncclDataType_t *out)
{
    switch (dt) {
    case CT_F32: *out = ncclFloat32; return true;
    case CT_F64: *out = ncclFloat64; return true;
    case CT_BF16: *out = ncclBfloat16; return true;
    case CT_F16: *out = ncclFloat16; return true;
    case CT_I64: *out = ncclInt64; return true;
    case CT_I32: *out = ncclInt32; return true;
    case CT_U8:
    case CT_BOOL: *out = ncclUint8; return true;
    default: return false;
    }
}

bool rt_nccl_op(RuntimeReduceOp op, ncclRedOp_t *out)
{
    switch (op) {
    case RUNTIME_REDUCE_SUM: *out = ncclSum; return true;
    case RUNTIME_REDUCE_MEAN: *out = ncclAvg; return true;
    case RUNTIME_REDUCE_MAX: *out = ncclMax; return true;
    case RUNTIME_REDUCE_MIN: *out = ncclMin; return true;
    default: return false;
    }
}

static CtStatus open_nccl(Runtime *rt)
{
    RtNccl *n = calloc(1, sizeof *n);
    if (!n) return ct_error(CT_ERR_OOM, "rank %d: NCCL: out of memory", rt->rank);
    ncclUniqueId id;
    CtStatus st = CUDA_STATUS(cudaSetDevice(rt->device.index));
    if (st == CT_OK && rt->rank == 0) st = NCCL_STATUS(ncclGetUniqueId(&id));
    /* every rank takes part in the broadcast, also after a local failure,
     * so no rank is left waiting */
    CtStatus bst = rt_comm_bcast(rt, &id, sizeof id, 0);
    if (st == CT_OK) st = bst;
    if (st == CT_OK)
        st = NCCL_STATUS(ncclCommInitRank(&n->comm, rt->world_size, id, rt->rank));
    if (st == CT_OK)
        st = CUDA_STATUS(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    if (st != CT_OK) {
        if (n->comm) ncclCommDestroy(n->comm);
        free(n);
        return st;
    }
    rt->nccl = n;
    return CT_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for the stream, the communicator's async errors and the deadline. */
static CtStatus wait_stream(Runtime *rt, const char *what)
{
    RtNccl *n = rt->nccl;
    double start = now_s();
    for (;;) {
        cudaError_t e = cudaStreamQuery(n->stream);
        if (e == cudaSuccess) return CT_OK;
        if (e != cudaErrorNotReady) return CUDA_STATUS(e);
        ncclResult_t async = ncclSuccess;
        CtStatus st = NCCL_STATUS(ncclCommGetAsyncError(n->comm, &async));
        if (st == CT_OK) st = NCCL_STATUS(async);
        if (st == CT_OK && now_s() - start > rt->timeout_s)
            st = ct_error(CT_ERR_BACKEND,
                          "rank %d: NCCL %s did not complete within %g s "
                          "(CTRAINER_COLLECTIVE_TIMEOUT): another rank died, failed, or "
                          "stopped calling the same collectives",
                          rt->rank, what, rt->timeout_s);
        if (st != CT_OK) {
            ncclCommAbort(n->comm); /* frees the communicator */
            n->comm = NULL;
            return st;
        }
        nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
    }
}

/* Opens the communicator on first use and orders the collective after the
 * work that produced its input. */
static CtStatus begin(Runtime *rt, const char *what)
{
    if (!rt->nccl) TRY(open_nccl(rt));
    if (!rt->nccl->comm)
        return ct_error(CT_ERR_STATE,
                        "rank %d: NCCL %s after an earlier collective failed: the "
                        "communicator was aborted",
                        rt->rank, what);
    TRY(CUDA_STATUS(cudaSetDevice(rt->device.index)));
    return CUDA_STATUS(cudaDeviceSynchronize());
}

CtStatus rt_nccl_allreduce(Runtime *rt, void *buf, int64_t n, CtDType dt,
                           RuntimeReduceOp op)
{
    ncclDataType_t type;
    ncclRedOp_t nop;
    if (!rt_nccl_datatype(dt, &type) || !rt_nccl_op(op, &nop))
        return ct_error(CT_ERR_DTYPE,
                        "rank %d: NCCL all-reduce of %s (op %d) is not supported",
                        rt->rank, ct_dtype_name(dt), (int)op);
    TRY(begin(rt, "all-reduce"));
    TRY(NCCL_STATUS(
        ncclAllReduce(buf, buf, (size_t)n, type, nop, rt->nccl->comm, rt->nccl->stream)));
    return wait_stream(rt, "all-reduce");
}

CtStatus rt_nccl_bcast(Runtime *rt, void *buf, int64_t bytes, int root)
{
    TRY(begin(rt, "broadcast"));
    TRY(NCCL_STATUS(ncclBroadcast(buf, buf, (size_t)bytes, ncclUint8, root,
                                  rt->nccl->comm, rt->nccl->stream)));
    return wait_stream(rt, "broadcast");
}

CtStatus rt_nccl_allgather(Runtime *rt, const void *send, void *recv, int64_t bytes)
{
    TRY(begin(rt, "gather"));
    TRY(NCCL_STATUS(ncclAllGather(send, recv, (size_t)bytes, ncclUint8, rt->nccl->comm,
                                  rt->nccl->stream)));
    return wait_stream(rt, "gather");
}

void rt_nccl_close(Runtime *rt)
{
    RtNccl *n = rt->nccl;
    if (!n) return;
    if (n->comm) ncclCommDestroy(n->comm);
    if (n->stream) cudaStreamDestroy(n->stream);
    free(n);
    rt->nccl = NULL;
}

#else /* no NCCL */

static CtStatus no_nccl(Runtime *rt, const char *what)
{
    return ct_error(
        CT_ERR_UNSUPPORTED,
        "rank %d: %s of a CUDA tensor needs NCCL, which this build of ctrainer "
        "does not have (build with -DCTRAINER_NCCL=ON, or move the tensor to the "
        "CPU first)",
        rt->rank, what);
}

CtStatus rt_nccl_allreduce(Runtime *rt, void *buf, int64_t n, CtDType dt,
                           RuntimeReduceOp op)
{
    return no_nccl(rt, "all-reduce");
}
CtStatus rt_nccl_bcast(Runtime *rt, void *buf, int64_t bytes, int root)
{
    return no_nccl(rt, "broadcast");
}
CtStatus rt_nccl_allgather(Runtime *rt, const void *send, void *recv, int64_t bytes)
{
    return no_nccl(rt, "gather");
}
void rt_nccl_close(Runtime *rt) {}
#endif
