/* bench_gemm_bf16 — GFLOP/s of tensor_matmul in f32 and under bf16 autocast
 * at the MLP's and BasicNet's GEMM shapes (forward and both backwards; conv2
 * as its per-sample im2col GEMMs), best of `reps` timings of `iters` calls.
 * Times are process CPU seconds, not wall seconds, so a machine shared with
 * other work still gives the kernels' speed; run with OMP_NUM_THREADS=1
 * (with more threads the figures are per CPU-second, not per second).
 * CTRAINER_CPU_ISA=baseline times the portable bf16 engine instead of the
 * native ones, CTRAINER_CPU_ISA=avx512 the avx512_bf16 engine instead of
 * AMX. First it prints one core's peak rates: f32 FMA, VDPBF16PS and
 * TDPBF16PS (AMX, its tiles reloaded from L1 at each step, as the engine
 * does), for those the CPU has.
 *
 *   bench_gemm_bf16 [reps]
 */
#include <stdio.h>
#include <time.h>

#include "bench.h"
#include "ctrainer/ctrainer.h"
#include "tensor/cpu/isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>
#define PEAKS 1
#endif

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

#ifdef PEAKS
#define PEAK_ITERS 20000000L

static volatile float sink; /* keeps the peak loops' sums alive */

/* GFLOP per CPU second of a loop of 12 independent FMA zmm. */
__attribute__((target("avx512f"))) static double peak_fma(void)
{
    __m512 acc[12], a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
    for (int i = 0; i < 12; i++) acc[i] = _mm512_setzero_ps();
    double t0 = cpu_now();
    for (long it = 0; it < PEAK_ITERS; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
        __asm__ volatile("" : "+v"(a));
    }
    double t = cpu_now() - t0;
    for (int i = 1; i < 12; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    sink = _mm512_reduce_add_ps(acc[0]);
    return 12.0 * PEAK_ITERS * 16 * 2 / t * 1e-9;
}

/* Likewise for VDPBF16PS (two multiply-adds per f32 lane). */
__attribute__((target("avx512f,avx512bf16"))) static double peak_dpbf16(void)
{
    __m512 acc[12];
    __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = a;
    for (int i = 0; i < 12; i++) acc[i] = _mm512_setzero_ps();
    double t0 = cpu_now();
    for (long it = 0; it < PEAK_ITERS; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
        __asm__ volatile("" : "+v"(a));
    }
    double t = cpu_now() - t0;
    for (int i = 1; i < 12; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    sink = _mm512_reduce_add_ps(acc[0]);
    return 12.0 * PEAK_ITERS * 16 * 4 / t * 1e-9;
}

/* TDPBF16PS on a 2 x 2 block of 16 x 16 C tiles, A's and B's two tiles
 * loaded from L1 at every step (the engine's inner loop). */
__attribute__((target("amx-tile,amx-bf16"))) static double peak_amx(void)
{
    static uint16_t buf[4][16][32] __attribute__((aligned(64)));
    struct __attribute__((packed, aligned(64))) {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const long iters = PEAK_ITERS / 10;
    double t0 = cpu_now();
    for (long it = 0; it < iters; it++) {
        _tile_loadd(4, buf[0], 64);
        _tile_loadd(5, buf[1], 64);
        _tile_loadd(6, buf[2], 64);
        _tile_loadd(7, buf[3], 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    double t = cpu_now() - t0;
    _tile_release();
    return 4.0 * iters * 16 * 16 * 32 * 2 / t * 1e-9;
}

static void print_peaks(void)
{
    __builtin_cpu_init();
    printf("one core's peak, GFLOP/s:");
    if (!__builtin_cpu_supports("avx512f")) {
        printf(" no AVX-512 on this CPU\n");
        return;
    }
    printf(" f32 FMA zmm %.1f", peak_fma());
    if (__builtin_cpu_supports("avx512bf16")) printf(", VDPBF16PS %.1f", peak_dpbf16());
    if (ct_cpu_amx_bf16()) printf(", TDPBF16PS %.1f", peak_amx());
    printf("\n");
}
#endif

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    CtGenerator g = ct_generator(1, 0);
#ifdef PEAKS
    print_peaks();
#endif
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
