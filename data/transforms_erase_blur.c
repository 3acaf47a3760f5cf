/* torchvision's tensor F.erase / RandomErasing and F.gaussian_blur /
 * GaussianBlur. The blur kernel repeats torchvision's float32 steps (this
 * file relies on the build's ISO C mode, which keeps GCC from fusing
 * a * b + c into an FMA); the convolution sums in f64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

/* ----------------------------------------------------------------- erase */

static bool erase_check(const char *op, Tensor *img, DataImg *in)
{
    if (!img) return false; /* sticky: keep the first error */
    if (tensor_dtype(img) != CT_F32) {
        char buf[96];
        ct_error(CT_ERR_DTYPE,
                 "%s: expects an f32 (C, H, W) image (after ToTensor), got %s", op,
                 tensor_describe(img, buf, sizeof buf));
        return false;
    }
    return data_img_view(op, img, in) == CT_OK;
}

/* Writes v into in's (h, w) window at (top, left); the window is valid. */
static void erase_window(const DataImg *in, float *d, int64_t top, int64_t left,
                         int64_t h, int64_t w, const float *v, int64_t nv)
{
    for (int64_t k = 0; k < in->c; k++) {
        float *dk = d + k * in->sc;
        for (int64_t y = 0; y < h; y++) {
            float *row = dk + (top + y) * in->sh + left;
            if (nv == in->c * h * w) {
                memcpy(row, v + (k * h + y) * w, (size_t)w * sizeof(float));
            } else {
                float val = v[nv == 1 ? 0 : k];
                for (int64_t x = 0; x < w; x++) row[x] = val;
            }
        }
    }
}

Tensor *data_image_erase(Tensor *img, int64_t top, int64_t left, int64_t h, int64_t w,
                         const float *v, int64_t nv, bool inplace)
{
    const char *op = "erase";
    DataImg in;
    if (!erase_check(op, img, &in)) return NULL;
    if (top < 0 || left < 0 || h < 0 || w < 0 || top + h > in.h || left + w > in.w) {
        ct_error(
            CT_ERR_INVALID,
            "%s: window (top %lld, left %lld, %lldx%lld) is not inside the %lldx%lld "
            "image",
            op, (long long)top, (long long)left, (long long)h, (long long)w,
            (long long)in.h, (long long)in.w);
        return NULL;
    }
    if (!v || (nv != 1 && nv != in.c && nv != in.c * h * w)) {
        ct_error(CT_ERR_INVALID,
                 "%s: needs 1, C = %lld or C * h * w = %lld values, got %lld%s", op,
                 (long long)in.c, (long long)(in.c * h * w), (long long)nv,
                 v ? "" : " (NULL)");
        return NULL;
    }
    Tensor *out = inplace ? in.t : tensor_clone(in.t);
    if (!out) return NULL;
    erase_window(&in, tensor_data(out), top, left, h, w, v, nv);
    return out;
}

/* -------------------------------------------------------- RandomErasing */

typedef struct RandomErasing {
    DataTransformer base;
    double p, scale[2], ratio[2];
    bool random, inplace;
    int n_value;
    float value[]; /* n_value entries */
} RandomErasing;

/* RandomErasing.get_params: false when all 10 tries are rejected. */
static bool erasing_box(const RandomErasing *re, CtGenerator *gen, int64_t ih, int64_t iw,
                        int64_t *bh, int64_t *bw)
{
    const double area = (double)(ih * iw);
    /* torch.log(torch.tensor(ratio)): f32 */
    const float lr0 = logf((float)re->ratio[0]), lr1 = logf((float)re->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        /* torch.empty(1).uniform_(a, b).item(): an f32 value */
        float s =
            (float)(re->scale[0] + (re->scale[1] - re->scale[0]) * data_rng_uniform(gen));
        float lr = (float)((double)lr0 + ((double)lr1 - lr0) * data_rng_uniform(gen));
        double erase_area = area * (double)s, aspect = (double)expf(lr);
        int64_t h = (int64_t)nearbyint(sqrt(erase_area * aspect)); /* half to even */
        int64_t w = (int64_t)nearbyint(sqrt(erase_area / aspect));
        if (h < ih && w < iw) {
            *bh = h, *bw = w;
            return true;
        }
    }
    return false;
}

static Tensor *erasing_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                             uint64_t stream)
{
    const RandomErasing *re = (const RandomErasing *)t;
    const char *op = t->name;
    DataImg in;
    if (!erase_check(op, img, &in)) return NULL;
    if (!ctx) {
        ct_error(CT_ERR_NULL,
                 "%s: NULL ctx (random transforms draw from the sample's "
                 "DataCtx)",
                 op);
        return NULL;
    }
    if (!re->random && re->n_value != 1 && re->n_value != in.c) {
        ct_error(CT_ERR_SHAPE,
                 "%s: %d values for an image of %lld channels (need 1 or C)", op,
                 re->n_value, (long long)in.c);
        return NULL;
    }
    CtGenerator gen = data_transform_rng(ctx, stream);
    int64_t h, w;
    if (!(data_rng_uniform(&gen) < re->p) || !erasing_box(re, &gen, in.h, in.w, &h, &w))
        return img;
    Tensor *noise = NULL;
    if (re->random) { /* drawn before the position, as get_params does */
        noise = tensor_normal(&gen, 3, (const int64_t[]){in.c, h, w}, 0.0, 1.0, CT_F32,
                              ct_cpu());
        if (!noise) return NULL;
    }
    int64_t top = data_rng_int(&gen, 0, in.h - h + 1);
    int64_t left = data_rng_int(&gen, 0, in.w - w + 1);
    if (noise)
        return data_image_erase(in.t, top, left, h, w, tensor_data(noise), in.c * h * w,
                                re->inplace);
    return data_image_erase(in.t, top, left, h, w, re->value, re->n_value, re->inplace);
}

