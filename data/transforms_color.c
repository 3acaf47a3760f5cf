/* Colour functions and transforms: torchvision.transforms.functional's
 * tensor adjust_brightness / contrast / saturation / hue and
 * rgb_to_grayscale, ColorJitter and RandomGrayscale. Every step repeats
 * torchvision's float32 arithmetic in its order (this file relies on the
 * build's ISO C mode, which keeps GCC from fusing a * b + c into an FMA);
 * u8 results are truncated as its .to(torch.uint8) does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

/* Lets GCC evaluate both arms of a ?: in the hue loop (it must not, while
 * an FP trap could be observed), so the loop vectorises; values are the
 * same IEEE results either way. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* The layout-independent view of a 1- or 3-channel image: pixel i channel k
 * is at i * ps + k * cs (u8 (H, W, C): ps = C, cs = 1; f32: ps = 1,
 * cs = H * W). */
typedef struct ColorImg {
    DataImg v;
    int64_t n, ps, cs;
} ColorImg;

static CtStatus color_view(const char *op, Tensor *img, ColorImg *o)
{
    if (!img) return ct_last_status(); /* sticky: keep the first error */
    if (data_img_view(op, img, &o->v) != CT_OK) return ct_last_status();
    if (o->v.c != 1 && o->v.c != 3) {
        char buf[96];
        return ct_error(CT_ERR_SHAPE, "%s: expects 1 or 3 channels, got %lld (%s)", op,
                        (long long)o->v.c, tensor_describe(img, buf, sizeof buf));
    }
    o->n = o->v.h * o->v.w;
    o->ps = o->v.sw;
    o->cs = o->v.sc;
    return CT_OK;
}

static bool check_factor(const char *op, double f, double lo, double hi)
{
    if (f >= lo && f <= hi) return true;
    ct_error(CT_ERR_INVALID, "%s: factor %g is out of range [%g, %g]", op, f, lo, hi);
    return false;
}

/* torchvision's f32 step .clamp(0, max).to(uint8) on a value in float. */
static inline uint8_t to_u8(float v)
{
    v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    return (uint8_t)v;
}

static inline float clamp01(float v)
{
    return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

/* rgb_to_grayscale's float value: (0.2989 r + 0.587 g) + 0.114 b. */
static inline float grey_f32(float r, float g, float b)
{
    return 0.2989f * r + 0.587f * g + 0.114f * b;
}

/* The grey image of a 3-channel view: u8 (truncated) in gu or f32 in gf
 * (one of them non-NULL), n pixels. */
static void grey_plane(const ColorImg *ci, uint8_t *gu, float *gf)
{
    const int64_t n = ci->n, ps = ci->ps, cs = ci->cs;
    if (ci->v.dt == CT_U8) {
        const uint8_t *s = tensor_data(ci->v.t);
        float wr[256], wg[256], wb[256]; /* each product, rounded to f32 */
        for (int v = 0; v < 256; v++)
            wr[v] = 0.2989f * (float)v, wg[v] = 0.587f * (float)v,
            wb[v] = 0.114f * (float)v;
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *p = s + i * ps;
            gu[i] = (uint8_t)(wr[p[0]] + wg[p[cs]] + wb[p[2 * cs]]);
        }
    } else {
        const float *s = tensor_data(ci->v.t);
        for (int64_t i = 0; i < n; i++) gf[i] = grey_f32(s[i], s[n + i], s[2 * n + i]);
    }
}

/* out = blend(img, b, f): b is the constant `bc` when bu and bf are NULL,
 * else the per-pixel plane (u8 bu or f32 bf) shared by all channels. */
