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
 * launcher bound to cores of its own uses those; ranks confined to the same
 * cores, such as a container's cpuset, split them), set with
 * omp_set_num_threads at runtime_create, unless OMP_NUM_THREADS is set.
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

#include "ctrainer/data.h"
#include "ctrainer/nn.h"
#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Runtime Runtime;

/* The seed pytorch-accelerated uses for every run (set_seed(42)). */
#define RUNTIME_DEFAULT_SEED 42u

/* Explicit settings of a program. A zero field is "not given": the
 * environment (CTRAINER_*, as `ctrainer launch` sets it, see "Settings"
 * below) decides, then the default. A given field beats the environment. */
typedef struct RuntimeArgs {
    /* true: train on CUDA device local_rank (one GPU per process); an error
     * (CT_ERR_DEVICE) when no CUDA device is present or the CUDA backend is
     * not built. Not given: CTRAINER_USE_CPU=false asks for CUDA, anything
     * else trains on the CPU. */
    bool use_cuda;
    /* Base seed of the run (0 -> CTRAINER_SEED, else RUNTIME_DEFAULT_SEED).
     * See runtime_seed. */
    uint64_t seed;
    /* true: train on the CPU even when CTRAINER_USE_CPU=false. use_cuda and
     * use_cpu together are CT_ERR_INVALID. */
    bool use_cpu;
    /* "no", "bf16" or "fp16" (NULL -> CTRAINER_MIXED_PRECISION, else "no").
     * fp16 on the CPU is CT_ERR_UNSUPPORTED. */
    const char *mixed_precision;
    /* >= 1 (0 -> CTRAINER_GRADIENT_ACCUMULATION_STEPS, else 1). */
    int gradient_accumulation_steps;
    /* Bitwise-reproducible kernels only (torch.use_deterministic_algorithms).
     * The CPU backend is deterministic whatever this says: one seed gives
     * the same bits for any OMP_NUM_THREADS and any loader num_workers
     * (tested with 1, 2 and 3 threads and 0 and 2 workers). On CUDA
     * the paths that are not deterministic by default are: cuBLAS(Lt)
     * split-K and stream-K GEMM heuristics, cuDNN autotuned convolution
     * algorithms (backward data/filter), and NCCL all-reduce across
     * different topologies (scatter/index adds and embedding backward add
     * in index order, without atomics, either way). With deterministic
     * set, the CUDA backend chooses the deterministic variants (a GEMM
     * algorithm that sums K in one sequence, cuDNN's deterministic
     * algorithms, cudnn benchmark off) or reports CT_ERR_UNSUPPORTED for
     * an op that has none. Setting it turns ct_set_deterministic
     * (tensor.h) on for the process. */
    bool deterministic;
} RuntimeArgs;

/* A runtime for this process. args NULL means defaults (CPU, seed 42).
 * Under an MPI launcher it joins the process group (collective: every rank
 * creates its runtime; the first runtime of the process initialises MPI
 * unless the program did, and registers MPI_Finalize to run at exit).
 * Otherwise it reads RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from
 * the environment when they are set: malformed values are CT_ERR_INVALID
 * naming the variable, a world size above 1 without MPI is
 * CT_ERR_UNSUPPORTED. CTRAINER_COLLECTIVE_TIMEOUT (seconds, > 0) sets the
 * collective deadline. The run settings come from args, then the CTRAINER_*
 * environment, then the defaults (runtime_settings_resolve); a malformed
 * CTRAINER_* value is CT_ERR_INVALID naming the variable. The config file is
 * not read here: `ctrainer launch` reads it and passes its values through
 * the environment. Returns NULL with the error recorded on failure. */
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
/* Mixed-precision mode of the run: "no", "bf16" or "fp16" (RuntimeArgs,
 * else CTRAINER_MIXED_PRECISION, else "no"). */
const char *runtime_mixed_precision(const Runtime *rt);
/* ----------------------------------------------------------- loss scaler */

/* Dynamic loss scaling for fp16 (PyTorch's GradScaler). Each update step:
 *   backward on scaler_scale(loss);
 *   scaler_unscale(grad block): divides by the scale and checks for inf/NaN
 *     in one pass;
 *   if !scaler_found_inf: clip, optimizer step, scheduler step; else the
 *     step is skipped (counted by scaler_skipped_steps);
 *   scaler_update: on inf/NaN the scale is multiplied by backoff_factor and
 *     the clean-step count restarts; after growth_interval clean steps in a
 *     row it is multiplied by growth_factor.
 * The Trainer does all of this when mixed_precision is fp16. */
