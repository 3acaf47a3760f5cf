/* CPU conv2d throughput: forward and forward+backward GFLOP/s for
 * BasicNet's two convolutions, a ResNet-18 stage conv at 56x56 and every
 * conv shape of ResNet-18 training on 64x64 images at batch 32, against a
 * large sgemm as the machine's practical peak. Then max pooling (BasicNet's
 * 2x2 and ResNet-18's 3x3 stride-2 padded pool) in GB/s of its input,
 * output and argmax traffic, against a 1-thread memcpy of 256 MiB (read +
 * written bytes) as the practical memory bandwidth.
 *
 *     OMP_NUM_THREADS=2 ./build/bench/bench_conv
 *
 * FLOPs per pass: 2*N*O*(C/groups)*kh*kw*OH*OW; the backward pass (data and
 * weight gradients) counts twice that. Times are medians of RUNS after
 * WARMUP, through the public API (scope, autograd and leaf gradient
 * accumulation included). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "ctrainer/tensor.h"

#define WARMUP 2
#define RUNS   7

/* GFLOP/s of a 2048^3 sgemm (BLAS threads as configured). */
static double sgemm_peak(void)
{
    const int n = 2048;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
    float *c = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    double t[RUNS];
    for (int r = 0; r < WARMUP + RUNS; r++) {
        double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0,
                    c, n);
        if (r >= WARMUP) t[r - WARMUP] = bench_now() - t0;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * n * n * n / bench_median(t, RUNS) * 1e-9;
}

typedef struct Shape {
    const char *name;
    int64_t n, c, h, w, o, k;
    int pad, stride;
} Shape;

static int bench(const Shape *s, double peak)
{
    const int64_t xs[4] = {s->n, s->c, s->h, s->w}, ws[4] = {s->o, s->c, s->k, s->k};
    const int st = s->stride;
    const int64_t oh = (s->h + 2 * s->pad - s->k) / st + 1;
    const int64_t ow = (s->w + 2 * s->pad - s->k) / st + 1;
    CtConv2dArgs args = {.padding = {s->pad, s->pad}, .stride = {st, st}};
    /* constant operands: the kernels' speed does not depend on the values */
    Tensor *x = tensor_full(4, xs, 0.5, CT_F32, ct_cpu());
    Tensor *w = tensor_full(4, ws, 0.25, CT_F32, ct_cpu());
    Tensor *b = tensor_full(1, ws, 0.1, CT_F32, ct_cpu());
    Tensor *gy =
        tensor_full(4, (const int64_t[]){s->n, s->o, oh, ow}, 1.0, CT_F32, ct_cpu());
    if (!x || !w || !b || !gy) return 1;
    tensor_set_requires_grad(x, true);
    tensor_set_requires_grad(w, true);
    tensor_set_requires_grad(b, true);
    double tf[RUNS], tfb[RUNS];
    for (int r = 0; r < WARMUP + RUNS; r++) {
        CtScope *sc = ct_scope_open();
        bool prev = ct_set_grad_enabled(false);
        double t0 = bench_now();
        Tensor *y = tensor_conv2d(x, w, b, &args);
        double t1 = bench_now();
        ct_set_grad_enabled(prev);
        if (!y) return 1;
        double t2 = bench_now();
        y = tensor_conv2d(x, w, b, &args);
        if (tensor_backward(y, gy) != CT_OK) return 1;
        double t3 = bench_now();
        ct_scope_close(sc);
        if (r >= WARMUP) {
            tf[r - WARMUP] = t1 - t0;
            tfb[r - WARMUP] = t3 - t2;
        }
    }
    double flop = 2.0 * s->n * s->o * s->c * s->k * s->k * oh * ow;
    double mf = bench_median(tf, RUNS), mfb = bench_median(tfb, RUNS);
    double gf = flop / mf * 1e-9, gfb = 3 * flop / mfb * 1e-9;
    printf("%-34s %8.2f ms %7.1f GFLOP/s %5.1f%% | %8.2f ms %7.1f GFLOP/s %5.1f%%\n",
           s->name, mf * 1e3, gf, 100 * gf / peak, mfb * 1e3, gfb, 100 * gfb / peak);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
    tensor_free(gy);
    return 0;
}

/* GB/s of a 1-thread memcpy of 256 MiB, counting read and written bytes. */
static double copy_bandwidth(void)
{
    const size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) return 0;
    memset(a, 1, n);
    memset(b, 0, n);
    double t[RUNS];
    for (int r = 0; r < WARMUP + RUNS; r++) {
        double t0 = bench_now();
        memcpy(b, a, n);
        if (r >= WARMUP) t[r - WARMUP] = bench_now() - t0;
    }
    free(a);
    free(b);
    return 2.0 * (double)n / bench_median(t, RUNS) * 1e-9;
}

typedef struct PoolShape {
    const char *name;
    int64_t n, c, h;
    int k, stride, pad;
} PoolShape;

