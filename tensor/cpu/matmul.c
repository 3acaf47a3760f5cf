/* MATMUL: batched GEMM (CtMatmulParams in internal.h). f32 runs on the
 * engine of sgemm.h for the shapes it wins (ct_cpu_sgemm_picks), else on
 * OpenBLAS, as do f64 and bf16; an outer product (k == 1) and a single row
 * (m == 1) are passes of their own.
 *
 * Threading: OpenBLAS runs single-threaded (openblas_set_num_threads(1)
 * when the CPU backend starts) and GEMM parallelism comes from the engine
 * pool (workers.h): a batch of small GEMMs runs one GEMM per item; a large
 * GEMM is split into row or column blocks of C, one block per item. Items
 * are claimed from a shared counter, so on a busy machine the calling
 * thread does the blocks a stalled pool thread did not take. OpenBLAS's
 * own threads were slower on small shapes (784x128x32: 93 GFLOP/s on one
 * thread, 29 on two) and spin against OpenMP's; docs/benchmarks.md. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm_bf16.h"
#include "sgemm.h"
#include "workers.h"

/* Work (m*n*k summed over the batch) below which a matmul runs on the
 * calling thread: about 20 us of single-threaded GEMM, the scale at which a
 * hand-off to a spinning pool thread (~1 us) stops being noise but a
 * wake-up from sleep (~50 us on a VM) could still dominate. */
#define PAR_MIN_MNK 1048576.0
/* A batch runs one GEMM per item when each GEMM is at most this big. */
#define BATCH_GEMM_MAX_MNK 262144.0
/* Blocks of a split GEMM: at most SPLIT_BLOCKS (slack for a thread that is
 * slowed down), each at least SPLIT_MIN_EDGE rows or columns (multiples of
 * 16 so that BLAS keeps its full-width kernels). The blocks depend on the
 * shape only, never on the thread count, so results are bitwise the same
 * for any number of threads (BLAS may round a block's tail differently
 * from a whole matrix). */
#define SPLIT_BLOCKS   8
#define SPLIT_MIN_EDGE 32

/* How one matmul call is cut into pool items. */
typedef struct GemmPlan {
    int nt;         /* threads (1: inline) */
    int64_t blocks; /* blocks per matrix (1: whole GEMMs) */
    int64_t step;   /* rows or columns per block */
    bool rows;      /* blocks of rows of C (else columns) */
} GemmPlan;

/* engine: the f32 engine of sgemm.h runs the blocks. Its results do not
 * depend on the blocks, so on one thread it takes the whole GEMM, and its
 * blocks are whole 32-wide tiles. */
static GemmPlan gemm_plan(const CtMatmulParams *p, bool engine)
{
    double mnk = (double)p->m * (double)p->n * (double)p->k;
    GemmPlan g = {.nt = ct_workers_max(), .blocks = 1, .rows = p->m >= p->n};
    g.step = g.rows ? p->m : p->n;
    bool small = mnk * (double)p->batch < PAR_MIN_MNK;
    bool per_gemm = p->batch > 1 && p->stride_c != 0 && mnk <= BATCH_GEMM_MAX_MNK;
    if (small) g.nt = 1;
    if (!small && !per_gemm && !(engine && g.nt == 1)) {
        int64_t len = g.step, most = len / SPLIT_MIN_EDGE, unit = engine ? 32 : 16;
        g.blocks = most < SPLIT_BLOCKS ? (most > 1 ? most : 1) : SPLIT_BLOCKS;
        g.step = ((len + g.blocks - 1) / g.blocks + unit - 1) / unit * unit;
        g.blocks = (len + g.step - 1) / g.step;
    }
    return g;
}

typedef struct GemmJob {
    const CtMatmulParams *p;
    GemmPlan g;
    CtSgemmIsa isa; /* f32: the engine of sgemm.h, or NONE for OpenBLAS */
    const void *A, *B;
    void *C;
} GemmJob;

/* Item i: block i % blocks of matrix i / blocks. A block of rows takes the
 * matching rows of op(A), a block of columns the matching columns of
 * op(B). */
