/* bench_engines — the machine's f32 peak and every GEMM of the example
 * models on each available engine, for choosing engines by measurement
 * (docs/benchmarks.md, "Engine choice").
 *
 *   OMP_NUM_THREADS=2 ./build/bench/bench_engines
 *
 * Peak: an FMA-throughput loop (12 independent accumulators, no memory
 * traffic) with AVX-512 (where the CPU has it) and AVX2 vectors, on one thread and
 * on every OpenMP thread. Then, per shape, GFLOP/s (2*m*n*k per GEMM) and % of the
 * widest 1-thread peak (x threads for the multi-threaded columns) for:
 *   blas1 / blas2   cblas_sgemm on OpenBLAS's own 1 / 2 threads
 *   own1            the f32 GEMM engine's kernel (tensor/cpu/sgemm.h) called
 *                   directly, 1 thread, whatever shape (CTRAINER_CPU_ISA=avx2
 *                   for its AVX2 kernel)
 *   ct              tensor_matmul on the CPU backend (the engine or OpenBLAS
 *                   per shape, output allocation included), its OpenMP
 *                   threads (OMP_NUM_THREADS)
 *   dnnl1 / dnnl2   oneDNN's dnnl_sgemm on 1 / 2 OpenMP threads (built only
 *                   where <dnnl.h> exists: apt-get install libdnnl-dev)
 * Shapes are row-major C (m, n) = op(A) (m, k) op(B) (k, n): each linear
 * layer's forward (x wᵀ), input gradient (gy w) and weight gradient (gyᵀ x);
 * each conv's per-sample im2col GEMMs (forward w col, data wᵀ gy, weight
 * gy colᵀ) and, for ResNet-18, the same with the batch's columns side by
 * side (n or k times the batch). Best of 5 samples of at least 10 ms.
 *
 *   ./build/bench/bench_engines --shape M N K TRANS_A TRANS_B [ROUNDS]
 *
 * times one shape instead: ROUNDS (default 11) rounds of the 1-thread FMA
 * loop, blas1 and own1, each as a fraction of its round's peak (median and
 * range), so the fractions hold while the machine's speed drifts.
 * BENCH_CLOCK=cycles counts the main thread's user-mode cycles instead
 * (bench.h): the 1-thread columns then read as FLOP per cycle, and their %
 * of the FMA loop's FLOP per cycle holds on a shared VM whatever the clock
 * (the multi-thread columns are not meaningful in that mode).
 * BENCH_CLOCK=cpu times in process CPU seconds instead of wall seconds:
 * on a busy machine with OMP_NUM_THREADS=1, the kernels' own speed (the
 * multi-thread columns then read as per-CPU-second rates).
 */
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "ctrainer/ctrainer.h"
#include "tensor/cpu/sgemm.h"

#if __has_include(<dnnl.h>)
#include <dnnl.h>
#define HAVE_DNNL 1
#else
#define HAVE_DNNL 0
#endif

void openblas_set_num_threads(int n);

#define FMA_ITERS 20000000L

__attribute__((target("avx512f"))) static float fma_avx512(long iters)
{
    __m512 a[12], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
    return s;
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long iters)
{
    __m256 a[12], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    float s[8] = {0};
    for (int i = 0; i < 12; i++) {
        float v[8];
        _mm256_storeu_ps(v, a[i]);
        for (int j = 0; j < 8; j++) s[j] += v[j];
    }
    return s[0];
}

/* GFLOP/s of the FMA loop (lanes per vector) on nt threads. */
static double peak(float (*fn)(long), int lanes, int nt)
{
    double best = 0;
    volatile float sink = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_clock();
#pragma omp parallel num_threads(nt)
        {
            float s = fn(FMA_ITERS / 4);
#pragma omp atomic
            sink += s;
        }
        double g = 2.0 * 12 * lanes * (FMA_ITERS / 4) * nt / (bench_clock() - t0) / 1e9;
        best = g > best ? g : best;
    }
    (void)sink;
    return best;
}

