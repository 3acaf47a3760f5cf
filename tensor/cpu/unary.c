/* Elementwise kernels: UNARY and UNARY_BWD (contracts in ../elementwise.h).
 * f32, f64, bf16 and f16 (computed in f32); i64 and i32 for the kinds of
 * ct_unary_kind_has_int. */
#include <math.h>

#include "../elementwise.h"
#include "cpu.h"
#include "workers.h"

#define CLAMP(x, lo, hi)                                                                 \
    (((x) < (lo) ? (lo) : (x)) > (hi) ? (hi) : ((x) < (lo) ? (lo) : (x)))
#define SQRT1_2     0.70710678118654752440 /* 1/sqrt(2) */
#define INV_SQRT2PI 0.39894228040143267794 /* 1/sqrt(2 pi) */

/* Inner loops are instantiated per dtype with the kind switched outside the
 * loop; the unit-stride case is separate so it vectorises. */
#define LOOP_1(EXPR)                                                                     \
    do {                                                                                 \
        if (so == 1 && si == 1)                                                          \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pi[i];                                                             \
                po[i] = (EXPR);                                                          \
            }                                                                            \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pi[i * si];                                                        \
                po[i * so] = (EXPR);                                                     \
            }                                                                            \
    } while (0)

#define LOOP_2(EXPR)                                                                     \
    do {                                                                                 \
        if (so == 1 && si == 1 && sg == 1)                                               \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pi[i], g = pg[i];                                                  \
                (void)x, (void)g;                                                        \
                po[i] = (EXPR);                                                          \
            }                                                                            \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pi[i * si], g = pg[i * sg];                                        \
                (void)x, (void)g;                                                        \
                po[i * so] = (EXPR);                                                     \
            }                                                                            \
    } while (0)

/* out <- f(x) for floating T, with the math functions of T's precision. */
#define UNARY_FLOAT_ROW(NAME, T_, EXP, LOG, SQRT, FABS, TANH, ERF, POW)                  \
    static void NAME(const CtUnaryParams *p, T_ *po, int64_t so, const T_ *pi,           \
                     int64_t si, int64_t n)                                              \
    {                                                                                    \
        typedef T_ T;                                                                    \
        const T a = (T)p->a, b = (T)p->b, one = 1, half = (T)0.5;                        \
        const T k = (T)CT_GELU_TANH_K, c = (T)CT_GELU_TANH_C, r2 = (T)SQRT1_2;           \
        switch (p->kind) {                                                               \
        case CT_UN_NEG: LOOP_1(-x); break;                                               \
        case CT_UN_EXP: LOOP_1(EXP(x)); break;                                           \
        case CT_UN_LOG: LOOP_1(LOG(x)); break;                                           \
        case CT_UN_SQRT: LOOP_1(SQRT(x)); break;                                         \
        case CT_UN_ABS: LOOP_1(FABS(x)); break;                                          \
        /* min(max(x, lo), hi) as PyTorch (hi wins when lo > hi); NaN fails both         \
           tests and passes through */                                                   \
        case CT_UN_CLAMP: LOOP_1(CLAMP(x, a, b)); break;                                 \
        case CT_UN_RELU: LOOP_1(x < 0 ? (T)0 : x); break;                                \
        case CT_UN_LEAKY_RELU: LOOP_1(x > 0 ? x : x * a); break;                         \
        case CT_UN_GELU_ERF: LOOP_1(half *x *(one + ERF(x * r2))); break;                \
        case CT_UN_GELU_TANH:                                                            \
            LOOP_1(half *x *(one + TANH(k * (x + c * x * x * x))));                      \
            break;                                                                       \
        case CT_UN_SILU: LOOP_1(x / (one + EXP(-x))); break;                             \
        case CT_UN_SIGMOID: LOOP_1(one / (one + EXP(-x))); break;                        \
        case CT_UN_TANH: LOOP_1(TANH(x)); break;                                         \
        case CT_UN_ADD_SCALAR: LOOP_1(x + a); break;                                     \
        case CT_UN_MUL_SCALAR: LOOP_1(x *a); break;                                      \
        case CT_UN_RSUB_SCALAR: LOOP_1(a - x); break;                                    \
        case CT_UN_RDIV_SCALAR: LOOP_1(a / x); break;                                    \
        case CT_UN_DIV_SCALAR: LOOP_1(x / a); break;                                     \
        case CT_UN_POW_SCALAR:                                                           \
            /* exact special cases of the common exponents */                            \
            if (p->a == 2.0)                                                             \
                LOOP_1(x *x);                                                            \
            else if (p->a == 1.0)                                                        \
                LOOP_1(x);                                                               \
            else if (p->a == -1.0)                                                       \
                LOOP_1(one / x);                                                         \
            else                                                                         \
                LOOP_1(POW(x, a));                                                       \
            break;                                                                       \
        }                                                                                \
    }

