/* Host time per op kind (include/ctrainer/tensor.h, ct_set_op_profile):
 * totals shared by every thread, added with relaxed atomics, so a run can
 * be profiled from the outside (CTRAINER_PROFILE_OPS=1) without changing
 * what it runs. Off, an op pays one relaxed load. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool profiling;                               /* atomic */
static uint64_t calls[CT_OP_COUNT], ns[CT_OP_COUNT]; /* atomic */

static void read_env(void)
{
    const char *v = getenv("CTRAINER_PROFILE_OPS");
    __atomic_store_n(&profiling, v && v[0] != '\0' && strcmp(v, "0") != 0,
                     __ATOMIC_RELAXED);
}

bool ct_op_profile_on(void)
{
    pthread_once(&env_once, read_env);
    return __atomic_load_n(&profiling, __ATOMIC_RELAXED);
}

uint64_t ct_op_profile_clock(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void ct_op_profile_add(CtOp op, uint64_t elapsed_ns)
{
    __atomic_fetch_add(&calls[op], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ns[op], elapsed_ns, __ATOMIC_RELAXED);
}

bool ct_set_op_profile(bool on)
{
    pthread_once(&env_once, read_env);
    return __atomic_exchange_n(&profiling, on, __ATOMIC_RELAXED);
}

void ct_op_profile_reset(void)
{
    for (int op = 0; op < CT_OP_COUNT; op++) {
        __atomic_store_n(&calls[op], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&ns[op], 0, __ATOMIC_RELAXED);
    }
}

uint64_t ct_op_profile_get(const char *op, uint64_t *host_ns)
{
    for (int k = 0; k < CT_OP_COUNT; k++)
        if (strcmp(ct_op_name((CtOp)k), op) == 0) {
            if (host_ns) *host_ns = __atomic_load_n(&ns[k], __ATOMIC_RELAXED);
            return __atomic_load_n(&calls[k], __ATOMIC_RELAXED);
        }
    if (host_ns) *host_ns = 0;
    return 0;
}

void ct_op_profile_print(FILE *f)
{
    uint64_t c[CT_OP_COUNT], t[CT_OP_COUNT];
    int order[CT_OP_COUNT], n = 0;
    for (int k = 0; k < CT_OP_COUNT; k++) {
        c[k] = __atomic_load_n(&calls[k], __ATOMIC_RELAXED);
        t[k] = __atomic_load_n(&ns[k], __ATOMIC_RELAXED);
        if (c[k]) order[n++] = k;
    }
    /* by total time, largest first (insertion sort: CT_OP_COUNT is small) */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[order[j]] > t[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (int i = 0; i < n; i++) {
        int k = order[i];
        fprintf(f,
                "op_profile %-24s calls %10" PRIu64 " host_us %12.1f us_per_call %8.2f\n",
                ct_op_name((CtOp)k), c[k], (double)t[k] / 1e3,
                (double)t[k] / 1e3 / (double)c[k]);
    }
}