typedef struct ScalerArgs {
    double init_scale;       /* > 0 (0 -> 65536) */
    double growth_factor;    /* > 1 (0 -> 2.0) */
    double backoff_factor;   /* in (0, 1) (0 -> 0.5) */
    int64_t growth_interval; /* >= 1 (0 -> 2000) */
} ScalerArgs;

typedef struct GradScaler GradScaler;

/* args NULL: PyTorch's defaults. Out-of-range values are CT_ERR_INVALID.
 * Free with scaler_free (NULL is a no-op). */
GradScaler *scaler_create(const ScalerArgs *args);
void scaler_free(GradScaler *s);
/* loss * scale (a new tensor in the current scope, with autograd). */
Tensor *scaler_scale(const GradScaler *s, Tensor *loss);
/* grads (contiguous f32, e.g. nn_module_grad_block) *= 1 / scale, and
 * records whether any element was inf or NaN (scaler_found_inf). Once per
 * update step, before clipping. */
CtStatus scaler_unscale(GradScaler *s, Tensor *grads);
/* Whether the last scaler_unscale saw an inf or NaN (the step to skip). */
bool scaler_found_inf(const GradScaler *s);
/* Ends the step: counts a skipped step and backs off, or counts a clean one
 * and grows after growth_interval of them. */
void scaler_update(GradScaler *s);
double scaler_get_scale(const GradScaler *s);
/* Steps skipped for inf/NaN gradients since creation (or the loaded state). */
int64_t scaler_skipped_steps(const GradScaler *s);
/* Appends the scaler's state to d as 1-element f64 tensors named
 * "<prefix>scale", "<prefix>growth_tracker", "<prefix>skipped_steps",
 * "<prefix>growth_factor", "<prefix>backoff_factor",
 * "<prefix>growth_interval" (prefix NULL: ""). For training-state
 * checkpoints. */
CtStatus scaler_state_save(const GradScaler *s, CtStateDict *d, const char *prefix);
/* Restores what scaler_state_save wrote. A missing entry or an invalid
 * value is an error naming it, and leaves s unchanged. */
CtStatus scaler_state_load(GradScaler *s, const CtStateDict *d, const char *prefix);

/* Gradient accumulation steps of the run (RuntimeArgs, else
 * CTRAINER_GRADIENT_ACCUMULATION_STEPS, else 1). */
int runtime_gradient_accumulation_steps(const Runtime *rt);

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

/* A loader over ds for this process, as accelerate's prepare(dataloader):
 * data_loader_create with args (borrowed; copied) and the runtime's
 * sharding (shard_rank / shard_world_size = rank / world size: this
 * process loads its rank::world share of every epoch, padded by wrapping
 * around; see DataLoaderArgs), its device, and seed 0 replaced by the
 * base seed, so every process shuffles the same order. Call
 * data_loader_set_epoch at each epoch for a new order. The caller frees
 * the loader. Errors: NULL runtime or args, args that already shard
 * (shard_world_size > 1), and data_loader_create's. */
DataLoader *runtime_prepare_dataloader(Runtime *rt, const Dataset *ds,
                                       const DataLoaderArgs *args);
/* accelerate's backward for data parallelism: tensor_backward(loss), then
 * runtime_reduce_gradients(rt, m) (m prepared with runtime_prepare_model),
 * so m's gradients are the mean over the processes, ready for the
 * optimizer step. For one micro-batch per update; with gradient
 * accumulation, call tensor_backward for the earlier micro-batches of a
 * window (no all-reduce: accelerate's no_sync) and this for its last.
 * NULL loss returns its first error. Collective. */
CtStatus runtime_backward(Runtime *rt, Module *m, Tensor *loss);

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

/* t (contiguous) overwritten in place by root's values on every process.
 * Same dtype, shape and device type everywhere. */
CtStatus runtime_broadcast(Runtime *rt, Tensor *t, int root);

/* Gradient averaging for data parallelism: the model's packed gradient
 * block (runtime_prepare_model packs it) replaced by its mean over the
 * processes, in one all-reduce. The Trainer calls it once per optimizer
 * update, never on the micro-batches of an accumulation window. A no-op
 * with one process. */
CtStatus runtime_reduce_gradients(Runtime *rt, Module *m);

/* PyTorch's SyncBatchNorm.convert_sync_batchnorm over this runtime's
 * process group: nn_convert_sync_batch_norm(m, <runtime_reduce SUM>, rt),
 * so every BatchNorm1d/2d of m takes its training statistics over all
 * processes (see nn.h; rt must outlive the model's use). With one process
 * the layers are converted (type "SyncBatchNorm") without an all-reduce,
 * and compute exactly as BatchNorm. Call it on every process, before
 * training; the state dict is unchanged. Returns the number of layers
 * converted, or -1 (NULL rt or m). */
