/* Geometric transforms: Resize, CenterCrop, RandomCrop, RandomResizedCrop,
 * RandomHorizontalFlip, RandomVerticalFlip. Parameters follow torchvision; the pixel work
 * is in image_ops.c. */
#include <math.h>
#include <stdlib.h>

#include "image_internal.h"

typedef struct Geom {
    DataTransformer base;
    int64_t h, w;            /* output size; Resize(shorter): h is the shorter side */
    DataInterpolation mode;  /* Resize */
    DataRandomCropArgs crop; /* RandomCrop */
    double p;                /* Random*Flip */
    double scale[2], ratio[2];
} Geom;

static Geom *geom_new(const char *name,
                      Tensor *(*apply)(const DataTransformer *, Tensor *, const DataCtx *,
                                       uint64_t))
{
    Geom *g = calloc(1, sizeof *g);
    if (!g) {
        ct_error(CT_ERR_OOM, "%s: out of memory", name);
        return NULL;
    }
    g->base = (DataTransformer){name, apply, NULL};
    return g;
}

static bool check_size(const char *name, int64_t h, int64_t w)
{
    if (h >= 1 && w >= 1) return true;
    ct_error(CT_ERR_INVALID, "%s: size must be positive, got %lldx%lld", name,
             (long long)h, (long long)w);
    return false;
}

static bool need_ctx(const char *name, const DataCtx *ctx)
{
    if (ctx) return true;
    ct_error(CT_ERR_NULL,
             "%s: NULL ctx (random transforms draw from the sample's DataCtx)", name);
    return false;
}

/* ---------------------------------------------------------------- Resize */

static Tensor *resize_to(DataImg *in, int64_t oh, int64_t ow, DataInterpolation mode)
{
    if (oh == in->h && ow == in->w) return in->t; /* identity at scale 1 */
    if (mode == DATA_INTERP_NEAREST) return data_img_resize_nearest(in, oh, ow);
    return data_img_resize(in, 0, 0, in->h, in->w, oh, ow);
}

static Tensor *resize_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                            uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (data_img_view(t->name, img, &in) != CT_OK) return NULL;
    return resize_to(&in, g->h, g->w, g->mode);
}

static Tensor *resize_shorter_apply(const DataTransformer *t, Tensor *img,
                                    const DataCtx *ctx, uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (data_img_view(t->name, img, &in) != CT_OK) return NULL;
    bool wide = in.w >= in.h;
    int64_t sh = wide ? in.h : in.w, lg = wide ? in.w : in.h;
    /* Python's int(size * long / short) */
    int64_t nl = (int64_t)((double)g->h * (double)lg / (double)sh);
    if (nl < 1) nl = 1;
    return wide ? resize_to(&in, g->h, nl, g->mode) : resize_to(&in, nl, g->h, g->mode);
}

static bool check_mode(DataInterpolation mode)
{
    if (mode == DATA_INTERP_BILINEAR || mode == DATA_INTERP_NEAREST) return true;
    ct_error(CT_ERR_INVALID, "Resize: unknown interpolation mode %d", (int)mode);
    return false;
}

DataTransformer *data_transform_resize_ex(int64_t h, int64_t w, DataInterpolation mode)
{
    if (!check_size("Resize", h, w) || !check_mode(mode)) return NULL;
    Geom *g = geom_new("Resize", resize_apply);
    if (!g) return NULL;
    g->h = h, g->w = w, g->mode = mode;
    return &g->base;
}

DataTransformer *data_transform_resize_shorter_ex(int64_t size, DataInterpolation mode)
{
    if (!check_size("Resize", size, size) || !check_mode(mode)) return NULL;
    Geom *g = geom_new("Resize", resize_shorter_apply);
    if (!g) return NULL;
    g->h = g->w = size, g->mode = mode;
    return &g->base;
}

DataTransformer *data_transform_resize(int64_t h, int64_t w)
{
    return data_transform_resize_ex(h, w, DATA_INTERP_BILINEAR);
}

DataTransformer *data_transform_resize_shorter(int64_t size)
{
    return data_transform_resize_shorter_ex(size, DATA_INTERP_BILINEAR);
}

/* ------------------------------------------------------------ CenterCrop */

/* Start of a centred window of `crop` in `size`, in image coordinates
 * (negative when torchvision would pad first: pad (crop - size) // 2 before,
 * then start at round((padded - crop) / 2), half to even). */
