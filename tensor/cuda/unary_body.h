/* Private to tensor/cuda: the thread bodies of UNARY and UNARY_BWD
 * (unary.cu), shared with the host harness (hd.h). Semantics and the order
 * of every floating-point operation follow tensor/cpu/unary.c (contracts in
 * ../elementwise.h): bf16 and f16 compute in f32 and round to nearest even,
 * i64 and i32 run the kinds of ct_unary_kind_has_int with wrap-around
 * arithmetic, and POW_SCALAR's exact special exponents are kinds of their
 * own (ct_unary_pow_kind). */
#ifndef CTRAINER_TENSOR_CUDA_UNARY_BODY_H
#define CTRAINER_TENSOR_CUDA_UNARY_BODY_H

#include <math.h>

#include "../elementwise.h"
#include "dtype_hd.h"

/* Kinds past CtUnaryKind: POW_SCALAR with an exponent the CPU special-cases. */
enum {
    CT_UNK_POW_0 = 64, /* backward only: derivative 0 */
    CT_UNK_POW_1,      /* x; backward g */
    CT_UNK_POW_2,      /* x * x; backward (x + x) g */
    CT_UNK_POW_M1,     /* forward only: 1 / x */
};

/* The kind a kernel runs for `kind` with scalar a: POW_SCALAR becomes one of
 * the special kinds where the CPU has one (same tests of a as there). */
static inline int ct_unary_pow_kind(bool bwd, CtUnaryKind kind, double a)
{
    if (kind != CT_UN_POW_SCALAR) return (int)kind;
    if (a == 2.0) return CT_UNK_POW_2;
    if (a == 1.0) return CT_UNK_POW_1;
    if (bwd && a == 0.0) return CT_UNK_POW_0;
    if (!bwd && a == -1.0) return CT_UNK_POW_M1;
    return (int)kind;
}

/* The kinds each kernel family is instantiated for, as X-macro lists:
 * floating forward, floating backward, and integer forward. */
/* clang-format off */
#define CT_UNARY_FLOAT_KINDS_(X)                                                         \
    X(CT_UN_NEG) X(CT_UN_EXP) X(CT_UN_LOG) X(CT_UN_SQRT) X(CT_UN_ABS) X(CT_UN_CLAMP)     \
    X(CT_UN_RELU) X(CT_UN_LEAKY_RELU) X(CT_UN_GELU_ERF) X(CT_UN_GELU_TANH)               \
    X(CT_UN_SILU) X(CT_UN_SIGMOID) X(CT_UN_TANH) X(CT_UN_ADD_SCALAR)                     \
    X(CT_UN_MUL_SCALAR) X(CT_UN_RSUB_SCALAR) X(CT_UN_POW_SCALAR) X(CT_UN_RDIV_SCALAR)    \
    X(CT_UN_DIV_SCALAR) X(CT_UNK_POW_1) X(CT_UNK_POW_2)
#define CT_UNARY_FWD_KINDS(X) CT_UNARY_FLOAT_KINDS_(X) X(CT_UNK_POW_M1)
#define CT_UNARY_BWD_KINDS(X) CT_UNARY_FLOAT_KINDS_(X) X(CT_UNK_POW_0)
#define CT_UNARY_INT_KINDS(X)                                                            \
    X(CT_UN_NEG) X(CT_UN_ABS) X(CT_UN_CLAMP) X(CT_UN_RELU) X(CT_UN_ADD_SCALAR)           \
    X(CT_UN_MUL_SCALAR) X(CT_UN_RSUB_SCALAR)
/* clang-format on */

/* A double param in DT's compute type, as the CPU converts it: a cast for
 * floating dtypes, saturation to the range (NaN -> 0) for integers. Host
 * code. */
template <typename C> static inline C ct_unary_saturate(double v, C lo, C hi)
{
    if (v != v) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (C)v;
}
template <int DT> static inline typename CtHdType<DT>::C ct_unary_param(double v)
{
    if constexpr (DT == CT_I64)
        return ct_unary_saturate<int64_t>(v, INT64_MIN, INT64_MAX);
    else if constexpr (DT == CT_I32)
        return ct_unary_saturate<int32_t>(v, INT32_MIN, INT32_MAX);
    else
        return (typename CtHdType<DT>::C)v;
}