static Tensor *blend(const ColorImg *ci, double f, float bc, const uint8_t *bu,
                     const float *bf)
{
    Tensor *out = tensor_empty_like(ci->v.t);
    if (!out) return NULL;
    const float fa = (float)f, fb = (float)(1.0 - f); /* Python's 1.0 - ratio */
    const int64_t n = ci->n, c = ci->v.c, ps = ci->ps, cs = ci->cs;
    if (ci->v.dt == CT_U8) {
        const uint8_t *s = tensor_data(ci->v.t);
        uint8_t *d = tensor_data(out);
        float ta[256], tb[256];
        for (int v = 0; v < 256; v++) ta[v] = fa * (float)v, tb[v] = fb * (float)v;
        if (!bu) {
            uint8_t lut[256];
            float b = fb * bc;
            for (int v = 0; v < 256; v++) lut[v] = to_u8(ta[v] + b);
            for (int64_t i = 0; i < n * c; i++) d[i] = lut[s[i]];
            return out;
        }
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < c; k++)
                d[i * ps + k * cs] = to_u8(ta[s[i * ps + k * cs]] + tb[bu[i]]);
        return out;
    }
    const float *s = tensor_data(ci->v.t);
    float *d = tensor_data(out);
    for (int64_t k = 0; k < c; k++)
        for (int64_t i = 0; i < n; i++) {
            float b = bf ? fb * bf[i] : fb * bc;
            d[k * n + i] = clamp01(fa * s[k * n + i] + b);
        }
    return out;
}

Tensor *data_image_adjust_brightness(Tensor *img, double factor)
{
    const char *op = "adjust_brightness";
    ColorImg ci;
    if (!check_factor(op, factor, 0, INFINITY) || color_view(op, img, &ci) != CT_OK)
        return NULL;
    return blend(&ci, factor, 0.0f, NULL, NULL);
}

/* torch.mean of the grey image in f32: the sum rounded once (exact in f64
 * while it stays below 2^53), divided by the count in float. */
static float grey_mean(const ColorImg *ci, const uint8_t *gu, const float *gf)
{
    const int64_t n = ci->n;
    double sum = 0;
    if (gu) {
        int64_t si = 0;
        for (int64_t i = 0; i < n; i++) si += gu[i];
        sum = (double)si;
    } else {
        for (int64_t i = 0; i < n; i++) sum += gf[i];
    }
    return (float)sum / (float)n;
}

Tensor *data_image_adjust_contrast(Tensor *img, double factor)
{
    const char *op = "adjust_contrast";
    ColorImg ci;
    if (!check_factor(op, factor, 0, INFINITY) || color_view(op, img, &ci) != CT_OK)
        return NULL;
    bool u8 = ci.v.dt == CT_U8;
    const void *gp = tensor_data(ci.v.t); /* C = 1: the image is its grey */
    void *tmp = NULL;
    if (ci.v.c == 3) {
        tmp = malloc((size_t)ci.n * (u8 ? sizeof(uint8_t) : sizeof(float)));
        if (!tmp) {
            ct_error(CT_ERR_OOM, "%s: out of memory", op);
            return NULL;
        }
        grey_plane(&ci, u8 ? tmp : NULL, u8 ? NULL : tmp);
        gp = tmp;
    }
    float mean = grey_mean(&ci, u8 ? gp : NULL, u8 ? NULL : gp);
    free(tmp);
    return blend(&ci, factor, mean, NULL, NULL);
}

