/* Geometric transforms: Resize, CenterCrop, RandomCrop, RandomResizedCrop,
 * RandomHorizontalFlip. Parameters follow torchvision; the pixel work is in
 * image_ops.c. */
#include <math.h>
#include <stdlib.h>

#include "image_internal.h"

typedef struct Geom {
    DataTransformer base;
    int64_t h, w; /* output size; Resize(shorter): h is the shorter side */
    int64_t pad;  /* RandomCrop */
    double p;     /* RandomHorizontalFlip */
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

static Tensor *resize_to(DataImg *in, int64_t oh, int64_t ow)
{
    if (oh == in->h && ow == in->w) return in->t; /* identity at scale 1 */
    return data_img_resize(in, 0, 0, in->h, in->w, oh, ow);
}

static Tensor *resize_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                            uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (data_img_view(t->name, img, &in) != CT_OK) return NULL;
    return resize_to(&in, g->h, g->w);
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
    return wide ? resize_to(&in, g->h, nl) : resize_to(&in, nl, g->h);
}

DataTransformer *data_transform_resize(int64_t h, int64_t w)
{
    if (!check_size("Resize", h, w)) return NULL;
    Geom *g = geom_new("Resize", resize_apply);
    if (!g) return NULL;
    g->h = h, g->w = w;
    return &g->base;
}

DataTransformer *data_transform_resize_shorter(int64_t size)
{
    if (!check_size("Resize", size, size)) return NULL;
    Geom *g = geom_new("Resize", resize_shorter_apply);
    if (!g) return NULL;
    g->h = g->w = size;
    return &g->base;
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

static Tensor *random_crop_apply(const DataTransformer *t, Tensor *img,
                                 const DataCtx *ctx, uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (!need_ctx(t->name, ctx) || data_img_view(t->name, img, &in) != CT_OK) return NULL;
    int64_t ph = in.h + 2 * g->pad, pw = in.w + 2 * g->pad;
    if (ph < g->h || pw < g->w) {
        ct_error(CT_ERR_SHAPE,
                 "RandomCrop: crop %lldx%lld is larger than the padded image %lldx%lld",
                 (long long)g->h, (long long)g->w, (long long)ph, (long long)pw);
        return NULL;
    }
    CtGenerator gen = data_transform_rng(ctx, stream);
    int64_t i = data_rng_int(&gen, 0, ph - g->h + 1);
    int64_t j = data_rng_int(&gen, 0, pw - g->w + 1);
    return data_img_crop(&in, i - g->pad, j - g->pad, g->h, g->w);
}

DataTransformer *data_transform_random_crop(int64_t h, int64_t w, int64_t padding)
{
    if (!check_size("RandomCrop", h, w)) return NULL;
    if (padding < 0) {
        ct_error(CT_ERR_INVALID, "RandomCrop: negative padding %lld", (long long)padding);
        return NULL;
    }
    Geom *g = geom_new("RandomCrop", random_crop_apply);
    if (!g) return NULL;
    g->h = h, g->w = w, g->pad = padding;
    return &g->base;
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

/* -------------------------------------------------- RandomHorizontalFlip */

static Tensor *flip_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                          uint64_t stream)
{
    const Geom *g = (const Geom *)t;
    DataImg in;
    if (!need_ctx(t->name, ctx) || data_img_view(t->name, img, &in) != CT_OK) return NULL;
    CtGenerator gen = data_transform_rng(ctx, stream);
    return data_rng_uniform(&gen) < g->p ? data_img_hflip(&in) : in.t;
}

DataTransformer *data_transform_random_horizontal_flip(double p)
{
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "RandomHorizontalFlip: p must be in [0, 1], got %g", p);
        return NULL;
    }
    Geom *g = geom_new("RandomHorizontalFlip", flip_apply);
    if (!g) return NULL;
    g->p = p;
    return &g->base;
}
