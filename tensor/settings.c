/* Process-wide backend settings (include/ctrainer/tensor.h): deterministic
 * algorithms, TF32 and cuDNN's benchmark mode, defaulted from the
 * environment on first use. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool deterministic; /* atomic */
static bool allow_tf32;    /* atomic */
static bool benchmark;     /* atomic */

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] != '\0' && strcmp(v, "0") != 0;
}

static void read_env(void)
{
    __atomic_store_n(&deterministic, env_flag("CTRAINER_DETERMINISTIC"),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&allow_tf32, env_flag("CTRAINER_ALLOW_TF32"), __ATOMIC_RELAXED);
    __atomic_store_n(&benchmark, env_flag("CTRAINER_CUDNN_BENCHMARK"), __ATOMIC_RELAXED);
}

static bool exchange(bool *flag, bool on)
{
    pthread_once(&env_once, read_env);
    return __atomic_exchange_n(flag, on, __ATOMIC_RELAXED);
}

static bool load(const bool *flag)
{
    pthread_once(&env_once, read_env);
    return __atomic_load_n(flag, __ATOMIC_RELAXED);
}

bool ct_set_deterministic(bool on)
{
    return exchange(&deterministic, on);
}

bool ct_deterministic(void)
{
    return load(&deterministic);
}

bool ct_set_allow_tf32(bool on)
{
    return exchange(&allow_tf32, on);
}

bool ct_allow_tf32(void)
{
    return load(&allow_tf32);
}

bool ct_set_cudnn_benchmark(bool on)
{
    return exchange(&benchmark, on);
}

bool ct_cudnn_benchmark(void)
{
    return load(&benchmark);
}
