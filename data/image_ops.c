/* Pixel kernels behind the geometric transforms: raw loops over contiguous
 * CPU images. An image is P planes of h rows of w pixels of `pb` interleaved
 * elements: u8 (H, W, C) is one plane with pb = C, f32 (C, H, W) is C planes
 * with pb = 1, so one loop serves both layouts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

CtStatus data_img_view(const char *op, Tensor *img, DataImg *o)
{
    char buf[96];
    CtDType dt = tensor_dtype(img);
    int nd = tensor_ndim(img);
    if (tensor_device(img).type != CT_DEVICE_CPU)
        return ct_error(CT_ERR_UNSUPPORTED, "%s: CPU images only, got %s", op,
                        tensor_describe(img, buf, sizeof buf));
    if ((dt != CT_U8 && dt != CT_F32) || (nd != 2 && nd != 3))
        return ct_error(CT_ERR_SHAPE,
                        "%s: expects a u8 (H, W, C) or f32 (C, H, W) image (or (H, W)), "
                        "got %s",
                        op, tensor_describe(img, buf, sizeof buf));
    const int64_t *s = tensor_shape(img);
    bool hwc = dt == CT_U8;
    int64_t h = nd == 2 ? s[0] : hwc ? s[0] : s[1];
    int64_t w = nd == 2 ? s[1] : hwc ? s[1] : s[2];
    int64_t c = nd == 2 ? 1 : hwc ? s[2] : s[0];
    if (h < 1 || w < 1 || c < 1)
        return ct_error(CT_ERR_SHAPE, "%s: empty image %s", op,
                        tensor_describe(img, buf, sizeof buf));
    Tensor *t = tensor_contiguous(img);
    if (!t) return ct_last_status();
    *o = (DataImg){.t = t, .op = op, .dt = dt, .ndim = nd, .h = h, .w = w, .c = c};
    o->sh = hwc ? w * c : w;
    o->sw = hwc ? c : 1;
    o->sc = hwc ? 1 : h * w;
    return CT_OK;
}

Tensor *data_img_new(const DataImg *in, int64_t h, int64_t w)
{
    int64_t shape[3];
    if (in->ndim == 2) {
        shape[0] = h, shape[1] = w;
    } else if (in->dt == CT_U8) {
        shape[0] = h, shape[1] = w, shape[2] = in->c;
    } else {
        shape[0] = in->c, shape[1] = h, shape[2] = w;
    }
    return tensor_empty(in->ndim, shape, in->dt, ct_cpu());
}

/* Planes and interleaved elements per pixel. */
static int64_t planes(const DataImg *in)
{
    return in->dt == CT_U8 ? 1 : in->c;
}
static int64_t pix_elems(const DataImg *in)
{
    return in->dt == CT_U8 ? in->c : 1;
}

Tensor *data_img_crop(const DataImg *in, int64_t top, int64_t left, int64_t h, int64_t w)
{
    Tensor *out = data_img_new(in, h, w);
    if (!out) return NULL;
    size_t es = ct_dtype_size(in->dt), pb = (size_t)pix_elems(in) * es;
    const uint8_t *src = tensor_data(in->t);
    uint8_t *dst = tensor_data(out);
    /* the columns [x0, x1) of the window that fall inside the image */
    int64_t x0 = left < 0 ? -left : 0;
    int64_t x1 = left + w > in->w ? in->w - left : w;
    if (x1 < x0) x1 = x0;
    for (int64_t p = 0; p < planes(in); p++) {
        for (int64_t y = 0; y < h; y++) {
            uint8_t *d = dst + ((size_t)(p * h + y) * (size_t)w) * pb;
            int64_t sy = top + y;
            if (sy < 0 || sy >= in->h || x0 == x1) {
                memset(d, 0, (size_t)w * pb);
                continue;
            }
            const uint8_t *s = src + ((size_t)(p * in->h + sy) * (size_t)in->w) * pb;
            memset(d, 0, (size_t)x0 * pb);
            memcpy(d + (size_t)x0 * pb, s + (size_t)(left + x0) * pb,
                   (size_t)(x1 - x0) * pb);
            memset(d + (size_t)x1 * pb, 0, (size_t)(w - x1) * pb);
        }
    }
    return out;
}

