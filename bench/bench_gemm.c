/* CPU GEMM throughput: forward + backward of the matmul-shaped work in the
 * example models, against the machine's measured sgemm peak.
 *
 *     OMP_NUM_THREADS=2 ./build/bench/bench_gemm
 *
 * Each row is timed as the median of 7 samples after 2 warm-up samples; a
 * sample repeats the work enough times to last >= 20 ms. FLOPs count the
 * GEMMs only (2·m·n·k each): a linear layer's forward + backward is
 * 3 × 2·N·in·out (y, dx, dw; the bias and its column sums are not counted),
 * and every input requires grad, as for a layer inside a network. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "ctrainer/tensor.h"

#define SAMPLES      7
#define WARMUP       2
#define MIN_SAMPLE_S 0.02

typedef void (*WorkFn)(void *ctx);

/* Median seconds of one call of fn. */
static double time_median(WorkFn fn, void *ctx)
{
    double t0 = bench_now();
    fn(ctx);
    double once = bench_now() - t0;
    int reps =
        once >= MIN_SAMPLE_S ? 1 : (int)(MIN_SAMPLE_S / (once > 1e-7 ? once : 1e-7)) + 1;
    double s[SAMPLES];
    for (int i = 0; i < WARMUP + SAMPLES; i++) {
        t0 = bench_now();
        for (int r = 0; r < reps; r++) fn(ctx);
        if (i >= WARMUP) s[i - WARMUP] = (bench_now() - t0) / reps;
    }
    qsort(s, SAMPLES, sizeof *s, bench_cmp_double);
    return s[SAMPLES / 2];
}

static void die(const char *what)
{
    fprintf(stderr, "bench_gemm: %s: %s\n", what, ct_last_error());
    exit(1);
}

/* Persistent f32 tensor of deterministic values in [-0.1, 0.1). */
static Tensor *param(int ndim, const int64_t *shape, bool grad)
{
    static uint64_t state = 1;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *v = malloc(sizeof *v * (size_t)n);
    if (!v) die("malloc");
    for (int64_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (float)((double)(state >> 40) / 16777216.0 * 0.2 - 0.1);
    }
    Tensor *t = tensor_from_data(v, ndim, shape, CT_F32, ct_cpu());
    free(v);
    if (!t || (grad && tensor_set_requires_grad(t, true) != CT_OK)) die("param");
    return t;
}

/* ---------------------------------------------------------- linear layer */

typedef struct LinearBench {
    Tensor *x, *w, *b, *g;
} LinearBench;

static void linear_step(void *ctx)
{
    LinearBench *l = ctx;
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_linear(l->x, l->w, l->b);
    if (!y || tensor_backward(y, l->g) != CT_OK) die("linear step");
    ct_scope_close(s);
}

static double run_linear(int64_t n, int64_t in, int64_t out)
{
    LinearBench l = {
        .x = param(2, (const int64_t[]){n, in}, true),
        .w = param(2, (const int64_t[]){out, in}, true),
        .b = param(1, &out, true),
        .g = param(2, (const int64_t[]){n, out}, false),
    };
    double t = time_median(linear_step, &l);
    tensor_free(l.x);
    tensor_free(l.w);
    tensor_free(l.b);
    tensor_free(l.g);
    return t;
}

/* ------------------------------------------------------- matmul (im2col) */

typedef struct MatmulBench {
    Tensor *a, *b, *g;
} MatmulBench;

static void matmul_step(void *ctx)
{
    MatmulBench *m = ctx;
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_matmul(m->a, m->b);
    if (!y || tensor_backward(y, m->g) != CT_OK) die("matmul step");
    ct_scope_close(s);
}

/* (batch.., m, k) @ (batch.., k, n) forward + both gradients. */
static double run_matmul(int nd, const int64_t *sa, const int64_t *sb, const int64_t *sy)
{
    MatmulBench m = {
        .a = param(nd, sa, true),
        .b = param(nd, sb, true),
        .g = param(nd, sy, false),
    };
    double t = time_median(matmul_step, &m);
    tensor_free(m.a);
    tensor_free(m.b);
    tensor_free(m.g);
    return t;
}

