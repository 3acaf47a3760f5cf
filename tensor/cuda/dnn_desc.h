/* Private to tensor/cuda: the arguments of the cuDNN calls (conv.cu,
 * bnorm.cu) as plain values, built by pure functions that name no CUDA
 * type, so they are unit tested on the CPU (tests/tensor/test_dnn_desc.c).
 * C and C++.
 *
 * Tensors are 4-D NCHW with explicit strides (cudnnSetTensorNdDescriptor),
 * every size and stride in cuDNN's 32-bit ints. The algorithm of a
 * convolution comes from cuDNN's heuristics (the *_v7 queries), filtered by
 * ct_dnn_pick: the first result in cuDNN's order that succeeded, fits the
 * workspace cap, is deterministic when the switch asks for it, and uses
 * tensor cores only where the dtype allows (f32 only with TF32 allowed).
 */
#ifndef CTRAINER_TENSOR_CUDA_DNN_DESC_H
#define CTRAINER_TENSOR_CUDA_DNN_DESC_H

#include <limits.h>
#include <stddef.h>

#include "../conv.h"
#include "../norm.h"

/* Most workspace a convolution algorithm may take from the caching
 * allocator; faster algorithms that need more are skipped. */
#define CT_DNN_WORKSPACE_MAX ((size_t)256 << 20)

typedef struct CtDnnTensor {
    int dims[4], strides[4]; /* N, C, H, W; in elements */
} CtDnnTensor;

/* cuDNN's math types (cudnnMathType_t of the same name). */
typedef enum CtDnnMath {
    CT_DNN_MATH_DEFAULT,   /* f64: no tensor cores exist for it */
    CT_DNN_MATH_TENSOR_OP, /* bf16, f16; f32 when TF32 is allowed */
    CT_DNN_MATH_FMA,       /* f32 without TF32: no tensor-core algorithms */
} CtDnnMath;

typedef struct CtDnnConv {
    CtDnnTensor x, y; /* x (n, c, h, w), y (n, o, oh, ow) */
    int w[4];         /* filter (o, c / groups, kh, kw) */
    int filter_nhwc;  /* 1: the filter stored (o, kh, kw, c / groups); an
                       * int, so the struct (hashed whole as the algorithm
                       * cache's key) has no padding */
    int bias[4];      /* (1, o, 1, 1), broadcast over y */
    int pad[2], stride[2], dilation[2], groups;
    CtDType data;    /* of x, w, y */
    CtDType compute; /* accumulation: f64 for f64, else f32 */
    CtDnnMath math;
} CtDnnConv;

/* One heuristic result of cuDNN (cudnnConvolution*AlgoPerf_t). */
typedef struct CtDnnAlgo {
    int algo;
    bool ok;            /* status == CUDNN_STATUS_SUCCESS */
    bool deterministic; /* determinism == CUDNN_DETERMINISTIC */
    bool tensor_op;     /* mathType == CUDNN_TENSOR_OP_MATH(_ALLOW_CONVERSION) */
    size_t memory;      /* workspace bytes */
} CtDnnAlgo;

/* Fills t for a tensor of this shape and these strides (elements). Records
 * CT_ERR_UNSUPPORTED naming `op` when a size or stride exceeds INT_MAX, or
 * the elements the tensor spans do (cuDNN limits a tensor, with the gaps
 * its strides leave, to 2^31 - 1 elements). */
static inline CtStatus ct_dnn_tensor(const char *op, const int64_t shape[4],
                                     const int64_t stride[4], CtDnnTensor *t)
{
    bool fits = true, empty = false;
    int64_t span = 1; /* the last element's offset + 1 */
    for (int i = 0; i < 4; i++) {
        fits = fits && shape[i] >= 0 && shape[i] <= INT_MAX && stride[i] >= 0 &&
               stride[i] <= INT_MAX;
        empty = empty || shape[i] == 0;
        if (fits && shape[i] > 0 && span <= INT_MAX) span += (shape[i] - 1) * stride[i];
    }
    if (!fits || (!empty && span > INT_MAX))
        return ct_error(
            CT_ERR_UNSUPPORTED,
            "%s: tensor (%lld, %lld, %lld, %lld) exceeds cuDNN's 32-bit sizes "
            "on cuda",
            op, (long long)shape[0], (long long)shape[1], (long long)shape[2],
            (long long)shape[3]);
    for (int i = 0; i < 4; i++) {
        t->dims[i] = (int)shape[i];
        t->strides[i] = (int)stride[i];
    }
    return CT_OK;
}

/* As ct_dnn_tensor for a contiguous NCHW tensor. */
static inline CtStatus ct_dnn_tensor_nchw(const char *op, int64_t n, int64_t c, int64_t h,
                                          int64_t w, CtDnnTensor *t)
{
    const int64_t shape[4] = {n, c, h, w};
    const int64_t stride[4] = {c * h * w, h * w, w, 1};
    return ct_dnn_tensor(op, shape, stride, t);
}

