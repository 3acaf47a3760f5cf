/* Private to runtime/: the Runtime struct and the process group seam.
 *
 * The process group (comm_mpi.c: over MPI, or one process without it) moves raw
 * contiguous host buffers between ranks; collectives.c turns tensors into
 * buffers and checks that every rank passed the same layout. Every rt_comm_*
 * call is collective: all ranks call it in the same order. */
#ifndef CTRAINER_RUNTIME_INTERNAL_H
#define CTRAINER_RUNTIME_INTERNAL_H

#include "ctrainer/runtime.h"

typedef struct RtComm RtComm; /* the process group; NULL: one process */
typedef struct RtNccl RtNccl; /* NCCL communicator; NULL until a CUDA collective */

struct Runtime {
    int rank, world_size, local_rank, local_world_size;
    /* the local ranks (this one included) allowed on some core this one is
     * allowed on (rt_comm_open; 1 for one process) */
    int cpu_sharers;
    CtDevice device;
    uint64_t seed;
    char mixed_precision[8]; /* "no", "bf16" or "fp16" */
    int gradient_accumulation_steps;
    double timeout_s; /* collective deadline, CTRAINER_COLLECTIVE_TIMEOUT */
    RtComm *comm;
    RtNccl *nccl;
    RuntimeCommStats stats;
    bool deterministic;
};

/* Default CTRAINER_COLLECTIVE_TIMEOUT, seconds. */
#define RT_DEFAULT_TIMEOUT_S 300.0

/* Was this process started as one of several ranks by an MPI launcher? */
bool rt_comm_launched(void);
/* Joins the process group: sets rt's identity (rank, world size, local
 * rank and size) and rt->comm. */
CtStatus rt_comm_open(Runtime *rt);
/* Leaves it (MPI itself is finalized at process exit). NULL comm: no-op. */
void rt_comm_close(Runtime *rt);
/* Ends every rank with exit status `code` (MPI_Abort). */
void rt_comm_abort(Runtime *rt, int code);

/* In place over n elements of dt (f32, f64, i64, i32, u8); MEAN sums (the
 * caller divides). */
CtStatus rt_comm_allreduce(Runtime *rt, void *buf, int64_t n, CtDType dt,
                           RuntimeReduceOp op);
/* Rank r's `counts[r]` bytes land at recv + sum(counts[0..r)). */
CtStatus rt_comm_allgatherv(Runtime *rt, const void *send, void *recv,
                            const int64_t *counts);
CtStatus rt_comm_bcast(Runtime *rt, void *buf, int64_t bytes, int root);
CtStatus rt_comm_barrier(Runtime *rt);

/* The same for device buffers of CUDA tensors, over NCCL (comm_nccl.c;
 * CT_ERR_UNSUPPORTED in builds without NCCL). Gathers take equal sizes. */
CtStatus rt_nccl_allreduce(Runtime *rt, void *buf, int64_t n, CtDType dt,
                           RuntimeReduceOp op);
CtStatus rt_nccl_bcast(Runtime *rt, void *buf, int64_t bytes, int root);
CtStatus rt_nccl_allgather(Runtime *rt, const void *send, void *recv, int64_t bytes);
void rt_nccl_close(Runtime *rt);

/* The OpenMP threads of a rank allowed on `allowed` of the machine's
 * `online` cores, among local_world_size ranks of which `sharers` (itself
 * included) may run on its cores: the machine's cores split evenly when it
 * may run anywhere, else its cores split among the ranks sharing them (a
 * launcher that bound each rank to its own cores: all of them). At least
 * 1. */
static inline int rt_rank_threads(int allowed, long online, int local_world_size,
                                  int sharers)
{
    int n = allowed < online
                ? allowed / (sharers > 0 ? sharers : 1)
                : (int)online / (local_world_size > 0 ? local_world_size : 1);
    return n >= 1 ? n : 1;
}
/* Sets the OpenMP thread count of a rank (rt_rank_threads) unless
 * OMP_NUM_THREADS is set; OpenBLAS stays at 1. */
void rt_set_rank_threads(int local_world_size, int sharers);

/* The CUDA device of a process of this local rank that sees `visible`
 * devices: its local rank, as `ctrainer launch` gives every rank all of the
 * machine's GPUs; device 0 when it sees exactly one (a launcher that binds
 * one GPU per rank, as Slurm's --gpus-per-task=1 does); -1 when it sees too
 * few. */
static inline int runtime_cuda_index(int visible, int local_rank)
{
    if (visible == 1) return 0;
    return local_rank < visible ? local_rank : -1;
}

#endif