/* The math functions of each precision (expf for float, exp for double). */
CT_HD float ct_m_exp(float x)
{
    return expf(x);
}
CT_HD double ct_m_exp(double x)
{
    return exp(x);
}
CT_HD float ct_m_log(float x)
{
    return logf(x);
}
CT_HD double ct_m_log(double x)
{
    return log(x);
}
CT_HD float ct_m_sqrt(float x)
{
    return sqrtf(x);
}
CT_HD double ct_m_sqrt(double x)
{
    return sqrt(x);
}
CT_HD float ct_m_fabs(float x)
{
    return fabsf(x);
}
CT_HD double ct_m_fabs(double x)
{
    return fabs(x);
}
CT_HD float ct_m_tanh(float x)
{
    return tanhf(x);
}
CT_HD double ct_m_tanh(double x)
{
    return tanh(x);
}
CT_HD float ct_m_erf(float x)
{
    return erff(x);
}
CT_HD double ct_m_erf(double x)
{
    return erf(x);
}
CT_HD float ct_m_pow(float x, float y)
{
    return powf(x, y);
}
CT_HD double ct_m_pow(double x, double y)
{
    return pow(x, y);
}

#define CT_UNARY_SQRT1_2     0.70710678118654752440 /* 1/sqrt(2) */
#define CT_UNARY_INV_SQRT2PI 0.39894228040143267794 /* 1/sqrt(2 pi) */

/* f(x) of a floating kind K in C's precision; a, b are the params in C. */
template <typename C, int K> CT_HD C ct_unary_float(C x, C a, C b)
{
    const C one = 1, half = (C)0.5;
    if constexpr (K == CT_UN_NEG)
        return -x;
    else if constexpr (K == CT_UN_EXP)
        return ct_m_exp(x);
    else if constexpr (K == CT_UN_LOG)
        return ct_m_log(x);
    else if constexpr (K == CT_UN_SQRT)
        return ct_m_sqrt(x);
    else if constexpr (K == CT_UN_ABS)
        return ct_m_fabs(x);
    else if constexpr (K == CT_UN_CLAMP) { /* min(max(x, lo), hi); NaN passes */
        C m = x < a ? a : x;
        return m > b ? b : m;
    } else if constexpr (K == CT_UN_RELU)
        return x < 0 ? (C)0 : x;
    else if constexpr (K == CT_UN_LEAKY_RELU)
        return x > 0 ? x : x * a;
    else if constexpr (K == CT_UN_GELU_ERF)
        return half * x * (one + ct_m_erf(x * (C)CT_UNARY_SQRT1_2));
    else if constexpr (K == CT_UN_GELU_TANH) {
        const C k = (C)CT_GELU_TANH_K, c = (C)CT_GELU_TANH_C;
        return half * x * (one + ct_m_tanh(k * (x + c * x * x * x)));
    } else if constexpr (K == CT_UN_SILU)
        return x / (one + ct_m_exp(-x));
    else if constexpr (K == CT_UN_SIGMOID)
        return one / (one + ct_m_exp(-x));
    else if constexpr (K == CT_UN_TANH)
        return ct_m_tanh(x);
    else if constexpr (K == CT_UN_ADD_SCALAR)
        return x + a;
    else if constexpr (K == CT_UN_MUL_SCALAR)
        return x * a;
    else if constexpr (K == CT_UN_RSUB_SCALAR)
        return a - x;
    else if constexpr (K == CT_UN_RDIV_SCALAR)
        return a / x;
    else if constexpr (K == CT_UN_DIV_SCALAR)
        return x / a;
    else if constexpr (K == CT_UNK_POW_2)
        return x * x;
    else if constexpr (K == CT_UNK_POW_1)
        return x;
    else if constexpr (K == CT_UNK_POW_M1)
        return one / x;
    else /* CT_UN_POW_SCALAR */
        return ct_m_pow(x, a);
}

/* f(x) of an integer kind (ct_unary_kind_has_int): wrap-around through the
 * unsigned type U; a, b are already saturated to C's range. */