/* out <- f'(x) * g; x is the input or the output per ct_unary_bwd_uses_output. */
#define UNARY_BWD_ROW(NAME, T_, EXP, TANH, ERF, POW)                                     \
    static void NAME(const CtUnaryParams *p, T_ *po, int64_t so, const T_ *pi,           \
                     int64_t si, const T_ *pg, int64_t sg, int64_t n)                    \
    {                                                                                    \
        typedef T_ T;                                                                    \
        const T a = (T)p->a, b = (T)p->b, one = 1, half = (T)0.5, zero = 0;              \
        const T k = (T)CT_GELU_TANH_K, c = (T)CT_GELU_TANH_C, r2 = (T)SQRT1_2;           \
        const T ipdf = (T)INV_SQRT2PI;                                                   \
        switch (p->kind) {                                                               \
        case CT_UN_NEG: LOOP_2(-g); break;                                               \
        case CT_UN_EXP: LOOP_2(x *g); break; /* x = y */                                 \
        case CT_UN_LOG: LOOP_2(g / x); break;                                            \
        case CT_UN_SQRT: LOOP_2(g / (x + x)); break; /* x = y */                         \
        case CT_UN_ABS: LOOP_2(x > 0 ? g : (x < 0 ? -g : zero)); break;                  \
        case CT_UN_CLAMP: LOOP_2((x >= a && x <= b) ? g : zero); break;                  \
        case CT_UN_RELU: LOOP_2(x <= 0 ? zero : g); break;                               \
        case CT_UN_LEAKY_RELU: LOOP_2(x > 0 ? g : g * a); break;                         \
        case CT_UN_GELU_ERF:                                                             \
            /* Phi(x) + x phi(x) */                                                      \
            LOOP_2(g *(half * (one + ERF(x * r2)) + x * ipdf * EXP(-half * x * x)));     \
            break;                                                                       \
        case CT_UN_GELU_TANH: LOOP_2(g *gelu_tanh_grad_##T_(x, k, c, half, one)); break; \
        case CT_UN_SILU: LOOP_2(g *silu_grad_##T_(x, one)); break;                       \
        case CT_UN_SIGMOID: LOOP_2(g *x *(one - x)); break; /* x = y */                  \
        case CT_UN_TANH: LOOP_2(g *(one - x * x)); break;   /* x = y */                  \
        case CT_UN_ADD_SCALAR: LOOP_2(g); break;                                         \
        case CT_UN_MUL_SCALAR: LOOP_2(g *a); break;                                      \
        case CT_UN_RSUB_SCALAR: LOOP_2(-g); break;                                       \
        case CT_UN_RDIV_SCALAR: LOOP_2(-a / (x * x) * g); break;                         \
        case CT_UN_DIV_SCALAR: LOOP_2(g / a); break;                                     \
        case CT_UN_POW_SCALAR:                                                           \
            if (p->a == 0.0)                                                             \
                LOOP_2(zero);                                                            \
            else if (p->a == 2.0)                                                        \
                LOOP_2((x + x) * g);                                                     \
            else if (p->a == 1.0)                                                        \
                LOOP_2(g);                                                               \
            else                                                                         \
                LOOP_2(a *POW(x, a - one) * g);                                          \
            break;                                                                       \
        }                                                                                \
        (void)b;                                                                         \
    }

/* Small helpers kept inline so the loops above stay single expressions. */
#define GRAD_HELPERS(T, EXP, TANH)                                                       \
    static inline T gelu_tanh_grad_##T(T x, T k, T c, T half, T one)                     \
    {                                                                                    \
        T t = TANH(k * (x + c * x * x * x));                                             \
        return half * (one + t) + half * x * (one - t * t) * k * (one + 3 * c * x * x);  \
    }                                                                                    \
    static inline T silu_grad_##T(T x, T one)                                            \
    {                                                                                    \
        T s = one / (one + EXP(-x));                                                     \
        return s * (one + x * (one - s));                                                \
    }

GRAD_HELPERS(float, expf, tanhf)
GRAD_HELPERS(double, exp, tanh)

UNARY_FLOAT_ROW(unary_f32, float, expf, logf, sqrtf, fabsf, tanhf, erff, powf)
UNARY_FLOAT_ROW(unary_f64, double, exp, log, sqrt, fabs, tanh, erf, pow)
UNARY_BWD_ROW(unary_bwd_f32, float, expf, tanhf, erff, powf)
UNARY_BWD_ROW(unary_bwd_f64, double, exp, tanh, erf, pow)

/* Integer kinds (ct_unary_kind_has_int). Arithmetic wraps around through the
 * unsigned type, as PyTorch's does, instead of overflowing; the double
 * params saturate to T's range (so infinite clamp bounds work). */
#define UNARY_INT_ROW(NAME, T_, U, TMIN, TMAX)                                           \
    static T_ NAME##_sat(double v)                                                       \
    {                                                                                    \
        if (v != v) return 0;                                                            \
        if (v <= (double)TMIN) return TMIN;                                              \
        if (v >= (double)TMAX) return TMAX;                                              \
        return (T_)v;                                                                    \
    }                                                                                    \
    static void NAME(const CtUnaryParams *p, T_ *po, int64_t so, const T_ *pi,           \
                     int64_t si, int64_t n)                                              \
    {                                                                                    \
        typedef T_ T;                                                                    \
        const T a = NAME##_sat(p->a), b = NAME##_sat(p->b);                              \
        switch (p->kind) {                                                               \
        case CT_UN_NEG: LOOP_1((T)(0u - (U)x)); break;                                   \
        case CT_UN_ABS: LOOP_1(x < 0 ? (T)(0u - (U)x) : x); break;                       \
        case CT_UN_CLAMP: LOOP_1(CLAMP(x, a, b)); break;                                 \
        case CT_UN_RELU: LOOP_1(x < 0 ? (T)0 : x); break;                                \
        case CT_UN_ADD_SCALAR: LOOP_1((T)((U)x + (U)a)); break;                          \
        case CT_UN_MUL_SCALAR: LOOP_1((T)((U)x * (U)a)); break;                          \
        case CT_UN_RSUB_SCALAR: LOOP_1((T)((U)a - (U)x)); break;                         \
        default: break;                                                                  \
        }                                                                                \
    }

UNARY_INT_ROW(unary_i64, int64_t, uint64_t, INT64_MIN, INT64_MAX)
UNARY_INT_ROW(unary_i32, int32_t, uint32_t, INT32_MIN, INT32_MAX)

/* bf16 and f16 compute in f32: blocks of a row are widened into stack
 * buffers, run through the f32 loop and rounded back (nearest even). */
#define HALF_BLOCK 256
#define HALF_ROWS(SUF, LOAD, STORE)                                                      \
    static void unary_##SUF(const CtUnaryParams *p, uint16_t *po, int64_t so,            \
                            const uint16_t *pi, int64_t si, int64_t n)                   \
    {                                                                                    \
        float x[HALF_BLOCK], y[HALF_BLOCK];                                              \
        for (int64_t s = 0; s < n; s += HALF_BLOCK) {                                    \
            int64_t m = n - s < HALF_BLOCK ? n - s : HALF_BLOCK;                         \
            for (int64_t j = 0; j < m; j++) x[j] = LOAD(pi[(s + j) * si]);               \
            unary_f32(p, y, 1, x, 1, m);                                                 \
            for (int64_t j = 0; j < m; j++) po[(s + j) * so] = STORE(y[j]);              \
        }                                                                                \
    }                                                                                    \
    static void unary_bwd_##SUF(const CtUnaryParams *p, uint16_t *po, int64_t so,        \
                                const uint16_t *pi, int64_t si, const uint16_t *pg,      \
                                int64_t sg, int64_t n)                                   \
    {                                                                                    \
        float x[HALF_BLOCK], g[HALF_BLOCK], y[HALF_BLOCK];                               \
        for (int64_t s = 0; s < n; s += HALF_BLOCK) {                                    \
            int64_t m = n - s < HALF_BLOCK ? n - s : HALF_BLOCK;                         \
            for (int64_t j = 0; j < m; j++) {                                            \
                x[j] = LOAD(pi[(s + j) * si]);                                           \
                g[j] = LOAD(pg[(s + j) * sg]);                                           \
            }                                                                            \
            unary_bwd_f32(p, y, 1, x, 1, g, 1, m);                                       \
            for (int64_t j = 0; j < m; j++) po[(s + j) * so] = STORE(y[j]);              \
        }                                                                                \
    }

