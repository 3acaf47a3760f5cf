/* FILL and COPY: strided writes and copies with conversion between any two
 * dtypes, matching tensor/cpu/copy.c bit for bit. */
#include <string.h>

#include "common.cuh"
#include "copy_body.h"

/* The kernels run the thread bodies of copy_body.h. */
template <int S, int D>
__global__ void convert_kernel(void *out, const void *in, CtCudaIndex ix, int64_t n)
{
    ct_convert_thread<S, D>(ct_cuda_thread(), out, in, ix, n);
}

template <typename W>
__global__ void move_kernel(W *out, const W *in, CtCudaIndex ix, int64_t n)
{
    ct_move_thread<W>(ct_cuda_thread(), out, in, ix, n);
}

template <typename W> __global__ void fill_kernel(W *out, W v, CtCudaIndex ix, int64_t n)
{
    ct_fill_thread<W>(ct_cuda_thread(), out, v, ix, n);
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
    uint64_t bits = ct_fill_bits(out->dtype, p->value);
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
