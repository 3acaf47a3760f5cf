/* Private to tensor/: the per-element formulas of the optimizer block ops,
 * shared by the CPU kernels (tensor/cpu/optim.c, C) and the CUDA thread
 * bodies (tensor/cuda/optim_body.h, C++), so both backends evaluate the
 * very same expression tree, operation by operation.
 *
 * Bitwise parity: every operation is one IEEE operation rounded to nearest.
 * The CPU build is ISO C (-std=c11), where GCC does not contract a * b + c
 * into a fused multiply-add; nvcc does by default, so on the device the
 * arithmetic goes through the _rn intrinsics, which are never contracted,
 * and sqrt through the correctly rounded __fsqrt_rn / __dsqrt_rn.
 *
 * Each element function takes element i of its operands; a state array is
 * read only when its flag says it is in use, so unused ones may be NULL.
 * The flags are constants at every call site, so each combination inlines
 * to its own straight loop. */
#ifndef CTRAINER_TENSOR_OPTIM_MATH_H
#define CTRAINER_TENSOR_OPTIM_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define CT_OPT_FN       static __host__ __device__ __forceinline__
#define CT_OPT_RESTRICT __restrict__
#elif defined(__cplusplus)
#define CT_OPT_FN       static inline
#define CT_OPT_RESTRICT __restrict__
#else
#define CT_OPT_FN       static inline __attribute__((always_inline))
#define CT_OPT_RESTRICT restrict
#endif

#if defined(__CUDA_ARCH__)
#define CT_OPT_ADD_float(a, b)  __fadd_rn(a, b)
#define CT_OPT_SUB_float(a, b)  __fsub_rn(a, b)
#define CT_OPT_MUL_float(a, b)  __fmul_rn(a, b)
#define CT_OPT_DIV_float(a, b)  __fdiv_rn(a, b)
#define CT_OPT_SQRT_float(a)    __fsqrt_rn(a)
#define CT_OPT_ADD_double(a, b) __dadd_rn(a, b)
#define CT_OPT_SUB_double(a, b) __dsub_rn(a, b)
#define CT_OPT_MUL_double(a, b) __dmul_rn(a, b)
#define CT_OPT_DIV_double(a, b) __ddiv_rn(a, b)
#define CT_OPT_SQRT_double(a)   __dsqrt_rn(a)
#else
#define CT_OPT_ADD_float(a, b)  ((a) + (b))
#define CT_OPT_SUB_float(a, b)  ((a) - (b))
#define CT_OPT_MUL_float(a, b)  ((a) * (b))
#define CT_OPT_DIV_float(a, b)  ((a) / (b))
#define CT_OPT_SQRT_float(a)    sqrtf(a)
#define CT_OPT_ADD_double(a, b) ((a) + (b))
#define CT_OPT_SUB_double(a, b) ((a) - (b))
#define CT_OPT_MUL_double(a, b) ((a) * (b))
#define CT_OPT_DIV_double(a, b) ((a) / (b))
#define CT_OPT_SQRT_double(a)   sqrt(a)
#endif

/* The hyper-parameters of one call, cast to the element type. */
#define CT_OPT_CONSTS(T)                                                                 \
    typedef struct CtSgdK_##T {                                                          \
        T lr, wd, mom, damp;                                                             \
    } CtSgdK_##T;                                                                        \
    typedef struct CtAdamK_##T {                                                         \
        T mul, l2, b1, b2, a1, a2, step, bc2, eps;                                       \
    } CtAdamK_##T;                                                                       \
    typedef struct CtRmsK_##T {                                                          \
        T lr, wd, mom, al, a1, eps;                                                      \
    } CtRmsK_##T;

/* SGD (torch.optim.SGD): d = g + wd p; buf = d on the first step, else
 * mom buf + (1 - dampening) d; d = nesterov ? d + mom buf : buf; p -= lr d. */
#define CT_OPT_SGD(T)                                                                    \
    CT_OPT_FN void ct_sgd_elem_##T(T *CT_OPT_RESTRICT p, const T *CT_OPT_RESTRICT g,     \
                                   T *CT_OPT_RESTRICT buf, int64_t i, CtSgdK_##T k,      \
                                   bool mom_on, bool first, bool nesterov)               \
    {                                                                                    \
        T d = CT_OPT_ADD_##T(g[i], CT_OPT_MUL_##T(k.wd, p[i]));                          \
        if (mom_on) {                                                                    \
            T b = first ? d                                                              \
                        : CT_OPT_ADD_##T(CT_OPT_MUL_##T(k.mom, buf[i]),                  \
                                         CT_OPT_MUL_##T(k.damp, d));                     \
            buf[i] = b;                                                                  \
            d = nesterov ? CT_OPT_ADD_##T(d, CT_OPT_MUL_##T(k.mom, b)) : b;              \
        }                                                                                \
        p[i] = CT_OPT_SUB_##T(p[i], CT_OPT_MUL_##T(k.lr, d));                            \
    }

/* Adam / AdamW (torch.optim.Adam, AdamW), amsgrad optional:
 *   p *= mul (AdamW decay); g += l2 p (Adam decay)
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  vmax = max(vmax, v)
 *   p -= step_size m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps) */