static int64_t center_start(int64_t size, int64_t crop)
{
    int64_t before = crop > size ? (crop - size) / 2 : 0;
    int64_t padded = crop > size ? crop : size;
    return (int64_t)nearbyint((double)(padded - crop) / 2.0) - before;
}

static Tensor *center_crop_apply(const DataTransformer *t, Tensor *img,
                                 const DataCtx *ctx, uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (data_img_view(t->name, img, &in) != CT_OK) return NULL;
    return data_img_crop(&in, center_start(in.h, g->h), center_start(in.w, g->w), g->h,
                         g->w);
}

DataTransformer *data_transform_center_crop(int64_t h, int64_t w)
{
    if (!check_size("CenterCrop", h, w)) return NULL;
    Geom *g = geom_new("CenterCrop", center_crop_apply);
    if (!g) return NULL;
    g->h = h, g->w = w;
    return &g->base;
}

/* ------------------------------------------------------------ RandomCrop */

/* Where padded coordinate q (of a side n padded by `pad` on both ends)
 * reads from: a coordinate in [0, n), or -1 for the fill. Needs pad < n for
 * reflect and pad <= n for symmetric (checked by the caller). */
static int64_t pad_index(int64_t q, int64_t n, int64_t pad, DataPadMode m)
{
    int64_t x = q < 0 ? q : q - pad; /* q -1 stays the fill */
    if (q < 0 || (x >= 0 && x < n)) return x;
    switch (m) {
    case DATA_PAD_EDGE: return x < 0 ? 0 : n - 1;
    case DATA_PAD_REFLECT: return data_reflect_index(x, n);
    case DATA_PAD_SYMMETRIC: return x < 0 ? -x - 1 : 2 * n - 1 - x;
    default: return -1;
    }
}

/* One axis of a RandomCrop: the side n, padded by p (`padding`), then by d
 * (pad_if_needed) on both ends. */
typedef struct CropAxis {
    int64_t n, p, d;
} CropAxis;

static int64_t axis_padded(CropAxis a)
{
    return a.n + 2 * a.p + 2 * a.d;
}

static bool axis_check(const DataRandomCropArgs *c, CropAxis a, const char *side)
{
    DataPadMode m = c->padding_mode;
    if (m != DATA_PAD_REFLECT && m != DATA_PAD_SYMMETRIC) return true;
    int64_t n1 = a.n + 2 * a.p;
    bool ok = m == DATA_PAD_REFLECT ? a.p < a.n && a.d < n1 : a.p <= a.n && a.d <= n1;
    if (!ok)
        ct_error(CT_ERR_SHAPE,
                 "RandomCrop: %s padding of %lld then %lld pixels is too wide for %s "
                 "padding of a %s of %lld",
                 side, (long long)a.p, (long long)a.d,
                 m == DATA_PAD_REFLECT ? "reflect" : "symmetric", side, (long long)a.n);
    return ok;
}

/* Source coordinates of the window [start, start + len) of the padded axis. */
static void axis_map(const DataRandomCropArgs *c, CropAxis a, int64_t start, int64_t len,
                     int64_t *idx)
{
    for (int64_t k = 0; k < len; k++) {
        int64_t q = pad_index(start + k, a.n + 2 * a.p, a.d, c->padding_mode);
        idx[k] = pad_index(q, a.n, a.p, c->padding_mode);
    }
}

static Tensor *crop_window(const Geom *g, const DataImg *in, CropAxis ay, CropAxis ax,
                           int64_t top, int64_t left)
{
    int64_t *ys = malloc((size_t)g->h * sizeof *ys),
            *xs = malloc((size_t)g->w * sizeof *xs);
    Tensor *out = NULL;
    if (!ys || !xs) {
        ct_error(CT_ERR_OOM, "RandomCrop: out of memory");
    } else {
        axis_map(&g->crop, ay, top, g->h, ys);
        axis_map(&g->crop, ax, left, g->w, xs);
        out = data_img_remap(in, ys, g->h, xs, g->w, g->crop.fill);
    }
    free(ys);
    free(xs);
    return out;
}