/* As ct_dnn_tensor for an (n, c, h, w) tensor, contiguous NCHW or, when
 * nhwc, channels last (strides (h*w*c, 1, w*c, c)). */
static inline CtStatus ct_dnn_tensor_4d(const char *op, int64_t n, int64_t c, int64_t h,
                                        int64_t w, bool nhwc, CtDnnTensor *t)
{
    if (!nhwc) return ct_dnn_tensor_nchw(op, n, c, h, w, t);
    const int64_t shape[4] = {n, c, h, w};
    const int64_t stride[4] = {h * w * c, 1, w * c, c};
    return ct_dnn_tensor(op, shape, stride, t);
}

/* The output extent of a convolution along one dim (cuDNN's formula). */
static inline int64_t ct_dnn_conv_out(int64_t in, int64_t k, int pad, int stride,
                                      int dilation)
{
    return (in + 2 * (int64_t)pad - (int64_t)dilation * (k - 1) - 1) / stride + 1;
}

/* Whether tensor-core algorithms may be chosen for data of dtype dt. */
static inline bool ct_dnn_tensor_ops_ok(CtDType dt, bool allow_tf32)
{
    return dt == CT_BF16 || dt == CT_F16 || (dt == CT_F32 && allow_tf32);
}

/* The dtype cuDNN convolves in for operands of dtype dt: their own, or
 * under autocast (f32 operands, p->autocast bf16 or f16) the low type.
 * cuDNN takes x, w and y of one dtype, so conv.cu rounds the f32 operands
 * to it, convolves with f32 accumulation and widens the results to f32
 * (the CPU's contract, with the results rounded to the low type once more,
 * as PyTorch's autocast conv returns them). */
static inline CtDType ct_dnn_conv_dtype(const CtConv2dParams *p, CtDType dt)
{
    return dt == CT_F32 && (p->autocast == CT_BF16 || p->autocast == CT_F16) ? p->autocast
                                                                             : dt;
}

/* Padding the input channels of a bf16/f16 convolution to a multiple of 8
 * (pad_channels.cu) pays for its copies only when the convolution itself
 * is large: at least this many multiply-adds per input channel. ResNet's
 * 7×7 stem over 3-channel 224² images at batch 128 does 5e9, where cuDNN
 * otherwise picks legacy (non-tensor-core) kernels; BasicNet's 1-channel
 * first layer (1.2e7 at batch 64) stays as it is. */
#define CT_DNN_PAD_MIN_WORK ((double)(1 << 26))

/* The input-channel count p's convolution runs with on dtype dt: p->c
 * rounded up to a multiple of 8 for bf16 and f16 without groups when the
 * work reaches CT_DNN_PAD_MIN_WORK, else p->c (always for channels last:
 * the padding copies are NCHW). */
static inline int64_t ct_dnn_padded_channels(const CtConv2dParams *p, CtDType dt)
{
    if ((dt != CT_BF16 && dt != CT_F16) || p->groups != 1 || p->c % 8 == 0 || p->nhwc)
        return p->c;
    double work =
        (double)p->n * (double)p->o * (double)(p->oh * p->ow) * (double)(p->kh * p->kw);
    return work >= CT_DNN_PAD_MIN_WORK ? (p->c + 7) / 8 * 8 : p->c;
}

/* The operands of a convolution call of kind op that have the input
 * channels as dim 1, as bit masks over in[] and out[]: x and w (forward),
 * w and dx (backward data), x and dw (backward weight). */
static inline void ct_dnn_channel_operands(CtOp op, unsigned *in, unsigned *out)
{
    *in = op == CT_OP_CONV2D ? 0x3u : 0x2u;
    *out = op == CT_OP_CONV2D ? 0x0u : 0x1u;
}

/* Fills d for p over operands of dtype dt (f32, f64, bf16 or f16), the
 * dtype cuDNN convolves in (ct_dnn_conv_dtype; p->autocast is not read).
 * Records CT_ERR_UNSUPPORTED for sizes beyond 32 bits, CT_ERR_DTYPE for
 * another dtype, and CT_ERR_INVALID when p's output size is not cuDNN's. */