/* ---------------------------------------------------------------- peak */

typedef struct SgemmBench {
    int n;
    float *a, *b, *c;
} SgemmBench;

static void sgemm_step(void *ctx)
{
    SgemmBench *s = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->n, s->n, s->n, 1.0f, s->a,
                s->n, s->b, s->n, 0.0f, s->c, s->n);
}

static double sgemm_gflops(int n, int threads)
{
    SgemmBench s = {n, malloc(sizeof(float) * (size_t)n * n),
                    malloc(sizeof(float) * (size_t)n * n),
                    malloc(sizeof(float) * (size_t)n * n)};
    if (!s.a || !s.b || !s.c) die("malloc");
    for (size_t i = 0; i < (size_t)n * n; i++) {
        s.a[i] = (float)(i % 7) * 0.1f;
        s.b[i] = (float)(i % 5) * 0.1f;
    }
    openblas_set_num_threads(threads);
    double t = time_median(sgemm_step, &s);
    free(s.a);
    free(s.b);
    free(s.c);
    return 2.0 * n * n * (double)n / t * 1e-9;
}

/* The same three GEMMs straight through cblas_sgemm, no framework:
 * y = a·b, da = g·bᵀ, db = aᵀ·g with a (m, k), b (k, n). */
typedef struct Raw3 {
    int m, k, n;
    float *a, *b, *g, *y, *da, *db;
} Raw3;

static void raw3_step(void *ctx)
{
    Raw3 *r = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r->m, r->n, r->k, 1.0f, r->a,
                r->k, r->b, r->n, 0.0f, r->y, r->n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->m, r->k, r->n, 1.0f, r->g,
                r->n, r->b, r->n, 0.0f, r->da, r->k);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r->k, r->n, r->m, 1.0f, r->a,
                r->k, r->g, r->n, 0.0f, r->db, r->n);
}

static int raw_blas_threads = 1;

static double run_raw3(int64_t m, int64_t k, int64_t n)
{
    Raw3 r = {.m = (int)m, .k = (int)k, .n = (int)n};
    size_t mk = (size_t)(m * k), kn = (size_t)(k * n), mn = (size_t)(m * n);
    float **bufs[6] = {&r.a, &r.b, &r.g, &r.y, &r.da, &r.db};
    size_t sizes[6] = {mk, kn, mn, mn, mk, kn};
    for (int i = 0; i < 6; i++) {
        *bufs[i] = malloc(sizes[i] * sizeof(float));
        if (!*bufs[i]) die("malloc");
        for (size_t j = 0; j < sizes[i]; j++) (*bufs[i])[j] = (float)(j % 13) * 0.01f;
    }
    /* raw BLAS on OpenBLAS's own threads (ctrainer pins BLAS to one thread
     * and splits GEMMs over OpenMP itself); restored for ctrainer after */
    openblas_set_num_threads(raw_blas_threads);
    double t = time_median(raw3_step, &r);
    openblas_set_num_threads(1);
    for (int i = 0; i < 6; i++) free(*bufs[i]);
    return t;
}

/* ---------------------------------------------------------------- main */

static double peak2;

/* t: through ctrainer (ops, autograd, grad accumulation); t_raw: the same
 * three GEMMs through cblas_sgemm alone (0 when not measured). */
static void row(const char *name, const char *shape, double gflop, double t, double t_raw)
{
    double rate = gflop / t;
    char raw[32] = "-";
    if (t_raw > 0) snprintf(raw, sizeof raw, "%.3f", t_raw * 1e3);
    printf("| %-30s | %-30s | %8.2f | %8.3f | %8s | %7.1f | %5.1f%% |\n", name, shape,
           gflop * 1e3, t * 1e3, raw, rate, 100.0 * rate / peak2);
}

