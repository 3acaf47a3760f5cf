/* Timing helpers shared by the benchmark programs. */
#ifndef CTRAINER_BENCH_H
#define CTRAINER_BENCH_H

#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

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

/* User-mode CPU cycles of the calling thread, in units of 1e9, from a
 * hardware counter (perf_event_open); -1 where the counter cannot be
 * opened. Rates timed with it are per cycle: a kernel's FLOP per cycle
 * against an FMA loop's, whatever the clock speed and however long the VM
 * was descheduled. Threads other than the caller are not counted. */
static inline double bench_cycles_now(void)
{
    static int fd = -2;
    if (fd == -2) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.type = PERF_TYPE_HARDWARE;
        a.size = sizeof a;
        a.config = PERF_COUNT_HW_CPU_CYCLES;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    }
    long long v;
    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v) return -1;
    return 1e-9 * (double)v;
}

/* BENCH_CLOCK=cpu: bench_cpu_now; BENCH_CLOCK=cycles: bench_cycles_now
 * (rates then read per cycle, not per second; where the counter cannot be
 * opened, a warning and wall seconds); else bench_now. For programs that
 * time short kernels on one thread of a shared machine. */
static inline double bench_clock(void)
{
    static int mode = -1;
    if (mode < 0) {
        const char *c = getenv("BENCH_CLOCK");
        mode = !c ? 0 : strcmp(c, "cpu") == 0 ? 1 : strcmp(c, "cycles") == 0 ? 2 : 0;
        if (mode == 2 && bench_cycles_now() < 0) {
            fprintf(stderr, "BENCH_CLOCK=cycles: no cycle counter here (perf_event_open "
                            "failed); timing wall seconds\n");
            mode = 0;
        }
    }
    return mode == 1 ? bench_cpu_now() : mode == 2 ? bench_cycles_now() : bench_now();
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
