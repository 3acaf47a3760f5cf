/* Host harness for the CUDA kernels' thread bodies (tensor/cuda/hd.h).
 *
 * Each test runs a body over every (block, thread) of a launch on the CPU,
 * on CPU tensors laid out as the kernel would see them on the device, and
 * compares the whole output buffer, bit for bit, with the CPU backend's
 * result written into an identical buffer (so writes outside a strided
 * output view are caught too). Each body runs under two launch shapes: the
 * backend's own (ct_cuda_blocks(n) × CT_CUDA_THREADS) and a small grid whose
 * grid-stride loop wraps many times. No CUDA runtime is needed. */
#ifndef CTRAINER_TESTS_CUDA_HOST_HARNESS_H
#define CTRAINER_TESTS_CUDA_HOST_HARNESS_H

#include <math.h>
#include <stdio.h>

extern "C" {
#include "testutil.h"
}
#include "tensor/cuda/hd.h"

/* Runs body(thread) for every thread of a grid × block launch. */
template <typename F> static void ch_launch(int64_t grid, int64_t block, F body)
{
    for (int64_t b = 0; b < grid; b++)
        for (int64_t t = 0; t < block; t++) body(CtThread{b, t, grid, block});
}

/* The launch shapes a body is checked under, for n work items. */
struct ChShape {
    int64_t grid, block;
};
static inline int ch_shapes(int64_t n, ChShape out[2])
{
    out[0] = ChShape{n > 0 ? (int64_t)ct_cuda_blocks(n) : 1, CT_CUDA_THREADS};
    out[1] = ChShape{3, 32};
    return 2;
}

/* A persistent CPU buffer (even inside a scope) of `n` elements of dt holding a byte
 * pattern nothing writes, to lay views over. */
static inline Tensor *ch_buffer(int64_t n, CtDType dt)
{
    Tensor *t = ct_tensor_new_persistent(1, &n, dt, ct_cpu());
    ck_assert_ptr_nonnull(t);
    memset(ct_ptr(t), 0xA5, (size_t)n * ct_dtype_size(dt));
    return t;
}

/* A copy of buffer b, (n, c, hw) NCHW, with its elements in (n, hw, c)
 * order (channels last), or back when `back`. */
static inline Tensor *ch_permuted(const Tensor *b, int64_t n, int64_t c, int64_t hw,
                                  bool back)
{
    Tensor *t = ch_buffer(tensor_numel(b), tensor_dtype(b));
    size_t es = ct_dtype_size(tensor_dtype(b));
    const char *src = (const char *)ct_ptr(b);
    char *dst = (char *)ct_ptr(t);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t k = 0; k < hw; k++) {
                int64_t nchw = (i * c + j) * hw + k, nhwc = (i * hw + k) * c + j;
                memcpy(dst + (back ? nchw : nhwc) * es, src + (back ? nhwc : nchw) * es,
                       es);
            }
    return t;
}

/* A persistent copy of buffer b (same bytes). */
static inline Tensor *ch_clone(const Tensor *b)
{
    int64_t n = tensor_numel(b);
    Tensor *t = ct_tensor_new_persistent(1, &n, tensor_dtype(b), ct_cpu());
    ck_assert_ptr_nonnull(t);
    memcpy(ct_ptr(t), ct_ptr(b), (size_t)n * ct_dtype_size(tensor_dtype(b)));
    return t;
}

/* Asserts two buffers of one dtype and size hold the same bytes. */
#define ch_assert_same_bytes(want, got, what)                                            \
    ch_assert_same_bytes_at(__LINE__, (want), (got), (what))
static inline void ch_assert_same_bytes_at(int line, const Tensor *want,
                                           const Tensor *got, const char *what)
{
    size_t es = ct_dtype_size(tensor_dtype(want));
    int64_t n = tensor_numel(want);
    ck_assert_int_eq(n, tensor_numel(got));
    const unsigned char *w = (const unsigned char *)ct_ptr(want);
    const unsigned char *g = (const unsigned char *)ct_ptr(got);
    /* check's asserts record every passing check (a write each): abort on
     * the first difference instead */
    for (int64_t i = 0; i < n; i++)
        if (memcmp(w + i * es, g + i * es, es) != 0)
            ck_abort_msg("line %d: %s: element %lld of %lld differs", line, what,
                         (long long)i, (long long)n);
}

#endif
