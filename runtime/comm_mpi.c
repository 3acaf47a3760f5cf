/* The process group over MPI: one duplicate of MPI_COMM_WORLD per runtime,
 * errors returned (MPI_ERRORS_RETURN) rather than aborting, and every
 * collective nonblocking and polled against a deadline, so a rank that died
 * or stopped calling collectives turns into an error on the others instead
 * of a hang. MPI is initialised by the first runtime of a process started by
 * an MPI launcher (unless the program did) and finalized at process exit:
 * MPI cannot be initialised twice, and a program may create and free
 * runtimes (trainers) one after another.
 *
 * A build without MPI (CTRAINER_MPI=OFF, or no MPI found) has the
 * single-process group at the end of this file: runtime_create refuses
 * WORLD_SIZE > 1 before any of it could be reached with several ranks. */
#ifdef CTRAINER_HAVE_MPI
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_mpi.h"

/* ------------------------------------------------------- type mapping */

MPI_Datatype rt_mpi_datatype(CtDType dt)
{
    switch (dt) {
    case CT_F32: return MPI_FLOAT;
    case CT_F64: return MPI_DOUBLE;
    case CT_I64: return MPI_INT64_T;
    case CT_I32: return MPI_INT32_T;
    case CT_U8:
    case CT_BOOL: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op rt_mpi_op(RuntimeReduceOp op)
{
    switch (op) {
    case RUNTIME_REDUCE_SUM:
    case RUNTIME_REDUCE_MEAN: return MPI_SUM;
    case RUNTIME_REDUCE_MAX: return MPI_MAX;
    case RUNTIME_REDUCE_MIN: return MPI_MIN;
    default: return MPI_OP_NULL;
    }
}

bool rt_mpi_env_launched(const char *(*get)(const char *name))
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                       "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = get(vars[i]);
        if (s && atoi(s) > 1) return true;
    }
    return false;
}

struct RtComm {
    MPI_Comm comm;
    bool broken; /* a collective failed: its request may still be pending */
};

/* Every MPI call goes through MPI_CHECK: evaluated once, the call's text,
 * file and line recorded with MPI's own message on failure. */
#define MPI_CHECK(call) mpi_check((call), #call, __FILE__, __LINE__)
#define MPI_TRY(call)                                                                    \
    do {                                                                                 \
        CtStatus mpi_st_ = MPI_CHECK(call);                                              \
        if (mpi_st_ != CT_OK) return mpi_st_;                                            \
    } while (0)

static CtStatus mpi_check(int rc, const char *call, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return CT_OK;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return ct_error(CT_ERR_BACKEND, "rank %d: %s failed (%s:%d): %s", rank, call, file,
                    line, msg);
}

/* A collective of some runtime failed: MPI_Finalize could wait forever for
 * the ranks that are gone, so process exit skips it (the launcher then ends
 * the job). */
static bool g_broken;

static void finalize_at_exit(void)
{
    int finalized = 1;
    if (!g_broken && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized)
        MPI_Finalize();
}

static const char *get_env(const char *name)
{
    return getenv(name);
}

bool rt_comm_launched(void)
{
    return rt_mpi_env_launched(get_env);
}