int64_t runtime_convert_sync_batch_norm(Runtime *rt, Module *m);

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

/* -------------------------------------------------------------- settings
 *
 * The settings of a run (accelerate's config schema where it fits), as a
 * YAML config file, as `ctrainer launch` flags and as environment
 * variables. Each comes from the first of these that gives it:
 *
 *     explicit API arguments > command-line flags > environment
 *       > config file > defaults
 *
 * Config file (YAML, read with libcyaml), every key optional:
 *
 *     distributed_type: MULTI_CPU      # NO | MULTI_CPU | MULTI_GPU
 *     num_processes: 4                 # total over all machines, >= 1
 *     num_machines: 1                  # >= 1
 *     machine_rank: 0                  # in [0, num_machines)
 *     main_process_ip: 10.0.0.1        # rank 0's host (exported as MASTER_ADDR)
 *     main_process_port: 29500         # 1..65535 (exported as MASTER_PORT)
 *     hostfile: /home/me/hostfile      # an mpirun hostfile, for several machines
 *     mixed_precision: bf16            # no | bf16 | fp16
 *     gradient_accumulation_steps: 1   # >= 1
 *     use_cpu: true                    # true/false (yes/no, on/off)
 *     gpu_ids: all                     # all, or a comma list: 0,1
 *     seed: 42                         # unsigned 64-bit
 *
 * Validation is strict: a syntax error, a second YAML document, an unknown
 * or repeated key, a value of the wrong type and a value out of range are
 * CT_ERR_FORMAT with
 * a message that starts with "FILE:LINE: ".
 *
 * Environment: each option is read from CTRAINER_<KEY in upper case>
 * (CTRAINER_NUM_PROCESSES, CTRAINER_MIXED_PRECISION, ...), with the same
 * value syntax as the flags. `ctrainer launch` and runtime_launch give every
 * rank CTRAINER_MIXED_PRECISION, CTRAINER_GRADIENT_ACCUMULATION_STEPS,
 * CTRAINER_USE_CPU and CTRAINER_SEED (which runtime_create reads),
 * OMP_NUM_THREADS (cores of a machine / ranks on it, at least 1),
 * MASTER_ADDR and MASTER_PORT, and CUDA_VISIBLE_DEVICES when gpu_ids is not
 * "all". The config file is $CTRAINER_CONFIG_FILE, else
 * ~/.cache/ctrainer/default_config.yaml. */

typedef enum RuntimeDistributedType {
    RUNTIME_DISTRIBUTED_NO = 0,
    RUNTIME_DISTRIBUTED_MULTI_CPU,
    RUNTIME_DISTRIBUTED_MULTI_GPU,
} RuntimeDistributedType;

/* The options, in the order of the file's keys. */
typedef enum RuntimeOption {
    RUNTIME_OPT_DISTRIBUTED_TYPE = 0,
    RUNTIME_OPT_NUM_PROCESSES,
    RUNTIME_OPT_NUM_MACHINES,
    RUNTIME_OPT_MACHINE_RANK,
    RUNTIME_OPT_MAIN_PROCESS_IP,
    RUNTIME_OPT_MAIN_PROCESS_PORT,
    RUNTIME_OPT_HOSTFILE,
    RUNTIME_OPT_MIXED_PRECISION,
    RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS,
    RUNTIME_OPT_USE_CPU,
    RUNTIME_OPT_GPU_IDS,
    RUNTIME_OPT_SEED,
    RUNTIME_OPT_COUNT
} RuntimeOption;

/* Where a resolved option came from. */
typedef enum RuntimeSource {
    RUNTIME_SOURCE_DEFAULT = 0,
    RUNTIME_SOURCE_CONFIG_FILE,
    RUNTIME_SOURCE_ENVIRONMENT,
    RUNTIME_SOURCE_COMMAND_LINE,
    RUNTIME_SOURCE_API,
} RuntimeSource;

#define RUNTIME_DEFAULT_PORT 29500
/* Longest string value (address, path, GPU list), '\0' excluded. */
#define RUNTIME_SETTING_MAX 1023

/* One set of settings: a config file's contents, a set of flags, or the
 * resolved result. Plain data (no ownership); defaults in comments. */