static Tensor *random_crop_apply(const DataTransformer *t, Tensor *img,
                                 const DataCtx *ctx, uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    const DataRandomCropArgs *c = &g->crop;
    DataImg in;
    if (!need_ctx(t->name, ctx) || data_img_view(t->name, img, &in) != CT_OK) return NULL;
    CropAxis ay = {in.h, c->padding, 0}, ax = {in.w, c->padding, 0};
    if (c->pad_if_needed && axis_padded(ax) < g->w) ax.d = g->w - axis_padded(ax);
    if (c->pad_if_needed && axis_padded(ay) < g->h) ay.d = g->h - axis_padded(ay);
    int64_t ph = axis_padded(ay), pw = axis_padded(ax);
    if (ph < g->h || pw < g->w) {
        ct_error(CT_ERR_SHAPE,
                 "RandomCrop: crop %lldx%lld is larger than the padded image %lldx%lld",
                 (long long)g->h, (long long)g->w, (long long)ph, (long long)pw);
        return NULL;
    }
    if (!axis_check(c, ax, "width") || !axis_check(c, ay, "height")) return NULL;
    bool padded = ph > in.h || pw > in.w;
    if (padded && c->padding_mode == DATA_PAD_CONSTANT && in.dt == CT_U8 &&
        !(c->fill >= 0 && c->fill <= 255)) {
        ct_error(CT_ERR_INVALID, "RandomCrop: fill %g does not fit a u8 image (0..255)",
                 c->fill);
        return NULL;
    }
    CtGenerator gen = data_transform_rng(ctx, stream);
    int64_t i = data_rng_int(&gen, 0, ph - g->h + 1);
    int64_t j = data_rng_int(&gen, 0, pw - g->w + 1);
    if (!padded) return data_img_crop(&in, i, j, g->h, g->w);
    return crop_window(g, &in, ay, ax, i, j);
}

DataTransformer *data_transform_random_crop_ex(int64_t h, int64_t w,
                                               const DataRandomCropArgs *args)
{
    DataRandomCropArgs a = args ? *args : (DataRandomCropArgs){0};
    if (!check_size("RandomCrop", h, w)) return NULL;
    if (a.padding < 0) {
        ct_error(CT_ERR_INVALID, "RandomCrop: negative padding %lld",
                 (long long)a.padding);
        return NULL;
    }
    if (a.padding_mode < DATA_PAD_CONSTANT || a.padding_mode > DATA_PAD_SYMMETRIC) {
        ct_error(CT_ERR_INVALID, "RandomCrop: unknown padding mode %d",
                 (int)a.padding_mode);
        return NULL;
    }
    if (!isfinite(a.fill)) {
        ct_error(CT_ERR_INVALID, "RandomCrop: fill must be finite, got %g", a.fill);
        return NULL;
    }
    Geom *g = geom_new("RandomCrop", random_crop_apply);
    if (!g) return NULL;
    g->h = h, g->w = w, g->crop = a;
    return &g->base;
}

DataTransformer *data_transform_random_crop(int64_t h, int64_t w, int64_t padding)
{
    return data_transform_random_crop_ex(h, w, &(DataRandomCropArgs){.padding = padding});
}

/* ----------------------------------------------------- RandomResizedCrop */

typedef struct Window {
    int64_t top, left, h, w;
} Window;

static int64_t clamp_side(int64_t v, int64_t side)
{
    return v < 1 ? 1 : v > side ? side : v;
}

/* torchvision's RandomResizedCrop.get_params, with our generator. */
static Window rrc_window(const Geom *g, int64_t H, int64_t W, CtGenerator *gen)
{
    double area = (double)H * (double)W;
    double lr0 = log(g->ratio[0]), lr1 = log(g->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target =
            area * (g->scale[0] + (g->scale[1] - g->scale[0]) * data_rng_uniform(gen));
        double aspect = exp(lr0 + (lr1 - lr0) * data_rng_uniform(gen));
        int64_t w = (int64_t)nearbyint(sqrt(target * aspect));
        int64_t h = (int64_t)nearbyint(sqrt(target / aspect));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            int64_t top = data_rng_int(gen, 0, H - h + 1);
            int64_t left = data_rng_int(gen, 0, W - w + 1);
            return (Window){top, left, h, w};
        }
    }
    /* fallback: the central crop with the ratio clamped to the range. Where
     * torchvision's rounds a side to 0 pixels (an extreme ratio on a thin
     * image) and fails to resize it, ours keeps 1 pixel. */
    double in_ratio = (double)W / (double)H;
    int64_t w = W, h = H;
    if (in_ratio < g->ratio[0]) {
        h = clamp_side((int64_t)nearbyint((double)w / g->ratio[0]), H);
    } else if (in_ratio > g->ratio[1]) {
        w = clamp_side((int64_t)nearbyint((double)h * g->ratio[1]), W);
    }
    return (Window){(H - h) / 2, (W - w) / 2, h, w};
}

