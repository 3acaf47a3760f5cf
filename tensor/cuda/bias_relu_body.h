/* Private to tensor/cuda: the thread body of a convolution's fused bias and
 * ReLU (conv.cu), shared with the host harness (hd.h). Semantics of the
 * CPU convolution's output loop with CtConv2dParams.relu. */
#ifndef CTRAINER_TENSOR_CUDA_BIAS_RELU_BODY_H
#define CTRAINER_TENSOR_CUDA_BIAS_RELU_BODY_H

#include "dtype_hd.h"
#include "hd.h"

/* y: (N, O, HW) contiguous, n = N * O * HW elements (channels last: pass
 * hw = 1, so the channel is i % o). y[i] <- y[i] + b[o] (o the channel of
 * i; no add when b is NULL), rounded once to DT's
 * storage, then ReLU with tensor_relu's expression (NaN and -0 pass). */
template <int DT, typename S = typename CtHdType<DT>::S>
CT_HD void ct_bias_relu_thread(CtThread t, S *y, const S *b, int64_t o, int64_t hw,
                               int64_t n)
{
    typedef CtHdType<DT> H;
    CT_THREAD_FOR(i, t, n)
    {
        S v = y[i];
        if (b) v = H::store(H::load(v) + H::load(b[(i / hw) % o]));
        y[i] = H::load(v) < 0 ? H::store(0) : v;
    }
}

#endif
