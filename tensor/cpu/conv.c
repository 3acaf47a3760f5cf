/* Conv2d kernels: im2col/col2im + GEMM, f32, f64 and bf16 autocast.
 *
 * Convs with few output pixels a sample (chunk_samples) run in chunks of
 * samples whose columns sit side by side, one GEMM on the engine pool per
 * product (conv_tmpl.h). The others run one sample at a time, with
 * single-threaded gemms: when the batch has at least as many
 * samples as there are threads, the engine pool (workers.h) takes whole
 * samples, each pool slot with its own column buffer, claimed one at a
 * time so that a stalled thread on a busy machine holds nobody up;
 * otherwise an OpenMP team shares each sample, splitting im2col/col2im and
 * the gemm's columns. The weight gradient of a batch is summed over
 * fixed chunks of samples (weight_plan), so it is bitwise the same on any
 * number of threads.
 * Measured on a 2-core EPYC for BasicNet's and a ResNet-18 stage's shapes
 * (docs/benchmarks.md, "CPU conv2d"): samples-per-thread was 2-7x faster
 * than running samples one by one with OpenBLAS threading the gemm, partly
 * because OpenBLAS's threads and OpenMP's spinning ones fight for cores. */
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../conv.h"
#include "cpu.h"
#include "gemm_bf16.h"
#include "sgemm.h"
#include "workers.h"

/* Pooling kernels live in pool.c and register with this group. */
void ct_cpu_register_pool(CtKernelFn *k, CtSupportsFn *s);

/* For a kernel tap at input offset off (= j*dilation - padding) and stride s,
 * outputs o in [out_lo, out_hi) read inside the input of size n. */
static inline int64_t out_lo(int64_t off, int s, int64_t n_out)
{
    int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
    return lo < n_out ? lo : n_out;
}

static inline int64_t out_hi(int64_t off, int s, int64_t n_in, int64_t n_out)
{
    if (n_in - 1 - off < 0) return 0;
    int64_t hi = (n_in - 1 - off) / s + 1;
    hi = hi < n_out ? hi : n_out;
    int64_t lo = out_lo(off, s, n_out);
    return hi > lo ? hi : lo;
}

/* The threads that share one sample's work. */
typedef struct Team {
    int tid, nth;
} Team;

static const Team SOLO = {0, 1};

/* Inside a parallel region: all of its threads. */
static inline Team team_here(void)
{
    Team t = {omp_get_thread_num(), omp_get_num_threads()};
    return t;
}

/* This thread's share [lo, hi) of n items, in chunks that are multiples of
 * `align` (but the last). */
