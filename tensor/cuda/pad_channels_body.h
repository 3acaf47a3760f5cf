/* Private to tensor/cuda: the thread body of a convolution's channel padding
 * (pad_channels.cu), shared with the host harness (hd.h). */
#ifndef CTRAINER_TENSOR_CUDA_PAD_CHANNELS_BODY_H
#define CTRAINER_TENSOR_CUDA_PAD_CHANNELS_BODY_H

#include "hd.h"

/* dst (rows, c_out, plane) <- src (rows, c_in, plane), both contiguous,
 * n = rows * c_out * plane elements of dst: channel ch of dst is channel ch
 * of src when ch < c_in, else all-zero bits (0 in every float dtype). With
 * c_out > c_in this pads with zero channels; with c_out < c_in it keeps the
 * first c_out. Elements move as bits of type S (of the dtype's size). */
template <typename S>
CT_HD void ct_pad_channels_thread(CtThread t, S *dst, const S *src, int64_t c_in,
                                  int64_t c_out, int64_t plane, int64_t n)
{
    CT_THREAD_FOR(i, t, n)
    {
        const int64_t p = i % plane, rc = i / plane, ch = rc % c_out, r = rc / c_out;
        dst[i] = ch < c_in ? src[(r * c_in + ch) * plane + p] : S(0);
    }
}

#endif
