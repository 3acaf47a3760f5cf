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
 * The spin yields the core every few microseconds: where threads outnumber
 * free cores, a spinning pool thread would otherwise take a share of the
 * core the caller needs.
 *
 * Busy machines: a job whose pool threads took none of its items, or whose
 * caller then waited for their items longer than it worked on its own
 * (plus CT_WORKERS_LATE_US; a pool thread's normal wake-up is shorter), is
 * a miss. After CT_WORKERS_MISSES_OFF misses in a row (other processes hold
 * the cores) the next CT_WORKERS_SKIP_JOBS calls run inline, then the pool
 * is tried again. Items give the same bits on any thread, so this changes
 * speed only (measured in docs/benchmarks.md: with one of 2 cores busy,
 * the MLP on 2 threads went from 0.77x to 1.04-1.17x of 1 thread).
 *
 * Threads: the pool starts lazily on the first call with nt > 1 and has
 * omp_get_max_threads() - 1 threads (OMP_NUM_THREADS, default the cores),
 * for the life of the process. */
#ifndef CTRAINER_TENSOR_CPU_WORKERS_H
#define CTRAINER_TENSOR_CPU_WORKERS_H

#include <stdint.h>

#define CT_WORKERS_SPIN_US    100
#define CT_WORKERS_LATE_US    50
#define CT_WORKERS_MISSES_OFF 4
#define CT_WORKERS_SKIP_JOBS  64

typedef void (*CtWorkFn)(void *ctx, int64_t i, int slot);

/* Threads a ct_workers_run call may use here: 1 inside a pool item or an
 * OpenMP parallel region, else omp_get_max_threads(). */
int ct_workers_max(void);

void ct_workers_run(int64_t n, int nt, CtWorkFn fn, void *ctx);

/* How many of the next calls run inline because the pool threads were
 * missing their cores ("Busy machines" above); 0 normally. */
int ct_workers_skipping(void);

#endif