Tensor *data_image_adjust_saturation(Tensor *img, double factor)
{
    const char *op = "adjust_saturation";
    ColorImg ci;
    if (!check_factor(op, factor, 0, INFINITY) || color_view(op, img, &ci) != CT_OK)
        return NULL;
    if (ci.v.c == 1) return ci.v.t; /* torchvision: "Match PIL behaviour" */
    bool u8 = ci.v.dt == CT_U8;
    void *g = malloc((size_t)ci.n * (u8 ? sizeof(uint8_t) : sizeof(float)));
    if (!g) {
        ct_error(CT_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    grey_plane(&ci, u8 ? g : NULL, u8 ? NULL : g);
    Tensor *out = blend(&ci, factor, 0.0f, u8 ? g : NULL, u8 ? NULL : g);
    free(g);
    return out;
}

/* ------------------------------------------------------------------- hue */

/* torchvision's _rgb2hsv, (h + hf) % 1 and _hsv2rgb on n pixels of planes
 * (r, g, b). Branch-free so that it vectorises (see the pragma above; IEEE
 * division and floor give the same bits in SIMD). */
static void hue_shift(const float *restrict rp, const float *restrict gp,
                      const float *restrict bp, float *restrict ro, float *restrict go,
                      float *restrict bo, int64_t n, float hf)
{
    for (int64_t k = 0; k < n; k++) {
        float r = rp[k], g = gp[k], b = bp[k];
        float maxc = r > g ? r : g, minc = r < g ? r : g;
        maxc = maxc > b ? maxc : b;
        minc = minc < b ? minc : b;
        bool eqc = maxc == minc;
        float cr = maxc - minc;
        float s = cr / (eqc ? 1.0f : maxc);
        float crd = eqc ? 1.0f : cr;
        float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
        /* one of torchvision's three masked terms is selected; the others
         * are zeros, which do not change the sum */
        float h = maxc == r ? bc - gc : maxc == g ? 2.0f + rc - bc : 4.0f + gc - rc;
        h = h / 6.0f + 1.0f;
        h -= floorf(h); /* fmod(h, 1): exact for h >= 0 */
        h += hf;        /* torch.remainder(h, 1.0), h in [-0.5, 1.5) */
        h = h >= 0.0f ? h - floorf(h) : h + 1.0f;
        float v = maxc, h6 = h * 6.0f, fi = floorf(h6), f = h6 - fi;
        float p = clamp01(v * (1.0f - s));
        float q = clamp01(v * (1.0f - s * f));
        float t = clamp01(v * (1.0f - s * (1.0f - f)));
        int i = (int)fi;
        i = i >= 6 ? i - 6 : i; /* h6 is at most 6 */
        /* sector i: R = v q p p t v, G = t v v q p p, B = p p t v v q */
        ro[k] = i == 0 || i == 5 ? v : i == 1 ? q : i == 4 ? t : p;
        go[k] = i == 0 ? t : i == 1 || i == 2 ? v : i == 3 ? q : p;
        bo[k] = i == 0 || i == 1 ? p : i == 2 ? t : i == 5 ? q : v;
    }
}

enum { HUE_BLOCK = 256 }; /* u8 pixels converted to float planes at a time */

static void hue_u8(const ColorImg *ci, float hf, uint8_t *d)
{
    const uint8_t *s = tensor_data(ci->v.t);
    const int64_t n = ci->n, ps = ci->ps, cs = ci->cs;
    float unit[256]; /* img.to(float32) / 255.0 */
    for (int v = 0; v < 256; v++) unit[v] = (float)v / 255.0f;
    float in[3][HUE_BLOCK], out[3][HUE_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += HUE_BLOCK) {
        int64_t m = n - i0 < HUE_BLOCK ? n - i0 : HUE_BLOCK;
        for (int64_t i = 0; i < m; i++)
            for (int k = 0; k < 3; k++) in[k][i] = unit[s[(i0 + i) * ps + k * cs]];
        hue_shift(in[0], in[1], in[2], out[0], out[1], out[2], m, hf);
        for (int64_t i = 0; i < m; i++)
            for (int k = 0; k < 3; k++)
                d[(i0 + i) * ps + k * cs] = (uint8_t)(out[k][i] * 255.0f);
    }
}

Tensor *data_image_adjust_hue(Tensor *img, double factor)
{
    const char *op = "adjust_hue";
    ColorImg ci;
    if (!check_factor(op, factor, -0.5, 0.5) || color_view(op, img, &ci) != CT_OK)
        return NULL;
    if (ci.v.c == 1) return ci.v.t; /* torchvision: "Match PIL behaviour" */
    Tensor *out = tensor_empty_like(ci.v.t);
    if (!out) return NULL;
    if (ci.v.dt == CT_U8) {
        hue_u8(&ci, (float)factor, tensor_data(out));
    } else {
        const float *s = tensor_data(ci.v.t);
        float *d = tensor_data(out);
        const int64_t n = ci.n;
        hue_shift(s, s + n, s + 2 * n, d, d + n, d + 2 * n, n, (float)factor);
    }
    return out;
}

/* ------------------------------------------------------------------ grey */

Tensor *data_image_rgb_to_grayscale(Tensor *img, int out_channels)
{
    const char *op = "rgb_to_grayscale";
    ColorImg ci;
    if (out_channels != 1 && out_channels != 3) {
        ct_error(CT_ERR_INVALID, "%s: out_channels must be 1 or 3, got %d", op,
                 out_channels);
        return NULL;
    }
    if (color_view(op, img, &ci) != CT_OK) return NULL;
    bool u8 = ci.v.dt == CT_U8;
    DataImg shape = ci.v;
    shape.c = out_channels;
    if (shape.ndim == 2 && out_channels == 3) shape.ndim = 3;
    Tensor *out = data_img_new(&shape, ci.v.h, ci.v.w);
    void *g = malloc((size_t)ci.n * (u8 ? sizeof(uint8_t) : sizeof(float)));
    if (!out || !g) {
        if (!g) ct_error(CT_ERR_OOM, "%s: out of memory", op);
        free(g);
        return NULL;
    }
    if (ci.v.c == 3) {
        grey_plane(&ci, u8 ? g : NULL, u8 ? NULL : g);
    } else {
        memcpy(g, tensor_data(ci.v.t), (size_t)ci.n * (u8 ? 1 : sizeof(float)));
    }
    const int64_t n = ci.n, oc = out_channels;
    if (u8) {
        const uint8_t *gs = g;
        uint8_t *d = tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < oc; k++) d[i * oc + k] = gs[i];
    } else {
        const float *gs = g;
        float *d = tensor_data(out);
        for (int64_t k = 0; k < oc; k++) memcpy(d + k * n, gs, (size_t)n * sizeof(float));
    }
    free(g);
    return out;
}

/* ----------------------------------------------------------- ColorJitter */

typedef struct ColorJitter {
    DataTransformer base;
    bool on[4]; /* brightness, contrast, saturation, hue */
    double lo[4], hi[4];
    double p; /* RandomGrayscale */
} ColorJitter;

static Tensor *jitter_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                            uint64_t stream)
{
    const ColorJitter *cj = (const ColorJitter *)t;
    if (!ctx) {
        ct_error(CT_ERR_NULL, "ColorJitter: NULL ctx (random transforms draw from the "
                              "sample's DataCtx)");
        return NULL;
    }
    CtGenerator gen = data_transform_rng(ctx, stream);
    int order[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; i--) { /* a uniform permutation, as randperm(4) */
        int j = (int)data_rng_int(&gen, 0, i + 1), tmp = order[i];
        order[i] = order[j], order[j] = tmp;
    }
    double f[4] = {0};
    for (int k = 0; k < 4; k++) /* drawn as torch.empty(1).uniform_: f32 */
        if (cj->on[k])
            f[k] = (float)(cj->lo[k] + (cj->hi[k] - cj->lo[k]) * data_rng_uniform(&gen));
    Tensor *(*const fns[4])(Tensor *, double) = {
        data_image_adjust_brightness, data_image_adjust_contrast,
        data_image_adjust_saturation, data_image_adjust_hue};
    ColorImg ci; /* validate up front so an image with no adjustment fails alike */
    if (color_view(t->name, img, &ci) != CT_OK) return NULL;
    img = ci.v.t;
    for (int k = 0; k < 4 && img; k++)
        if (cj->on[order[k]]) img = fns[order[k]](img, f[order[k]]);
    return img;
}

