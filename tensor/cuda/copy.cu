/* FILL and COPY: strided writes and copies with conversion between any two
 * dtypes, matching tensor/cpu/copy.c bit for bit. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>

#include "common.cuh"

/* Conversions go through double, as on the CPU: exact for every dtype but
 * i64 beyond 2^53, and bf16/f16 round f64 -> f32 -> half (to nearest even)
 * like the CPU does. Same-dtype copies move raw bits instead. */
template <int DT> __device__ __forceinline__ double ld(const void *p, int64_t i);
template <int DT> __device__ __forceinline__ void st(void *p, int64_t i, double v);

template <> __device__ __forceinline__ double ld<CT_F32>(const void *p, int64_t i)
{
    return (double)((const float *)p)[i];
}
template <> __device__ __forceinline__ double ld<CT_F64>(const void *p, int64_t i)
{
    return ((const double *)p)[i];
}
template <> __device__ __forceinline__ double ld<CT_BF16>(const void *p, int64_t i)
{
    return (double)__bfloat162float(__ushort_as_bfloat16(((const unsigned short *)p)[i]));
}
template <> __device__ __forceinline__ double ld<CT_F16>(const void *p, int64_t i)
{
    return (double)__half2float(__ushort_as_half(((const unsigned short *)p)[i]));
}
template <> __device__ __forceinline__ double ld<CT_I64>(const void *p, int64_t i)
{
    return (double)((const int64_t *)p)[i];
}
template <> __device__ __forceinline__ double ld<CT_I32>(const void *p, int64_t i)
{
    return (double)((const int32_t *)p)[i];
}
template <> __device__ __forceinline__ double ld<CT_U8>(const void *p, int64_t i)
{
    return (double)((const uint8_t *)p)[i];
}
template <> __device__ __forceinline__ double ld<CT_BOOL>(const void *p, int64_t i)
{
    return ((const uint8_t *)p)[i] != 0 ? 1.0 : 0.0;
}

