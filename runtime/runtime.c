/* The runtime: process identity from the environment, the device, seeding
 * and main-process printing. The process group itself is in comm_*.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "settings_internal.h"

/* Reads an integer environment variable; *out keeps `dflt` when unset. */
static CtStatus env_int(const char *name, int dflt, int lo, int *out)
{
    *out = dflt;
    const char *s = getenv(name);
    if (!s || !*s) return CT_OK;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > 1 << 20)
        return ct_error(CT_ERR_INVALID,
                        "runtime: environment variable %s='%s' is not an "
                        "integer >= %d",
                        name, s, lo);
    *out = (int)v;
    return CT_OK;
}

/* Identity from another launcher's environment (or none: one process). */
static CtStatus read_env_ranks(Runtime *rt)
{
    rt->cpu_sharers = 1;
    CtStatus st = env_int("WORLD_SIZE", 1, 1, &rt->world_size);
    if (st == CT_OK) st = env_int("RANK", 0, 0, &rt->rank);
    if (st == CT_OK) st = env_int("LOCAL_RANK", rt->rank, 0, &rt->local_rank);
    if (st == CT_OK)
        st = env_int("LOCAL_WORLD_SIZE", rt->world_size, 1, &rt->local_world_size);
    if (st != CT_OK) return st;
    if (rt->rank >= rt->world_size)
        return ct_error(CT_ERR_INVALID, "runtime: RANK=%d is not below WORLD_SIZE=%d",
                        rt->rank, rt->world_size);
    if (rt->local_rank >= rt->local_world_size)
        return ct_error(CT_ERR_INVALID,
                        "runtime: LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d",
                        rt->local_rank, rt->local_world_size);
    if (rt->world_size > 1)
        return ct_error(CT_ERR_UNSUPPORTED,
                        "runtime: WORLD_SIZE=%d but %s; start the ranks with "
                        "`ctrainer launch` or mpirun",
                        rt->world_size,
#ifdef CTRAINER_HAVE_MPI
                        "the process was not started by an MPI launcher, and "
                        "ctrainer's process group is MPI"
#else
                        "this build of ctrainer is single-process (no MPI); "
                        "rebuild with CTRAINER_MPI=ON and"
#endif
        );
    return CT_OK;
}

static CtStatus read_timeout(Runtime *rt)
{
    rt->timeout_s = RT_DEFAULT_TIMEOUT_S;
    const char *s = getenv("CTRAINER_COLLECTIVE_TIMEOUT");
    if (!s || !*s) return CT_OK;
    char *end = NULL;
    double v = strtod(s, &end);
    if (*end || !(v > 0) || v > 1e9)
        return ct_error(CT_ERR_INVALID,
                        "runtime: environment variable CTRAINER_COLLECTIVE_TIMEOUT='%s' "
                        "is not a number of seconds > 0",
                        s);
    rt->timeout_s = v;
    return CT_OK;
}

static CtStatus join(Runtime *rt)
{
    CtStatus st = read_timeout(rt);
    if (st != CT_OK) return st;
    if (!rt_comm_launched()) return read_env_ranks(rt);
    st = rt_comm_open(rt);
    if (st == CT_OK) rt_set_rank_threads(rt->local_world_size, rt->cpu_sharers);
    return st;
}

static CtStatus pick_device(Runtime *rt, bool use_cuda)
{
    if (!use_cuda) return CT_OK;
    int n = ct_cuda_device_count();
    int idx = runtime_cuda_index(n, rt->local_rank);
    if (idx < 0)
        return ct_error(CT_ERR_DEVICE,
                        "runtime: use_cuda asks for CUDA device %d (local rank) but %d "
                        "CUDA device(s) are usable%s",
                        rt->local_rank, n,
                        n == 0 ? " (no GPU, or the CUDA backend is not built)" : "");
    rt->device = ct_cuda(idx);
    /* the device's instance and context now (a synchronisation of nothing
     * makes them), as accelerate sets the process's device: the first CUDA
     * instance is then this process's GPU, whose context pinned memory uses
     * too, so no rank starts a context on GPU 0 */
    return ct_device_synchronize(rt->device);
}

