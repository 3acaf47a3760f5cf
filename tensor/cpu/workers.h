/* Private to tensor/cpu: the compute pool of the GEMM and conv engines.
 *
 * ct_workers_run(n, nt, fn, ctx) runs fn(ctx, i, slot) for every i in
 * [0, n) on the calling thread and up to nt - 1 pool threads, and returns
 * when all n are done. Items are claimed one at a time from a shared
 * counter, and the caller claims too, so the caller never waits for a pool
 * thread that has not started: on a machine whose other cores are busy,
 * the caller does the items itself instead of waiting at a barrier for a
 * thread the OS has not scheduled (an OpenMP team's end-of-region barrier
 * does wait, which made 2 threads many times slower than 1 on a busy
 * 2-core machine; docs/benchmarks.md). slot is 0 on the caller and
 * 1..nt-1 on pool threads, for per-thread scratch; every slot below nt may
 * take items.
 *
 * Waits: a pool thread spins for CT_WORKERS_SPIN_US after its last item
 * (the next GEMM of a training step usually follows within that), then
 * blocks on a condition variable; the caller spins only while claimed
 * items are still running. A call made from inside fn, from a second
 * application thread while the pool is busy, or with nt <= 1 runs every
 * item inline on the caller, in order.
 *
 * Threads: the pool starts lazily on the first call with nt > 1 and has
 * omp_get_max_threads() - 1 threads (OMP_NUM_THREADS, default the cores),
 * for the life of the process. */
#ifndef CTRAINER_TENSOR_CPU_WORKERS_H
#define CTRAINER_TENSOR_CPU_WORKERS_H

#include <stdint.h>

#define CT_WORKERS_SPIN_US 100

typedef void (*CtWorkFn)(void *ctx, int64_t i, int slot);

/* Threads a ct_workers_run call may use here: 1 inside a pool item or an
 * OpenMP parallel region, else omp_get_max_threads(). */
int ct_workers_max(void);

void ct_workers_run(int64_t n, int nt, CtWorkFn fn, void *ctx);

#endif
