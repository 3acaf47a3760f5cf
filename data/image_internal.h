/* Private to data/: image views, pixel kernels, transform internals and the
 * scalar draws random transforms make. */
#ifndef CTRAINER_DATA_IMAGE_INTERNAL_H
#define CTRAINER_DATA_IMAGE_INTERNAL_H

#include "ctrainer/data.h"

/* Kernels fork OpenMP threads only from this many output elements: a
 * fork/join costs hundreds of microseconds on small VMs (the tensor layer
 * uses the same threshold). */
#define DATA_IMG_PAR_MIN ((int64_t)1 << 20)

/* An image tensor seen as (h, w, c) with element strides. u8 images are
 * (H, W, C) or (H, W); f32 images are (C, H, W) or (H, W). */
typedef struct DataImg {
    Tensor *t; /* contiguous CPU tensor (a reference in the open scope) */
    const char *op;
    CtDType dt; /* CT_U8 or CT_F32 */
    int ndim;   /* 2 or 3 */
    int64_t h, w, c;
    int64_t sh, sw, sc;
} DataImg;

/* Validates img for transform `op` and fills out. */
CtStatus data_img_view(const char *op, Tensor *img, DataImg *out);
/* An uninitialised image of in's dtype, layout and channels, sized (h, w). */
Tensor *data_img_new(const DataImg *in, int64_t h, int64_t w);
/* The (h, w) window at (top, left); pixels outside the image are zero. */
Tensor *data_img_crop(const DataImg *in, int64_t top, int64_t left, int64_t h, int64_t w);
/* Left-right mirror. */
Tensor *data_img_hflip(const DataImg *in);
/* The (oh, ow) image whose pixel (y, x) is in's pixel (ys[y], xs[x]), or
 * `fill` (every channel) where ys[y] or xs[x] is -1. Indices must be -1 or
 * inside the image. */
Tensor *data_img_remap(const DataImg *in, const int64_t *ys, int64_t oh,
                       const int64_t *xs, int64_t ow, double fill);
/* Nearest resize to (oh, ow) as PyTorch's interpolate(mode="nearest"). */
Tensor *data_img_resize_nearest(const DataImg *in, int64_t oh, int64_t ow);
/* Bilinear resize (align_corners=False) of the window (top, left, ch, cw)
 * to (oh, ow). CT_ERR_INVALID unless the window is at least 1x1 and lies
 * inside the image and oh, ow >= 1. */
Tensor *data_img_resize(const DataImg *in, int64_t top, int64_t left, int64_t ch,
                        int64_t cw, int64_t oh, int64_t ow);

/* -------------------------------------------------------------- decoders */

/* Decoded pixels: malloc'd h*w*c bytes, row-major (H, W, C), c = 1 or 3. */
typedef struct DataPixels {
    uint8_t *px;
    int64_t h, w, c;
} DataPixels;

/* Decoders behind data_image_decode; errors name `name`. On failure
 * nothing is allocated. */
CtStatus data_png_decode(const uint8_t *buf, size_t len, const char *name,
                         DataPixels *out);
CtStatus data_jpeg_decode(const uint8_t *buf, size_t len, const char *name,
                          DataPixels *out);

/* ------------------------------------------------------------ transforms */

struct DataTransformer {
    const char *name;
    /* `stream` tells apart transforms of one pipeline: a random transform
     * draws from data_transform_rng(ctx, stream). */
    Tensor *(*apply)(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                     uint64_t stream);
    void (*free)(DataTransformer *t); /* NULL: free(t) */
};

Tensor *data_transform_apply_stream(const DataTransformer *t, Tensor *img,
                                    const DataCtx *ctx, uint64_t stream);
/* The generator a random transform at `stream` draws from. */
CtGenerator data_transform_rng(const DataCtx *ctx, uint64_t stream);
/* Uniform double in [0, 1) (53 bits; one Philox block per draw). */
double data_rng_uniform(CtGenerator *g);
/* Uniform integer in [lo, hi), hi > lo. */
int64_t data_rng_int(CtGenerator *g, int64_t lo, int64_t hi);

/* Where coordinate x of a side of n reads from under torch's reflect
 * padding (the edge not repeated): x itself inside [0, n), mirrored around
 * 0 or n - 1 outside (|x| < n and x < 2n - 1). */
static inline int64_t data_reflect_index(int64_t x, int64_t n)
{
    return x < 0 ? -x : x >= n ? 2 * (n - 1) - x : x;
}

#endif
