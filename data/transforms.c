/* Transform objects: apply/free, Compose, user functions, the dataset
 * adapter, the per-transform random streams, ToTensor and Normalize. The
 * geometric transforms are in transforms_geometry.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

/* Purposes of data_ctx_generator used by transforms: this base mixed with
 * the transform's stream. */
#define TRANSFORM_PURPOSE 0x7472616e73666f72ull /* "transfor" */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

CtGenerator data_transform_rng(const DataCtx *ctx, uint64_t stream)
{
    return data_ctx_generator(ctx, mix64(TRANSFORM_PURPOSE ^ stream));
}

double data_rng_uniform(CtGenerator *g)
{
    uint32_t ctr[4] = {(uint32_t)g->offset, (uint32_t)(g->offset >> 32),
                       (uint32_t)g->stream, (uint32_t)(g->stream >> 32)};
    uint32_t key[2] = {(uint32_t)g->seed, (uint32_t)(g->seed >> 32)};
    uint32_t r[4];
    ct_philox4x32_10(ctr, key, r);
    g->offset++;
    /* the lanes tensor_rand uses for an f64 uniform */
    uint64_t bits = ((uint64_t)(r[0] >> 5) << 26) | (r[1] >> 6);
    return (double)bits * 0x1p-53;
}

int64_t data_rng_int(CtGenerator *g, int64_t lo, int64_t hi)
{
    int64_t v = lo + (int64_t)(data_rng_uniform(g) * (double)(hi - lo));
    return v < hi ? v : hi - 1;
}

Tensor *data_transform_apply_stream(const DataTransformer *t, Tensor *img,
                                    const DataCtx *ctx, uint64_t stream)
{
    if (!img) return NULL; /* sticky: keep the first error */
    if (!t) {
        ct_error(CT_ERR_NULL, "data_transform_apply: NULL transform");
        return NULL;
    }
    return t->apply(t, img, ctx, stream);
}

Tensor *data_transform_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx)
{
    return data_transform_apply_stream(t, img, ctx, 0);
}

Tensor *data_transform_fn(Tensor *img, const DataCtx *ctx, void *transformer)
{
    return data_transform_apply(transformer, img, ctx);
}

DataTransform data_transform_as_fn(const DataTransformer *t)
{
    return (DataTransform){data_transform_fn, (void *)t};
}

void data_transform_free(DataTransformer *t)
{
    if (!t) return;
    if (t->free)
        t->free(t);
    else
        free(t);
}

const char *data_transform_name(const DataTransformer *t)
{
    return t ? t->name : "(null)";
}

/* --------------------------------------------------------------- compose */

typedef struct Compose {
    DataTransformer base;
    int n;
    DataTransformer **ts;
} Compose;

static Tensor *compose_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                             uint64_t stream)
{
    const Compose *c = (const Compose *)t;
    for (int i = 0; i < c->n && img; i++)
        img = data_transform_apply_stream(c->ts[i], img, ctx,
                                          mix64(stream ^ mix64((uint64_t)i + 1)));
    return img;
}

static void compose_free(DataTransformer *t)
{
    Compose *c = (Compose *)t;
    for (int i = 0; i < c->n; i++) data_transform_free(c->ts[i]);
    free(c->ts);
    free(c);
}

DataTransformer *data_transform_compose(int n, DataTransformer *const *ts)
{
    bool null_entry = false;
    for (int i = 0; ts && i < n; i++) null_entry |= ts[i] == NULL;
    Compose *c = NULL;
    DataTransformer **copy = NULL;
    if (n < 0 || (n > 0 && !ts)) {
        ct_error(CT_ERR_INVALID, "Compose: bad list (n = %d, ts %s)", n,
                 ts ? "set" : "NULL");
    } else if (null_entry) {
        /* usually a constructor that failed: keep its message (sticky) */
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERR_NULL, "Compose: a NULL transform in the list");
    } else {
        c = calloc(1, sizeof *c);
        copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
        if (!c || !copy) ct_error(CT_ERR_OOM, "Compose: out of memory");
    }
    if (!c || !copy) {
        free(c);
        free(copy);
        for (int i = 0; ts && i < n; i++) data_transform_free(ts[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++) copy[i] = ts[i];
    c->base = (DataTransformer){"Compose", compose_apply, compose_free};
    c->n = n;
    c->ts = copy;
    return &c->base;
}

/* ---------------------------------------------------------------- lambda */

typedef struct Lambda {
    DataTransformer base;
    DataTransformFn fn;
    void *user;
    void (*free_user)(void *);
    char name[32];
} Lambda;

static Tensor *lambda_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                            uint64_t stream)
{
    const Lambda *l = (const Lambda *)t;
    return l->fn(img, ctx, l->user);
}

static void lambda_free(DataTransformer *t)
{
    Lambda *l = (Lambda *)t;
    if (l->free_user) l->free_user(l->user);
    free(l);
}