template <typename C, typename U, int K> CT_HD C ct_unary_int(C x, C a, C b)
{
    if constexpr (K == CT_UN_NEG)
        return (C)((U)0 - (U)x);
    else if constexpr (K == CT_UN_ABS)
        return x < 0 ? (C)((U)0 - (U)x) : x;
    else if constexpr (K == CT_UN_CLAMP) {
        C m = x < a ? a : x;
        return m > b ? b : m;
    } else if constexpr (K == CT_UN_RELU)
        return x < 0 ? (C)0 : x;
    else if constexpr (K == CT_UN_ADD_SCALAR)
        return (C)((U)x + (U)a);
    else if constexpr (K == CT_UN_MUL_SCALAR)
        return (C)((U)x * (U)a);
    else /* CT_UN_RSUB_SCALAR */
        return (C)((U)a - (U)x);
}

/* f'(x) * g of kind K; x is the forward output for ct_unary_bwd_uses_output. */
template <typename C, int K> CT_HD C ct_unary_grad(C x, C g, C a, C b)
{
    const C one = 1, half = (C)0.5, zero = 0;
    if constexpr (K == CT_UN_NEG || K == CT_UN_RSUB_SCALAR)
        return -g;
    else if constexpr (K == CT_UN_EXP) /* x = y */
        return x * g;
    else if constexpr (K == CT_UN_LOG)
        return g / x;
    else if constexpr (K == CT_UN_SQRT) /* x = y */
        return g / (x + x);
    else if constexpr (K == CT_UN_ABS)
        return x > 0 ? g : (x < 0 ? -g : zero);
    else if constexpr (K == CT_UN_CLAMP)
        return (x >= a && x <= b) ? g : zero;
    else if constexpr (K == CT_UN_RELU) /* NaN passes g, as in PyTorch */
        return x <= 0 ? zero : g;
    else if constexpr (K == CT_UN_LEAKY_RELU)
        return x > 0 ? g : g * a;
    else if constexpr (K == CT_UN_GELU_ERF) /* Phi(x) + x phi(x) */
        return g * (half * (one + ct_m_erf(x * (C)CT_UNARY_SQRT1_2)) +
                    x * (C)CT_UNARY_INV_SQRT2PI * ct_m_exp(-half * x * x));
    else if constexpr (K == CT_UN_GELU_TANH) {
        const C k = (C)CT_GELU_TANH_K, c = (C)CT_GELU_TANH_C;
        C t = ct_m_tanh(k * (x + c * x * x * x));
        return g *
               (half * (one + t) + half * x * (one - t * t) * k * (one + 3 * c * x * x));
    } else if constexpr (K == CT_UN_SILU) {
        C s = one / (one + ct_m_exp(-x));
        return g * (s * (one + x * (one - s)));
    } else if constexpr (K == CT_UN_SIGMOID) /* x = y */
        return g * x * (one - x);
    else if constexpr (K == CT_UN_TANH) /* x = y */
        return g * (one - x * x);
    else if constexpr (K == CT_UN_ADD_SCALAR || K == CT_UNK_POW_1)
        return g;
    else if constexpr (K == CT_UN_MUL_SCALAR)
        return g * a;
    else if constexpr (K == CT_UN_RDIV_SCALAR)
        return -a / (x * x) * g;
    else if constexpr (K == CT_UN_DIV_SCALAR)
        return g / a;
    else if constexpr (K == CT_UNK_POW_0)
        return zero;
    else if constexpr (K == CT_UNK_POW_2)
        return (x + x) * g;
    else /* CT_UN_POW_SCALAR */
        return a * ct_m_pow(x, a - one) * g;
}

/* out (operand 0 of ix) <- f(in (operand 1)); out may alias in. */
template <int DT, int K>
CT_HD void ct_unary_thread(CtThread t, void *out, const void *in,
                           typename CtHdType<DT>::C a, typename CtHdType<DT>::C b,
                           const CtCudaIndex &ix, int64_t n)
{
    typedef CtHdType<DT> Ty;
    typedef typename Ty::S S;
    typedef typename Ty::C C;
    S *po = (S *)out;
    const S *pi = (const S *)in;
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[2];
        ct_cuda_offsets<2>(ix, i, off);
        C x = Ty::load(pi[off[1]]);
        C y;
        if constexpr (DT == CT_I64 || DT == CT_I32)
            y = ct_unary_int<C, typename Ty::U, K>(x, a, b);
        else
            y = ct_unary_float<C, K>(x, a, b);
        po[off[0]] = Ty::store(y);
    }
}

