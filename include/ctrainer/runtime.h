/* ctrainer — the runtime: processes, devices, collectives, seeding.
 *
 * The runtime is the part HF accelerate plays under pytorch-accelerated: it
 * knows which process this is (rank, world size, local rank), which device
 * the process trains on, and how to combine tensors across processes
 * (gather, reduce, barrier). The Trainer goes through it for everything
 * that involves more than one process, so a training program written
 * against it runs unchanged on one process or many.
 *
 * This build is single-process: world size 1, rank 0, and the collectives
 * are local (a gather is a copy, a reduce is a copy, a barrier returns at
 * once). The contracts below are the distributed ones; a multi-process
 * build (MPI/NCCL) fills them in without changing callers. When the
 * environment says the program was started as one of several ranks
 * (WORLD_SIZE > 1) and no multi-process backend is built, runtime_create
 * fails with CT_ERR_UNSUPPORTED instead of silently training N copies.
 *
 * Ownership: a Runtime is created with runtime_create and freed with
 * runtime_free. Tensors the collectives return are owned like op results
 * (the open scope, or the caller when none is open).
 */
#ifndef CTRAINER_RUNTIME_H
#define CTRAINER_RUNTIME_H

#include <stdarg.h>

#include "ctrainer/nn.h"
#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Runtime Runtime;

/* The seed pytorch-accelerated uses for every run (set_seed(42)). */
#define RUNTIME_DEFAULT_SEED 42u

typedef struct RuntimeArgs {
    /* false (default): train on the CPU. true: train on CUDA device
     * local_rank (one GPU per process); an error (CT_ERR_DEVICE) when no
     * CUDA device is present or the CUDA backend is not built. */
    bool use_cuda;
    /* Base seed of the run (0 -> RUNTIME_DEFAULT_SEED). See runtime_seed. */
    uint64_t seed;
    /* Bitwise-reproducible kernels only (torch.use_deterministic_algorithms).
     * The CPU backend is deterministic whatever this says: one seed gives
     * the same bits for any OMP_NUM_THREADS and any loader num_workers
     * (tested with 1, 2 and 3 threads and 0 and 2 workers). On CUDA
     * the paths that are not deterministic by default are: scatter/index
     * adds and embedding backward through atomicAdd, cuBLAS(Lt) split-K and
     * stream-K GEMM heuristics, cuDNN autotuned convolution algorithms
     * (backward data/filter), and NCCL all-reduce across different
     * topologies. With deterministic set, the CUDA backend must choose the
     * deterministic variants (sorted segment reductions instead of atomics,
     * a fixed GEMM algorithm without split-K, cuDNN's deterministic
     * algorithms, cudnn benchmark off) or report CT_ERR_UNSUPPORTED for an
     * op that has none. */
    bool deterministic;
} RuntimeArgs;

/* A runtime for this process. args NULL means defaults (CPU, seed 42).
 * Reads RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the
 * environment when they are set (as torchrun and `ctrainer launch` set
 * them): malformed values are CT_ERR_INVALID naming the variable, and a
 * world size above 1 is CT_ERR_UNSUPPORTED in this single-process build.
 * Returns NULL with the error recorded on failure. */
Runtime *runtime_create(const RuntimeArgs *args);
/* NULL is a no-op. */
void runtime_free(Runtime *rt);

/* Process identity. rank in [0, world_size); local_rank is the rank within
 * this machine. */
int runtime_rank(const Runtime *rt);
int runtime_world_size(const Runtime *rt);
int runtime_local_rank(const Runtime *rt);
int runtime_local_world_size(const Runtime *rt);
/* rank == 0: the one process that writes files and logs for the run. */
bool runtime_is_main_process(const Runtime *rt);
/* local_rank == 0: one process per machine. */
bool runtime_is_local_main_process(const Runtime *rt);
/* world_size > 1. */
bool runtime_is_distributed(const Runtime *rt);
/* The device this process computes on (models and batches go there). */
CtDevice runtime_device(const Runtime *rt);
/* Mixed-precision mode of the run: "no" in this build (bf16/fp16 come with
 * the autocast work). */
const char *runtime_mixed_precision(const Runtime *rt);

/* ------------------------------------------------------------ placement */