static inline CtStatus ct_dnn_conv(const CtConv2dParams *p, CtDType dt, bool allow_tf32,
                                   CtDnnConv *d)
{
    if (dt != CT_F32 && dt != CT_F64 && dt != CT_BF16 && dt != CT_F16)
        return ct_error(CT_ERR_DTYPE, "conv2d: cuDNN has no convolution for %s on cuda",
                        ct_dtype_name(dt));
    if (p->oh != ct_dnn_conv_out(p->h, p->kh, p->ph, p->sh, p->dh) ||
        p->ow != ct_dnn_conv_out(p->w, p->kw, p->pw, p->sw, p->dw))
        return ct_error(CT_ERR_INVALID,
                        "conv2d: output %lldx%lld does not match input %lldx%lld, kernel "
                        "%lldx%lld, stride %dx%d, padding %dx%d, dilation %dx%d",
                        (long long)p->oh, (long long)p->ow, (long long)p->h,
                        (long long)p->w, (long long)p->kh, (long long)p->kw, p->sh, p->sw,
                        p->ph, p->pw, p->dh, p->dw);
    CtDnnTensor wt;
    CtStatus st = ct_dnn_tensor_4d("conv2d", p->n, p->c, p->h, p->w, p->nhwc, &d->x);
    if (st == CT_OK)
        st = ct_dnn_tensor_4d("conv2d", p->n, p->o, p->oh, p->ow, p->nhwc, &d->y);
    if (st == CT_OK)
        st = ct_dnn_tensor_nchw("conv2d", p->o, p->c / p->groups, p->kh, p->kw, &wt);
    if (st != CT_OK) return st;
    for (int i = 0; i < 4; i++) d->w[i] = wt.dims[i];
    d->filter_nhwc = p->nhwc;
    d->bias[0] = 1, d->bias[1] = (int)p->o, d->bias[2] = 1, d->bias[3] = 1;
    d->pad[0] = p->ph, d->pad[1] = p->pw;
    d->stride[0] = p->sh, d->stride[1] = p->sw;
    d->dilation[0] = p->dh, d->dilation[1] = p->dw;
    d->groups = p->groups;
    d->data = dt;
    d->compute = dt == CT_F64 ? CT_F64 : CT_F32;
    d->math = dt == CT_F64                           ? CT_DNN_MATH_DEFAULT
              : ct_dnn_tensor_ops_ok(dt, allow_tf32) ? CT_DNN_MATH_TENSOR_OP
                                                     : CT_DNN_MATH_FMA;
    return CT_OK;
}

/* The index in r[0..n) (cuDNN's order: fastest first) of the algorithm to
 * run, or -1 when none qualifies. */
static inline int ct_dnn_pick(const CtDnnAlgo *r, int n, bool deterministic,
                              bool tensor_ops_ok, size_t max_workspace)
{
    for (int i = 0; i < n; i++) {
        if (!r[i].ok || r[i].memory > max_workspace) continue;
        if (deterministic && !r[i].deterministic) continue;
        if (r[i].tensor_op && !tensor_ops_ok) continue;
        return i;
    }
    return -1;
}

/* cuDNN's batch norm (CUDNN_BATCHNORM_SPATIAL: statistics per channel over
 * N and the spatial dims) for CtBatchNormParams: x (n, c, inner) as the
 * NCHW tensor (n, c, inner, 1), scale/bias/statistics (1, c, 1, 1) of the
 * same dtype (f32 or f64); with p->nhwc, x is (n, c, inner, 1) with NHWC
 * strides. cuDNN's running-average factor is PyTorch's
 * momentum (r = (1 - f) r + f stat, with the unbiased variance), its saved
 * mean and inverse variance are stats rows 0 and 1, and its epsilon is
 * PyTorch's eps (cuDNN 9's minimum is 0). */
typedef struct CtDnnBatchNorm {
    CtDnnTensor x;     /* also y, dy and dx */
    CtDnnTensor param; /* (1, c, 1, 1) */
    double eps, factor;
    bool persistent;     /* CUDNN_BATCHNORM_SPATIAL_PERSISTENT (channels-last
                          * training, where cuDNN's fast NHWC kernels are),
                          * else CUDNN_BATCHNORM_SPATIAL */
    CtDType dtype;       /* x, y, dy, dx */
    CtDType param_dtype; /* scale, bias, statistics: f32 for bf16/f16 data */
} CtDnnBatchNorm;

/* Fills d for p over data of dtype dt. Records CT_ERR_DTYPE for a dtype
 * other than f32, f64, bf16 and f16 and CT_ERR_UNSUPPORTED for sizes beyond
 * 32 bits. */
static inline CtStatus ct_dnn_batch_norm(const CtBatchNormParams *p, CtDType dt,
                                         CtDnnBatchNorm *d)
{
    if (dt != CT_F32 && dt != CT_F64 && dt != CT_BF16 && dt != CT_F16)
        return ct_error(CT_ERR_DTYPE, "batch_norm: no cuDNN batch norm for %s on cuda",
                        ct_dtype_name(dt));
    CtStatus st = ct_dnn_tensor_4d("batch_norm", p->n, p->c, p->inner, 1, p->nhwc, &d->x);
    if (st == CT_OK) st = ct_dnn_tensor_nchw("batch_norm", 1, p->c, 1, 1, &d->param);
    if (st != CT_OK) return st;
    d->eps = p->eps;
    d->factor = p->momentum;
    d->persistent = p->nhwc && p->training;
    d->dtype = dt;
    d->param_dtype = ct_bn_param_dtype(dt);
    return CT_OK;
}

#endif
