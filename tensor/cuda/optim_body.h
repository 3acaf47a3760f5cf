/* Private to tensor/cuda: the thread bodies of OPTIM_SGD, OPTIM_ADAM,
 * OPTIM_RMSPROP, BLOCK_NORM, BLOCK_SCALE and BLOCK_CLAMP (optim.cu), shared
 * with the host harness (hd.h). The per-element formulas are
 * tensor/optim_math.h, the CPU kernels' own, evaluated without contraction
 * on the device, so results match the CPU bit for bit. Operands are
 * contiguous; a NULL state buffer is one the configuration does not use. */
#ifndef CTRAINER_TENSOR_CUDA_OPTIM_BODY_H
#define CTRAINER_TENSOR_CUDA_OPTIM_BODY_H

#include "../optim_math.h"
#include "hd.h"

/* The element type's constants and element functions, by T. */
template <typename T> struct CtOptimT;
template <> struct CtOptimT<float> {
    typedef CtSgdK_float Sgd;
    typedef CtAdamK_float Adam;
    typedef CtRmsK_float Rms;
};
template <> struct CtOptimT<double> {
    typedef CtSgdK_double Sgd;
    typedef CtAdamK_double Adam;
    typedef CtRmsK_double Rms;
};

template <typename T> CT_HD typename CtOptimT<T>::Sgd ct_sgd_consts(const CtSgdParams &q)
{
    return {(T)q.lr, (T)q.weight_decay, (T)q.momentum, (T)q.one_minus_dampening};
}

template <typename T>
CT_HD typename CtOptimT<T>::Adam ct_adam_consts(const CtAdamParams &q)
{
    return {(T)q.decay_mul,
            (T)q.l2,
            (T)q.beta1,
            (T)q.beta2,
            (T)q.one_minus_beta1,
            (T)q.one_minus_beta2,
            (T)q.step_size,
            (T)q.bc2_sqrt,
            (T)q.eps};
}

template <typename T>
CT_HD typename CtOptimT<T>::Rms ct_rms_consts(const CtRmspropParams &q)
{
    return {(T)q.lr,    (T)q.weight_decay,    (T)q.momentum,
            (T)q.alpha, (T)q.one_minus_alpha, (T)q.eps};
}

/* Element i through the T-suffixed functions of optim_math.h. */
#define CT_OPTIM_BY_T(T, NAME, ...)                                                      \
    do {                                                                                 \
        if constexpr (sizeof(T) == sizeof(float))                                        \
            NAME##_float(__VA_ARGS__);                                                   \
        else                                                                             \
            NAME##_double(__VA_ARGS__);                                                  \
    } while (0)

/* The updates below read g[i] and, when gz (g itself) is given, zero it
 * after the element's update: the op's out[CT_OPTIM_ZERO_GRAD]. */

/* MOM, FIRST, NESTEROV: whether buf is used, was just created, and Nesterov. */
template <typename T, bool MOM, bool FIRST, bool NESTEROV>
CT_HD void ct_sgd_thread(CtThread t, T *p, const T *g, T *buf, T *gz, CtSgdParams q,
                         int64_t n)
{
    const auto k = ct_sgd_consts<T>(q);
    CT_THREAD_FOR(i, t, n)
    {
        CT_OPTIM_BY_T(T, ct_sgd_elem, p, g, buf, i, k, MOM, FIRST, NESTEROV);
        if (gz) gz[i] = T(0);
    }
}

template <typename T, bool AMS>
CT_HD void ct_adam_thread(CtThread t, T *p, const T *g, T *m, T *v, T *vmax, T *gz,
                          CtAdamParams q, int64_t n)
{
    const auto k = ct_adam_consts<T>(q);
    CT_THREAD_FOR(i, t, n)
    {
        CT_OPTIM_BY_T(T, ct_adam_elem, p, g, m, v, vmax, i, k, AMS);
        if (gz) gz[i] = T(0);
    }
}

template <typename T, bool CENTERED, bool MOM>
CT_HD void ct_rms_thread(CtThread t, T *p, const T *g, T *sq, T *mb, T *ga, T *gz,
                         CtRmspropParams q, int64_t n)
{
    const auto k = ct_rms_consts<T>(q);
    CT_THREAD_FOR(i, t, n)
    {
        CT_OPTIM_BY_T(T, ct_rms_elem, p, g, sq, mb, ga, i, k, CENTERED, MOM);
        if (gz) gz[i] = T(0);
    }
}

/* x = x * value (CLAMP false) or clamp(x, -value, value) (CLAMP true). */
template <typename T, bool CLAMP>
CT_HD void ct_clip_thread(CtThread t, T *x, T value, int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        if constexpr (sizeof(T) == sizeof(float))
            x[i] = CLAMP ? ct_clamp_elem_float(x[i], value)
                         : ct_scale_elem_float(x[i], value);
        else
            x[i] = CLAMP ? ct_clamp_elem_double(x[i], value)
                         : ct_scale_elem_double(x[i], value);
    }
}

/* One thread per CT_NORM_CHUNK chunk of x, summed in index order: the CPU's
 * partials, bit for bit (n > 0). */
template <typename T, bool MAX_ABS>
CT_HD void ct_norm_thread(CtThread t, const T *x, double *part, int64_t n)
{
    int64_t nch = (n + CT_NORM_CHUNK - 1) / CT_NORM_CHUNK;
    CT_THREAD_FOR(c, t, nch)
    {
        int64_t lo = c * CT_NORM_CHUNK,
                hi = lo + CT_NORM_CHUNK < n ? lo + CT_NORM_CHUNK : n;
        if constexpr (sizeof(T) == sizeof(float))
            part[c] = MAX_ABS ? ct_maxabs_chunk_float(x, lo, hi)
                              : ct_sumsq_chunk_float(x, lo, hi);
        else
            part[c] = MAX_ABS ? ct_maxabs_chunk_double(x, lo, hi)
                              : ct_sumsq_chunk_double(x, lo, hi);
    }
}

#endif