#define GEMM_ITEM(NAME, T, GEMM)                                                         \
    static void NAME(void *ctx, int64_t i, int slot)                                     \
    {                                                                                    \
        (void)slot;                                                                      \
        const GemmJob *j = ctx;                                                          \
        const CtMatmulParams *p = j->p;                                                  \
        const int64_t mat = i / j->g.blocks, s0 = i % j->g.blocks * j->g.step;           \
        const int m = (int)p->m, n = (int)p->n, k = (int)p->k;                           \
        const int lda = p->trans_a ? m : k, ldb = p->trans_b ? k : n;                    \
        const T *a = (const T *)j->A + mat * p->stride_a;                                \
        const T *b = (const T *)j->B + mat * p->stride_b;                                \
        T *c = (T *)j->C + mat * p->stride_c;                                            \
        const enum CBLAS_TRANSPOSE ta = p->trans_a ? CblasTrans : CblasNoTrans;          \
        const enum CBLAS_TRANSPOSE tb = p->trans_b ? CblasTrans : CblasNoTrans;          \
        const int64_t len = j->g.rows ? m : n;                                           \
        const int bl = (int)(len - s0 < j->g.step ? len - s0 : j->g.step);               \
        if (j->g.rows)                                                                   \
            GEMM(j, ta, tb, bl, n, k, (T)p->alpha, a + (p->trans_a ? s0 : s0 * lda),     \
                 lda, b, ldb, (T)p->beta, c + s0 * n, n);                                \
        else                                                                             \
            GEMM(j, ta, tb, m, bl, k, (T)p->alpha, a, lda,                               \
                 b + (p->trans_b ? s0 * ldb : s0), ldb, (T)p->beta, c + s0, n);          \
    }
#define SGEMM_BLOCK(j, ...) ct_cpu_sgemm_cblas((j)->isa, __VA_ARGS__)
#define DGEMM_BLOCK(j, ...) cblas_dgemm(CblasRowMajor, __VA_ARGS__)
GEMM_ITEM(sgemm_item, float, SGEMM_BLOCK)
GEMM_ITEM(dgemm_item, double, DGEMM_BLOCK)

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

/* ------------------------------------------------------------ rank one */

/* k == 1 (a weight gradient at batch 1): C = alpha * a bᵀ + beta * C in one
 * pass over C, where BLAS scales or zeroes C, packs both vectors and runs
 * its kernel (three passes). a and b are contiguous vectors whatever the
 * trans flags. Each element is a_i * b_j, times alpha, plus beta * c_ij
 * (beta 0: C is not read), each step rounded: the same bits for any split
 * into row blocks. */
#define OUTER_ROWS_MIN 16384 /* elements of C per pool item, at least */

/* c <- alpha * t, plus beta * c unless beta is 0 (c is then not read),
 * each step rounded in T. */
#define STORE_AXPBY(T, c, t, alpha, beta)                                                \
    do {                                                                                 \
        T t_ = (T)(alpha) * (t);                                                         \
        if ((beta) != 0) {                                                               \
            T u_ = (T)(beta) * (c);                                                      \
            t_ = t_ + u_;                                                                \
        }                                                                                \
        (c) = t_;                                                                        \
    } while (0)

/* A product cut into pool items along one dim of C (outer: rows; one row:
 * columns). */
typedef struct SliceJob {
    const CtMatmulParams *p;
    const void *A, *B;
    void *C;
    int64_t per, blocks; /* rows or columns per item; items per matrix */
} SliceJob;

#define OUTER_ITEM(NAME, T)                                                              \
    static void NAME(void *ctx, int64_t i, int slot)                                     \
    {                                                                                    \
        (void)slot;                                                                      \
        const SliceJob *j = ctx;                                                         \
        const CtMatmulParams *p = j->p;                                                  \
        const int64_t mat = i / j->blocks, r0 = i % j->blocks * j->per, n = p->n;        \
        const int64_t r1 = r0 + j->per < p->m ? r0 + j->per : p->m;                      \
        const T *a = (const T *)j->A + mat * p->stride_a;                                \
        const T *restrict b = (const T *)j->B + mat * p->stride_b;                       \
        const T alpha = (T)p->alpha, beta = (T)p->beta;                                  \
        for (int64_t r = r0; r < r1; r++) {                                              \
            T *restrict c = (T *)j->C + mat * p->stride_c + r * n;                       \
            const T ar = a[r];                                                           \
            for (int64_t q = 0; q < n; q++) {                                            \
                const T t = ar * b[q];                                                   \
                STORE_AXPBY(T, c[q], t, alpha, beta);                                    \
            }                                                                            \
        }                                                                                \
    }
OUTER_ITEM(outer_f32, float)
OUTER_ITEM(outer_f64, double)

static void outer(const CtMatmulParams *p, CtDType dt, const void *A, const void *B,
                  void *C)
{
    int64_t rows = (OUTER_ROWS_MIN + p->n - 1) / p->n;
    SliceJob j = {.p = p, .A = A, .B = B, .C = C, .per = rows};
    j.blocks = (p->m + rows - 1) / rows;
    int nt = p->batch * p->m * p->n >= CT_CPU_POOL_MIN ? ct_workers_max() : 1;
    ct_workers_run(p->batch * j.blocks, nt, dt == CT_F32 ? outer_f32 : outer_f64, &j);
}

/* ------------------------------------------------------------- one row */