static bool check_range(const char *op, const char *what, const double r[2])
{
    if (r[0] > 0 && r[0] <= r[1] && isfinite(r[1])) return true;
    ct_error(CT_ERR_INVALID, "%s: %s range (%g, %g) must satisfy 0 < min <= max", op,
             what, r[0], r[1]);
    return false;
}

DataTransformer *data_transform_random_erasing(double p,
                                               const DataRandomErasingArgs *args)
{
    const char *op = "RandomErasing";
    DataRandomErasingArgs a = args ? *args : (DataRandomErasingArgs){0};
    if (a.scale[0] == 0 && a.scale[1] == 0) a.scale[0] = 0.02, a.scale[1] = 0.33;
    if (a.ratio[0] == 0 && a.ratio[1] == 0) a.ratio[0] = 0.3, a.ratio[1] = 3.3;
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "%s: p must be in [0, 1], got %g", op, p);
        return NULL;
    }
    if (!check_range(op, "scale", a.scale) || !check_range(op, "ratio", a.ratio))
        return NULL;
    if (a.mode != DATA_ERASE_CONSTANT && a.mode != DATA_ERASE_RANDOM) {
        ct_error(CT_ERR_INVALID, "%s: unknown value mode %d", op, (int)a.mode);
        return NULL;
    }
    bool random = a.mode == DATA_ERASE_RANDOM;
    if (!random && (a.n_value < 0 || (a.n_value > 0 && !a.value))) {
        ct_error(CT_ERR_INVALID, "%s: n_value %d with %s values", op, a.n_value,
                 a.value ? "these" : "NULL");
        return NULL;
    }
    int nv = random ? 0 : a.n_value > 0 ? a.n_value : 1;
    RandomErasing *re = calloc(1, sizeof *re + (size_t)nv * sizeof(float));
    if (!re) {
        ct_error(CT_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    re->base = (DataTransformer){op, erasing_apply, NULL};
    re->p = p;
    memcpy(re->scale, a.scale, sizeof re->scale);
    memcpy(re->ratio, a.ratio, sizeof re->ratio);
    re->random = random;
    re->inplace = a.inplace;
    re->n_value = nv;
    for (int i = 0; i < nv; i++) re->value[i] = a.n_value > 0 ? (float)a.value[i] : 0.0f;
    return &re->base;
}

/* ---------------------------------------------------------- gaussian blur */

/* torchvision's _get_gaussian_kernel1d in f32: linspace as PyTorch's CPU
 * kernel computes it (from both ends), pdf = exp(-0.5 * (x / sigma)^2),
 * divided by its sum. k[n]. */
static void gaussian_kernel1d(int64_t n, double sigma, float *k)
{
    const float end = (float)((double)(n - 1) * 0.5), start = -end;
    const float step = n > 1 ? (end - start) / (float)(n - 1) : 0.0f;
    const float s = (float)sigma;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float x = i < n / 2 ? start + step * (float)i : end - step * (float)(n - 1 - i);
        float t = x / s;
        float q = -0.5f * (t * t);
        k[i] = (float)exp((double)q);
        sum += k[i];
    }
    for (int64_t i = 0; i < n; i++) k[i] /= sum;
}

static inline double pixel(const DataImg *in, const void *s, int64_t off)
{
    return in->dt == CT_U8 ? (double)((const uint8_t *)s)[off]
                           : (double)((const float *)s)[off];
}

/* Blurs channel k of `in` into `out` (same layout) with kernels kx[nx],
 * ky[ny]; tmp holds h * w doubles. */
static void blur_channel(const DataImg *in, void *out, int64_t k, const float *kx,
                         int64_t nx, const float *ky, int64_t ny, double *tmp)
{
    const void *s = tensor_data(in->t);
    const int64_t h = in->h, w = in->w, px = nx / 2, py = ny / 2;
    const int64_t base = k * in->sc;
    for (int64_t y = 0; y < h; y++) /* horizontal pass */
        for (int64_t x = 0; x < w; x++) {
            double acc = 0;
            for (int64_t j = 0; j < nx; j++)
                acc +=
                    (double)kx[j] *
                    pixel(in, s,
                          base + y * in->sh + data_reflect_index(x - px + j, w) * in->sw);
            tmp[y * w + x] = acc;
        }
    for (int64_t y = 0; y < h; y++) /* vertical pass, rounded once to f32 */
        for (int64_t x = 0; x < w; x++) {
            double acc = 0;
            for (int64_t i = 0; i < ny; i++)
                acc += (double)ky[i] * tmp[data_reflect_index(y - py + i, h) * w + x];
            float v = (float)acc;
            int64_t off = base + y * in->sh + x * in->sw;
            if (in->dt == CT_F32) {
                ((float *)out)[off] = v;
            } else { /* torch.round (half to even), then .to(uint8) */
                v = nearbyintf(v);
                ((uint8_t *)out)[off] = (uint8_t)(v < 0.0f     ? 0.0f
                                                  : v > 255.0f ? 255.0f
                                                               : v);
            }
        }
}