/* Moves the model's parameters, gradients and buffers to the runtime's
 * device (nn_module_to, which also packs them). Idempotent. */
CtStatus runtime_prepare_model(Runtime *rt, Module *m);
/* t on the runtime's device: tensor_contiguous(t) (t itself, with a new
 * reference in the open scope, when contiguous) when it is already there,
 * else a copy (differentiable). NULL t returns NULL keeping the first
 * error. */
Tensor *runtime_to_device(Runtime *rt, Tensor *t);

/* -------------------------------------------------------------- seeding */

/* The base seed of the run (RuntimeArgs.seed, or 42). */
uint64_t runtime_base_seed(const Runtime *rt);
/* RuntimeArgs.deterministic: backends must use bitwise-reproducible
 * kernels only. */
bool runtime_deterministic(const Runtime *rt);
/* A per-process seed: base + rank, the convention of accelerate's
 * set_seed(device_specific=True), so augmentation and dropout streams
 * differ between processes while the run stays reproducible. Use the base
 * seed itself (not this) for anything every process must agree on, such as
 * the shuffle order of a sharded loader. */
uint64_t runtime_seed(const Runtime *rt, uint64_t base);
/* A Philox generator keyed by (runtime_seed(rt, base), stream). */
CtGenerator runtime_generator(const Runtime *rt, uint64_t base, uint64_t stream);

/* ---------------------------------------------------------- collectives
 *
 * Every process must make the same collective calls in the same order
 * (with tensors of the same dtype and, except along dim 0 for gathers, the
 * same shape), as with any MPI/NCCL program. A collective given a NULL
 * tensor returns NULL keeping the first error. */

/* Waits until every process reaches the barrier. */
CtStatus runtime_barrier(Runtime *rt);

/* Concatenates t from every process along dim 0, in rank order; every
 * process gets the whole result. t must have at least one dim and the same
 * trailing dims on every process; the size of dim 0 must be equal on all
 * processes (use runtime_gather_padded otherwise). Not differentiable: the
 * result is detached. */
Tensor *runtime_gather(Runtime *rt, Tensor *t);
/* As runtime_gather for tensors whose dim 0 differs between processes (the
 * last eval batch, variable numbers of detections): each process's tensor
 * is padded along dim 0 with pad_value (cast to t's dtype) to the largest
 * size, gathered, and the padding is removed again by position (each
 * process's true size is gathered first), so real rows that happen to equal
 * pad_value are kept. The result has sum-of-sizes rows. */
Tensor *runtime_gather_padded(Runtime *rt, Tensor *t, double pad_value);
/* accelerate's gather_for_metrics: drops the last num_padding_rows rows of
 * t (the wrap-around duplicates a sharded loader added to even out the
 * processes: data_loader_batch_padding of the loader t's batch came from),
 * then runtime_gather_padded, so metrics counted over the gathered rows of
 * an epoch count every sample exactly once. Call it per batch. The result
 * is detached, owned like runtime_gather's; it has 0 rows when every
 * process dropped all of its rows. Errors: a 0-d t, num_padding_rows
 * outside [0, rows of t]. */
Tensor *runtime_gather_for_metrics(Runtime *rt, Tensor *t, int64_t num_padding_rows);

typedef enum RuntimeReduceOp {
    RUNTIME_REDUCE_SUM = 0,
    RUNTIME_REDUCE_MEAN, /* sum / world_size */
    RUNTIME_REDUCE_MAX,
    RUNTIME_REDUCE_MIN,
} RuntimeReduceOp;

/* Element-wise reduction of t over all processes; every process gets the
 * result (same shape, dtype and device as t; float or integer dtypes, MEAN
 * floats only). Not differentiable. */
Tensor *runtime_reduce(Runtime *rt, Tensor *t, RuntimeReduceOp op);
/* The same for n host doubles, in place: what the trainer uses for loss
 * totals and for agreeing on a stop request (MAX of a 0/1 flag). */
CtStatus runtime_reduce_f64(Runtime *rt, double *values, int n, RuntimeReduceOp op);

/* ---------------------------------------------------------------- output */

/* printf to stdout on the main process only (a no-op elsewhere), flushed,
 * so a message appears once per run rather than once per process. */
void runtime_print(const Runtime *rt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void runtime_vprint(const Runtime *rt, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif
