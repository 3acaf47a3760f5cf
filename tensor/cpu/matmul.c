/* MATMUL: batched GEMM through OpenBLAS (CtMatmulParams in internal.h).
 *
 * Threading: one pool. OpenBLAS is told once to run single-threaded
 * (openblas_set_num_threads(1) when the CPU backend starts) and every GEMM
 * parallelism comes from OpenMP: a batch of small GEMMs runs one GEMM per
 * thread; a large GEMM is split into row or column blocks of C, one per
 * thread. Two pools (OpenBLAS's pthreads and libgomp's) spin-wait against
 * each other on small machines; measured in docs/benchmarks.md. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "cpu.h"
#include "gemm_bf16.h"

/* A batch runs one GEMM per thread when each GEMM is at most this big
 * (m*n*k) and the batch has at least BATCH_PAR_MIN_MNK in all. */
#define BATCH_GEMM_MAX_MNK 262144.0
#define BATCH_PAR_MIN_MNK  524288.0
/* A single GEMM is split over threads from this m*n*k on (about 60 us of
 * single-threaded work: below it a fork/join costs more than it saves). */
#define SPLIT_MIN_MNK 4194304.0

static bool batch_parallel(const CtMatmulParams *p)
{
    double mnk = (double)p->m * (double)p->n * (double)p->k;
    return p->batch > 1 && p->stride_c != 0 && mnk <= BATCH_GEMM_MAX_MNK &&
           mnk * (double)p->batch >= BATCH_PAR_MIN_MNK;
}

static int split_threads(const CtMatmulParams *p)
{
    double mnk = (double)p->m * (double)p->n * (double)p->k;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    return mnk >= SPLIT_MIN_MNK ? nt : 1;
}

/* One row-major GEMM split into nt blocks of C along its larger dim: a block
 * of rows takes the matching rows of op(A), a block of columns the matching
 * columns of op(B). Block edges are multiples of 16 so that BLAS keeps its
 * full-width micro-kernels. */
#define SPLIT_GEMM(NAME, T, GEMM)                                                        \
    static void NAME(const CtMatmulParams *p, int nt, T alpha, const T *a, int lda,      \
                     const T *b, int ldb, T beta, T *c)                                  \
    {                                                                                    \
        const int m = (int)p->m, n = (int)p->n, k = (int)p->k;                           \
        const enum CBLAS_TRANSPOSE ta = p->trans_a ? CblasTrans : CblasNoTrans;          \
        const enum CBLAS_TRANSPOSE tb = p->trans_b ? CblasTrans : CblasNoTrans;          \
        const bool rows = m >= n;                                                        \
        const int len = rows ? m : n;                                                    \
        const int step = ((len + nt - 1) / nt + 15) / 16 * 16;                           \
        _Pragma("omp parallel for schedule(static) num_threads(nt)") for (int s0 = 0;    \
                                                                          s0 < len;      \
                                                                          s0 += step)    \
        {                                                                                \
            int bl = len - s0 < step ? len - s0 : step;                                  \
            if (rows)                                                                    \
                GEMM(CblasRowMajor, ta, tb, bl, n, k, alpha,                             \
                     a + (p->trans_a ? s0 : (int64_t)s0 * lda), lda, b, ldb, beta,       \
                     c + (int64_t)s0 * n, n);                                            \
            else                                                                         \
                GEMM(CblasRowMajor, ta, tb, m, bl, k, alpha, a, lda,                     \
                     b + (p->trans_b ? (int64_t)s0 * ldb : s0), ldb, beta, c + s0, n);   \
        }                                                                                \
    }
SPLIT_GEMM(split_sgemm, float, cblas_sgemm)
SPLIT_GEMM(split_dgemm, double, cblas_dgemm)

/* C = beta * C for every matrix (k == 0: the product is empty). */
static void scale_c(const CtMatmulParams *p, CtDType dt, void *C)
{
    int64_t mn = p->m * p->n;
    for (int64_t i = 0; i < p->batch; i++) {
        if (dt == CT_F32) {
            float *c = (float *)C + i * p->stride_c;
            for (int64_t j = 0; j < mn; j++)
                c[j] = p->beta == 0 ? 0.0f : (float)p->beta * c[j];
        } else {
            double *c = (double *)C + i * p->stride_c;
            for (int64_t j = 0; j < mn; j++) c[j] = p->beta == 0 ? 0.0 : p->beta * c[j];
        }
    }
}

/* Row-major GEMMs, f32 or f64; leading dimensions follow from the packed
 * layout. The dtype is switched outside the batch loop. */
static void gemm(const CtMatmulParams *p, CtDType dt, const void *A, const void *B,
                 void *C)
{
    if (p->m == 0 || p->n == 0 || p->batch == 0) return;
    if (p->k == 0) {
        scale_c(p, dt, C);
        return;
    }
    const int m = (int)p->m, n = (int)p->n, k = (int)p->k;
    const int lda = p->trans_a ? m : k, ldb = p->trans_b ? k : n;
    const enum CBLAS_TRANSPOSE ta = p->trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = p->trans_b ? CblasTrans : CblasNoTrans;
    const int64_t sa = p->stride_a, sb = p->stride_b, sc = p->stride_c;
    const bool par = batch_parallel(p);
    if (dt == CT_F32) {
        const float *a = A, *b = B;
        float *c = C;
        const int nt = par ? 1 : split_threads(p);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < p->batch; i++)
            if (nt > 1)
                split_sgemm(p, nt, (float)p->alpha, a + i * sa, lda, b + i * sb, ldb,
                            (float)p->beta, c + i * sc);
            else
                cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, (float)p->alpha, a + i * sa,
                            lda, b + i * sb, ldb, (float)p->beta, c + i * sc, n);
    } else {
        const double *a = A, *b = B;
        double *c = C;
        const int nt = par ? 1 : split_threads(p);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < p->batch; i++)
            if (nt > 1)
                split_dgemm(p, nt, p->alpha, a + i * sa, lda, b + i * sb, ldb, p->beta,
                            c + i * sc);
            else
                cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, p->alpha, a + i * sa, lda,
                            b + i * sb, ldb, p->beta, c + i * sc, n);
    }
}

/* ------------------------------------------------------------------ bf16 */

/* nmat matrices of len elements, matrix i at src + i*stride, into dst packed. */
static void widen(float *dst, const uint16_t *src, int64_t nmat, int64_t len,
                  int64_t stride)
{
#pragma omp parallel for collapse(2) schedule(static) if (nmat * len >= CT_CPU_PAR_MIN)
    for (int64_t i = 0; i < nmat; i++)
        for (int64_t j = 0; j < len; j++)
            dst[i * len + j] = ct_bf16_widen(src[i * stride + j]);
}

static void narrow(uint16_t *dst, const float *src, int64_t nmat, int64_t len,
                   int64_t stride)
{
#pragma omp parallel for collapse(2) schedule(static) if (nmat * len >= CT_CPU_PAR_MIN)
    for (int64_t i = 0; i < nmat; i++)
        for (int64_t j = 0; j < len; j++)
            dst[i * stride + j] = ct_bf16_round(src[i * len + j]);
}

#ifdef CTRAINER_HAVE_SBGEMM
/* bf16 inputs, f32 accumulation into an f32 copy of C, rounded back. */
static CtStatus gemm_bf16(const CtMatmulParams *p, const uint16_t *A, const uint16_t *B,
                          uint16_t *C)
{
    int64_t mn = p->m * p->n;
    float *fc = ct_malloc((size_t)(p->batch * mn) * sizeof *fc + 1);
    if (!fc) return ct_error(CT_ERR_OOM, "matmul: out of memory for bf16 scratch");
    if (p->beta != 0) widen(fc, C, p->batch, mn, p->stride_c);
    const int m = (int)p->m, n = (int)p->n, k = (int)p->k;
    const int lda = p->trans_a ? m : k, ldb = p->trans_b ? k : n;
    const enum CBLAS_TRANSPOSE ta = p->trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = p->trans_b ? CblasTrans : CblasNoTrans;
    if (k == 0) {
        for (int64_t j = 0; j < p->batch * mn; j++)
            fc[j] = p->beta == 0 ? 0.0f : (float)p->beta * fc[j];
    } else {
#pragma omp parallel for schedule(static) if (batch_parallel(p))
        for (int64_t i = 0; i < p->batch; i++)
            cblas_sbgemm(CblasRowMajor, ta, tb, m, n, k, (float)p->alpha,
                         A + i * p->stride_a, lda, B + i * p->stride_b, ldb,
                         (float)p->beta, fc + i * mn, n);
    }
    narrow(C, fc, p->batch, mn, p->stride_c);
    free(fc);
    return CT_OK;
}
#else
/* No sbgemm: widen the operands to f32 scratch (each distinct matrix once),
 * sgemm, round C back. Same numerics as sbgemm (f32 accumulate). */