template <> __device__ __forceinline__ void st<CT_F32>(void *p, int64_t i, double v)
{
    ((float *)p)[i] = (float)v;
}
template <> __device__ __forceinline__ void st<CT_F64>(void *p, int64_t i, double v)
{
    ((double *)p)[i] = v;
}
template <> __device__ __forceinline__ void st<CT_BF16>(void *p, int64_t i, double v)
{
    ((unsigned short *)p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
}
template <> __device__ __forceinline__ void st<CT_F16>(void *p, int64_t i, double v)
{
    ((unsigned short *)p)[i] = __half_as_ushort(__float2half_rn((float)v));
}
template <> __device__ __forceinline__ void st<CT_I64>(void *p, int64_t i, double v)
{
    ((int64_t *)p)[i] = (int64_t)v;
}
template <> __device__ __forceinline__ void st<CT_I32>(void *p, int64_t i, double v)
{
    ((int32_t *)p)[i] = (int32_t)v;
}
template <> __device__ __forceinline__ void st<CT_U8>(void *p, int64_t i, double v)
{
    ((uint8_t *)p)[i] = (uint8_t)(int64_t)v;
}
template <> __device__ __forceinline__ void st<CT_BOOL>(void *p, int64_t i, double v)
{
    ((uint8_t *)p)[i] = v != 0;
}

/* out (operand 0) <- convert(in (operand 1)), both strided. */
template <int S, int D>
__global__ void convert_kernel(void *out, const void *in, CtCudaIndex ix, int64_t n)
{
    CT_CUDA_FOR(i, n)
    {
        int64_t off[2];
        ct_cuda_offsets<2>(ix, i, off);
        st<D>(out, off[0], ld<S>(in, off[1]));
    }
}

/* Same dtype: raw element moves (W is an unsigned type of the element size). */
template <typename W>
__global__ void move_kernel(W *out, const W *in, CtCudaIndex ix, int64_t n)
{
    CT_CUDA_FOR(i, n)
    {
        int64_t off[2];
        ct_cuda_offsets<2>(ix, i, off);
        out[off[0]] = in[off[1]];
    }
}

/* out (operand 0) <- the element bits `v`. */
template <typename W> __global__ void fill_kernel(W *out, W v, CtCudaIndex ix, int64_t n)
{
    CT_CUDA_FOR(i, n)
    {
        int64_t off[1];
        ct_cuda_offsets<1>(ix, i, off);
        out[off[0]] = v;
    }
}

typedef void (*ConvertKernel)(void *, const void *, CtCudaIndex, int64_t);

#define ROW(S)                                                                           \
    {                                                                                    \
        convert_kernel<S, CT_F32>, convert_kernel<S, CT_F64>,                            \
            convert_kernel<S, CT_BF16>, convert_kernel<S, CT_F16>,                       \
            convert_kernel<S, CT_I64>, convert_kernel<S, CT_I32>,                        \
            convert_kernel<S, CT_U8>, convert_kernel<S, CT_BOOL>                         \
    }
static const ConvertKernel convert_kernels[CT_DTYPE_COUNT][CT_DTYPE_COUNT] = {
    ROW(CT_F32), ROW(CT_F64), ROW(CT_BF16), ROW(CT_F16),
    ROW(CT_I64), ROW(CT_I32), ROW(CT_U8),   ROW(CT_BOOL)};
#undef ROW

template <typename W>
static CtStatus launch_move(CtCudaCtx *c, void *out, const void *in,
                            const CtCudaIndex &ix, int64_t n)
{
    move_kernel<W><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        (W *)out, (const W *)in, ix, n);
    CT_CUDA_CHECK_LAUNCH("move_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_copy(const CtOpCall *call)
{
    Tensor *out = call->out[0];
    const Tensor *in = call->in[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CtCudaIndex ix;
    const Tensor *ops[2] = {out, in};
    int64_t n = ct_cuda_index_init(&ix, out->ndim, out->shape, 2, ops);
    if (n == 0) return CT_OK;
    void *po = ct_ptr(out);
    const void *pi = ct_ptr(in);
    if (in->dtype != out->dtype) {
        convert_kernels[in->dtype]
                       [out->dtype]<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
                           po, pi, ix, n);
        CT_CUDA_CHECK_LAUNCH("convert_kernel", c->stream);
        return CT_OK;
    }
    size_t es = ct_dtype_size(out->dtype);
    if (ix.ndim == 1 && ix.stride[0][0] == 1 && ix.stride[1][0] == 1) {
        CT_CUDA_CHECK(
            cudaMemcpyAsync(po, pi, (size_t)n * es, cudaMemcpyDeviceToDevice, c->stream));
        return CT_OK;
    }
    switch (es) {
    case 1: return launch_move<uint8_t>(c, po, pi, ix, n);
    case 2: return launch_move<uint16_t>(c, po, pi, ix, n);
    case 4: return launch_move<uint32_t>(c, po, pi, ix, n);
    default: return launch_move<uint64_t>(c, po, pi, ix, n);
    }
}

/* The fill value converted on the host exactly as the CPU's stores do. */
static uint64_t fill_bits(CtDType dt, double v)
{
    uint64_t bits = 0;
    switch (dt) {
    case CT_F32: {
        float f = (float)v;
        memcpy(&bits, &f, 4);
        break;
    }
    case CT_F64: memcpy(&bits, &v, 8); break;
    case CT_BF16: bits = ct_f32_to_bf16((float)v); break;
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

template <typename W>
static CtStatus launch_fill(CtCudaCtx *c, void *out, uint64_t bits, const CtCudaIndex &ix,
                            int64_t n)
{
    fill_kernel<W>
        <<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>((W *)out, (W)bits, ix, n);
    CT_CUDA_CHECK_LAUNCH("fill_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_fill(const CtOpCall *call)
{
    const CtFillParams *p = (const CtFillParams *)call->params;
    Tensor *out = call->out[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CtCudaIndex ix;
    const Tensor *ops[1] = {out};
    int64_t n = ct_cuda_index_init(&ix, out->ndim, out->shape, 1, ops);
    if (n == 0) return CT_OK;
    uint64_t bits = fill_bits(out->dtype, p->value);
    void *po = ct_ptr(out);
    switch (ct_dtype_size(out->dtype)) {
    case 1: return launch_fill<uint8_t>(c, po, bits, ix, n);
    case 2: return launch_fill<uint16_t>(c, po, bits, ix, n);
    case 4: return launch_fill<uint32_t>(c, po, bits, ix, n);
    default: return launch_fill<uint64_t>(c, po, bits, ix, n);
    }
}

/* Every dtype, both directions, any strides: no supports function needed. */
void ct_cuda_register_copy(CtKernelFn *k, CtSupportsFn *s)
{
    (void)s;
    k[CT_OP_FILL] = cuda_fill;
    k[CT_OP_COPY] = cuda_copy;
}