Tensor *data_img_hflip(const DataImg *in)
{
    Tensor *out = data_img_new(in, in->h, in->w);
    if (!out) return NULL;
    size_t pb = (size_t)pix_elems(in) * ct_dtype_size(in->dt);
    const uint8_t *src = tensor_data(in->t);
    uint8_t *dst = tensor_data(out);
    int64_t rows = planes(in) * in->h, w = in->w;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *s = src + (size_t)(r * w) * pb;
        uint8_t *d = dst + (size_t)(r * w) * pb;
        for (int64_t x = 0; x < w; x++)
            for (size_t k = 0; k < pb; k++)
                d[(size_t)x * pb + k] = s[(size_t)(w - 1 - x) * pb + k];
    }
    return out;
}

/* ---------------------------------------------------------------- resize */

/* PyTorch's source index and weights for one output coordinate of a linear
 * resize with align_corners=False, rounding as its CPU kernel does: a float
 * scale, the source index computed and kept in double, the weights rounded
 * to float from it (l1 = src - i0, l0 = 1 - l1). (Exact ties in u8 results
 * round the same way only so.) */
typedef struct Tap {
    int64_t i0, i1;
    float w0, w1;
} Tap;

static void compute_taps(Tap *taps, int64_t out, int64_t in, int64_t start)
{
    float scale = (float)in / (float)out;
    for (int64_t d = 0; d < out; d++) {
        if (out == in) { /* PyTorch copies at scale 1 */
            taps[d] = (Tap){start + d, start + d, 1.0f, 0.0f};
            continue;
        }
        double src = (double)scale * ((double)d + 0.5) - 0.5;
        if (src < 0) src = 0;
        int64_t i0 = (int64_t)src;
        if (i0 > in - 1) i0 = in - 1;
        double l = src - (double)i0;
        float l1 = (float)(l < 0 ? 0 : l > 1 ? 1 : l);
        taps[d] = (Tap){start + i0, start + i0 + (i0 < in - 1), 1.0f - l1, l1};
    }
}

typedef struct ResizeJob {
    const DataImg *in;
    const Tap *ty, *tx;
    int64_t oh, ow, pb;
    const void *src;
    void *dst;
} ResizeJob;

static inline uint8_t round_u8(float v)
{
    long r = lrintf(v); /* half to even, as torch.round */
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

/* a * w0 + b * w1 with one rounding of the product a * w0 fused in, the
 * order PyTorch's CPU kernel (built with FMA) evaluates it, rows first and
 * then between rows: bit for bit its float results. */
static inline float lerp_f32(float a, float b, float w0, float w1)
{
    return fmaf(a, w0, b * w1);
}

/* Output row r (plane r / oh, row r % oh) for element type T; STORE turns
 * the float result into a T. PB is the elements per pixel: a constant for
 * the common layouts (RGB u8, planar f32) so the channel loop unrolls. */
#define RESIZE_ROW(NAME, T, STORE, PB)                                                   \
    static void NAME(const ResizeJob *j, int64_t r)                                      \
    {                                                                                    \
        int64_t p = r / j->oh, y = r % j->oh, pb = (PB), iw = j->in->w;                  \
        const Tap ty = j->ty[y];                                                         \
        const T *plane = (const T *)j->src + p * j->in->h * iw * pb;                     \
        const T *r0 = plane + ty.i0 * iw * pb, *r1 = plane + ty.i1 * iw * pb;            \
        T *d = (T *)j->dst + r * j->ow * pb;                                             \
        for (int64_t x = 0; x < j->ow; x++) {                                            \
            const Tap tx = j->tx[x];                                                     \
            int64_t a = tx.i0 * pb, b = tx.i1 * pb;                                      \
            for (int64_t k = 0; k < pb; k++) {                                           \
                float t0 = lerp_f32(r0[a + k], r0[b + k], tx.w0, tx.w1);                 \
                float t1 = lerp_f32(r1[a + k], r1[b + k], tx.w0, tx.w1);                 \
                float v = lerp_f32(t0, t1, ty.w0, ty.w1);                                \
                d[x * pb + k] = STORE(v);                                                \
            }                                                                            \
        }                                                                                \
    }
#define STORE_F32(v) (v)
RESIZE_ROW(resize_row_u8, uint8_t, round_u8, j->pb)
RESIZE_ROW(resize_row_u8_rgb, uint8_t, round_u8, 3)
RESIZE_ROW(resize_row_f32, float, STORE_F32, 1)

Tensor *data_img_resize(const DataImg *in, int64_t top, int64_t left, int64_t ch,
                        int64_t cw, int64_t oh, int64_t ow)
{
    if (ch < 1 || cw < 1 || top < 0 || left < 0 || ch > in->h - top ||
        cw > in->w - left || oh < 1 || ow < 1) {
        ct_error(CT_ERR_INVALID,
                 "%s: cannot resize the %lldx%lld window at (%lld, %lld) of a %lldx%lld "
                 "image to %lldx%lld",
                 in->op, (long long)ch, (long long)cw, (long long)top, (long long)left,
                 (long long)in->h, (long long)in->w, (long long)oh, (long long)ow);
        return NULL;
    }
    Tap *ty = malloc((size_t)oh * sizeof *ty), *tx = malloc((size_t)ow * sizeof *tx);
    Tensor *out = ty && tx ? data_img_new(in, oh, ow) : NULL;
    if (!out) {
        if (!ty || !tx) ct_error(CT_ERR_OOM, "%s: out of memory", in->op);
        free(ty);
        free(tx);
        return NULL;
    }
    compute_taps(ty, oh, ch, top);
    compute_taps(tx, ow, cw, left);
    ResizeJob j = {
        in, ty, tx, oh, ow, pix_elems(in), tensor_data(in->t), tensor_data(out)};
    void (*row)(const ResizeJob *, int64_t) = in->dt == CT_F32 ? resize_row_f32
                                              : j.pb == 3      ? resize_row_u8_rgb
                                                               : resize_row_u8;
    int64_t rows = planes(in) * oh;
    if (rows * ow * j.pb >= DATA_IMG_PAR_MIN) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) row(&j, r);
    }
    free(ty);
    free(tx);
    return out;
}