/* m == 1 (a linear layer at batch 1): c = alpha * a op(B) + beta * c reads
 * B once, where BLAS first packs it (a read and a write of B, then a read
 * of the copy). op(B) = B (k, n): c accumulates a_i * row i of B in row
 * order; op(B) = Bᵀ (B is (n, k)): c_j is the dot product of a with row j,
 * in ROW_LANES interleaved partial sums added in a fixed order. Either way
 * the bits depend on the shape only. Columns split over the pool from
 * PAR_MIN_MNK multiply-adds. */
#define ROW_LANES 8
#define ROW_COLS  64 /* columns per pool item, at least */

#define ROW_ITEM(NAME, T)                                                                \
    static void NAME(void *ctx, int64_t it, int slot)                                    \
    {                                                                                    \
        (void)slot;                                                                      \
        const SliceJob *j = ctx;                                                         \
        const CtMatmulParams *p = j->p;                                                  \
        const int64_t mat = it / j->blocks, c0 = it % j->blocks * j->per;                \
        const int64_t c1 = c0 + j->per < p->n ? c0 + j->per : p->n, k = p->k;            \
        const T *restrict a = (const T *)j->A + mat * p->stride_a;                       \
        const T *restrict b = (const T *)j->B + mat * p->stride_b;                       \
        T *restrict c = (T *)j->C + mat * p->stride_c;                                   \
        T acc[ROW_COLS];                                                                 \
        for (int64_t q0 = c0; q0 < c1; q0 += ROW_COLS) {                                 \
            const int64_t w = c1 - q0 < ROW_COLS ? c1 - q0 : ROW_COLS;                   \
            if (p->trans_b) {                                                            \
                for (int64_t q = 0; q < w; q++) {                                        \
                    const T *restrict r = b + (q0 + q) * k;                              \
                    T l[ROW_LANES] = {0};                                                \
                    int64_t i = 0;                                                       \
                    for (; i + ROW_LANES <= k; i += ROW_LANES)                           \
                        for (int u = 0; u < ROW_LANES; u++) l[u] += a[i + u] * r[i + u]; \
                    for (int u = 0; i < k; i++, u++) l[u] += a[i] * r[i];                \
                    T sum = 0;                                                           \
                    for (int u = 0; u < ROW_LANES; u++) sum += l[u];                     \
                    acc[q] = sum;                                                        \
                }                                                                        \
            } else {                                                                     \
                for (int64_t q = 0; q < w; q++) acc[q] = 0;                              \
                for (int64_t i = 0; i < k; i++) {                                        \
                    const T ai = a[i], *restrict r = b + i * p->n + q0;                  \
                    for (int64_t q = 0; q < w; q++) acc[q] += ai * r[q];                 \
                }                                                                        \
            }                                                                            \
            for (int64_t q = 0; q < w; q++)                                              \
                STORE_AXPBY(T, c[q0 + q], acc[q], p->alpha, p->beta);                    \
        }                                                                                \
    }
ROW_ITEM(row_f32, float)
ROW_ITEM(row_f64, double)

static void one_row(const CtMatmulParams *p, CtDType dt, const void *A, const void *B,
                    void *C)
{
    double mnk = (double)p->n * (double)p->k * (double)p->batch;
    int nt = mnk >= PAR_MIN_MNK ? ct_workers_max() : 1;
    SliceJob j = {.p = p, .A = A, .B = B, .C = C, .per = p->n};
    if (nt > 1 && p->n >= 2 * ROW_COLS)
        j.per = (p->n / SPLIT_BLOCKS + ROW_COLS - 1) / ROW_COLS * ROW_COLS;
    j.blocks = (p->n + j.per - 1) / j.per;
    ct_workers_run(p->batch * j.blocks, nt, dt == CT_F32 ? row_f32 : row_f64, &j);
}

/* Row-major GEMMs, f32 or f64; leading dimensions follow from the packed
 * layout. */
