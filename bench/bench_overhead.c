/* bench_overhead — the per-step fixed costs of the CPU path, in ns:
 *
 *   OMP_NUM_THREADS=2 ./build/bench/bench_overhead
 *
 *   dispatch     tensor_add of two 1-element f32 tensors inside an open
 *                scope (validation, output allocation, kernel dispatch;
 *                grad mode on, no input requires grad), scope closed every
 *                1000 ops (its share included)
 *   node         the same with one input requiring grad: the autograd node
 *   scope        ct_scope_open + ct_scope_close of an empty scope
 *   alloc        tensor_empty of 32x128 f32 in a scope (the caching
 *                allocator's hit path), freed every 1000 by the scope
 *   pool         ct_workers_run of 2 empty items on 2 threads: the engine
 *                pool's fork/join with its thread spinning
 *   pool_cold    the same after 1 ms of idling (the pool thread asleep)
 *   omp          an empty `#pragma omp parallel` region on every thread
 *   omp_cold     the same after 1 ms of idling
 *
 * Median of 7 samples. BENCH_CLOCK=cpu times in process CPU time (on a
 * shared machine with OMP_NUM_THREADS=1: the costs themselves, not the
 * waits for a core; the 2-thread pool and omp figures then mean little).
 */
#include <omp.h>
#include <stdio.h>
#include <time.h>

#include "../tensor/cpu/workers.h"
#include "bench.h"
#include "ctrainer/ctrainer.h"

enum { DISPATCH, NODE, SCOPE, ALLOC, POOL, POOL_COLD, OMP, OMP_COLD, NKINDS };
static const char *NAMES[] = {"dispatch", "node",      "scope", "alloc",
                              "pool",     "pool_cold", "omp",   "omp_cold"};

static void nothing(void *ctx, int64_t i, int slot)
{
    (void)ctx;
    (void)i;
    (void)slot;
}

static void idle_1ms(void)
{
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
}

/* ns per operation of kind k, over reps operations (cold kinds: the
 * sleep between operations is not counted) */
static double sample(int k, long reps)
{
    Tensor *a = tensor_zeros(1, (int64_t[]){1}, CT_F32, ct_cpu());
    Tensor *b = tensor_zeros(1, (int64_t[]){1}, CT_F32, ct_cpu());
    if (k == NODE) tensor_set_requires_grad(b, true);
    const bool cold = k == POOL_COLD || k == OMP_COLD;
    const long batch = cold ? 1 : 1000;
    double spent = 0;
    for (long r = 0; r < reps; r += batch) {
        long n = reps - r < batch ? reps - r : batch;
        if (cold) idle_1ms();
        double t0 = bench_clock();
        CtScope *s = k == SCOPE ? NULL : ct_scope_open();
        for (long i = 0; i < n; i++) {
            switch (k) {
            case DISPATCH:
            case NODE: tensor_add(a, b); break;
            case SCOPE: ct_scope_close(ct_scope_open()); break;
            case ALLOC: tensor_empty(2, (int64_t[]){32, 128}, CT_F32, ct_cpu()); break;
            case POOL:
            case POOL_COLD: ct_workers_run(2, 2, nothing, NULL); break;
            default: {
#pragma omp parallel
                {
                    __asm__ volatile("" ::: "memory");
                }
            }
            }
        }
        if (s) ct_scope_close(s);
        spent += bench_clock() - t0;
    }
    tensor_free(a);
    tensor_free(b);
    return 1e9 * spent / (double)reps;
}

int main(void)
{
    printf("threads %d\n", omp_get_max_threads());
    for (int k = 0; k < NKINDS; k++) {
        long reps = k == POOL_COLD || k == OMP_COLD ? 200 : 200000;
        double v[7];
        sample(k, reps / 10); /* warm-up */
        for (int i = 0; i < 7; i++) v[i] = sample(k, reps);
        double med = bench_median(v, 7);
        printf("%-10s %9.0f ns  (%.0f-%.0f)\n", NAMES[k], med, v[0], v[6]);
    }
    return 0;
}
