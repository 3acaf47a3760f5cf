/* Private to tensor/cpu: kernel registration and the strided iterator. */
#ifndef CTRAINER_TENSOR_CPU_H
#define CTRAINER_TENSOR_CPU_H

#include "../internal.h"

/* Each kernel file fills the table slots of the ops it implements. */
typedef void (*CtCpuRegisterFn)(CtKernelFn *kernels, CtSupportsFn *supports);
void ct_cpu_register_copy(CtKernelFn *k, CtSupportsFn *s);   /* FILL, COPY */
void ct_cpu_register_random(CtKernelFn *k, CtSupportsFn *s); /* RNG */
void ct_cpu_register_elementwise(CtKernelFn *k,
                                 CtSupportsFn *s); /* BINARY, UNARY(_BWD), WHERE */
void ct_cpu_register_reduce(CtKernelFn *k, CtSupportsFn *s); /* REDUCE, ARG_REDUCE */
void ct_cpu_register_softmax(CtKernelFn *k,
                             CtSupportsFn *s); /* SOFTMAX(_BWD), CROSS_ENTROPY(_BWD) */
void ct_cpu_register_matmul(CtKernelFn *k, CtSupportsFn *s); /* MATMUL */
void ct_cpu_register_conv(CtKernelFn *k, CtSupportsFn *s);   /* CONV2D*, POOL2D* */
void ct_cpu_register_norm(CtKernelFn *k, CtSupportsFn *s); /* BATCH_NORM*, LAYER_NORM* */
void ct_cpu_register_unscale(CtKernelFn *k, CtSupportsFn *s); /* UNSCALE */
void ct_cpu_register_optim(CtKernelFn *k, CtSupportsFn *s);   /* OPTIM_*, BLOCK_* */
void ct_cpu_register_index(CtKernelFn *k,
                           CtSupportsFn *s); /* INDEX_*, GATHER, SCATTER_ADD, ONE_HOT */

/* The MATMUL kernel's body: p's GEMMs over packed operands (leading
 * dimensions from the shapes) of dtype dt, on the engine pool; the split
 * depends on the shape alone, so C has the same bits for any thread count.
 * Dims must fit in an int. Errors: out of memory (bf16 scratch), dtype. */
CtStatus ct_cpu_matmul(const CtMatmulParams *p, CtDType dt, const void *A, const void *B,
                       void *C);

/* y[0] <- the sum of the n contiguous elements at x (f32 or f64): the
 * bits of a REDUCE summing a contiguous tensor over every dim. Errors: out
 * of memory (partial sums of a long run). */
CtStatus ct_cpu_sum_contiguous(CtDType dt, const void *x, int64_t n, void *y);

/* y[i] <- the sum over k of op(A)[i, :] for p's one matrix A (f32 or f64),
 * i < m: the bits of a REDUCE summing op(A)ᵀ over dim 0 (a linear layer's
 * bias gradient, CtMatmulParams.bias_grad). Errors: out of memory. */
CtStatus ct_cpu_sum_op_a_rows(const CtMatmulParams *p, CtDType dt, const void *A,
                              void *y);

/* Memory-bound work below this many elements runs on one thread. An OpenMP
 * fork/join costs a few microseconds on an idle machine, but its
 * end-of-region barrier waits for every team thread, and when another
 * process holds a core that takes 0.1-20 ms (bench/bench_overhead.c,
 * docs/benchmarks.md) while a 1M-element pass is ~0.5 ms of work. From 8M
 * elements (32 MB of f32: several ms of work) splitting still pays. */
#define CT_CPU_PAR_MIN 8388608
/* Memory-bound work from this many elements runs its rows on the engine
 * pool (workers.h), whose hand-off to a spinning thread costs ~1 us and
 * whose caller never waits for a thread that has not started: a 109k-
 * element gradient block's zeroing (once per optimizer step) splits. */
#define CT_CPU_POOL_MIN 65536

/* Strided iteration over `nops` tensors of one shape, dims coalesced where
 * every operand allows it. Rows are the innermost (coalesced) dim:
 *
 *     CT_ROW_ITEM(row_item, Job,   // Job: a struct whose member `it` is a CtIter
 *                 ... len elements from offsets off[k] of ct_ptr(operand k),
 *                 strides j->it.istride[k])
 *     Job j = {...};
 *     ct_iter_init(&j.it, out->ndim, out->shape, 2, (const Tensor *[]){out, in});
 *     ct_cpu_rows(&j.it, row_item, &j);
 *
 * A fully contiguous set of operands coalesces to one dim; ct_iter_init then
 * splits it into rows of CT_ITER_CHUNK so that the rows still split across
 * the pool. */
#define CT_ITER_MAX_OPS 4
#define CT_ITER_CHUNK   16384

typedef struct CtIter {
    int ndim; /* dims of the outer index (coalesced shape minus the inner dim) */
    int64_t shape[CT_MAX_DIMS];
    int64_t stride[CT_ITER_MAX_OPS][CT_MAX_DIMS];
    int nops;
    int64_t inner;                    /* elements per row */
    int64_t istride[CT_ITER_MAX_OPS]; /* stride along the row */
    int64_t rows;
    int64_t numel;
    int64_t chunk_tail; /* when split from one flat dim: size of the last row */
} CtIter;

void ct_iter_init(CtIter *it, int ndim, const int64_t *shape, int nops,
                  const Tensor *const *ts);

/* Offsets of row r's first element for each operand; returns the row's
 * length (it.inner, or less for the last chunk of a flat split). */
static inline int64_t ct_iter_row(const CtIter *it, int64_t r, int64_t *off)
{
    for (int k = 0; k < it->nops; k++) off[k] = 0;
    int64_t rem = r;
    for (int d = it->ndim - 1; d >= 0; d--) {
        int64_t i = rem % it->shape[d];
        rem /= it->shape[d];
        for (int k = 0; k < it->nops; k++) off[k] += i * it->stride[k][d];
    }
    return (it->chunk_tail && r == it->rows - 1) ? it->chunk_tail : it->inner;
}

/* Defines static void NAME(void *ctx, int64_t r, int slot), a pool item for
 * row r of a job struct JOB (at ctx) that holds a CtIter `it`. The body (the
 * trailing arguments) sees j (const JOB *), off (each operand's offset of
 * the row's first element) and len (the row's length). */
#define CT_ROW_ITEM(NAME, JOB, ...)                                                      \
    static void NAME(void *ctx, int64_t r, int slot)                                     \
    {                                                                                    \
        (void)slot;                                                                      \
        const JOB *j = ctx;                                                              \
        int64_t off[CT_ITER_MAX_OPS];                                                    \
        int64_t len = ct_iter_row(&j->it, r, off);                                       \
        __VA_ARGS__                                                                      \
    }

/* fn(ctx, i, slot) for every item i < n of memory-bound work touching
 * `elems` elements in all: on the calling thread below CT_CPU_POOL_MIN
 * elements, else on the engine pool. Items must be independent, so the bits
 * do not depend on the split. ct_cpu_rows: the rows of it as the items. */
void ct_cpu_items(int64_t n, int64_t elems, void (*fn)(void *ctx, int64_t i, int slot),
                  void *ctx);
void ct_cpu_rows(const CtIter *it, void (*fn)(void *ctx, int64_t r, int slot), void *ctx);

/* True when every operand has unit stride along the row. */
static inline bool ct_iter_unit_rows(const CtIter *it)
{
    for (int k = 0; k < it->nops; k++)
        if (it->istride[k] != 1) return false;
    return true;
}

#endif
