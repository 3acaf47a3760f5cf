/* Inputs and CPU references for the host-harness tests of the nn kernels
 * (softmax, cross-entropy, layer norm, indexing): contiguous buffers of
 * random values, and running one CtOpCall through the CPU backend. */
#ifndef CTRAINER_TESTS_CUDA_HOST_DATA_H
#define CTRAINER_TESTS_CUDA_HOST_DATA_H

#include "harness.h"

/* A persistent contiguous tensor of `shape` in dt, uniform in [lo, hi). */
static inline Tensor *ch_rand(int ndim, const int64_t *shape, CtDType dt, double lo,
                              double hi, unsigned seed)
{
    Tensor *r = tu_rand64(ndim, shape, lo, hi, seed, false);
    Tensor *t = ct_tensor_new_persistent(ndim, shape, dt, ct_cpu());
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(tensor_copy_(t, r), CT_OK);
    tensor_free(r);
    return t;
}

/* A persistent CT_I64 tensor of `shape` with values uniform in [0, size). */
static inline Tensor *ch_index(int ndim, const int64_t *shape, int64_t size,
                               unsigned seed)
{
    Tensor *r = tu_rand64(ndim, shape, 0, (double)size, seed, false);
    Tensor *t = ct_tensor_new_persistent(ndim, shape, CT_I64, ct_cpu());
    ck_assert_ptr_nonnull(t);
    const double *d = (const double *)ct_ptr(r);
    int64_t *o = (int64_t *)ct_ptr(t);
    for (int64_t i = 0; i < tensor_numel(t); i++) o[i] = (int64_t)d[i];
    tensor_free(r);
    return t;
}

/* A persistent contiguous tensor of `shape` in dt holding the byte pattern
 * of ch_buffer, for a kernel to write. */
static inline Tensor *ch_out(int ndim, const int64_t *shape, CtDType dt)
{
    Tensor *t = ct_tensor_new_persistent(ndim, shape, dt, ct_cpu());
    ck_assert_ptr_nonnull(t);
    memset(ct_ptr(t), 0xA5, (size_t)tensor_numel(t) * ct_dtype_size(dt));
    return t;
}

/* Runs call on the CPU backend; asserts it succeeds. */
static inline void ch_cpu(const CtOpCall &call)
{
    CtStatus st = ct_dispatch(&call);
    ck_assert_msg(st == CT_OK, "%s: %s", ct_op_name(call.op), ct_last_error());
}

#endif