typedef struct RuntimeSettings {
    RuntimeDistributedType distributed_type;       /* NO */
    int num_processes;                             /* 1 */
    int num_machines;                              /* 1 */
    int machine_rank;                              /* 0 */
    char main_process_ip[RUNTIME_SETTING_MAX + 1]; /* "" (127.0.0.1 at launch) */
    int main_process_port;                         /* RUNTIME_DEFAULT_PORT */
    char hostfile[RUNTIME_SETTING_MAX + 1];        /* "" (none) */
    char mixed_precision[8];                       /* "no" */
    int gradient_accumulation_steps;               /* 1 */
    bool use_cpu;                                  /* false */
    char gpu_ids[RUNTIME_SETTING_MAX + 1];         /* "all" */
    uint64_t seed;                                 /* RUNTIME_DEFAULT_SEED */
    /* Bit (1u << RuntimeOption) for each option this set gives; options
     * whose bit is clear hold their default. */
    unsigned set;
    /* Filled by runtime_settings_resolve: where each option came from. */
    RuntimeSource source[RUNTIME_OPT_COUNT];
} RuntimeSettings;

/* The defaults, no option set. */
void runtime_settings_default(RuntimeSettings *s);
/* The key of an option ("num_processes"); NULL for an invalid option. */
const char *runtime_option_key(RuntimeOption opt);
/* Looks a key up; CT_ERR_INVALID "unknown option" when there is none. */
CtStatus runtime_option_find(const char *key, RuntimeOption *opt);
/* Parses a value written as on the command line or in the environment
 * ("2", "bf16", "true", "0,1") into option opt of s and sets its bit.
 * A bad value is CT_ERR_INVALID naming the key, the value and what is
 * expected; s is unchanged then. */
CtStatus runtime_settings_set(RuntimeSettings *s, RuntimeOption opt, const char *value);
/* Writes option opt of s as text (the inverse of runtime_settings_set)
 * into buf (size bytes, truncated); returns buf. */
const char *runtime_settings_format(const RuntimeSettings *s, RuntimeOption opt,
                                    char *buf, size_t size);
/* "default", "config file", "environment", "command line" or "argument". */
const char *runtime_source_name(RuntimeSource src);

/* Reads the CTRAINER_<KEY> variables of env ("NAME=VALUE" strings, NULL
 * terminated, as environ; NULL is empty) into *out (defaults, then the
 * variables, their bits set). A bad value is CT_ERR_INVALID naming the
 * variable. */
CtStatus runtime_settings_from_env(const char *const *env, RuntimeSettings *out);

/* The precedence rule, as a pure function: each option of *out comes from
 * the first of api, cli, env (read as runtime_settings_from_env), file
 * that sets it, else its default; out->set is the union of their bits and
 * out->source says where each option came from. Any of the four may be
 * NULL (gives nothing). Then checks the combination: machine_rank <
 * num_machines, num_processes a multiple of num_machines and at least
 * num_machines, fp16 not with use_cpu (CT_ERR_INVALID naming the options
 * and their sources). */
CtStatus runtime_settings_resolve(const RuntimeSettings *api, const RuntimeSettings *cli,
                                  const char *const *env, const RuntimeSettings *file,
                                  RuntimeSettings *out);

/* The config file path: $CTRAINER_CONFIG_FILE when set and not empty, else
 * $HOME/.cache/ctrainer/default_config.yaml, into buf (size bytes).
 * CT_ERR_INVALID when neither variable is set or the path does not fit. */
CtStatus runtime_config_default_path(char *buf, size_t size);
/* Reads a YAML config file into *out (defaults, then the file's keys, their
 * bits set). CT_ERR_IO when it cannot be read; CT_ERR_FORMAT "PATH:LINE:
 * ..." for a syntax error, an unknown or repeated key, a wrong type or a
 * bad value. *out is unspecified on error. */
CtStatus runtime_config_load(const char *path, RuntimeSettings *out);
/* Writes every option of s (set or not, so the file records the whole
 * setup) as a YAML config file, atomically (a temporary file renamed over
 * path). Fails with CT_ERR_IO naming the path. */
CtStatus runtime_config_write(const char *path, const RuntimeSettings *s);

/* -------------------------------------------------------------- launching */

/* What a launch needs to know about this machine; runtime_launch_command
 * takes it as an argument so it stays a pure function. */
#define RUNTIME_MAX_FORWARD_ENV 32
#define RUNTIME_ENV_NAME_MAX    64