static CtStatus init_mpi(void)
{
    int inited = 0, finalized = 0;
    MPI_TRY(MPI_Initialized(&inited));
    MPI_TRY(MPI_Finalized(&finalized));
    if (finalized)
        return ct_error(CT_ERR_STATE, "runtime: MPI was already finalized in this "
                                      "process; it cannot be started again");
    if (!inited) {
        int provided = 0;
        MPI_TRY(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        atexit(finalize_at_exit);
    }
    /* the world communicator too: an error comes back as a status */
    return MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

/* Ranks on this machine: the shared-memory split of the world. */
/* rt->cpu_sharers: the ranks of this machine (this one included) allowed
 * on some core this rank is allowed on. Ranks bound to disjoint cores share
 * none; ranks confined together (a cgroup's cpuset, a socket binding)
 * share them. */
static CtStatus count_cpu_sharers(Runtime *rt, MPI_Comm node)
{
    cpu_set_t mine;
    CPU_ZERO(&mine);
    bool known = sched_getaffinity(0, sizeof mine, &mine) == 0;
    cpu_set_t *all = malloc((size_t)rt->local_world_size * sizeof *all);
    if (!all) return ct_error(CT_ERR_OOM, "runtime: out of memory");
    CtStatus st = MPI_CHECK(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all,
                                          (int)sizeof mine, MPI_BYTE, node));
    rt->cpu_sharers = 0;
    for (int r = 0; st == CT_OK && r < rt->local_world_size; r++) {
        cpu_set_t both;
        CPU_AND(&both, &mine, &all[r]);
        rt->cpu_sharers += !known || CPU_COUNT(&both) > 0;
    }
    free(all);
    return st;
}

static CtStatus local_identity(Runtime *rt)
{
    MPI_Comm node;
    MPI_TRY(MPI_Comm_split_type(rt->comm->comm, MPI_COMM_TYPE_SHARED, rt->rank,
                                MPI_INFO_NULL, &node));
    CtStatus st = MPI_CHECK(MPI_Comm_rank(node, &rt->local_rank));
    if (st == CT_OK) st = MPI_CHECK(MPI_Comm_size(node, &rt->local_world_size));
    if (st == CT_OK) st = count_cpu_sharers(rt, node);
    MPI_Comm_free(&node);
    return st;
}

/* RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE exported by another
 * launcher must agree with MPI, digit for digit. */
static CtStatus check_env_identity(const Runtime *rt)
{
    const char *names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
    int mine[] = {rt->rank, rt->world_size, rt->local_rank, rt->local_world_size};
    for (int i = 0; i < 4; i++) {
        const char *s = getenv(names[i]);
        char want[16];
        snprintf(want, sizeof want, "%d", mine[i]);
        if (s && *s && strcmp(s, want) != 0)
            return ct_error(CT_ERR_INVALID,
                            "runtime: %s=%s but MPI says %d (rank %d of %d); unset %s "
                            "or launch with one launcher",
                            names[i], s, mine[i], rt->rank, rt->world_size, names[i]);
    }
    return CT_OK;
}

static CtStatus open_comm(Runtime *rt)
{
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &rt->comm->comm));
    MPI_TRY(MPI_Comm_set_errhandler(rt->comm->comm, MPI_ERRORS_RETURN));
    MPI_TRY(MPI_Comm_rank(rt->comm->comm, &rt->rank));
    MPI_TRY(MPI_Comm_size(rt->comm->comm, &rt->world_size));
    CtStatus st = local_identity(rt);
    return st == CT_OK ? check_env_identity(rt) : st;
}

CtStatus rt_comm_open(Runtime *rt)
{
    CtStatus st = init_mpi();
    if (st != CT_OK) return st;
    rt->comm = calloc(1, sizeof *rt->comm);
    if (!rt->comm) return ct_error(CT_ERR_OOM, "runtime: out of memory");
    rt->comm->comm = MPI_COMM_NULL;
    st = open_comm(rt);
    if (st != CT_OK) rt_comm_close(rt);
    return st;
}

void rt_comm_close(Runtime *rt)
{
    RtComm *c = rt->comm;
    if (!c) return;
    if (!c->broken && c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c);
    rt->comm = NULL;
}

void rt_comm_abort(Runtime *rt, int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}

/* --------------------------------------------------------------- waiting */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls req until it completes or rt->timeout_s passes. Spins briefly, then
 * sleeps between polls so waiting ranks leave the cores to working ones. */
static CtStatus wait_req(Runtime *rt, MPI_Request *req, const char *what)
{
    double start = now_s();
    for (long polls = 0;; polls++) {
        int done = 0;
        CtStatus st = MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (st != CT_OK) {
            rt->comm->broken = g_broken = true;
            return st;
        }
        if (done) return CT_OK;
        if (polls > 1000) {
            if (now_s() - start > rt->timeout_s) {
                rt->comm->broken = g_broken = true;
                return ct_error(CT_ERR_BACKEND,
                                "rank %d: %s did not complete within %g s "
                                "(CTRAINER_COLLECTIVE_TIMEOUT): another rank died, "
                                "failed, or stopped calling the same collectives",
                                rt->rank, what, rt->timeout_s);
            }
            nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
        }
    }
}