#define CT_OPT_ADAM(T)                                                                   \
    CT_OPT_FN void ct_adam_elem_##T(T *CT_OPT_RESTRICT p, const T *CT_OPT_RESTRICT g,    \
                                    T *CT_OPT_RESTRICT m, T *CT_OPT_RESTRICT v,          \
                                    T *CT_OPT_RESTRICT vmax, int64_t i, CtAdamK_##T k,   \
                                    bool ams)                                            \
    {                                                                                    \
        T pi = CT_OPT_MUL_##T(p[i], k.mul);                                              \
        T gi = CT_OPT_ADD_##T(g[i], CT_OPT_MUL_##T(k.l2, pi));                           \
        T mi = CT_OPT_ADD_##T(CT_OPT_MUL_##T(k.b1, m[i]), CT_OPT_MUL_##T(k.a1, gi));     \
        T vi = CT_OPT_ADD_##T(CT_OPT_MUL_##T(k.b2, v[i]),                                \
                              CT_OPT_MUL_##T(CT_OPT_MUL_##T(k.a2, gi), gi));             \
        m[i] = mi;                                                                       \
        v[i] = vi;                                                                       \
        if (ams) {                                                                       \
            vi = vmax[i] > vi ? vmax[i] : vi;                                            \
            vmax[i] = vi;                                                                \
        }                                                                                \
        T den = CT_OPT_ADD_##T(CT_OPT_DIV_##T(CT_OPT_SQRT_##T(vi), k.bc2), k.eps);       \
        p[i] = CT_OPT_SUB_##T(pi, CT_OPT_DIV_##T(CT_OPT_MUL_##T(k.step, mi), den));      \
    }

/* RMSprop (torch.optim.RMSprop): g += wd p; sq = al sq + (1 - al) g g;
 * centered: ga = al ga + (1 - al) g, avg = sqrt(sq - ga ga) + eps, else
 * avg = sqrt(sq) + eps; momentum: buf = mom buf + g / avg, p -= lr buf;
 * else p -= lr (g / avg). */
#define CT_OPT_RMSPROP(T)                                                                \
    CT_OPT_FN void ct_rms_elem_##T(T *CT_OPT_RESTRICT p, const T *CT_OPT_RESTRICT g,     \
                                   T *CT_OPT_RESTRICT sq, T *CT_OPT_RESTRICT mb,         \
                                   T *CT_OPT_RESTRICT ga, int64_t i, CtRmsK_##T k,       \
                                   bool centered, bool mom_on)                           \
    {                                                                                    \
        T gi = CT_OPT_ADD_##T(g[i], CT_OPT_MUL_##T(k.wd, p[i]));                         \
        T s = CT_OPT_ADD_##T(CT_OPT_MUL_##T(k.al, sq[i]),                                \
                             CT_OPT_MUL_##T(CT_OPT_MUL_##T(k.a1, gi), gi));              \
        sq[i] = s;                                                                       \
        if (centered) {                                                                  \
            T a = CT_OPT_ADD_##T(CT_OPT_MUL_##T(k.al, ga[i]), CT_OPT_MUL_##T(k.a1, gi)); \
            ga[i] = a;                                                                   \
            s = CT_OPT_SUB_##T(s, CT_OPT_MUL_##T(a, a));                                 \
        }                                                                                \
        T avg = CT_OPT_ADD_##T(CT_OPT_SQRT_##T(s), k.eps);                               \
        if (mom_on) {                                                                    \
            T b = CT_OPT_ADD_##T(CT_OPT_MUL_##T(k.mom, mb[i]), CT_OPT_DIV_##T(gi, avg)); \
            mb[i] = b;                                                                   \
            p[i] = CT_OPT_SUB_##T(p[i], CT_OPT_MUL_##T(k.lr, b));                        \
        } else {                                                                         \
            p[i] = CT_OPT_SUB_##T(p[i], CT_OPT_MUL_##T(k.lr, CT_OPT_DIV_##T(gi, avg)));  \
        }                                                                                \
    }

/* Clipping: x * c, and x clamped to [-c, c] (a NaN stays NaN). */
#define CT_OPT_CLIP(T)                                                                   \
    CT_OPT_FN T ct_scale_elem_##T(T x, T c)                                              \
    {                                                                                    \
        return CT_OPT_MUL_##T(x, c);                                                     \
    }                                                                                    \
    CT_OPT_FN T ct_clamp_elem_##T(T x, T c)                                              \
    {                                                                                    \
        return x > c ? c : x < -c ? -c : x;                                              \
    }

/* One norm chunk [lo, hi) of x, in index order: the f64 sum of squares, or
 * max |x| where a NaN wins. */
#define CT_OPT_NORM(T)                                                                   \
    CT_OPT_FN double ct_sumsq_chunk_##T(const T *x, int64_t lo, int64_t hi)              \
    {                                                                                    \
        double s = 0;                                                                    \
        for (int64_t i = lo; i < hi; i++)                                                \
            s = CT_OPT_ADD_double(s, CT_OPT_MUL_double((double)x[i], (double)x[i]));     \
        return s;                                                                        \
    }                                                                                    \
    CT_OPT_FN double ct_maxabs_chunk_##T(const T *x, int64_t lo, int64_t hi)             \
    {                                                                                    \
        double m = 0;                                                                    \
        for (int64_t i = lo; i < hi && m == m; i++) {                                    \
            double a = fabs((double)x[i]);                                               \
            if (a > m || a != a) m = a;                                                  \
        }                                                                                \
        return m;                                                                        \
    }

#define CT_OPT_ALL(T)                                                                    \
    CT_OPT_CONSTS(T)                                                                     \
    CT_OPT_SGD(T)                                                                        \
    CT_OPT_ADAM(T)                                                                       \
    CT_OPT_RMSPROP(T)                                                                    \
    CT_OPT_CLIP(T)                                                                       \
    CT_OPT_NORM(T)

CT_OPT_ALL(float)
CT_OPT_ALL(double)

#endif