typedef struct Shape {
    const char *what;
    int m, n, k;
    bool ta, tb;
} Shape;

static void blas(const Shape *s, const float *a, const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, a,
                s->ta ? s->m : s->k, b, s->tb ? s->k : s->n, 0.0f, c, s->n);
}

#if HAVE_DNNL
static void dnnl(const Shape *s, const float *a, const float *b, float *c)
{
    dnnl_sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->m, s->n, s->k, 1.0f, a,
               s->ta ? s->m : s->k, b, s->tb ? s->k : s->n, 0.0f, c, s->n);
}
#endif

/* The operands of one shape for every engine. */
typedef struct Operands {
    const float *a, *b;
    float *c;
    Tensor *va, *vb; /* op(A), op(B) as tensor views */
} Operands;

enum { BLAS, OWN, CT, DNNL };

static void call(int engine, const Shape *s, const Operands *o)
{
    if (engine == BLAS) blas(s, o->a, o->b, o->c);
    if (engine == OWN)
        ct_cpu_sgemm_cblas(ct_cpu_sgemm_isa(), s->ta ? CblasTrans : CblasNoTrans,
                           s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1, o->a,
                           s->ta ? s->m : s->k, o->b, s->tb ? s->k : s->n, 0, o->c, s->n);
#if HAVE_DNNL
    if (engine == DNNL) dnnl(s, o->a, o->b, o->c);
#endif
    if (engine == CT) {
        CtScope *sc = ct_scope_open();
        tensor_matmul(o->va, o->vb);
        ct_scope_close(sc);
    }
}

/* GFLOP/s of one sample of >= 10 ms. */
static double sample(int engine, const Shape *s, const Operands *o)
{
    long reps = 0;
    double t0 = bench_clock(), dt;
    do {
        call(engine, s, o);
        reps++;
    } while ((dt = bench_clock() - t0) < 0.01);
    return 2.0 * s->m * s->n * (double)s->k * (double)reps / dt / 1e9;
}

/* Best GFLOP/s over 5 samples (after one warm-up sample). */
static double gflops(int engine, const Shape *s, const Operands *o)
{
    double best = 0;
    for (int r = 0; r < 6; r++) {
        double g = sample(engine, s, o);
        if (r > 0 && g > best) best = g;
    }
    return best;
}

/* op(A), op(B) as views of row-major tensors holding A and B's data. */
static void make_views(const Shape *s, Operands *o, Tensor **ta, Tensor **tb)
{
    int64_t as[2] = {s->ta ? s->k : s->m, s->ta ? s->m : s->k};
    int64_t bs[2] = {s->tb ? s->n : s->k, s->tb ? s->k : s->n};
    *ta = tensor_empty(2, as, CT_F32, ct_cpu());
    *tb = tensor_empty(2, bs, CT_F32, ct_cpu());
    memcpy(tensor_data(*ta), o->a, (size_t)s->m * (size_t)s->k * 4);
    memcpy(tensor_data(*tb), o->b, (size_t)s->k * (size_t)s->n * 4);
    o->va = s->ta ? tensor_transpose(*ta, 0, 1) : *ta;
    o->vb = s->tb ? tensor_transpose(*tb, 0, 1) : *tb;
}

#define LIN(name, B, in, out)                                                            \
    {name " fwd", B, out, in, false, true}, {name " dx", B, in, out, false, false},      \
    {                                                                                    \
        name " dw", out, in, B, true, false                                              \
    }
/* conv with O outputs, Ckk = C*kh*kw, P = OH*OW, per sample (xN: batch) */
#define CONV(name, O, Ckk, P)                                                            \
    {name " fwd", O, P, Ckk, false, false}, {name " dx", Ckk, P, O, true, false},        \
    {                                                                                    \
        name " dw", O, Ckk, P, false, true                                               \
    }

