/* Private to tensor/: kernel params of the convolution and pooling ops,
 * shared by the front-ends (conv.c, pool.c) and the backends' kernels.
 *
 * Every conv/pool kernel requires contiguous operands (the front-ends make
 * them so). Layouts are NCHW, except that a convolution with params.nhwc
 * has x, y, gx and gy channels last (tensor/layout.c), and w and gw too
 * (stored (O, kh, kw, C/groups)); only backends whose `supports` accepts
 * nhwc get such calls (CUDA).
 *
 * CT_OP_CONV2D            out0 = y (N, O, OH, OW)
 *                         in0 = x (N, C, H, W), in1 = w (O, C/groups, kh, kw),
 *                         in2 = b (O) or NULL; ReLU after the bias when
 *                         params.relu
 * CT_OP_CONV2D_BWD_DATA   out0 = gx (N, C, H, W)         (overwritten)
 *                         in0 = gy (N, O, OH, OW), in1 = w
 * CT_OP_CONV2D_BWD_WEIGHT out0 = gw (O, C/groups, kh, kw) or NULL,
 *                         out1 = gb (O) or NULL          (both overwritten)
 *                         in0 = gy, in1 = x
 * CT_OP_POOL2D            out0 = y (N, C, OH, OW); out1 = argmax (CT_I64,
 *                         same shape, index into the H*W plane) for max
 *                         pooling, NULL otherwise; in0 = x (N, C, H, W)
 * CT_OP_POOL2D_BWD        out0 = gx (N, C, H, W)         (overwritten)
 *                         in0 = gy (N, C, OH, OW), in1 = argmax (max only)
 */
#ifndef CTRAINER_TENSOR_CONV_H
#define CTRAINER_TENSOR_CONV_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CtConv2dParams {
    int64_t n, c, h, w; /* input */
    int64_t o, kh, kw;  /* weight: (o, c / groups, kh, kw) */
    int64_t oh, ow;     /* output */
    int sh, sw;         /* stride, >= 1 */
    int ph, pw;         /* zero padding on both sides, >= 0 */
    int dh, dw;         /* dilation, >= 1 */
    int groups;         /* >= 1, divides c and o */
    bool relu;          /* CONV2D: y <- relu(y) after the bias */
    bool nhwc;          /* operands channels last (see above) */
    /* CT_F32: compute in the operands' dtype; CT_BF16 (autocast): f32
     * operands rounded to bf16, products accumulated in f32, f32 results
     * (the forward and both backward kernels) */
    CtDType autocast;
} CtConv2dParams;

typedef enum CtPoolKind {
    CT_POOL_MAX,          /* window max; padding never wins */
    CT_POOL_AVG,          /* window mean, see count_include_pad */
    CT_POOL_ADAPTIVE_AVG, /* bin i: [floor(i*H/oh), ceil((i+1)*H/oh)) */
} CtPoolKind;

typedef struct CtPool2dParams {
    CtPoolKind kind;
    int64_t n, c, h, w; /* input */
    int64_t oh, ow;     /* output */
    int kh, kw;         /* window (unused for adaptive) */
    int sh, sw;
    int ph, pw;
    /* avg: divide by the window clipped to the padded input (true, PyTorch's
     * default) or by the window clipped to the input (false). */
    bool count_include_pad;
    /* x, y, argmax, gx and gy channels last (tensor/layout.c); only
     * backends whose `supports` accepts it get such calls (CUDA) */
    bool nhwc;
} CtPool2dParams;

/* Window of output (oh, ow) clipped to the input, and its divisor: the
 * CPU kernels and the CUDA thread bodies (tensor/cuda/pool_body.h) share
 * it, so both backends pool the same elements. */
typedef struct CtPoolWindow {
    int64_t h0, h1, w0, w1; /* [h0, h1) x [w0, w1) inside the input */
    int64_t div;            /* avg divisor (0: empty window) */
} CtPoolWindow;

#ifdef __CUDACC__
#define CT_POOL_HD __host__ __device__
#else
#define CT_POOL_HD
#endif

static inline CT_POOL_HD CtPoolWindow ct_pool_window(const CtPool2dParams *p, int64_t oh,
                                                     int64_t ow)
{
    CtPoolWindow r;
    if (p->kind == CT_POOL_ADAPTIVE_AVG) {
        r.h0 = oh * p->h / p->oh;
        r.h1 = ((oh + 1) * p->h + p->oh - 1) / p->oh;
        r.w0 = ow * p->w / p->ow;
        r.w1 = ((ow + 1) * p->w + p->ow - 1) / p->ow;
        r.div = (r.h1 - r.h0) * (r.w1 - r.w0);
        return r;
    }
    int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw;
    /* with ceil_mode a window may hang past the right padding; PyTorch's
     * "include pad" divisor counts only up to the padded edge */
    int64_t h1 = h0 + p->kh, w1 = w0 + p->kw;
    if (h1 > p->h + p->ph) h1 = p->h + p->ph;
    if (w1 > p->w + p->pw) w1 = p->w + p->pw;
    int64_t padded = (h1 - h0) * (w1 - w0);
    r.h0 = h0 > 0 ? h0 : 0;
    r.w0 = w0 > 0 ? w0 : 0;
    r.h1 = h1 < p->h ? h1 : p->h;
    r.w1 = w1 < p->w ? w1 : p->w;
    if (r.h0 >= r.h1 || r.w0 >= r.w1)
        r.div = 0;
    else
        r.div = p->count_include_pad ? padded : (r.h1 - r.h0) * (r.w1 - r.w0);
    return r;
}

#ifdef __cplusplus
}
#endif
#endif
