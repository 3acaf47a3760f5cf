/* Private to tensor/cuda: the thread bodies of BINARY and WHERE (elementwise.cu),
 * shared with the host harness (hd.h). Semantics follow
 * tensor/cpu/elementwise.c: max/min propagate a NaN in the first operand;
 * f32 pow is powf. bf16 and f16 compute in f32 and round the result to
 * nearest even once (dtype_hd.h), as the CPU does: an f32 operation
 * rounded, as PyTorch's kernels give. i64 and i32 wrap around on overflow
 * (the arithmetic is unsigned), a negative power is 0, and they never
 * divide (the front end divides integers as f32); u8 and bool only
 * compare. */
#ifndef CTRAINER_TENSOR_CUDA_ELEMENTWISE_BODY_H
#define CTRAINER_TENSOR_CUDA_ELEMENTWISE_BODY_H

#include <math.h>

#include "dtype_hd.h"

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
    else if constexpr (K == CT_BIN_ADD_RELU)
        return x + y < 0 ? (T)0 : x + y;
    else
        return (x != x || x <= y) ? x : y; /* CT_BIN_MIN */
}

/* ct_arith for i64 and i32 (T), computed in their unsigned type U. */
template <typename T, typename U, int K> CT_HD T ct_int_arith(T x, T y)
{
    static_assert(K != CT_BIN_DIV, "integers divide as f32");
    if constexpr (K == CT_BIN_ADD)
        return (T)((U)x + (U)y);
    else if constexpr (K == CT_BIN_SUB)
        return (T)((U)x - (U)y);
    else if constexpr (K == CT_BIN_MUL)
        return (T)((U)x * (U)y);
    else if constexpr (K == CT_BIN_POW) {
        U r = 1, b = (U)x;
        if (y < 0) return 0;
        for (T e = y; e > 0; e >>= 1, b *= b)
            if (e & 1) r *= b;
        return (T)r;
    } else if constexpr (K == CT_BIN_MAX)
        return x >= y ? x : y;
    else if constexpr (K == CT_BIN_ADD_RELU) {
        T s = (T)((U)x + (U)y);
        return s < 0 ? (T)0 : s;
    } else
        return x <= y ? x : y; /* CT_BIN_MIN */
}

/* Whether DT is i64 or i32 (ct_int_arith). */
template <int DT> CT_HD constexpr bool ct_hd_is_int()
{
    return DT == CT_I64 || DT == CT_I32;
}

/* x (kind K) y in DT's compute type. */
template <int DT, int K, typename C = typename CtHdType<DT>::C>
CT_HD C ct_arith_dt(C x, C y)
{
    if constexpr (ct_hd_is_int<DT>())
        return ct_int_arith<C, typename CtHdType<DT>::U, K>(x, y);
    else
        return ct_arith<C, K>(x, y);
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

/* out, a, b are operands 0, 1, 2 of ix; out may alias a. Elements of
 * dtype DT (storage S, computed in C). */
template <int DT, int K, typename S = typename CtHdType<DT>::S>
CT_HD void ct_arith_thread(CtThread t, S *out, const S *a, const S *b,
                           const CtCudaIndex &ix, int64_t n)
{
    typedef CtHdType<DT> V;
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[3];
        ct_cuda_offsets<3>(ix, i, off);
        out[off[0]] =
            V::store(ct_arith_dt<DT, K>(V::load(a[off[1]]), V::load(b[off[2]])));
    }
}

template <int DT, int K, typename S = typename CtHdType<DT>::S>
CT_HD void ct_compare_thread(CtThread t, uint8_t *out, const S *a, const S *b,
                             const CtCudaIndex &ix, int64_t n)
{
    typedef CtHdType<DT> V;
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[3];
        ct_cuda_offsets<3>(ix, i, off);
        out[off[0]] =
            ct_compare<typename V::C, K>(V::load(a[off[1]]), V::load(b[off[2]]));
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

/* One element of ct_arith_thread: x op y in DT's compute type, stored. */
template <int DT, int K, typename S = typename CtHdType<DT>::S>
CT_HD S ct_arith_one(S x, S y)
{
    typedef CtHdType<DT> V;
    return V::store(ct_arith_dt<DT, K>(V::load(x), V::load(y)));
}

/* ct_arith_thread over contiguous, 16-byte aligned operands of one shape
 * (hd.h, CtPack): item j owns elements [j * N, j * N + N) of n. */
template <int DT, int K, typename S = typename CtHdType<DT>::S>
CT_HD void ct_arith_packed_thread(CtThread t, S *out, const S *a, const S *b, int64_t n)
{
    typedef CtPack<S> P;
    CT_THREAD_FOR(j, t, (n + P::N - 1) / P::N)
    {
        int64_t base = j * P::N;
        if (base + P::N <= n) {
            typename P::V x = ((const typename P::V *)a)[j];
            typename P::V y = ((const typename P::V *)b)[j], r;
            for (int e = 0; e < P::N; e++) r.v[e] = ct_arith_one<DT, K>(x.v[e], y.v[e]);
            ((typename P::V *)out)[j] = r;
        } else {
            for (int64_t i = base; i < n; i++) out[i] = ct_arith_one<DT, K>(a[i], b[i]);
        }
    }
}

#endif