static CtStatus usable(Runtime *rt, const char *what)
{
    if (rt->comm->broken)
        return ct_error(CT_ERR_STATE,
                        "rank %d: %s after an earlier collective failed: the process "
                        "group is broken",
                        rt->rank, what);
    return CT_OK;
}

static void count(Runtime *rt, int64_t bytes, double start)
{
    rt->stats.calls++;
    rt->stats.bytes += bytes;
    rt->stats.seconds += now_s() - start;
}

/* ----------------------------------------------------------- collectives */

/* Large buffers go in chunks of at most INT_MAX elements (MPI's counts are
 * ints). */
CtStatus rt_comm_allreduce(Runtime *rt, void *buf, int64_t n, CtDType dt,
                           RuntimeReduceOp op)
{
    CtStatus st = usable(rt, "all-reduce");
    if (st != CT_OK) return st;
    MPI_Datatype type = rt_mpi_datatype(dt);
    if (type == MPI_DATATYPE_NULL || rt_mpi_op(op) == MPI_OP_NULL)
        return ct_error(CT_ERR_DTYPE,
                        "rank %d: all-reduce of %s (op %d) is not supported", rt->rank,
                        ct_dtype_name(dt), (int)op);
    double start = now_s();
    size_t es = ct_dtype_size(dt);
    for (int64_t off = 0; off < n; off += INT_MAX) {
        int chunk = (int)(n - off < INT_MAX ? n - off : INT_MAX);
        MPI_Request req;
        MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * es, chunk, type,
                               rt_mpi_op(op), rt->comm->comm, &req));
        st = wait_req(rt, &req, "all-reduce");
        if (st != CT_OK) return st;
    }
    count(rt, n * (int64_t)es, start);
    return CT_OK;
}

CtStatus rt_comm_allgatherv(Runtime *rt, const void *send, void *recv,
                            const int64_t *counts)
{
    CtStatus st = usable(rt, "gather");
    if (st != CT_OK) return st;
    int w = rt->world_size;
    int *cnt = malloc(2 * sizeof(int) * (size_t)w);
    if (!cnt) return ct_error(CT_ERR_OOM, "rank %d: gather: out of memory", rt->rank);
    int *displ = cnt + w;
    int64_t total = 0;
    for (int r = 0; r < w; r++) {
        cnt[r] = (int)counts[r];
        displ[r] = (int)total;
        total += counts[r];
    }
    if (total > INT_MAX) {
        free(cnt);
        return ct_error(CT_ERR_UNSUPPORTED,
                        "rank %d: gather of %lld bytes: at most %d bytes in one gather",
                        rt->rank, (long long)total, INT_MAX);
    }
    double start = now_s();
    MPI_Request req;
    st = MPI_CHECK(MPI_Iallgatherv(send, cnt[rt->rank], MPI_BYTE, recv, cnt, displ,
                                   MPI_BYTE, rt->comm->comm, &req));
    free(cnt);
    if (st == CT_OK) st = wait_req(rt, &req, "gather");
    if (st == CT_OK) count(rt, total, start);
    return st;
}

CtStatus rt_comm_bcast(Runtime *rt, void *buf, int64_t bytes, int root)
{
    CtStatus st = usable(rt, "broadcast");
    if (st != CT_OK) return st;
    double start = now_s();
    for (int64_t off = 0; off < bytes; off += INT_MAX) {
        int chunk = (int)(bytes - off < INT_MAX ? bytes - off : INT_MAX);
        MPI_Request req;
        MPI_TRY(
            MPI_Ibcast((char *)buf + off, chunk, MPI_BYTE, root, rt->comm->comm, &req));
        st = wait_req(rt, &req, "broadcast");
        if (st != CT_OK) return st;
    }
    count(rt, bytes, start);
    return CT_OK;
}

CtStatus rt_comm_barrier(Runtime *rt)
{
    CtStatus st = usable(rt, "barrier");
    if (st != CT_OK) return st;
    double start = now_s();
    MPI_Request req;
    MPI_TRY(MPI_Ibarrier(rt->comm->comm, &req));
    st = wait_req(rt, &req, "barrier");
    if (st == CT_OK) count(rt, 0, start);
    return st;
}

#else /* no MPI: one process */

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
#endif
