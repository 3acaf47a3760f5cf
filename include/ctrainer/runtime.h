/* ctrainer — the runtime: processes, devices, collectives, seeding.
 *
 * The runtime is the part HF accelerate plays under pytorch-accelerated: it
 * knows which process this is (rank, world size, local rank), which device
 * the process trains on, and how to combine tensors across processes
 * (gather, reduce, barrier). The Trainer goes through it for everything
 * that involves more than one process, so a training program written
 * against it runs unchanged on one process or many.
 *
 * Processes. A program started by an MPI launcher as one of several ranks
 * (`ctrainer launch`, `mpirun -np N`) joins the process group over MPI:
 * rank and world size come from MPI, the local rank and size from the ranks
 * sharing this machine. A program started alone never initialises MPI, and
 * runs as world size 1 with local collectives (a gather is a copy, a reduce
 * a copy, a barrier returns at once). RANK / WORLD_SIZE / LOCAL_RANK /
 * LOCAL_WORLD_SIZE from other launchers are read too; under MPI they must
 * agree with it. WORLD_SIZE > 1 without an MPI launcher (or in a build
 * without MPI, CTRAINER_MPI=OFF) is refused with CT_ERR_UNSUPPORTED instead
 * of silently training N copies.
 *
 * Devices. Collectives on CPU tensors go over MPI; on CUDA tensors over
 * NCCL (one GPU per process: device local_rank; the NCCL communicator is
 * created on the first CUDA collective, its unique id broadcast over MPI).
 * A build without NCCL refuses CUDA tensors in collectives with
 * CT_ERR_UNSUPPORTED.
 *
 * Threads. With several ranks on one machine, each rank runs
 * cores / ranks-on-this-machine OpenMP threads (at least 1; a rank the
 * launcher bound to a subset of the cores uses that subset), set
 * with omp_set_num_threads at runtime_create, unless OMP_NUM_THREADS is set.
 * OpenBLAS always runs single-threaded inside the library's one pool.
 *
 * Faults. Every collective waits at most CTRAINER_COLLECTIVE_TIMEOUT seconds
 * (default 300) for the other ranks, then fails with CT_ERR_BACKEND naming
 * this rank: a rank that died or failed never leaves the others hanging.
 * After a failed collective the process group is broken: later collectives
 * fail at once, and MPI is not finalized at exit. A program ends a
 * failed distributed run with runtime_abort, which ends every rank at once
 * (mpirun also ends the job when a rank dies or exits non-zero). A rank
 * that only returns from main after a failure waits in MPI_Finalize at exit
 * until the others' collectives time out: bounded, but slow. Under Open
 * MPI's mpirun, when one rank is killed the others are killed within
 * seconds.
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
} RuntimeArgs;

/* A runtime for this process. args NULL means defaults (CPU, seed 42).
 * Under an MPI launcher it joins the process group (collective: every rank
 * creates its runtime; the first runtime of the process initialises MPI
 * unless the program did, and registers MPI_Finalize to run at exit).
 * Otherwise it reads RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from
 * the environment when they are set: malformed values are CT_ERR_INVALID
 * naming the variable, a world size above 1 without MPI is
 * CT_ERR_UNSUPPORTED. CTRAINER_COLLECTIVE_TIMEOUT (seconds, > 0) sets the
 * collective deadline. Returns NULL with the error recorded on failure. */
Runtime *runtime_create(const RuntimeArgs *args);
/* Leaves the process group. MPI itself, when runtime_create initialised it,
 * is finalized at process exit (not after a failed collective: see Faults
 * above), so runtimes can be created and freed one after another. NULL is
 * a no-op. */
void runtime_free(Runtime *rt);
/* Ends a failed run on every rank: prints "ctrainer: rank R of N failed:
 * <status>: <last error>" to stderr and, when distributed, aborts every rank
 * with exit status 1 (MPI_Abort; this call does not return). With one
 * process it only prints and returns 1, so `return runtime_abort(rt, st);`
 * from main ends the program the same way everywhere. NULL rt prints
 * without a rank. */
int runtime_abort(Runtime *rt, CtStatus st);

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
 * device (nn_module_to, which also packs them), then, with several
 * processes, broadcasts the parameters and buffers from rank 0 so every
 * process starts from the same model. Idempotent; collective. */
CtStatus runtime_prepare_model(Runtime *rt, Module *m);
/* t on the runtime's device: tensor_contiguous(t) (t itself, with a new
 * reference in the open scope, when contiguous) when it is already there,
 * else a copy (differentiable). NULL t returns NULL keeping the first
 * error. */
Tensor *runtime_to_device(Runtime *rt, Tensor *t);

/* -------------------------------------------------------------- seeding */

/* The base seed of the run (RuntimeArgs.seed, or 42). */
uint64_t runtime_base_seed(const Runtime *rt);
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

/* t (contiguous) overwritten in place by root's values on every process.
 * Same dtype, shape and device type everywhere. */
CtStatus runtime_broadcast(Runtime *rt, Tensor *t, int root);

/* Gradient averaging for data parallelism: the model's packed gradient
 * block (runtime_prepare_model packs it) replaced by its mean over the
 * processes, in one all-reduce. The Trainer calls it once per optimizer
 * update, never on the micro-batches of an accumulation window. A no-op
 * with one process. */
CtStatus runtime_reduce_gradients(Runtime *rt, Module *m);

/* "Main process first": code between begin and end runs on the main
 * process, then on the others together (downloading or preprocessing a
 * dataset once, then reading the cache). Every process calls both:
 *
 *     runtime_main_process_first_begin(rt);   // others wait here
 *     ds = load_or_build_cache(path);
 *     runtime_main_process_first_end(rt);     // the main process releases them
 */
CtStatus runtime_main_process_first_begin(Runtime *rt);
CtStatus runtime_main_process_first_end(Runtime *rt);

/* What the collectives of this runtime moved so far: calls, bytes of
 * payload per process, and seconds spent in them (waiting included). */
typedef struct RuntimeCommStats {
    int64_t calls, bytes;
    double seconds;
} RuntimeCommStats;
RuntimeCommStats runtime_comm_stats(const Runtime *rt);

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