int main(void)
{
    const char *omp = getenv("OMP_NUM_THREADS");
    const char *obt = getenv("OPENBLAS_NUM_THREADS");
    printf("bench_gemm: OMP_NUM_THREADS=%s OPENBLAS_NUM_THREADS=%s, %s\n",
           omp ? omp : "(unset)", obt ? obt : "(unset)", openblas_get_config());

    int blas_threads = openblas_get_num_threads();
    double peak1 = sgemm_gflops(2048, 1);
    peak2 = sgemm_gflops(2048, 2);
    raw_blas_threads = blas_threads;
    printf("\npeak sgemm 2048^3: 1 thread %.1f GFLOP/s, 2 threads %.1f GFLOP/s "
           "(OpenBLAS threads for the raw BLAS column: %d)\n\n",
           peak1, peak2, blas_threads);

    printf("| %-30s | %-30s | %8s | %8s | %8s | %7s | %6s |\n", "work (fwd + bwd)",
           "shape", "MFLOP", "ms", "BLAS ms", "GFLOP/s", "% peak");
    printf(
        "|--------------------------------|--------------------------------|----------|"
        "----------|----------|---------|--------|\n");

    /* MNIST MLP layers, batch 32 */
    static const int64_t mlp[3][2] = {{784, 128}, {128, 64}, {64, 10}};
    double mlp_flop = 0, mlp_t = 0, mlp_raw = 0;
    for (int i = 0; i < 3; i++) {
        char name[64], shape[64];
        int64_t in = mlp[i][0], out = mlp[i][1];
        double f = 6.0 * 32 * (double)in * (double)out * 1e-9;
        double t = run_linear(32, in, out), t_raw = run_raw3(32, in, out);
        snprintf(name, sizeof name, "MLP linear %lld->%lld", (long long)in,
                 (long long)out);
        snprintf(shape, sizeof shape, "x[32, %lld] w[%lld, %lld]", (long long)in,
                 (long long)out, (long long)in);
        row(name, shape, f, t, t_raw);
        mlp_flop += f;
        mlp_t += t;
        mlp_raw += t_raw;
    }
    row("MLP, 3 linears together", "batch 32", mlp_flop, mlp_t, mlp_raw);
    /* BasicNet fc1, batch 64 */
    row("BasicNet fc 9216->128", "x[64, 9216] w[128, 9216]", 6.0 * 64 * 9216 * 128 * 1e-9,
        run_linear(64, 9216, 128), run_raw3(64, 9216, 128));
    /* ResNet-18 3x3 convs as im2col GEMMs, batch 8 at 224x224 input:
     * cols (N*H*W, C*9) @ w (C*9, C) -> (N*H*W, C); backward dcols, dw */
    static const struct {
        const char *name;
        int64_t c, hw;
    } stages[] = {{"ResNet-18 layer1 3x3 conv", 64, 56},
                  {"ResNet-18 layer2 3x3 conv", 128, 28},
                  {"ResNet-18 layer3 3x3 conv", 256, 14},
                  {"ResNet-18 layer4 3x3 conv", 512, 7}};
    for (int i = 0; i < 4; i++) {
        int64_t m = 8 * stages[i].hw * stages[i].hw, k = stages[i].c * 9, n = stages[i].c;
        char shape[64];
        snprintf(shape, sizeof shape, "[%lld, %lld] @ [%lld, %lld]", (long long)m,
                 (long long)k, (long long)k, (long long)n);
        double t = run_matmul(2, (const int64_t[]){m, k}, (const int64_t[]){k, n},
                              (const int64_t[]){m, n});
        row(stages[i].name, shape, 6.0 * (double)m * (double)k * (double)n * 1e-9, t,
            run_raw3(m, k, n));
    }
    /* many small matrices: the OpenMP batch loop (attention-sized heads) */
    double t = run_matmul(3, (const int64_t[]){256, 64, 64},
                          (const int64_t[]){256, 64, 64}, (const int64_t[]){256, 64, 64});
    row("batched 256 x (64x64 @ 64x64)", "[256, 64, 64] @ [256, 64, 64]",
        6.0 * 256 * 64 * 64 * 64 * 1e-9, t, 0);
    return 0;
}