HALF_ROWS(bf16, ct_bf16_widen, ct_bf16_round)
HALF_ROWS(f16, ct_f16_to_f32, ct_f32_to_f16)

/* One UNARY or UNARY_BWD call over strided rows. */
typedef struct UnaryJob {
    CtIter it;
    const CtUnaryParams *p;
    void *po;
    const void *pi, *pg;
} UnaryJob;

#define UNARY_ITEM(FN, T)                                                                \
    CT_ROW_ITEM(FN##_item, UnaryJob,                                                     \
                FN(j->p, (T *)j->po + off[0], j->it.istride[0],                          \
                   (const T *)j->pi + off[1], j->it.istride[1], len);)
#define UNARY_BWD_ITEM(FN, T)                                                            \
    CT_ROW_ITEM(FN##_item, UnaryJob,                                                     \
                FN(j->p, (T *)j->po + off[0], j->it.istride[0],                          \
                   (const T *)j->pi + off[1], j->it.istride[1],                          \
                   (const T *)j->pg + off[2], j->it.istride[2], len);)
UNARY_ITEM(unary_f32, float)
UNARY_ITEM(unary_f64, double)
UNARY_ITEM(unary_i64, int64_t)
UNARY_ITEM(unary_i32, int32_t)
UNARY_ITEM(unary_bf16, uint16_t)
UNARY_ITEM(unary_f16, uint16_t)
UNARY_BWD_ITEM(unary_bwd_f32, float)
UNARY_BWD_ITEM(unary_bwd_f64, double)
UNARY_BWD_ITEM(unary_bwd_bf16, uint16_t)
UNARY_BWD_ITEM(unary_bwd_f16, uint16_t)

