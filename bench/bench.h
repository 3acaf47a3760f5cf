/* Timing helpers shared by the benchmark programs. */
#ifndef CTRAINER_BENCH_H
#define CTRAINER_BENCH_H

#include <stdlib.h>
#include <time.h>

/* Monotonic seconds. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process: on a busy machine, the time this
 * process actually ran (1 thread: a kernel's own cost, not its waits). */
static inline double bench_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* bench_cpu_now when BENCH_CLOCK=cpu, else bench_now: for programs that
 * time short kernels on one thread of a shared machine. */
static inline double bench_clock(void)
{
    static int cpu = -1;
    if (cpu < 0) {
        const char *c = getenv("BENCH_CLOCK");
        cpu = c && c[0] == 'c' && c[1] == 'p' && c[2] == 'u' && !c[3];
    }
    return cpu ? bench_cpu_now() : bench_now();
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
