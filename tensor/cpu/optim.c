/* OPTIM_SGD, OPTIM_ADAM, OPTIM_RMSPROP, BLOCK_NORM, BLOCK_SCALE, BLOCK_CLAMP:
 * the optimizer's passes over flat parameter / gradient / state blocks.
 *
 * Work is split by shape only: fixed chunks of CT_NORM_CHUNK elements,
 * handed to the worker pool, so results do not depend on the number of
 * threads. An update given out[CT_OPTIM_ZERO_GRAD] zeroes the gradient
 * behind itself, in the same loop. */
#include "../optim_math.h"
#include "cpu.h"
#include "workers.h"

typedef void (*RangeFn)(const CtOpCall *c, int64_t lo, int64_t hi);

typedef struct Split {
    const CtOpCall *c;
    RangeFn fn;
    int64_t n;
} Split;

static void split_item(void *ctx, int64_t i, int slot)
{
    (void)slot;
    const Split *s = ctx;
    int64_t lo = i * CT_NORM_CHUNK,
            hi = lo + CT_NORM_CHUNK < s->n ? lo + CT_NORM_CHUNK : s->n;
    s->fn(s->c, lo, hi);
}

/* fn over [0, n) chunk by chunk, the chunks on the pool (a block of one
 * chunk runs on the caller). The MLP's 109k-element SGD-with-momentum pass
 * (two chunks) took 48 us a step on one thread of a Zen 3, a tenth of the
 * step; docs/benchmarks.md ("Whole process") has the step's A/B figures. */
static void run_chunks(const CtOpCall *c, RangeFn fn, int64_t n)
{
    Split s = {c, fn, n};
    ct_workers_run((n + CT_NORM_CHUNK - 1) / CT_NORM_CHUNK, ct_workers_max(), split_item,
                   &s);
}

static void *buf(const CtOpCall *c, int k)
{
    return c->out[k] ? ct_ptr(c->out[k]) : NULL;
}

/* The update's gradient, which it zeroes behind itself (in the same loop,
 * one pass over memory) when the call has out[CT_OPTIM_ZERO_GRAD]. */
static void *grad_of(const CtOpCall *c, bool *zero)
{
    *zero = c->out[CT_OPTIM_ZERO_GRAD] != NULL;
    return ct_ptr(c->in[0]);
}

/* STMT for i in [lo, hi), then g[i] = 0 when zero. */
#define UPDATE_LOOP(lo, hi, g, zero, STMT)                                               \
    do {                                                                                 \
        if (zero)                                                                        \
            for (int64_t i = lo; i < hi; i++) {                                          \
                STMT;                                                                    \
                g[i] = 0;                                                                \
            }                                                                            \
        else                                                                             \
            for (int64_t i = lo; i < hi; i++) STMT;                                      \
    } while (0)

/* -------------------------------------------------------------- SGD */