/* out (operand 0) <- f'(x (operand 1)) * g (operand 2); floating DT. */
template <int DT, int K>
CT_HD void ct_unary_bwd_thread(CtThread t, void *out, const void *xv, const void *gv,
                               typename CtHdType<DT>::C a, typename CtHdType<DT>::C b,
                               const CtCudaIndex &ix, int64_t n)
{
    typedef CtHdType<DT> Ty;
    typedef typename Ty::S S;
    typedef typename Ty::C C;
    S *po = (S *)out;
    const S *px = (const S *)xv, *pg = (const S *)gv;
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[3];
        ct_cuda_offsets<3>(ix, i, off);
        C x = Ty::load(px[off[1]]), g = Ty::load(pg[off[2]]);
        po[off[0]] = Ty::store(ct_unary_grad<C, K>(x, g, a, b));
    }
}

/* f(x) of ct_unary_thread for one element. */
template <int DT, int K>
CT_HD typename CtHdType<DT>::S ct_unary_one(typename CtHdType<DT>::S v,
                                            typename CtHdType<DT>::C a,
                                            typename CtHdType<DT>::C b)
{
    typedef CtHdType<DT> Ty;
    typedef typename Ty::C C;
    if constexpr (DT == CT_I64 || DT == CT_I32)
        return Ty::store(ct_unary_int<C, typename Ty::U, K>(Ty::load(v), a, b));
    else
        return Ty::store(ct_unary_float<C, K>(Ty::load(v), a, b));
}

/* ct_unary_thread over contiguous, 16-byte aligned operands (hd.h,
 * CtPack): item j owns elements [j * N, j * N + N) of n. */
template <int DT, int K>
CT_HD void ct_unary_packed_thread(CtThread t, void *out, const void *in,
                                  typename CtHdType<DT>::C a, typename CtHdType<DT>::C b,
                                  int64_t n)
{
    typedef typename CtHdType<DT>::S S;
    typedef CtPack<S> P;
    S *po = (S *)out;
    const S *pi = (const S *)in;
    CT_THREAD_FOR(j, t, (n + P::N - 1) / P::N)
    {
        int64_t base = j * P::N;
        if (base + P::N <= n) {
            typename P::V x = ((const typename P::V *)in)[j], y;
            for (int e = 0; e < P::N; e++) y.v[e] = ct_unary_one<DT, K>(x.v[e], a, b);
            ((typename P::V *)out)[j] = y;
        } else {
            for (int64_t i = base; i < n; i++) po[i] = ct_unary_one<DT, K>(pi[i], a, b);
        }
    }
}

/* f'(x) * g of ct_unary_bwd_thread for one element. */
template <int DT, int K>
CT_HD typename CtHdType<DT>::S
ct_unary_grad_one(typename CtHdType<DT>::S x, typename CtHdType<DT>::S g,
                  typename CtHdType<DT>::C a, typename CtHdType<DT>::C b)
{
    typedef CtHdType<DT> Ty;
    return Ty::store(ct_unary_grad<typename Ty::C, K>(Ty::load(x), Ty::load(g), a, b));
}

/* ct_unary_bwd_thread over contiguous, 16-byte aligned operands. */
template <int DT, int K>
CT_HD void ct_unary_bwd_packed_thread(CtThread t, void *out, const void *xv,
                                      const void *gv, typename CtHdType<DT>::C a,
                                      typename CtHdType<DT>::C b, int64_t n)
{
    typedef typename CtHdType<DT>::S S;
    typedef CtPack<S> P;
    S *po = (S *)out;
    const S *px = (const S *)xv, *pg = (const S *)gv;
    CT_THREAD_FOR(j, t, (n + P::N - 1) / P::N)
    {
        int64_t base = j * P::N;
        if (base + P::N <= n) {
            typename P::V x = ((const typename P::V *)xv)[j];
            typename P::V g = ((const typename P::V *)gv)[j], y;
            for (int e = 0; e < P::N; e++)
                y.v[e] = ct_unary_grad_one<DT, K>(x.v[e], g.v[e], a, b);
            ((typename P::V *)out)[j] = y;
        } else {
            for (int64_t i = base; i < n; i++)
                po[i] = ct_unary_grad_one<DT, K>(px[i], pg[i], a, b);
        }
    }
}

#endif
