/* Private to tensor/cuda: the thread bodies of FILL and COPY (copy.cu),
 * shared with the host harness (hd.h).
 *
 * Conversions go through double, as on the CPU (tensor/cpu/copy.c): exact
 * for every dtype but i64 beyond 2^53, and bf16/f16 round f64 -> f32 -> half
 * to nearest even. The half <-> f32 steps use CUDA's intrinsics on the
 * device and the CPU backend's conversions on the host (the one place where
 * the harness does not run the device's instructions). */
#ifndef CTRAINER_TENSOR_CUDA_COPY_BODY_H
#define CTRAINER_TENSOR_CUDA_COPY_BODY_H

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "hd.h"

CT_HD float ct_hd_bf16_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __bfloat162float(__ushort_as_bfloat16(h));
#else
    return ct_bf16_widen(h);
#endif
}

CT_HD uint16_t ct_hd_f32_to_bf16(float x)
{
#ifdef __CUDA_ARCH__
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
    return ct_bf16_round(x);
#endif
}

CT_HD float ct_hd_f16_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    return ct_f16_to_f32(h);
#endif
}

CT_HD uint16_t ct_hd_f32_to_f16(float x)
{
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(x));
#else
    return ct_f32_to_f16(x);
#endif
}

/* Element i of a DT array, as double. */
template <int DT> CT_HD double ct_ld(const void *p, int64_t i)
{
    if constexpr (DT == CT_F32)
        return (double)((const float *)p)[i];
    else if constexpr (DT == CT_F64)
        return ((const double *)p)[i];
    else if constexpr (DT == CT_BF16)
        return (double)ct_hd_bf16_to_f32(((const uint16_t *)p)[i]);
    else if constexpr (DT == CT_F16)
        return (double)ct_hd_f16_to_f32(((const uint16_t *)p)[i]);
    else if constexpr (DT == CT_I64)
        return (double)((const int64_t *)p)[i];
    else if constexpr (DT == CT_I32)
        return (double)((const int32_t *)p)[i];
    else if constexpr (DT == CT_U8)
        return (double)((const uint8_t *)p)[i];
    else /* CT_BOOL */
        return ((const uint8_t *)p)[i] != 0 ? 1.0 : 0.0;
}

/* Stores v as element i of a DT array. */
template <int DT> CT_HD void ct_st(void *p, int64_t i, double v)
{
    if constexpr (DT == CT_F32)
        ((float *)p)[i] = (float)v;
    else if constexpr (DT == CT_F64)
        ((double *)p)[i] = v;
    else if constexpr (DT == CT_BF16)
        ((uint16_t *)p)[i] = ct_hd_f32_to_bf16((float)v);
    else if constexpr (DT == CT_F16)
        ((uint16_t *)p)[i] = ct_hd_f32_to_f16((float)v);
    else if constexpr (DT == CT_I64)
        ((int64_t *)p)[i] = (int64_t)v;
    else if constexpr (DT == CT_I32)
        ((int32_t *)p)[i] = (int32_t)v;
    else if constexpr (DT == CT_U8)
        ((uint8_t *)p)[i] = (uint8_t)(int64_t)v;
    else /* CT_BOOL */
        ((uint8_t *)p)[i] = v != 0;
}

/* out (operand 0 of ix) <- convert(in (operand 1)), S and D dtypes. */
template <int S, int D>
CT_HD void ct_convert_thread(CtThread t, void *out, const void *in, const CtCudaIndex &ix,
                             int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[2];
        ct_cuda_offsets<2>(ix, i, off);
        ct_st<D>(out, off[0], ct_ld<S>(in, off[1]));
    }
}

/* Same dtype: raw element moves (W is an unsigned type of the element size). */
template <typename W>
CT_HD void ct_move_thread(CtThread t, W *out, const W *in, const CtCudaIndex &ix,
                          int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[2];
        ct_cuda_offsets<2>(ix, i, off);
        out[off[0]] = in[off[1]];
    }
}

/* out (operand 0) <- the element bits `v`. */
template <typename W>
CT_HD void ct_fill_thread(CtThread t, W *out, W v, const CtCudaIndex &ix, int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        int64_t off[1];
        ct_cuda_offsets<1>(ix, i, off);
        out[off[0]] = v;
    }
}

/* The bits of fill value v in dtype dt, converted as the CPU's stores do.
 * Host code. */
static inline uint64_t ct_fill_bits(CtDType dt, double v)
{
    uint64_t bits = 0;
    switch (dt) {
    case CT_F32: {
        float f = (float)v;
        memcpy(&bits, &f, 4);
        break;
    }
    case CT_F64: memcpy(&bits, &v, 8); break;
    case CT_BF16: bits = ct_bf16_round((float)v); break;
    case CT_F16: bits = ct_f32_to_f16((float)v); break;
    case CT_I64: {
        int64_t x = (int64_t)v;
        memcpy(&bits, &x, 8);
        break;
    }
    case CT_I32: {
        int32_t x = (int32_t)v;
        memcpy(&bits, &x, 4);
        break;
    }
    case CT_U8: bits = (uint8_t)(int64_t)v; break;
    case CT_BOOL: bits = v != 0; break;
    default: break;
    }
    return bits;
}

#endif