static inline void team_range(Team t, int64_t n, int64_t align, int64_t *lo, int64_t *hi)
{
    int64_t per = (n + t.nth - 1) / t.nth;
    per = (per + align - 1) / align * align;
    int64_t a = t.tid * per, b = a + per;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

/* This thread's columns [lo, hi) of a GEMM the team shares: its share when
 * the GEMM's bits do not depend on the split, else all of them on the
 * first thread (OpenBLAS may sum a narrower block in another order). */
static inline void gemm_range(Team t, int64_t n, int64_t align, bool splits, int64_t *lo,
                              int64_t *hi)
{
    if (splits) {
        team_range(t, n, align, lo, hi);
        return;
    }
    *lo = 0;
    *hi = t.tid == 0 ? n : 0;
}

static inline void team_barrier(Team t)
{
    if (t.nth > 1) {
#pragma omp barrier
    }
}

typedef struct ConvPlan {
    bool batch;     /* threads over samples (else they share each sample) */
    int64_t chunks; /* weight gradient: chunks of samples (0: share each) */
    int nt;         /* threads of the parallel region */
    int64_t col;    /* elements of one column buffer (0: 1x1 conv, none) */
    int64_t total;  /* scratch elements */
} ConvPlan;

/* acc: elements of the per-thread accumulator the batch-parallel path needs. */
static ConvPlan plan(const CtConv2dParams *p, int64_t acc)
{
    ConvPlan pl = {0};
    bool direct =
        p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->ph == 0 && p->pw == 0;
    pl.col = direct ? 0 : (p->c / p->groups) * p->kh * p->kw * p->oh * p->ow;
    int nt = ct_workers_max();
    /* tiny problems: one thread (the parallel region costs more) */
    if (p->n * p->o * p->oh * p->ow * (p->c / p->groups) * p->kh * p->kw < CT_CPU_PAR_MIN)
        nt = 1;
    pl.batch = nt > 1 && p->n >= nt;
    pl.nt = nt;
    pl.total = pl.batch ? pl.nt * (pl.col + acc) : pl.col;
    return pl;
}

/* The weight gradient of a batch: the samples in WEIGHT_CHUNKS contiguous
 * chunks (fewer for a smaller batch), each summed in order into its own
 * gradient block by one pool item, the blocks then added in chunk order.
 * The chunks depend on the batch size alone, never on the thread count,
 * so the gradient is bitwise the same on any number of threads. A single
 * sample is shared by the threads (plan()). acc: elements of one block. */
#define WEIGHT_CHUNKS 8
static ConvPlan weight_plan(const CtConv2dParams *p, int64_t acc)
{
    ConvPlan pl = plan(p, acc);
    if (p->n < 2) return pl;
    pl.batch = false;
    pl.chunks = p->n < WEIGHT_CHUNKS ? p->n : WEIGHT_CHUNKS;
    pl.total = pl.nt * pl.col + pl.chunks * acc;
    return pl;
}

/* Samples per chunk for the chunked path of conv_tmpl.h (0: one sample at
 * a time). A sample's GEMMs are OHW columns wide; below CHUNK_BELOW they
 * run far under the engine's speed (ResNet-18 at 64x64: 13 GFLOP/s per
 * core at 2x2, 37 at 4x4, against 45-50 at 8x8 and up; docs/benchmarks.md,
 * "Zen 3 without AVX-512"), so such convs take enough samples
 * for CHUNK_COLS columns, as far as CHUNK_MAX_ELEMS of scratch allows. A
 * function of the shape alone. */
#define CHUNK_BELOW     64
#define CHUNK_COLS      512
#define CHUNK_MAX_ELEMS (4 << 20)
static int64_t chunk_samples(const CtConv2dParams *p)
{
    const int64_t ohw = p->oh * p->ow, per_sample = (p->c * p->kh * p->kw + p->o) * ohw;
    if (p->groups != 1 || ohw == 0 || ohw >= CHUNK_BELOW || p->n < 2) return 0;
    if (p->h * p->w >= INT32_MAX) return 0; /* tap_table() offsets */
    int64_t per = (CHUNK_COLS + ohw - 1) / ohw;
    if (per > p->n) per = p->n;
    while (per > 1 && per * per_sample > CHUNK_MAX_ELEMS) per--;
    return per > 1 ? per : 0;
}

/* For the chunked path: the input offset ih * W + iw that tap t = i * kw + j
 * reads for output pixel e (H * W: padding), at [t * OHW + e]; kh * kw * OHW
 * entries (OHW < CHUNK_BELOW), to free(); NULL (an error set) when out of
 * memory. */
static int32_t *tap_table(const CtConv2dParams *p)
{
    const int64_t ohw = p->oh * p->ow;
    int32_t *tab = ct_malloc((size_t)(p->kh * p->kw * ohw) * sizeof *tab + 1);
    if (!tab) {
        ct_error(CT_ERR_OOM, "conv2d: out of memory for the tap table");
        return NULL;
    }
    for (int64_t i = 0; i < p->kh; i++)
        for (int64_t j = 0; j < p->kw; j++)
            for (int64_t oh = 0; oh < p->oh; oh++)
                for (int64_t ow = 0; ow < p->ow; ow++) {
                    const int64_t ih = oh * p->sh - p->ph + i * p->dh;
                    const int64_t iw = ow * p->sw - p->pw + j * p->dw;
                    const bool in = ih >= 0 && ih < p->h && iw >= 0 && iw < p->w;
                    tab[(i * p->kw + j) * ohw + oh * p->ow + ow] =
                        (int32_t)(in ? ih * p->w + iw : p->h * p->w);
                }
    return tab;
}

/* Whether im2col's rows are shifted copies of whole input planes: stride
 * 1 with "same" padding in width (OW == W), so output row oh + 1 of a tap
 * follows output row oh as input row ih + 1 follows ih. */
static inline bool same_rows(const CtConv2dParams *p)
{
    return p->sh == 1 && p->sw == 1 && p->ow == p->w;
}

/* Scratch from the caching allocator (not scope-owned: freed by the kernel). */
static Tensor *scratch_new(const ConvPlan *pl, CtDType dt, void **data)
{
    if (!pl->total) return NULL;
    Tensor *t = ct_tensor_new_persistent(1, (const int64_t[]){pl->total}, dt, ct_cpu());
    *data = t ? ct_ptr(t) : NULL;
    return t;
}

/* Every thread of a parallel region runs its own gemm; BLAS itself is
 * single-threaded (set when the CPU backend starts, see cpu/matmul.c).
 * GEMM(n_all, ta, tb, m, n, k, ...) computes n of the n_all columns of C,
 * with the engine chosen on the whole product; a team splits the columns
 * only where SPLITS says that the bits of C stay the same (sgemm.h,
 * gemm_bf16.h), so results do not depend on the number of threads. */

#define T               float
#define SFX             f32
#define GEMM            ct_cpu_sgemm_block
#define SPLITS(m, n, k) ct_cpu_sgemm_picks(m, n, k)
#define DT              CT_F32
#include "conv_tmpl.h"

#define T               double
#define SFX             f64
#define GEMM(_, ...)    cblas_dgemm(CblasRowMajor, __VA_ARGS__)
#define SPLITS(m, n, k) false
#define DT              CT_F64
#include "conv_tmpl.h"

/* bf16 autocast: f32 tensors, the gemms round their operands to bf16 */
#define T               float
#define SFX             bf16
#define GEMM(_, ...)    ct_cblas_sgemm_bf16(CblasRowMajor, __VA_ARGS__)
#define SPLITS(m, n, k) ct_cpu_gemm_bf16_splits()
#define DT              CT_F32
#include "conv_tmpl.h"

#define BY_DTYPE(name)                                                                   \
    static CtStatus name(const CtOpCall *c)                                              \
    {                                                                                    \
        const CtConv2dParams *p = c->params;                                             \
        if (p->autocast == CT_BF16) return name##_bf16(c);                               \
        return c->in[0]->dtype == CT_F32 ? name##_f32(c) : name##_f64(c);                \
    }
BY_DTYPE(conv_fwd)
BY_DTYPE(conv_bwd_data)
BY_DTYPE(conv_bwd_weight)

static bool float_only(const CtOpCall *c)
{
    const CtConv2dParams *p = c->params;
    if (p->nhwc) return false; /* NCHW kernels */
    if (p->autocast != CT_F32) return p->autocast == CT_BF16 && c->in[0]->dtype == CT_F32;
    return c->in[0]->dtype == CT_F32 || c->in[0]->dtype == CT_F64;
}

void ct_cpu_register_conv(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_CONV2D] = conv_fwd;
    k[CT_OP_CONV2D_BWD_DATA] = conv_bwd_data;
    k[CT_OP_CONV2D_BWD_WEIGHT] = conv_bwd_weight;
    s[CT_OP_CONV2D] = s[CT_OP_CONV2D_BWD_DATA] = s[CT_OP_CONV2D_BWD_WEIGHT] = float_only;
    ct_cpu_register_pool(k, s);
}