/* ----------------------------------------------------------------- remap */

#define REMAP_ROWS(T)                                                                    \
    do {                                                                                 \
        const T *s = tensor_data(in->t);                                                 \
        T *d = tensor_data(out), f = (T)fill;                                            \
        for (int64_t p = 0; p < np; p++) {                                               \
            for (int64_t y = 0; y < oh; y++) {                                           \
                T *dr = d + (p * oh + y) * ow * pb;                                      \
                const T *sr = s + (p * in->h + (ys[y] < 0 ? 0 : ys[y])) * in->w * pb;    \
                for (int64_t x = 0; x < ow; x++) {                                       \
                    bool out_px = ys[y] < 0 || xs[x] < 0;                                \
                    for (int64_t k = 0; k < pb; k++)                                     \
                        dr[x * pb + k] = out_px ? f : sr[xs[x] * pb + k];                \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    } while (0)

Tensor *data_img_remap(const DataImg *in, const int64_t *ys, int64_t oh,
                       const int64_t *xs, int64_t ow, double fill)
{
    Tensor *out = data_img_new(in, oh, ow);
    if (!out) return NULL;
    int64_t np = planes(in), pb = pix_elems(in);
    if (in->dt == CT_U8)
        REMAP_ROWS(uint8_t);
    else
        REMAP_ROWS(float);
    return out;
}

/* PyTorch's nearest_idx: identity at scale 1, d / 2 when upscaling by
 * exactly 2, else floor(d * scale) in float, at most in - 1. */
static void nearest_taps(int64_t *idx, int64_t out, int64_t in)
{
    float scale = (float)in / (float)out;
    for (int64_t d = 0; d < out; d++) {
        int64_t s = out == in       ? d
                    : out == 2 * in ? d >> 1
                                    : (int64_t)floorf((float)d * scale);
        idx[d] = s < in - 1 ? s : in - 1;
    }
}

Tensor *data_img_resize_nearest(const DataImg *in, int64_t oh, int64_t ow)
{
    int64_t *ys = malloc((size_t)oh * sizeof *ys), *xs = malloc((size_t)ow * sizeof *xs);
    Tensor *out = NULL;
    if (!ys || !xs) {
        ct_error(CT_ERR_OOM, "%s: out of memory", in->op);
    } else {
        nearest_taps(ys, oh, in->h);
        nearest_taps(xs, ow, in->w);
        out = data_img_remap(in, ys, oh, xs, ow, 0);
    }
    free(ys);
    free(xs);
    return out;
}