// out, in0: same shape and dtype, any strides.
static CtStatus cpu_unary(const CtOpCall *c)
{
    Tensor *out = c->out[0];
    UnaryJob j = {.p = c->params, .po = ct_ptr(out), .pi = ct_ptr(c->in[0])};
    ct_iter_init(&j.it, out->ndim, out->shape, 2, (const Tensor *[]){out, c->in[0]});
    CtWorkFn fn = NULL;
    switch (out->dtype) {
    case CT_F32: fn = unary_f32_item; break;
    case CT_F64: fn = unary_f64_item; break;
    case CT_I64: fn = unary_i64_item; break;
    case CT_I32: fn = unary_i32_item; break;
    case CT_BF16: fn = unary_bf16_item; break;
    case CT_F16: fn = unary_f16_item; break;
    default: break;
    }
    if (fn) ct_cpu_rows(&j.it, fn, &j);
    return CT_OK;
}

// out, in0 (x or y), in1 (gout): same shape and dtype, any strides.
static CtStatus cpu_unary_bwd(const CtOpCall *c)
{
    Tensor *out = c->out[0];
    UnaryJob j = {.p = c->params,
                  .po = ct_ptr(out),
                  .pi = ct_ptr(c->in[0]),
                  .pg = ct_ptr(c->in[1])};
    ct_iter_init(&j.it, out->ndim, out->shape, 3,
                 (const Tensor *[]){out, c->in[0], c->in[1]});
    CtWorkFn fn = NULL;
    switch (out->dtype) {
    case CT_F32: fn = unary_bwd_f32_item; break;
    case CT_F64: fn = unary_bwd_f64_item; break;
    case CT_BF16: fn = unary_bwd_bf16_item; break;
    case CT_F16: fn = unary_bwd_f16_item; break;
    default: break;
    }
    if (fn) ct_cpu_rows(&j.it, fn, &j);
    return CT_OK;
}

static bool valid_kind(CtUnaryKind k)
{
    return (unsigned)k <= (unsigned)CT_UN_DIV_SCALAR;
}

static bool cpu_unary_supports(const CtOpCall *c)
{
    const CtUnaryParams *p = c->params;
    if (!valid_kind(p->kind)) return false;
    switch (c->in[0]->dtype) {
    case CT_F32:
    case CT_F64:
    case CT_BF16:
    case CT_F16: return true;
    case CT_I64:
    case CT_I32: return ct_unary_kind_has_int(p->kind);
    default: return false;
    }
}

static bool cpu_unary_bwd_supports(const CtOpCall *c)
{
    const CtUnaryParams *p = c->params;
    CtDType dt = c->in[0]->dtype;
    return valid_kind(p->kind) && ct_dtype_is_float(dt);
}

void ct_cpu_register_unary(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_UNARY] = cpu_unary;
    s[CT_OP_UNARY] = cpu_unary_supports;
    k[CT_OP_UNARY_BWD] = cpu_unary_bwd;
    s[CT_OP_UNARY_BWD] = cpu_unary_bwd_supports;
}