static const Shape SHAPES[] = {
    LIN("MLP 784-128 b32", 32, 784, 128),
    LIN("MLP 128-64 b32", 32, 128, 64),
    LIN("MLP 64-10 b32", 32, 64, 10),
    CONV("BasicNet conv1", 32, 9, 676),
    CONV("BasicNet conv2", 64, 288, 576),
    LIN("BasicNet fc1 b64", 64, 9216, 128),
    LIN("BasicNet fc2 b64", 64, 128, 10),
    CONV("R18 conv1 7x7", 64, 147, 1024),
    CONV("R18 layer1 3x3", 64, 576, 256),
    CONV("R18 layer2 3x3", 128, 1152, 64),
    CONV("R18 layer3 3x3", 256, 2304, 16),
    CONV("R18 layer4 3x3", 512, 4608, 4),
    CONV("R18 layer3 x32", 256, 2304, 16 * 32),
    CONV("R18 layer4 x32", 512, 4608, 4 * 32),
    LIN("R18 fc b32", 32, 512, 10),
    {"large 2048^3", 2048, 2048, 2048, false, false},
};

/* Floats an operand starts past a 64-byte boundary: 0, as tensors are;
 * 4 (16 bytes) with BENCH_MISALIGN=1, to see the cost of unaligned operands. */
static size_t misalign(void)
{
    const char *mis = getenv("BENCH_MISALIGN");
    return mis && mis[0] == '1' ? 4 : 0;
}

static float *floats(size_t n)
{
    float *p = aligned_alloc(64, (n + misalign() + 15) / 16 * 64);
    return p ? p + misalign() : NULL;
}

static void free_floats(const float *p)
{
    free((void *)(p - misalign()));
}

/* Fresh operands of shape s (free with free_operands). */
static Operands operands(const Shape *s, Tensor **ta, Tensor **tb)
{
    size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
    float *a = floats(na), *b = floats(nb), *c = floats(nc);
    for (size_t j = 0; j < na; j++) a[j] = (float)(j % 7) * 0.1f;
    for (size_t j = 0; j < nb; j++) b[j] = (float)(j % 5) * 0.1f;
    Operands o = {.a = a, .b = b, .c = c};
    make_views(s, &o, ta, tb);
    return o;
}

static void free_operands(Operands *o, Tensor *ta, Tensor *tb)
{
    if (o->va != ta) tensor_free(o->va);
    if (o->vb != tb) tensor_free(o->vb);
    tensor_free(ta);
    tensor_free(tb);
    free_floats(o->a);
    free_floats(o->b);
    free_floats(o->c);
}

static void print_spread(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    printf(" %s %.1f%% (%.1f-%.1f)", what, 100 * v[n / 2], 100 * v[0], 100 * v[n - 1]);
}

/* --shape: rounds of (FMA loop, OpenBLAS on 1 thread, the engine's kernel),
 * each engine's rate as a fraction of its own round's peak; medians and
 * ranges. Interleaving makes the fractions hold on a machine whose speed
 * drifts (with BENCH_CLOCK=cycles, also whatever the clock). */
static void interleaved(const Shape *s, int rounds, bool has512)
{
    Tensor *ta, *tb;
    Operands o = operands(s, &ta, &tb);
    double *fb = malloc((size_t)rounds * sizeof *fb),
           *fo = malloc((size_t)rounds * sizeof *fo);
    openblas_set_num_threads(1);
    for (int r = -1; r < rounds; r++) { /* round -1 warms up */
        double t0 = bench_clock();
        volatile float sink =
            has512 ? fma_avx512(FMA_ITERS / 20) : fma_avx2(FMA_ITERS / 20);
        (void)sink;
        double p =
            2.0 * 12 * (has512 ? 16 : 8) * (FMA_ITERS / 20) / (bench_clock() - t0) / 1e9;
        double b = sample(BLAS, s, &o), w = sample(OWN, s, &o);
        if (r < 0) continue;
        fb[r] = b / p;
        fo[r] = w / p;
    }
    printf("%dx%dx%d%s%s, %d rounds, %% of the %s FMA peak:", s->m, s->n, s->k,
           s->ta ? " Aᵀ" : "", s->tb ? " Bᵀ" : "", rounds, has512 ? "AVX-512" : "AVX2");
    print_spread("blas1", fb, rounds);
    print_spread("own1", fo, rounds);
    printf("\n");
    free(fb);
    free(fo);
    free_operands(&o, ta, tb);
}