/* Max pooling forward (input read, output and int64 argmax written) and
 * forward + backward (the backward also reads the output gradient and the
 * argmax and writes the input gradient), in ms and GB/s. */
static int bench_pool(const PoolShape *s, double bw)
{
    Tensor *x =
        tensor_full(4, (const int64_t[]){s->n, s->c, s->h, s->h}, 0.5, CT_F32, ct_cpu());
    if (!x) return 1;
    tensor_set_requires_grad(x, true);
    CtPool2dArgs args = {.kernel = {s->k, s->k},
                         .stride = {s->stride, s->stride},
                         .padding = {s->pad, s->pad}};
    double tf[RUNS], tfb[RUNS];
    int64_t out = 0;
    for (int r = 0; r < WARMUP + RUNS; r++) {
        CtScope *sc = ct_scope_open();
        bool prev = ct_set_grad_enabled(false);
        double t0 = bench_now();
        Tensor *y = tensor_max_pool2d(x, &args);
        double t1 = bench_now();
        ct_set_grad_enabled(prev);
        if (!y) return 1;
        out = tensor_numel(y);
        Tensor *gy = tensor_full(4, tensor_shape(y), 1.0, CT_F32, ct_cpu());
        double t2 = bench_now();
        y = tensor_max_pool2d(x, &args);
        if (!gy || tensor_backward(y, gy) != CT_OK) return 1;
        double t3 = bench_now();
        ct_scope_close(sc);
        if (r >= WARMUP) {
            tf[r - WARMUP] = t1 - t0;
            tfb[r - WARMUP] = t3 - t2;
        }
    }
    const double in = (double)tensor_numel(x) * 4, fwd = in + (double)out * (4 + 8);
    const double bwd = (double)out * (4 + 8) + in;
    double mf = bench_median(tf, RUNS), mfb = bench_median(tfb, RUNS);
    printf("%-34s %8.2f ms %7.1f GB/s %5.1f%% | %8.2f ms %7.1f GB/s %5.1f%%\n", s->name,
           mf * 1e3, fwd / mf * 1e-9, 100 * fwd / mf * 1e-9 / bw, mfb * 1e3,
           (fwd + bwd) / mfb * 1e-9, 100 * (fwd + bwd) / mfb * 1e-9 / bw);
    tensor_free(x);
    return 0;
}

int main(void)
{
    double peak = sgemm_peak();
    printf("sgemm 2048^3 (practical peak): %.1f GFLOP/s\n", peak);
    printf("%-34s %-33s | %s\n", "conv (f32)", "forward", "forward + backward");
    static const Shape shapes[] = {
        {"BasicNet conv1 1->32 3x3 28x28 b64", 64, 1, 28, 28, 32, 3, 0, 1},
        {"BasicNet conv2 32->64 3x3 26x26 b64", 64, 32, 26, 26, 64, 3, 0, 1},
        {"ResNet-18 64->64 3x3 p1 56x56 b8", 8, 64, 56, 56, 64, 3, 1, 1},
        {"R18/64 conv1 3->64 7x7 s2 64x64 b32", 32, 3, 64, 64, 64, 7, 3, 2},
        {"R18/64 layer1 64->64 3x3 16x16 b32", 32, 64, 16, 16, 64, 3, 1, 1},
        {"R18/64 layer2 64->128 3x3 s2 b32", 32, 64, 16, 16, 128, 3, 1, 2},
        {"R18/64 layer2 128->128 3x3 8x8 b32", 32, 128, 8, 8, 128, 3, 1, 1},
        {"R18/64 layer2 down 64->128 1x1 s2", 32, 64, 16, 16, 128, 1, 0, 2},
        {"R18/64 layer3 256->256 3x3 4x4 b32", 32, 256, 4, 4, 256, 3, 1, 1},
        {"R18/64 layer4 512->512 3x3 2x2 b32", 32, 512, 2, 2, 512, 3, 1, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        if (bench(&shapes[i], peak)) {
            fprintf(stderr, "%s: %s\n", shapes[i].name, ct_last_error());
            return 1;
        }
    double bw = copy_bandwidth();
    printf("memcpy 256 MiB, 1 thread (practical bandwidth): %.1f GB/s\n", bw);
    printf("%-34s %-33s | %s\n", "max pool (f32)", "forward", "forward + backward");
    static const PoolShape pools[] = {
        {"BasicNet 2x2 64x24x24 b64", 64, 64, 24, 2, 2, 0},
        {"R18/64 3x3 s2 p1 64x32x32 b32", 32, 64, 32, 3, 2, 1},
    };
    for (size_t i = 0; i < sizeof pools / sizeof *pools; i++)
        if (bench_pool(&pools[i], bw)) {
            fprintf(stderr, "%s: %s\n", pools[i].name, ct_last_error());
            return 1;
        }
    return 0;
}
