/* bench_gemm_bf16 — GFLOP/s of tensor_matmul in f32 and under bf16 autocast
 * at the MLP's and BasicNet's GEMM shapes (forward and both backwards; conv2
 * as its per-sample im2col GEMMs), best of `reps` timings of `iters` calls.
 * Times are process CPU seconds, not wall seconds, so a machine shared with
 * other work still gives the kernels' speed; run with OMP_NUM_THREADS=1
 * (with more threads the figures are per CPU-second, not per second).
 * CTRAINER_CPU_ISA=baseline times the portable bf16 engine instead of the
 * avx512_bf16 one.
 *
 *   bench_gemm_bf16 [reps]
 */
#include <stdio.h>
#include <time.h>

#include "bench.h"
#include "ctrainer/ctrainer.h"

typedef struct Shape {
    const char *what;
    int64_t m, n, k;
} Shape;

static const Shape SHAPES[] = {
    {"MLP fc1 forward", 32, 128, 784},
    {"MLP fc1 weight grad", 128, 784, 32},
    {"MLP fc1 input grad", 32, 784, 128},
    {"BasicNet fc1 forward", 64, 128, 9216},
    {"BasicNet fc1 input grad", 64, 9216, 128},
    {"BasicNet fc1 weight grad", 128, 9216, 64},
    {"BasicNet conv2 forward", 64, 576, 288},
    {"BasicNet conv2 data grad", 288, 576, 64},
    {"BasicNet conv2 weight grad", 64, 288, 576},
};

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best CPU seconds per call of a @ b in `dt` (CT_F32: no autocast). */
static double time_matmul(Tensor *a, Tensor *b, CtDType dt, int reps, int iters)
{
    double best = 1e30;
    CtDType prev;
    tensor_autocast_begin(dt, &prev);
    for (int r = 0; r < reps; r++) {
        CtScope *s = ct_scope_open();
        double t0 = cpu_now();
        for (int i = 0; i < iters; i++) tensor_matmul(a, b);
        double t = (cpu_now() - t0) / iters;
        ct_scope_close(s);
        best = t < best ? t : best;
    }
    tensor_autocast_end(prev);
    return best;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    CtGenerator g = ct_generator(1, 0);
    printf("%-28s %16s %10s %10s %7s\n", "shape", "m x n x k", "f32", "bf16", "ratio");
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        const Shape *s = &SHAPES[i];
        Tensor *a = tensor_rand(&g, 2, (const int64_t[]){s->m, s->k}, CT_F32, ct_cpu());
        Tensor *b = tensor_rand(&g, 2, (const int64_t[]){s->k, s->n}, CT_F32, ct_cpu());
        double flop = 2.0 * (double)(s->m * s->n * s->k);
        int iters = (int)(2e9 / flop) + 1;
        double f = time_matmul(a, b, CT_F32, reps, iters);
        double h = time_matmul(a, b, CT_BF16, reps, iters);
        char dims[32];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)s->m, (long long)s->n,
                 (long long)s->k);
        printf("%-28s %16s %10.1f %10.1f %6.2fx\n", s->what, dims, flop / f * 1e-9,
               flop / h * 1e-9, f / h);
        tensor_free(a);
        tensor_free(b);
    }
    printf("GFLOP per CPU second, best of %d\n", reps);
    return 0;
}
