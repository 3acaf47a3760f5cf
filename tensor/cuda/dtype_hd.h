/* Private to tensor/cuda: the storage type S and compute type C of a
 * dtype in thread bodies, with the conversions. bf16 and f16 are stored as
 * their 16 bits and computed in f32, rounding to nearest even on store (as
 * the CPU kernels do). */
#ifndef CTRAINER_TENSOR_CUDA_DTYPE_HD_H
#define CTRAINER_TENSOR_CUDA_DTYPE_HD_H

#include "copy_body.h"

/* Storage type S and compute type C of dtype DT, with the conversions;
 * i64 and i32 also name their unsigned type U. */
template <typename S_> struct CtHdPlain {
    typedef S_ S;
    typedef S_ C;
    static CT_HD C load(S v) { return v; }
    static CT_HD S store(C v) { return v; }
};
template <int DT> struct CtHdType;
template <> struct CtHdType<CT_F32> : CtHdPlain<float> {
};
template <> struct CtHdType<CT_F64> : CtHdPlain<double> {
};
template <> struct CtHdType<CT_I64> : CtHdPlain<int64_t> {
    typedef uint64_t U;
};
template <> struct CtHdType<CT_I32> : CtHdPlain<int32_t> {
    typedef uint32_t U;
};
template <> struct CtHdType<CT_U8> : CtHdPlain<uint8_t> {
};
template <> struct CtHdType<CT_BOOL> : CtHdPlain<uint8_t> {
};
template <> struct CtHdType<CT_BF16> {
    typedef uint16_t S;
    typedef float C;
    static CT_HD C load(S v) { return ct_hd_bf16_to_f32(v); }
    static CT_HD S store(C v) { return ct_hd_f32_to_bf16(v); }
};
template <> struct CtHdType<CT_F16> {
    typedef uint16_t S;
    typedef float C;
    static CT_HD C load(S v) { return ct_hd_f16_to_f32(v); }
    static CT_HD S store(C v) { return ct_hd_f32_to_f16(v); }
};

#endif