static bool check_kernel(const char *op, int64_t kw, int64_t kh)
{
    if (kw > 0 && kh > 0 && kw % 2 == 1 && kh % 2 == 1) return true;
    ct_error(CT_ERR_INVALID, "%s: kernel size %lldx%lld (w x h) must be odd and positive",
             op, (long long)kw, (long long)kh);
    return false;
}

static Tensor *gaussian_blur(const char *op, Tensor *img, int64_t kw, int64_t kh,
                             double sx, double sy)
{
    DataImg in;
    if (!img) return NULL; /* sticky: keep the first error */
    if (!check_kernel(op, kw, kh)) return NULL;
    if (!(sx > 0 && sy > 0 && isfinite(sx) && isfinite(sy))) {
        ct_error(CT_ERR_INVALID, "%s: sigma (%g, %g) must be positive", op, sx, sy);
        return NULL;
    }
    if (data_img_view(op, img, &in) != CT_OK) return NULL;
    if (kw / 2 >= in.w || kh / 2 >= in.h) {
        ct_error(
            CT_ERR_SHAPE,
            "%s: kernel %lldx%lld (w x h) needs reflect padding (%lld, %lld) smaller "
            "than the %lldx%lld image",
            op, (long long)kw, (long long)kh, (long long)(kw / 2), (long long)(kh / 2),
            (long long)in.h, (long long)in.w);
        return NULL;
    }
    Tensor *out = tensor_empty_like(in.t);
    /* one buffer: both kernels, then the f64 plane */
    size_t nk = (size_t)(kw + kh), nk_pad = (nk * sizeof(float) + 7) / 8;
    double *buf = malloc((nk_pad + (size_t)(in.h * in.w)) * sizeof(double));
    if (!out || !buf) {
        if (!buf) ct_error(CT_ERR_OOM, "%s: out of memory", op);
        free(buf);
        return NULL;
    }
    float *kx = (float *)buf, *ky = kx + kw;
    gaussian_kernel1d(kw, sx, kx);
    gaussian_kernel1d(kh, sy, ky);
    for (int64_t k = 0; k < in.c; k++)
        blur_channel(&in, tensor_data(out), k, kx, kw, ky, kh, buf + nk_pad);
    free(buf);
    return out;
}

Tensor *data_image_gaussian_blur(Tensor *img, int64_t kernel_w, int64_t kernel_h,
                                 double sigma_x, double sigma_y)
{
    return gaussian_blur("gaussian_blur", img, kernel_w, kernel_h, sigma_x, sigma_y);
}

/* --------------------------------------------------------- GaussianBlur */

typedef struct GaussianBlur {
    DataTransformer base;
    int64_t kw, kh;
    double sigma[2];
} GaussianBlur;

static Tensor *blur_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                          uint64_t stream)
{
    const GaussianBlur *gb = (const GaussianBlur *)t;
    if (!img) return NULL;
    if (!ctx) {
        ct_error(CT_ERR_NULL,
                 "%s: NULL ctx (random transforms draw from the sample's "
                 "DataCtx)",
                 t->name);
        return NULL;
    }
    CtGenerator gen = data_transform_rng(ctx, stream);
    /* torch.empty(1).uniform_(min, max).item(): an f32 value */
    double sigma =
        (float)(gb->sigma[0] + (gb->sigma[1] - gb->sigma[0]) * data_rng_uniform(&gen));
    return gaussian_blur(t->name, img, gb->kw, gb->kh, sigma, sigma);
}

DataTransformer *data_transform_gaussian_blur(int64_t kernel_w, int64_t kernel_h,
                                              double sigma_min, double sigma_max)
{
    const char *op = "GaussianBlur";
    if (!check_kernel(op, kernel_w, kernel_h)) return NULL;
    if (sigma_min == 0 && sigma_max == 0) sigma_min = 0.1, sigma_max = 2.0;
    if (!(sigma_min > 0 && sigma_min <= sigma_max && isfinite(sigma_max))) {
        ct_error(CT_ERR_INVALID, "%s: sigma (%g, %g) must satisfy 0 < min <= max", op,
                 sigma_min, sigma_max);
        return NULL;
    }
    GaussianBlur *gb = calloc(1, sizeof *gb);
    if (!gb) {
        ct_error(CT_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    gb->base = (DataTransformer){op, blur_apply, NULL};
    gb->kw = kernel_w, gb->kh = kernel_h;
    gb->sigma[0] = sigma_min, gb->sigma[1] = sigma_max;
    return &gb->base;
}