DataTransformer *data_transform_color_jitter_ex(const DataColorJitterArgs *args)
{
    DataColorJitterArgs a = args ? *args : (DataColorJitterArgs){0};
    const double *r[4] = {a.brightness, a.contrast, a.saturation, a.hue};
    static const char *names[4] = {"brightness", "contrast", "saturation", "hue"};
    for (int k = 0; k < 4; k++) {
        double lo = k == 3 ? -0.5 : 0, hi = k == 3 ? 0.5 : INFINITY;
        if (!(lo <= r[k][0] && r[k][0] <= r[k][1] && r[k][1] <= hi)) {
            ct_error(CT_ERR_INVALID,
                     "ColorJitter: %s range (%g, %g) must satisfy %g <= min <= max <= %g",
                     names[k], r[k][0], r[k][1], lo, hi);
            return NULL;
        }
    }
    ColorJitter *cj = calloc(1, sizeof *cj);
    if (!cj) {
        ct_error(CT_ERR_OOM, "ColorJitter: out of memory");
        return NULL;
    }
    cj->base = (DataTransformer){"ColorJitter", jitter_apply, NULL};
    for (int k = 0; k < 4; k++) {
        double center = k == 3 ? 0.0 : 1.0;
        bool off =
            (r[k][0] == 0 && r[k][1] == 0) || (r[k][0] == center && r[k][1] == center);
        cj->on[k] = !off;
        cj->lo[k] = r[k][0];
        cj->hi[k] = r[k][1];
    }
    return &cj->base;
}