Runtime *runtime_create(const RuntimeArgs *args)
{
    RuntimeSettings set;
    if (runtime_args_resolve(args, &set) != CT_OK) return NULL;
    bool use_cuda =
        !set.use_cpu && set.source[RUNTIME_OPT_USE_CPU] != RUNTIME_SOURCE_DEFAULT;
    if (!use_cuda && strcmp(set.mixed_precision, "fp16") == 0) {
        ct_error(CT_ERR_UNSUPPORTED,
                 "runtime_create: mixed_precision fp16 (%s) needs CUDA; "
                 "use bf16 on the CPU",
                 runtime_source_name(set.source[RUNTIME_OPT_MIXED_PRECISION]));
        return NULL;
    }
    Runtime *rt = calloc(1, sizeof *rt);
    if (!rt) {
        ct_error(CT_ERR_OOM, "runtime_create: out of memory");
        return NULL;
    }
    rt->seed = set.seed;
    snprintf(rt->mixed_precision, sizeof rt->mixed_precision, "%s", set.mixed_precision);
    rt->gradient_accumulation_steps = set.gradient_accumulation_steps;
    rt->deterministic = args && args->deterministic;
    if (rt->deterministic) ct_set_deterministic(true);
    rt->device = ct_cpu();
    if (join(rt) != CT_OK || pick_device(rt, use_cuda) != CT_OK) {
        runtime_free(rt);
        return NULL;
    }
    return rt;
}

void runtime_free(Runtime *rt)
{
    if (!rt) return;
    rt_nccl_close(rt);
    rt_comm_close(rt);
    free(rt);
}

int runtime_abort(Runtime *rt, CtStatus st)
{
    if (rt)
        fprintf(stderr, "ctrainer: rank %d of %d failed: %s: %s\n", rt->rank,
                rt->world_size, ct_status_str(st), ct_last_error());
    else
        fprintf(stderr, "ctrainer: failed: %s: %s\n", ct_status_str(st), ct_last_error());
    fflush(stderr);
    if (rt && rt->comm) rt_comm_abort(rt, 1);
    return 1;
}

RuntimeCommStats runtime_comm_stats(const Runtime *rt)
{
    return rt ? rt->stats : (RuntimeCommStats){0};
}

int runtime_rank(const Runtime *rt)
{
    return rt->rank;
}
int runtime_world_size(const Runtime *rt)
{
    return rt->world_size;
}
int runtime_local_rank(const Runtime *rt)
{
    return rt->local_rank;
}
int runtime_local_world_size(const Runtime *rt)
{
    return rt->local_world_size;
}
bool runtime_is_main_process(const Runtime *rt)
{
    return rt->rank == 0;
}
bool runtime_is_local_main_process(const Runtime *rt)
{
    return rt->local_rank == 0;
}
bool runtime_is_distributed(const Runtime *rt)
{
    return rt->world_size > 1;
}
CtDevice runtime_device(const Runtime *rt)
{
    return rt->device;
}
const char *runtime_mixed_precision(const Runtime *rt)
{
    return rt->mixed_precision;
}
int runtime_gradient_accumulation_steps(const Runtime *rt)
{
    return rt->gradient_accumulation_steps;
}

CtStatus runtime_prepare_model(Runtime *rt, Module *m)
{
    if (!rt || !m)
        return ct_error(CT_ERR_NULL, "runtime_prepare_model: NULL %s",
                        rt ? "module" : "runtime");
    CtStatus st = nn_module_to(m, rt->device);
    if (st != CT_OK || rt->world_size == 1) return st;
    Tensor *params = nn_module_param_block(m);
    if (params) st = runtime_broadcast(rt, params, 0);
    CtStateDict *bufs = st == CT_OK ? nn_module_buffers(m) : NULL;
    if (st == CT_OK && !bufs) return ct_last_status();
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(bufs); i++)
        st = runtime_broadcast(rt, ct_state_dict_tensor(bufs, i), 0);
    ct_state_dict_free(bufs);
    return st;
}

Tensor *runtime_to_device(Runtime *rt, Tensor *t)
{
    if (!t) return NULL;
    if (ct_device_eq(tensor_device(t), rt->device)) return tensor_contiguous(t);
    return tensor_to_device(t, rt->device);
}

uint64_t runtime_base_seed(const Runtime *rt)
{
    return rt->seed;
}

bool runtime_deterministic(const Runtime *rt)
{
    return rt && rt->deterministic;
}

uint64_t runtime_seed(const Runtime *rt, uint64_t base)
{
    return base + (uint64_t)rt->rank;
}

CtGenerator runtime_generator(const Runtime *rt, uint64_t base, uint64_t stream)
{
    return ct_generator(runtime_seed(rt, base), stream);
}

void runtime_vprint(const Runtime *rt, const char *fmt, va_list ap)
{
    if (rt && !runtime_is_main_process(rt)) return;
    vfprintf(stdout, fmt, ap);
    fflush(stdout);
}

void runtime_print(const Runtime *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    runtime_vprint(rt, fmt, ap);
    va_end(ap);
}