typedef struct RuntimeHost {
    char mpirun[RUNTIME_SETTING_MAX + 1]; /* path of mpirun */
    int cpu_count;                        /* usable cores of this machine */
    int gpu_count;                        /* GPUs of this machine */
    bool is_root;                         /* uid 0: mpirun needs --allow-run-as-root */
    /* This process's stdout is a terminal. mpirun hands its workers a
     * pseudo-terminal whatever it writes to, so the launch passes this on
     * (CTRAINER_STDOUT_TTY) and progress bars redraw in place only when the
     * user's own output is a terminal. */
    bool stdout_tty;
    /* Names of this process's environment variables every rank gets as
     * they are (CTRAINER_*, NCCL_*, CUDA_VISIBLE_DEVICES), "" after the
     * last: mpirun gives its own environment to the ranks on this machine
     * only, so the launch names them (-x NAME) for the other machines' too. */
    char forward_env[RUNTIME_MAX_FORWARD_ENV][RUNTIME_ENV_NAME_MAX];
} RuntimeHost;

/* Probes this machine: mpirun from PATH (else the one found at build
 * time), the cores of this process's affinity mask, the GPUs counted
 * without initialising CUDA (the entries of /proc/driver/nvidia/gpus; 0
 * without an NVIDIA driver), the user id, and the environment variables to
 * forward (the first RUNTIME_MAX_FORWARD_ENV). When no mpirun is found,
 * h->mpirun is "" and CT_ERR_UNSUPPORTED is returned with the rest filled. */
CtStatus runtime_host_probe(RuntimeHost *h);

/* The mpirun command of a launch: argv[0..argc) and a NULL terminator.
 * Free with runtime_command_free. */
typedef struct RuntimeCommand {
    int argc;
    char **argv;
    bool use_gpus; /* the ranks train on GPUs, one each */
} RuntimeCommand;

/* Builds the mpirun command line that starts the ranks of program (prog[0]
 * its path, then its arguments; nprog >= 1) with resolved settings s on
 * host h: `mpirun [--allow-run-as-root] [--oversubscribe] -np N
 * [--hostfile F] --bind-to none -x VAR=VALUE... PROGRAM ARGS...`, with the
 * worker environment described under "Settings". --oversubscribe is added
 * when one machine runs more ranks than it has cores. The ranks use GPUs
 * when use_cpu is false, distributed_type is not MULTI_CPU and the host has
 * GPUs. Errors (CT_ERR_INVALID,
 * clear, nothing allocated): several machines without a hostfile (mpirun
 * starts every machine's ranks from this one), MULTI_GPU without GPUs or
 * with use_cpu, more GPU ranks per machine than GPUs, no program. */
CtStatus runtime_launch_command(const RuntimeSettings *s, const RuntimeHost *h,
                                char *const *prog, int nprog, RuntimeCommand *out);
/* NULL is a no-op. */
void runtime_command_free(RuntimeCommand *cmd);
/* "Launching training on N CPUs." (or GPUs; "1 CPU" for one), the line
 * launchers print before starting the ranks, into buf; returns buf. */
const char *runtime_launch_line(int num_processes, bool use_gpus, char *buf, size_t size);
/* Runs cmd (fork + exec, stdout and stderr shared) and waits for it.
 * *exit_code: its exit status, or 128 + signal when it was killed. Fails
 * (CT_ERR_IO) only when it could not be started. */
CtStatus runtime_command_run(const RuntimeCommand *cmd, int *exit_code);

/* True when this process was started as one rank of several (by mpirun,
 * `ctrainer launch`, torchrun...): OMPI_COMM_WORLD_SIZE, PMI_SIZE or
 * WORLD_SIZE is set. */
bool runtime_is_launched_rank(void);

/* The in-program launcher, accelerate's notebook_launcher: runs fn(user)
 * on num_processes processes of this machine.
 *  - In a rank (runtime_is_launched_rank), or when num_processes is 1: calls
 *    fn(user) and returns CT_OK when it returns 0, else CT_ERR_STATE naming
 *    the rank and the value.
 *  - Otherwise re-executes this program (/proc/self/exe with its original
 *    arguments) under mpirun with num_processes ranks, the settings of the
 *    CTRAINER_* environment and the worker environment of `ctrainer
 *    launch`, prints the same "Launching training on ..." line, and waits:
 *    CT_OK when every rank exited 0, else CT_ERR_STATE with mpirun's exit
 *    status. fn is not called in this process.
 * Code after the call runs in this process and in every rank, so put the
 * training inside fn. CT_ERR_STATE when CUDA was already initialised in
 * this process (create runtimes and tensors inside fn); CT_ERR_INVALID for
 * num_processes < 1. */
CtStatus runtime_launch(int (*fn)(void *user), void *user, int num_processes);

#ifdef __cplusplus
}
#endif
#endif