DataTransformer *data_transform_color_jitter(double brightness, double contrast,
                                             double saturation, double hue)
{
    const double v[4] = {brightness, contrast, saturation, hue};
    static const char *names[4] = {"brightness", "contrast", "saturation", "hue"};
    DataColorJitterArgs a;
    double *r[4] = {a.brightness, a.contrast, a.saturation, a.hue};
    for (int k = 0; k < 4; k++) {
        double max = k == 3 ? 0.5 : INFINITY, center = k == 3 ? 0.0 : 1.0;
        if (!(v[k] >= 0 && v[k] <= max)) {
            ct_error(CT_ERR_INVALID, "ColorJitter: %s must be in [0, %g], got %g",
                     names[k], max, v[k]);
            return NULL;
        }
        /* torchvision's [center - v, center + v], the low end clipped at 0 */
        r[k][0] = k < 3 && v[k] > center ? 0.0 : center - v[k];
        r[k][1] = center + v[k];
        if (v[k] == 0) r[k][0] = r[k][1] = 0; /* off */
    }
    return data_transform_color_jitter_ex(&a);
}

/* ------------------------------------------------------- RandomGrayscale */

static Tensor *grayscale_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                               uint64_t stream)
{
    const ColorJitter *cj = (const ColorJitter *)t;
    ColorImg ci;
    if (!ctx) {
        ct_error(CT_ERR_NULL, "RandomGrayscale: NULL ctx (random transforms draw from "
                              "the sample's DataCtx)");
        return NULL;
    }
    if (color_view(t->name, img, &ci) != CT_OK) return NULL;
    CtGenerator gen = data_transform_rng(ctx, stream);
    if (!(data_rng_uniform(&gen) < cj->p) || ci.v.c == 1) return ci.v.t;
    return data_image_rgb_to_grayscale(ci.v.t, 3);
}

DataTransformer *data_transform_random_grayscale(double p)
{
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "RandomGrayscale: p must be in [0, 1], got %g", p);
        return NULL;
    }
    ColorJitter *cj = calloc(1, sizeof *cj);
    if (!cj) {
        ct_error(CT_ERR_OOM, "RandomGrayscale: out of memory");
        return NULL;
    }
    cj->base = (DataTransformer){"RandomGrayscale", grayscale_apply, NULL};
    cj->p = p;
    return &cj->base;
}