static void gemm(const CtMatmulParams *p, CtDType dt, const void *A, const void *B,
                 void *C)
{
    if (p->m == 0 || p->n == 0 || p->batch == 0) return;
    if (p->k == 0) {
        scale_c(p, dt, C);
        return;
    }
    if (p->k == 1) {
        outer(p, dt, A, B, C);
        return;
    }
    if (p->m == 1) {
        one_row(p, dt, A, B, C);
        return;
    }
    GemmJob j = {.p = p, .isa = CT_SGEMM_NONE, .A = A, .B = B, .C = C};
    if (dt == CT_F32 && ct_cpu_sgemm_picks(p->m, p->n, p->k)) j.isa = ct_cpu_sgemm_isa();
    j.g = gemm_plan(p, j.isa != CT_SGEMM_NONE);
    ct_workers_run(p->batch * j.g.blocks, j.g.nt, dt == CT_F32 ? sgemm_item : dgemm_item,
                   &j);
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

/* f32 operands computed in bf16 (gemm_bf16.h), threads as for sgemm: one
 * GEMM per pool item for a batch of small ones, else the pool inside each
 * GEMM (an item's GEMM runs inline). */
typedef struct AutocastJob {
    const CtMatmulParams *p;
    const float *a, *b;
    float *c;
    int nt; /* threads inside one GEMM */
} AutocastJob;

static void autocast_item(void *ctx, int64_t i, int slot)
{
    (void)slot;
    const AutocastJob *j = ctx;
    const CtMatmulParams *p = j->p;
    CtGemmBf16 g = {.trans_a = p->trans_a,
                    .trans_b = p->trans_b,
                    .m = (int)p->m,
                    .n = (int)p->n,
                    .k = (int)p->k,
                    .alpha = (float)p->alpha,
                    .beta = (float)p->beta,
                    .a = j->a + i * p->stride_a,
                    .lda = (int)(p->trans_a ? p->m : p->k),
                    .b = j->b + i * p->stride_b,
                    .ldb = (int)(p->trans_b ? p->k : p->n),
                    .c = j->c + i * p->stride_c,
                    .ldc = (int)p->n};
    ct_cpu_gemm_bf16(&g, j->nt);
}

static void gemm_autocast(const CtMatmulParams *p, const float *a, const float *b,
                          float *c)
{
    const GemmPlan plan = gemm_plan(p, false);
    const double mnk = (double)p->m * (double)p->n * (double)p->k;
    const bool per_gemm =
        plan.nt > 1 && p->batch > 1 && p->stride_c != 0 && mnk <= BATCH_GEMM_MAX_MNK;
    AutocastJob j = {.p = p, .a = a, .b = b, .c = c, .nt = per_gemm ? 1 : plan.nt};
    ct_workers_run(p->batch, per_gemm ? plan.nt : 1, autocast_item, &j);
}

/* ---------------------------------------------------------------- kernel */

static bool matmul_supports(const CtOpCall *c)
{
    const CtMatmulParams *p = c->params;
    CtDType dt = c->out[0]->dtype;
    if (c->in[0]->dtype != dt || c->in[1]->dtype != dt) return false;
    if (p->bias || p->act != CT_MATMUL_ACT_NONE || p->aux) return false; /* no epilogue */
    if (p->bias_grad) /* the sums after the GEMM, as a REDUCE would */
        return (dt == CT_F32 || dt == CT_F64) && p->autocast == CT_F32 && p->batch == 1 &&
               c->out[1] && c->out[1]->dtype == dt && tensor_is_contiguous(c->out[1]) &&
               tensor_numel(c->out[1]) == p->m;
    if (p->autocast != CT_F32) return dt == CT_F32 && p->autocast == CT_BF16;
    return dt == CT_F32 || dt == CT_F64 || dt == CT_BF16;
}

CtStatus ct_cpu_matmul(const CtMatmulParams *p, CtDType dt, const void *A, const void *B,
                       void *C)
{
    if (p->autocast == CT_BF16) {
        if (p->m > 0 && p->n > 0) gemm_autocast(p, A, B, C);
        return CT_OK;
    }
    switch (dt) {
    case CT_F32:
    case CT_F64: gemm(p, dt, A, B, C); return CT_OK;
    case CT_BF16:
        if (p->m == 0 || p->n == 0 || p->batch == 0) return CT_OK;
        return gemm_bf16(p, A, B, C);
    default: return ct_error(CT_ERR_UNSUPPORTED, "matmul: dtype not supported");
    }
}

static CtStatus matmul_kernel(const CtOpCall *c)
{
    const CtMatmulParams *p = c->params;
    if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX)
        return ct_error(
            CT_ERR_UNSUPPORTED,
            "matmul: matrix dims (%lld, %lld, %lld) exceed the BLAS int range",
            (long long)p->m, (long long)p->n, (long long)p->k);
    CtDType dt = c->out[0]->dtype;
    CtStatus st =
        ct_cpu_matmul(p, dt, ct_ptr(c->in[0]), ct_ptr(c->in[1]), ct_ptr(c->out[0]));
    if (st != CT_OK || !p->bias_grad) return st;
    return ct_cpu_sum_op_a_rows(p, dt, ct_ptr(c->in[0]), ct_ptr(c->out[1]));
}

void ct_cpu_register_matmul(CtKernelFn *k, CtSupportsFn *s)
{
    openblas_set_num_threads(1); /* one pool: see the top of this file */
    k[CT_OP_MATMUL] = matmul_kernel;
    s[CT_OP_MATMUL] = matmul_supports;
}