static CtStatus gemm_bf16(const CtMatmulParams *p, const uint16_t *A, const uint16_t *B,
                          uint16_t *C)
{
    int64_t mk = p->m * p->k, kn = p->k * p->n, mn = p->m * p->n;
    int64_t na = p->stride_a ? p->batch : 1, nb = p->stride_b ? p->batch : 1;
    size_t n_el = (size_t)(na * mk + nb * kn + p->batch * mn);
    float *buf = ct_malloc(n_el * sizeof *buf + 1);
    if (!buf) return ct_error(CT_ERR_OOM, "matmul: out of memory for bf16 scratch");
    float *fa = buf, *fb = fa + na * mk, *fc = fb + nb * kn;
    widen(fa, A, na, mk, p->stride_a);
    widen(fb, B, nb, kn, p->stride_b);
    if (p->beta != 0) widen(fc, C, p->batch, mn, p->stride_c);
    CtMatmulParams q = *p;
    q.stride_a = p->stride_a ? mk : 0;
    q.stride_b = p->stride_b ? kn : 0;
    q.stride_c = mn;
    if (p->beta == 0) q.beta = 0;
    gemm(&q, CT_F32, fa, fb, fc);
    narrow(C, fc, p->batch, mn, p->stride_c);
    free(buf);
    return CT_OK;
}
#endif

/* --------------------------------------------------------- bf16 autocast */

/* f32 operands computed in bf16 (gemm_bf16.h), threads as for sgemm. */
static void gemm_autocast(const CtMatmulParams *p, const float *a, const float *b,
                          float *c)
{
    const bool par = batch_parallel(p);
    const int nt = par ? 1 : split_threads(p);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t i = 0; i < p->batch; i++) {
        CtGemmBf16 g = {.trans_a = p->trans_a,
                        .trans_b = p->trans_b,
                        .m = (int)p->m,
                        .n = (int)p->n,
                        .k = (int)p->k,
                        .alpha = (float)p->alpha,
                        .beta = (float)p->beta,
                        .a = a + i * p->stride_a,
                        .lda = (int)(p->trans_a ? p->m : p->k),
                        .b = b + i * p->stride_b,
                        .ldb = (int)(p->trans_b ? p->k : p->n),
                        .c = c + i * p->stride_c,
                        .ldc = (int)p->n};
        ct_cpu_gemm_bf16(&g, nt);
    }
}

/* ---------------------------------------------------------------- kernel */

static bool matmul_supports(const CtOpCall *c)
{
    const CtMatmulParams *p = c->params;
    CtDType dt = c->out[0]->dtype;
    if (c->in[0]->dtype != dt || c->in[1]->dtype != dt) return false;
    if (p->autocast != CT_F32) return dt == CT_F32 && p->autocast == CT_BF16;
    return dt == CT_F32 || dt == CT_F64 || dt == CT_BF16;
}

static CtStatus matmul_kernel(const CtOpCall *c)
{
    const CtMatmulParams *p = c->params;
    if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX)
        return ct_error(
            CT_ERR_UNSUPPORTED,
            "matmul: matrix dims (%lld, %lld, %lld) exceed the BLAS int range",
            (long long)p->m, (long long)p->n, (long long)p->k);
    void *A = ct_ptr(c->in[0]), *B = ct_ptr(c->in[1]), *C = ct_ptr(c->out[0]);
    if (p->autocast == CT_BF16) {
        if (p->m > 0 && p->n > 0) gemm_autocast(p, A, B, C);
        return CT_OK;
    }
    switch (c->out[0]->dtype) {
    case CT_F32:
    case CT_F64: gemm(p, c->out[0]->dtype, A, B, C); return CT_OK;
    case CT_BF16:
        if (p->m == 0 || p->n == 0 || p->batch == 0) return CT_OK;
        return gemm_bf16(p, A, B, C);
    default: return ct_error(CT_ERR_UNSUPPORTED, "matmul: dtype not supported");
    }
}

void ct_cpu_register_matmul(CtKernelFn *k, CtSupportsFn *s)
{
    openblas_set_num_threads(1); /* one pool: see the top of this file */
    k[CT_OP_MATMUL] = matmul_kernel;
    s[CT_OP_MATMUL] = matmul_supports;
}