static Tensor *rrc_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                         uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (!need_ctx(t->name, ctx) || data_img_view(t->name, img, &in) != CT_OK) return NULL;
    CtGenerator gen = data_transform_rng(ctx, stream);
    Window c = rrc_window(g, in.h, in.w, &gen);
    return data_img_resize(&in, c.top, c.left, c.h, c.w, g->h, g->w);
}

DataTransformer *data_transform_random_resized_crop(int64_t h, int64_t w,
                                                    const DataRandomResizedCropArgs *args)
{
    if (!check_size("RandomResizedCrop", h, w)) return NULL;
    DataRandomResizedCropArgs a =
        args ? *args : (DataRandomResizedCropArgs){{0, 0}, {0, 0}};
    if (a.scale[0] == 0 && a.scale[1] == 0) a.scale[0] = 0.08, a.scale[1] = 1.0;
    if (a.ratio[0] == 0 && a.ratio[1] == 0)
        a.ratio[0] = 3.0 / 4.0, a.ratio[1] = 4.0 / 3.0;
    if (!(a.scale[0] > 0 && a.scale[0] <= a.scale[1]) ||
        !(a.ratio[0] > 0 && a.ratio[0] <= a.ratio[1])) {
        ct_error(CT_ERR_INVALID,
                 "RandomResizedCrop: need 0 < min <= max for scale (%g, %g) and ratio "
                 "(%g, %g)",
                 a.scale[0], a.scale[1], a.ratio[0], a.ratio[1]);
        return NULL;
    }
    Geom *g = geom_new("RandomResizedCrop", rrc_apply);
    if (!g) return NULL;
    g->h = h, g->w = w;
    g->scale[0] = a.scale[0], g->scale[1] = a.scale[1];
    g->ratio[0] = a.ratio[0], g->ratio[1] = a.ratio[1];
    return &g->base;
}

/* ------------------------------------------ RandomHorizontalFlip, Vertical */

static Tensor *flip_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                          uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (!need_ctx(t->name, ctx) || data_img_view(t->name, img, &in) != CT_OK) return NULL;
    CtGenerator gen = data_transform_rng(ctx, stream);
    return data_rng_uniform(&gen) < g->p ? data_img_hflip(&in) : in.t;
}

static Tensor *vflip_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                           uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (!need_ctx(t->name, ctx) || data_img_view(t->name, img, &in) != CT_OK) return NULL;
    CtGenerator gen = data_transform_rng(ctx, stream);
    if (!(data_rng_uniform(&gen) < g->p)) return in.t;
    int64_t *ys = malloc((size_t)in.h * sizeof *ys),
            *xs = malloc((size_t)in.w * sizeof *xs);
    Tensor *out = NULL;
    if (!ys || !xs) {
        ct_error(CT_ERR_OOM, "%s: out of memory", t->name);
    } else {
        for (int64_t y = 0; y < in.h; y++) ys[y] = in.h - 1 - y;
        for (int64_t x = 0; x < in.w; x++) xs[x] = x;
        out = data_img_remap(&in, ys, in.h, xs, in.w, 0);
    }
    free(ys);
    free(xs);
    return out;
}

static DataTransformer *flip_new(const char *name, double p,
                                 Tensor *(*apply)(const DataTransformer *, Tensor *,
                                                  const DataCtx *, uint64_t))
{
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "%s: p must be in [0, 1], got %g", name, p);
        return NULL;
    }
    Geom *g = geom_new(name, apply);
    if (!g) return NULL;
    g->p = p;
    return &g->base;
}

DataTransformer *data_transform_random_horizontal_flip(double p)
{
    return flip_new("RandomHorizontalFlip", p, flip_apply);
}

DataTransformer *data_transform_random_vertical_flip(double p)
{
    return flip_new("RandomVerticalFlip", p, vflip_apply);
}
