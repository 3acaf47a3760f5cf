/* Private to tensor/cuda: the thread bodies of BINARY and WHERE (elementwise.cu),
 * shared with the host harness (hd.h). Semantics follow
 * tensor/cpu/elementwise.c: max/min propagate a NaN in the first operand;
 * f32 pow is powf. */
#ifndef CTRAINER_TENSOR_CUDA_ELEMENTWISE_BODY_H
#define CTRAINER_TENSOR_CUDA_ELEMENTWISE_BODY_H

#include <math.h>

#include "hd.h"

/* The kind is a template parameter so no switch runs per element. */
template <typename T, int K> CT_HD T ct_arith(T x, T y)
{
    if constexpr (K == CT_BIN_ADD)
        return x + y;
    else if constexpr (K == CT_BIN_SUB)
        return x - y;
    else if constexpr (K == CT_BIN_MUL)
        return x * y;
    else if constexpr (K == CT_BIN_DIV)
        return x / y;
    else if constexpr (K == CT_BIN_POW)
        return sizeof(T) == sizeof(float) ? (T)powf((float)x, (float)y)
                                          : (T)pow((double)x, (double)y);
    else if constexpr (K == CT_BIN_MAX)
        return (x != x || x >= y) ? x : y;
    else
        return (x != x || x <= y) ? x : y; /* CT_BIN_MIN */
}

template <typename T, int K> CT_HD bool ct_compare(T x, T y)
{
    if constexpr (K == CT_BIN_EQ)
        return x == y;
    else if constexpr (K == CT_BIN_NE)
        return x != y;
    else if constexpr (K == CT_BIN_LT)
        return x < y;
    else if constexpr (K == CT_BIN_LE)
        return x <= y;
    else if constexpr (K == CT_BIN_GT)
        return x > y;
    else
        return x >= y; /* CT_BIN_GE */
}

/* out, a, b are operands 0, 1, 2 of ix; out may alias a. */
template <typename T, int K>
CT_HD void ct_arith_thread(CtThread t, T *out, const T *a, const T *b,
                           const CtCudaIndex &ix, int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[3];
        ct_cuda_offsets<3>(ix, i, off);
        out[off[0]] = ct_arith<T, K>(a[off[1]], b[off[2]]);
    }
}

template <typename T, int K>
CT_HD void ct_compare_thread(CtThread t, uint8_t *out, const T *a, const T *b,
                             const CtCudaIndex &ix, int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[3];
        ct_cuda_offsets<3>(ix, i, off);
        out[off[0]] = ct_compare<T, K>(a[off[1]], b[off[2]]);
    }
}

/* out, cond, a, b are operands 0, 1, 2, 3 of ix. Elements move as bits, so
 * W is the unsigned type of the element size. */
template <typename W>
CT_HD void ct_where_thread(CtThread t, W *out, const uint8_t *cond, const W *a,
                           const W *b, const CtCudaIndex &ix, int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[4];
        ct_cuda_offsets<4>(ix, i, off);
        out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
    }
}

#endif
