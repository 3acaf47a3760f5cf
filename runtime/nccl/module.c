/* libctrainer_nccl.so: NCCL and the CUDA runtime behind the table of
 * runtime/nccl_module.h. Built only with CTRAINER_NCCL; every NCCL and CUDA
 * call goes through a check that names the call, file and line. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "../nccl_module.h"

_Static_assert(sizeof(CtNcclId) == sizeof(ncclUniqueId), "unique id size");
#define SAME(ours, nccl) ((int)(ours) == (int)(nccl))
_Static_assert(SAME(RT_NCCL_UINT8, ncclUint8) && SAME(RT_NCCL_INT32, ncclInt32) &&
                   SAME(RT_NCCL_INT64, ncclInt64) && SAME(RT_NCCL_FLOAT16, ncclFloat16) &&
                   SAME(RT_NCCL_FLOAT32, ncclFloat32) &&
                   SAME(RT_NCCL_FLOAT64, ncclFloat64) &&
                   SAME(RT_NCCL_BFLOAT16, ncclBfloat16),
               "NCCL data types");
_Static_assert(SAME(RT_NCCL_SUM, ncclSum) && SAME(RT_NCCL_MAX, ncclMax) &&
                   SAME(RT_NCCL_MIN, ncclMin) && SAME(RT_NCCL_AVG, ncclAvg),
               "NCCL reduction ops");

struct CtNcclComm {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
};

static const CtNcclHost *host;

#define NCCL_CHECK(call) nccl_check((call), #call, __FILE__, __LINE__)
#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)

static CtStatus nccl_check(ncclResult_t r, const char *call, const char *file, int line)
{
    if (r == ncclSuccess || r == ncclInProgress) return CT_OK;
    return host->error(CT_ERR_BACKEND, "%s failed (%s:%d): %s", call, file, line,
                       ncclGetErrorString(r));
}

static CtStatus cuda_check(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess) return CT_OK;
    cudaGetLastError(); /* clear a non-sticky error */
    CtStatus st = e == cudaErrorMemoryAllocation ? CT_ERR_OOM : CT_ERR_BACKEND;
    return host->error(st, "%s failed (%s:%d): %s", call, file, line,
                       cudaGetErrorString(e));
}

static CtStatus unique_id(int device, CtNcclId *id)
{
    CtStatus st = CUDA_CHECK(cudaSetDevice(device));
    return st == CT_OK ? NCCL_CHECK(ncclGetUniqueId((ncclUniqueId *)id)) : st;
}

static void destroy(CtNcclComm *c, bool abort_comm)
{
    if (!c) return;
    if (c->comm) (void)(abort_comm ? ncclCommAbort(c->comm) : ncclCommDestroy(c->comm));
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

static CtStatus open_comm(int device, int world, int rank, const CtNcclId *id,
                          CtNcclComm **out)
{
    CtNcclComm *c = calloc(1, sizeof *c);
    if (!c) return host->error(CT_ERR_OOM, "NCCL: out of memory for a communicator");
    c->device = device;
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    CtStatus st = CUDA_CHECK(cudaSetDevice(device));
    if (st == CT_OK) st = NCCL_CHECK(ncclCommInitRank(&c->comm, world, uid, rank));
    if (st == CT_OK)
        st = CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    if (st != CT_OK) {
        destroy(c, false);
        return st;
    }
    *out = c;
    return CT_OK;
}

/* Orders the next collective after the work that produced its input (any
 * stream of the backend). */
static CtStatus begin(CtNcclComm *c)
{
    CtStatus st = CUDA_CHECK(cudaSetDevice(c->device));
    return st == CT_OK ? CUDA_CHECK(cudaDeviceSynchronize()) : st;
}

static CtStatus all_reduce(CtNcclComm *c, void *buf, size_t n, int type, int op)
{
    CtStatus st = begin(c);
    if (st != CT_OK) return st;
    return NCCL_CHECK(ncclAllReduce(buf, buf, n, (ncclDataType_t)type, (ncclRedOp_t)op,
                                    c->comm, c->stream));
}

static CtStatus broadcast(CtNcclComm *c, void *buf, size_t bytes, int root)
{
    CtStatus st = begin(c);
    if (st != CT_OK) return st;
    return NCCL_CHECK(
        ncclBroadcast(buf, buf, bytes, ncclUint8, root, c->comm, c->stream));
}

static CtStatus all_gather(CtNcclComm *c, const void *send, void *recv, size_t bytes)
{
    CtStatus st = begin(c);
    if (st != CT_OK) return st;
    return NCCL_CHECK(ncclAllGather(send, recv, bytes, ncclUint8, c->comm, c->stream));
}

static CtStatus query(CtNcclComm *c, bool *done)
{
    cudaError_t e = cudaStreamQuery(c->stream);
    *done = e == cudaSuccess;
    if (*done) return CT_OK;
    if (e != cudaErrorNotReady) return CUDA_CHECK(e);
    /* the runtime keeps "not ready" as the thread's last error, which the
     * next kernel launch's check would report: clear it */
    (void)cudaGetLastError();
    ncclResult_t async = ncclSuccess;
    CtStatus st = NCCL_CHECK(ncclCommGetAsyncError(c->comm, &async));
    return st == CT_OK ? NCCL_CHECK(async) : st;
}

static void abort_comm(CtNcclComm *c)
{
    destroy(c, true);
}

static void close_comm(CtNcclComm *c)
{
    destroy(c, false);
}

static const CtNcclModule module = {
    .abi = CT_NCCL_MODULE_ABI,
    .unique_id = unique_id,
    .open = open_comm,
    .all_reduce = all_reduce,
    .broadcast = broadcast,
    .all_gather = all_gather,
    .query = query,
    .comm_abort = abort_comm,
    .close = close_comm,
};

__attribute__((visibility("default"))) const CtNcclModule *
ct_nccl_module_open(const CtNcclHost *h)
{
    if (!h || h->abi != CT_NCCL_MODULE_ABI) return NULL;
    host = h;
    return &module;
}