DataTransformer *data_transform_lambda(const char *name, DataTransformFn fn, void *user,
                                       void (*free_user)(void *))
{
    if (!fn) {
        ct_error(CT_ERR_NULL, "Lambda %s: NULL function", name ? name : "");
        return NULL;
    }
    Lambda *l = calloc(1, sizeof *l);
    if (!l) {
        ct_error(CT_ERR_OOM, "Lambda: out of memory");
        return NULL;
    }
    snprintf(l->name, sizeof l->name, "%s", name ? name : "Lambda");
    l->base = (DataTransformer){l->name, lambda_apply, lambda_free};
    l->fn = fn;
    l->user = user;
    l->free_user = free_user;
    return &l->base;
}

/* -------------------------------------------------------------- ToTensor */

static Tensor *to_tensor_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                               uint64_t stream)
{
    DataImg in;
    if (tensor_dtype(img) != CT_U8) {
        char buf[96];
        ct_error(CT_ERR_DTYPE, "ToTensor: expects a u8 (H, W, C) or (H, W) image, got %s",
                 tensor_describe(img, buf, sizeof buf));
        return NULL;
    }
    if (data_img_view("ToTensor", img, &in) != CT_OK) return NULL;
    Tensor *out = tensor_empty(3, (const int64_t[]){in.c, in.h, in.w}, CT_F32, ct_cpu());
    if (!out) return NULL;
    const uint8_t *s = tensor_data(in.t);
    float *d = tensor_data(out);
    int64_t hw = in.h * in.w, c = in.c;
    /* division, not a reciprocal multiply: torchvision's float().div(255) */
    if (c == 1) {
        for (int64_t i = 0; i < hw; i++) d[i] = (float)s[i] / 255.0f;
    } else if (c == 3) {
        for (int64_t i = 0; i < hw; i++) {
            d[i] = (float)s[3 * i] / 255.0f;
            d[hw + i] = (float)s[3 * i + 1] / 255.0f;
            d[2 * hw + i] = (float)s[3 * i + 2] / 255.0f;
        }
    } else {
        for (int64_t i = 0; i < hw; i++)
            for (int64_t k = 0; k < c; k++) d[k * hw + i] = (float)s[c * i + k] / 255.0f;
    }
    return out;
}

DataTransformer *data_transform_to_tensor(void)
{
    DataTransformer *t = malloc(sizeof *t);
    if (!t) {
        ct_error(CT_ERR_OOM, "ToTensor: out of memory");
        return NULL;
    }
    *t = (DataTransformer){"ToTensor", to_tensor_apply, NULL};
    return t;
}

/* ------------------------------------------------------------- Normalize */

typedef struct Normalize {
    DataTransformer base;
    int n;
    float *mean, *std;
} Normalize;

static Tensor *normalize_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx,
                               uint64_t stream)
{
    const Normalize *nz = (const Normalize *)t;
    char buf[96];
    if (tensor_dtype(img) != CT_F32) {
        ct_error(CT_ERR_DTYPE, "Normalize: expects an f32 (C, H, W) image, got %s",
                 tensor_describe(img, buf, sizeof buf));
        return NULL;
    }
    DataImg in;
    if (data_img_view("Normalize", img, &in) != CT_OK) return NULL;
    if (nz->n != 1 && nz->n != in.c) {
        ct_error(CT_ERR_SHAPE,
                 "Normalize: %d means/stds for an image of %lld channels (%s)", nz->n,
                 (long long)in.c, tensor_describe(img, buf, sizeof buf));
        return NULL;
    }
    Tensor *out = tensor_empty_like(in.t);
    if (!out) return NULL;
    const float *s = tensor_data(in.t);
    float *d = tensor_data(out);
    int64_t hw = in.h * in.w;
    for (int64_t k = 0; k < in.c; k++) {
        float m = nz->mean[nz->n == 1 ? 0 : k], sd = nz->std[nz->n == 1 ? 0 : k];
        const float *sk = s + k * hw;
        float *dk = d + k * hw;
        for (int64_t i = 0; i < hw; i++) dk[i] = (sk[i] - m) / sd;
    }
    return out;
}

static void normalize_free(DataTransformer *t)
{
    Normalize *nz = (Normalize *)t;
    free(nz->mean);
    free(nz->std);
    free(nz);
}

DataTransformer *data_transform_normalize(int n, const double *mean, const double *std)
{
    if (n < 1 || !mean || !std) {
        ct_error(CT_ERR_INVALID, "Normalize: needs n >= 1 means and stds (n = %d)", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!((float)std[i] != 0.0f)) {
            ct_error(CT_ERR_INVALID, "Normalize: std[%d] is %g (must be nonzero)", i,
                     std[i]);
            return NULL;
        }
    }
    Normalize *nz = calloc(1, sizeof *nz);
    float *m = malloc((size_t)n * sizeof *m), *s = malloc((size_t)n * sizeof *s);
    if (!nz || !m || !s) {
        free(nz);
        free(m);
        free(s);
        ct_error(CT_ERR_OOM, "Normalize: out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) m[i] = (float)mean[i], s[i] = (float)std[i];
    nz->base = (DataTransformer){"Normalize", normalize_apply, normalize_free};
    nz->n = n;
    nz->mean = m;
    nz->std = s;
    return &nz->base;
}