int main(int argc, char **argv)
{
    int nt = omp_get_max_threads();
    /* The reference is the widest FMA the CPU has: AVX-512 where present,
     * else AVX2 (running the AVX-512 loop there is an illegal instruction). */
    bool has512 = __builtin_cpu_supports("avx512f");
    if (argc >= 7 && strcmp(argv[1], "--shape") == 0) {
        Shape s = {"",
                   atoi(argv[2]),
                   atoi(argv[3]),
                   atoi(argv[4]),
                   atoi(argv[5]) != 0,
                   atoi(argv[6]) != 0};
        int rounds = argc >= 8 ? atoi(argv[7]) : 11;
        if (s.m < 1 || s.n < 1 || s.k < 1 || rounds < 1) {
            fprintf(stderr, "usage: %s [--shape M N K TRANS_A TRANS_B [ROUNDS]]\n",
                    argv[0]);
            return 2;
        }
        interleaved(&s, rounds, has512);
        return 0;
    }
    double p256 = peak(fma_avx2, 8, 1), ref = p256;
    if (has512) {
        ref = peak(fma_avx512, 16, 1);
        printf("peak f32 FMA, GFLOP/s: AVX-512 1 thread %.1f, %d threads %.1f; ", ref, nt,
               peak(fma_avx512, 16, nt));
    } else {
        printf("peak f32 FMA, GFLOP/s: no AVX-512 on this CPU; ");
    }
    printf("AVX2 1 thread %.1f, %d threads %.1f\n", p256, nt, peak(fma_avx2, 8, nt));
    printf("%% of peak: 1-thread columns vs %.1f, multi-thread vs %d x %.1f\n", ref, nt,
           ref);
    printf("| shape | m x n x k | blas1 | blas2 | own1 | ct (%d thr) |%s\n", nt,
           HAVE_DNNL ? " dnnl1 | dnnl2 |" : "");
    printf("|---|---|---|---|---|---|%s\n", HAVE_DNNL ? "---|---|" : "");
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        const Shape *s = &SHAPES[i];
        double g[6];
        Tensor *ta, *tb;
        Operands o = operands(s, &ta, &tb);
        openblas_set_num_threads(1);
        g[0] = gflops(BLAS, s, &o);
        openblas_set_num_threads(nt);
        g[1] = gflops(BLAS, s, &o);
        openblas_set_num_threads(1); /* the CPU backend's setting */
        g[2] = gflops(OWN, s, &o);
        g[3] = gflops(CT, s, &o);
#if HAVE_DNNL
        omp_set_num_threads(1);
        g[4] = gflops(DNNL, s, &o);
        omp_set_num_threads(nt);
        g[5] = gflops(DNNL, s, &o);
#endif
        printf(
            "| %s | %dx%dx%d%s%s | %.0f (%.0f%%) | %.0f (%.0f%%) | %.0f (%.0f%%) | %.0f "
            "(%.0f%%) |",
            s->what, s->m, s->n, s->k, s->ta ? " Aᵀ" : "", s->tb ? " Bᵀ" : "", g[0],
            100 * g[0] / ref, g[1], 100 * g[1] / (nt * ref), g[2], 100 * g[2] / ref, g[3],
            100 * g[3] / (nt * ref));
#if HAVE_DNNL
        printf(" %.0f (%.0f%%) | %.0f (%.0f%%) |", g[4], 100 * g[4] / ref, g[5],
               100 * g[5] / (nt * ref));
#endif
        printf("\n");
        fflush(stdout);
        free_operands(&o, ta, tb);
    }
    return 0;
}
