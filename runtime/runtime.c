/* The runtime: process identity from the environment, the device, seeding
 * and main-process printing. Single-process build: see runtime.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime_internal.h"

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

static CtStatus read_ranks(Runtime *rt)
{
    CtStatus st = env_int("WORLD_SIZE", 1, 1, &rt->world_size);
    if (st == CT_OK) st = env_int("RANK", 0, 0, &rt->rank);
    if (st == CT_OK) st = env_int("LOCAL_RANK", rt->rank, 0, &rt->local_rank);
    if (st == CT_OK)
        st = env_int("LOCAL_WORLD_SIZE", rt->world_size, 1, &rt->local_world_size);
    if (st != CT_OK) return st;
    if (rt->rank >= rt->world_size)
        return ct_error(CT_ERR_INVALID, "runtime: RANK=%d is not below WORLD_SIZE=%d",
                        rt->rank, rt->world_size);
    if (rt->world_size > 1)
        return ct_error(
            CT_ERR_UNSUPPORTED,
            "runtime: WORLD_SIZE=%d but this build of ctrainer is single-process "
            "(no MPI/NCCL backend); run one process or rebuild with "
            "CTRAINER_MPI=ON",
            rt->world_size);
    return CT_OK;
}

Runtime *runtime_create(const RuntimeArgs *args)
{
    RuntimeArgs a = args ? *args : (RuntimeArgs){0};
    Runtime *rt = calloc(1, sizeof *rt);
    if (!rt) {
        ct_error(CT_ERR_OOM, "runtime_create: out of memory");
        return NULL;
    }
    rt->seed = a.seed ? a.seed : RUNTIME_DEFAULT_SEED;
    rt->deterministic = a.deterministic;
    rt->device = ct_cpu();
    if (read_ranks(rt) != CT_OK) {
        free(rt);
        return NULL;
    }
    if (a.use_cuda) {
        int n = ct_cuda_device_count();
        if (n <= rt->local_rank) {
            ct_error(CT_ERR_DEVICE,
                     "runtime: use_cuda asks for CUDA device %d (local rank) but %d CUDA "
                     "device(s) are usable%s",
                     rt->local_rank, n,
                     n == 0 ? " (no GPU, or the CUDA backend is not built)" : "");
            free(rt);
            return NULL;
        }
        rt->device = ct_cuda(rt->local_rank);
    }
    return rt;
}

void runtime_free(Runtime *rt)
{
    free(rt);
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
    return "no";
}

CtStatus runtime_prepare_model(Runtime *rt, Module *m)
{
    if (!rt || !m)
        return ct_error(CT_ERR_NULL, "runtime_prepare_model: NULL %s",
                        rt ? "module" : "runtime");
    return nn_module_to(m, rt->device);
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