#define SGD_RANGE(T)                                                                     \
    static void sgd_range_##T(const CtOpCall *c, int64_t lo, int64_t hi)                 \
    {                                                                                    \
        const CtSgdParams *q = c->params;                                                \
        bool z;                                                                          \
        T *restrict p = ct_ptr(c->out[0]), *restrict b = buf(c, 1);                      \
        T *restrict g = grad_of(c, &z);                                                  \
        const CtSgdK_##T k = {(T)q->lr, (T)q->weight_decay, (T)q->momentum,              \
                              (T)q->one_minus_dampening};                                \
        if (!b)                                                                          \
            UPDATE_LOOP(lo, hi, g, z, ct_sgd_elem_##T(p, g, b, i, k, 0, 0, 0));          \
        else if (q->first)                                                               \
            UPDATE_LOOP(lo, hi, g, z,                                                    \
                        ct_sgd_elem_##T(p, g, b, i, k, 1, 1, q->nesterov));              \
        else if (q->nesterov)                                                            \
            UPDATE_LOOP(lo, hi, g, z, ct_sgd_elem_##T(p, g, b, i, k, 1, 0, 1));          \
        else                                                                             \
            UPDATE_LOOP(lo, hi, g, z, ct_sgd_elem_##T(p, g, b, i, k, 1, 0, 0));          \
    }

/* -------------------------------------------------------------- Adam */

#define ADAM_RANGE(T)                                                                    \
    static void adam_range_##T(const CtOpCall *c, int64_t lo, int64_t hi)                \
    {                                                                                    \
        const CtAdamParams *q = c->params;                                               \
        bool z;                                                                          \
        T *restrict p = ct_ptr(c->out[0]), *restrict m = buf(c, 1);                      \
        T *restrict v = buf(c, 2), *restrict vmax = buf(c, 3);                           \
        T *restrict g = grad_of(c, &z);                                                  \
        const CtAdamK_##T k = {(T)q->decay_mul,                                          \
                               (T)q->l2,                                                 \
                               (T)q->beta1,                                              \
                               (T)q->beta2,                                              \
                               (T)q->one_minus_beta1,                                    \
                               (T)q->one_minus_beta2,                                    \
                               (T)q->step_size,                                          \
                               (T)q->bc2_sqrt,                                           \
                               (T)q->eps};                                               \
        if (vmax)                                                                        \
            UPDATE_LOOP(lo, hi, g, z, ct_adam_elem_##T(p, g, m, v, vmax, i, k, 1));      \
        else                                                                             \
            UPDATE_LOOP(lo, hi, g, z, ct_adam_elem_##T(p, g, m, v, vmax, i, k, 0));      \
    }

/* ----------------------------------------------------------- RMSprop */

#define RMS_RANGE(T)                                                                     \
    static void rms_range_##T(const CtOpCall *c, int64_t lo, int64_t hi)                 \
    {                                                                                    \
        const CtRmspropParams *q = c->params;                                            \
        bool z;                                                                          \
        T *restrict p = ct_ptr(c->out[0]), *restrict sq = buf(c, 1);                     \
        T *restrict mb = buf(c, 2), *restrict ga = buf(c, 3);                            \
        T *restrict g = grad_of(c, &z);                                                  \
        const CtRmsK_##T k = {(T)q->lr,    (T)q->weight_decay,    (T)q->momentum,        \
                              (T)q->alpha, (T)q->one_minus_alpha, (T)q->eps};            \
        if (ga && mb)                                                                    \
            UPDATE_LOOP(lo, hi, g, z, ct_rms_elem_##T(p, g, sq, mb, ga, i, k, 1, 1));    \
        else if (ga)                                                                     \
            UPDATE_LOOP(lo, hi, g, z, ct_rms_elem_##T(p, g, sq, mb, ga, i, k, 1, 0));    \
        else if (mb)                                                                     \
            UPDATE_LOOP(lo, hi, g, z, ct_rms_elem_##T(p, g, sq, mb, ga, i, k, 0, 1));    \
        else                                                                             \
            UPDATE_LOOP(lo, hi, g, z, ct_rms_elem_##T(p, g, sq, mb, ga, i, k, 0, 0));    \
    }

/* ---------------------------------------------------------- clipping */

#define CLIP_RANGES(T)                                                                   \
    static void scale_range_##T(const CtOpCall *c, int64_t lo, int64_t hi)               \
    {                                                                                    \
        T *restrict x = ct_ptr(c->out[0]);                                               \
        const T s = (T)((const CtFillParams *)c->params)->value;                         \
        for (int64_t i = lo; i < hi; i++) x[i] = ct_scale_elem_##T(x[i], s);             \
    }                                                                                    \
    static void clamp_range_##T(const CtOpCall *c, int64_t lo, int64_t hi)               \
    {                                                                                    \
        T *restrict x = ct_ptr(c->out[0]);                                               \
        const T v = (T)((const CtFillParams *)c->params)->value;                         \
        for (int64_t i = lo; i < hi; i++) x[i] = ct_clamp_elem_##T(x[i], v);             \
    }                                                                                    \
    static void norm_range_##T(const CtOpCall *c, int64_t lo, int64_t hi)                \
    {                                                                                    \
        const T *x = ct_ptr(c->in[0]);                                                   \
        double *part = ct_ptr(c->out[0]);                                                \
        bool mx = ((const CtBlockNormParams *)c->params)->max_abs;                       \
        part[lo / CT_NORM_CHUNK] =                                                       \
            mx ? ct_maxabs_chunk_##T(x, lo, hi) : ct_sumsq_chunk_##T(x, lo, hi);         \
    }

#define ALL_RANGES(T)                                                                    \
    SGD_RANGE(T)                                                                         \
    ADAM_RANGE(T)                                                                        \
    RMS_RANGE(T)                                                                         \
    CLIP_RANGES(T)

ALL_RANGES(float)
ALL_RANGES(double)

/* Operand 0 of the pass (param or gradient block) picks the dtype. */
#define KERNEL(NAME, OPND)                                                               \
    static CtStatus NAME##_kernel(const CtOpCall *c)                                     \
    {                                                                                    \
        const Tensor *t = c->OPND[0];                                                    \
        run_chunks(c, t->dtype == CT_F32 ? NAME##_range_float : NAME##_range_double,     \
                   tensor_numel(t));                                                     \
        return CT_OK;                                                                    \
    }

KERNEL(sgd, out)
KERNEL(adam, out)
KERNEL(rms, out)
KERNEL(scale, out)
KERNEL(clamp, out)

/* One partial per chunk: the chunks of run_chunks are the partials. */
KERNEL(norm, in)

void ct_cpu_register_optim(CtKernelFn *k, CtSupportsFn *s)
{
    (void)s; /* the front-ends (tensor/optim_ops.c) admit only contiguous f32/f64 */
    k[CT_OP_OPTIM_SGD] = sgd_kernel;
    k[CT_OP_OPTIM_ADAM] = adam_kernel;
    k[CT_OP_OPTIM_RMSPROP] = rms_kernel;
    k[CT_OP_BLOCK_NORM] = norm_kernel;
    k[CT_OP_BLOCK_SCALE] = scale_kernel;
    k[CT_OP_BLOCK_CLAMP] = clamp_kernel;
}
