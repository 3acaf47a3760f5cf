/* Private to tensor/cuda: the thread bodies of FILL and COPY (copy.cu),
 * shared with the host harness (hd.h).
 *
 * Conversions as on the CPU (tensor/cpu/copy.c): a load gives the dtype's
 * own C type (bf16 and f16 widened to float), so no value passes through a
 * wider type; integers convert to integers wrapping around; floats
 * truncate to integers, NaN and values out of range giving the minimum of
 * i64 (or of i32, for i32 and u8); bf16/f16 round f32 -> half to nearest
 * even. The half <-> f32 steps use CUDA's intrinsics on the
 * device and the CPU backend's conversions on the host (the one place where
 * the harness does not run the device's instructions). The intrinsics give
 * NaN one canonical pattern; the device takes NaN apart itself, as the CPU
 * does (sign and payload kept, quiet), so both give the same bits. */
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
    if (x != x) return (uint16_t)((__float_as_uint(x) >> 16) | 0x40u);
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
    return ct_bf16_round(x);
#endif
}

CT_HD float ct_hd_f16_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
    if ((h & 0x7fffu) > 0x7c00u)
        return __uint_as_float(((uint32_t)(h & 0x8000u) << 16) | 0x7f800000u |
                               ((uint32_t)(h & 0x3ffu) << 13));
    return __half2float(__ushort_as_half(h));
#else
    return ct_f16_to_f32(h);
#endif
}

CT_HD uint16_t ct_hd_f32_to_f16(float x)
{
#ifdef __CUDA_ARCH__
    if (x != x) return (uint16_t)(((__float_as_uint(x) >> 16) & 0x8000u) | 0x7e00u);
    return __half_as_ushort(__float2half_rn(x));
#else
    return ct_f32_to_f16(x);
#endif
}

/* Element i of a DT array, in the dtype's C type (float for bf16/f16,
 * uint8_t 0/1 for bool). */
template <int DT> CT_HD auto ct_ld(const void *p, int64_t i)
{
    if constexpr (DT == CT_F32)
        return ((const float *)p)[i];
    else if constexpr (DT == CT_F64)
        return ((const double *)p)[i];
    else if constexpr (DT == CT_BF16)
        return ct_hd_bf16_to_f32(((const uint16_t *)p)[i]);
    else if constexpr (DT == CT_F16)
        return ct_hd_f16_to_f32(((const uint16_t *)p)[i]);
    else if constexpr (DT == CT_I64)
        return ((const int64_t *)p)[i];
    else if constexpr (DT == CT_I32)
        return ((const int32_t *)p)[i];
    else if constexpr (DT == CT_U8)
        return ((const uint8_t *)p)[i];
    else /* CT_BOOL */
        return (uint8_t)(((const uint8_t *)p)[i] != 0);
}

/* To i64 and i32: integers wrap around, floats truncate (NaN and out of
 * range: the minimum). */
CT_HD int64_t ct_to_i64(double v)
{
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v
                                                                    : INT64_MIN;
}
CT_HD int64_t ct_to_i64(float v)
{
    return ct_to_i64((double)v);
}
CT_HD int64_t ct_to_i64(int64_t v)
{
    return v;
}
CT_HD int64_t ct_to_i64(int32_t v)
{
    return v;
}
CT_HD int64_t ct_to_i64(uint8_t v)
{
    return v;
}
CT_HD int32_t ct_to_i32(double v)
{
    return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
}
CT_HD int32_t ct_to_i32(float v)
{
    return ct_to_i32((double)v);
}
CT_HD int32_t ct_to_i32(int64_t v)
{
    return (int32_t)(uint32_t)(uint64_t)v;
}
CT_HD int32_t ct_to_i32(int32_t v)
{
    return v;
}
CT_HD int32_t ct_to_i32(uint8_t v)
{
    return v;
}

/* Stores v (any type ct_ld gives, or double) as element i of a DT array. */
template <int DT, typename V> CT_HD void ct_st(void *p, int64_t i, V v)
{
    if constexpr (DT == CT_F32)
        ((float *)p)[i] = (float)v;
    else if constexpr (DT == CT_F64)
        ((double *)p)[i] = (double)v;
    else if constexpr (DT == CT_BF16)
        ((uint16_t *)p)[i] = ct_hd_f32_to_bf16((float)v);
    else if constexpr (DT == CT_F16)
        ((uint16_t *)p)[i] = ct_hd_f32_to_f16((float)v);
    else if constexpr (DT == CT_I64)
        ((int64_t *)p)[i] = ct_to_i64(v);
    else if constexpr (DT == CT_I32)
        ((int32_t *)p)[i] = ct_to_i32(v);
    else if constexpr (DT == CT_U8)
        ((uint8_t *)p)[i] = (uint8_t)ct_to_i32(v);
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
        int64_t x = ct_to_i64(v);
        memcpy(&bits, &x, 8);
        break;
    }
    case CT_I32: {
        int32_t x = ct_to_i32(v);
        memcpy(&bits, &x, 4);
        break;
    }
    case CT_U8: bits = (uint8_t)ct_to_i32(v); break;
    case CT_BOOL: bits = v != 0; break;
    default: break;
    }
    return bits;
}

#endif
