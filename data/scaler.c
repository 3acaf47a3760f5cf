/* DataScaler: per-column standardisation or min-max scaling, fitted on a
 * dataset and applied as a transform; its statistics travel in a state
 * dict (e.g. the model's safetensors file). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

struct DataScaler {
    DataScaleKind kind;
    int64_t n;          /* features */
    double *a, *b;      /* the statistics: mean, std or min, max */
    float *shift, *inv; /* y = (x - shift) * inv */
};

static const char *const stat_names[2][2] = {{"mean", "std"}, {"min", "max"}};

void data_scaler_free(DataScaler *s)
{
    if (!s) return;
    free(s->a);
    free(s->b);
    free(s->shift);
    free(s->inv);
    free(s);
}

/* A scaler of n features with room for its statistics (set by the caller,
 * then derive()). */
static DataScaler *scaler_alloc(DataScaleKind kind, int64_t n)
{
    DataScaler *s = calloc(1, sizeof *s);
    if (s) {
        *s = (DataScaler){kind,
                          n,
                          calloc((size_t)n, sizeof(double)),
                          calloc((size_t)n, sizeof(double)),
                          calloc((size_t)n, sizeof(float)),
                          calloc((size_t)n, sizeof(float))};
    }
    if (!s || !s->a || !s->b || !s->shift || !s->inv) {
        data_scaler_free(s);
        ct_error(CT_ERR_OOM, "DataScaler: out of memory for %lld features", (long long)n);
        return NULL;
    }
    return s;
}

/* shift and 1/scale from the statistics; a constant column (scale 0) is
 * only shifted, as scikit-learn's scalers do. */
static void derive(DataScaler *s)
{
    for (int64_t j = 0; j < s->n; j++) {
        double scale = s->kind == DATA_SCALE_STANDARDIZE ? s->b[j] : s->b[j] - s->a[j];
        s->shift[j] = (float)s->a[j];
        s->inv[j] = scale > 0 && isfinite(scale) ? (float)(1.0 / scale) : 1.0f;
    }
}

/* The field's values of sample i as f32 on the host: a contiguous (n)
 * tensor in the open scope. */
static Tensor *sample_row(const Dataset *d, int64_t i, int field, int64_t n)
{
    DataSample smp;
    if (data_dataset_get(d, i, NULL, &smp) != CT_OK) return NULL;
    char buf[96];
    Tensor *t = field < smp.n ? smp.t[field] : NULL;
    if (!t || tensor_device(t).type != CT_DEVICE_CPU || tensor_dtype(t) != CT_F32 ||
        tensor_ndim(t) != 1 || (n >= 0 && tensor_size(t, 0) != n)) {
        ct_error(CT_ERR_SHAPE,
                 "DataScaler: sample %lld field %d is %s; expected an f32 CPU vector%s",
                 (long long)i, field, t ? tensor_describe(t, buf, sizeof buf) : "missing",
                 n >= 0 ? " like the first sample's" : "");
        return NULL;
    }
    return tensor_contiguous(t);
}

/* Accumulates sample rows: Welford's mean and sum of squares, or min/max. */
static void accumulate(DataScaler *s, const float *x, int64_t count)
{
    for (int64_t j = 0; j < s->n; j++) {
        double v = x[j];
        if (s->kind == DATA_SCALE_MIN_MAX) {
            s->a[j] = count == 1 ? v : fmin(s->a[j], v);
            s->b[j] = count == 1 ? v : fmax(s->b[j], v);
        } else {
            double delta = v - s->a[j];
            s->a[j] += delta / (double)count;
            s->b[j] += delta * (v - s->a[j]); /* sum of squares, std at the end */
        }
    }
}

DataScaler *data_scaler_fit(const Dataset *d, int field, DataScaleKind kind)
{
    int64_t len = d ? data_dataset_len(d) : 0;
    if (len < 1) {
        ct_error(CT_ERR_INVALID, "DataScaler: nothing to fit on (%s)",
                 d ? "an empty dataset" : "NULL dataset");
        return NULL;
    }
    if (field < 0 || field >= DATA_MAX_FIELDS ||
        (kind != DATA_SCALE_STANDARDIZE && kind != DATA_SCALE_MIN_MAX)) {
        ct_error(CT_ERR_INVALID, "DataScaler: field %d or kind %d is out of range", field,
                 (int)kind);
        return NULL;
    }
    DataScaler *s = NULL;
    for (int64_t i = 0; i < len; i++) {
        CtScope *sc = ct_scope_open();
        Tensor *row = sc ? sample_row(d, i, field, s ? s->n : -1) : NULL;
        if (row && !s) s = scaler_alloc(kind, tensor_size(row, 0));
        if (row && s) accumulate(s, tensor_data(row), i + 1);
        ct_scope_close(sc);
        if (!row || !s) {
            data_scaler_free(s);
            return NULL;
        }
    }
    if (kind == DATA_SCALE_STANDARDIZE) /* population std, as scikit-learn */
        for (int64_t j = 0; j < s->n; j++) s->b[j] = sqrt(s->b[j] / (double)len);
    derive(s);
    return s;
}

int64_t data_scaler_num_features(const DataScaler *s)
{
    return s ? s->n : -1;
}

CtStatus data_scaler_stats(const DataScaler *s, double *a, double *b)
{
    if (!s || !a || !b) return ct_error(CT_ERR_NULL, "data_scaler_stats: NULL argument");
    memcpy(a, s->a, (size_t)s->n * sizeof *a);
    memcpy(b, s->b, (size_t)s->n * sizeof *b);
    return CT_OK;
}

Tensor *data_scaler_apply(const DataScaler *s, Tensor *x)
{
    if (!x) return NULL; /* sticky */
    char buf[96];
    if (!s || tensor_dtype(x) != CT_F32 || tensor_device(x).type != CT_DEVICE_CPU ||
        tensor_ndim(x) < 1 || tensor_size(x, tensor_ndim(x) - 1) != s->n) {
        ct_error(CT_ERR_SHAPE, "DataScaler: expects f32 CPU (..., %lld), got %s",
                 (long long)(s ? s->n : -1), tensor_describe(x, buf, sizeof buf));
        return NULL;
    }
    Tensor *in = tensor_contiguous(x), *out = in ? tensor_empty_like(in) : NULL;
    if (!out) return NULL;
    const float *src = tensor_data(in);
    float *dst = tensor_data(out);
    int64_t rows = tensor_numel(in) / (s->n ? s->n : 1);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < s->n; j++)
            dst[r * s->n + j] = (src[r * s->n + j] - s->shift[j]) * s->inv[j];
    return out;
}

static Tensor *scaler_fn(Tensor *x, const DataCtx *ctx, void *user)
{
    return data_scaler_apply(user, x);
}

DataTransform data_scaler_transform(const DataScaler *s)
{
    return (DataTransform){scaler_fn, (void *)s};
}

/* ------------------------------------------------------------ state dicts */

static void stat_key(char *buf, size_t n, const char *prefix, const char *stat)
{
    snprintf(buf, n, "%s%s", prefix ? prefix : "", stat);
}

CtStatus data_scaler_state_dict_add(const DataScaler *s, CtStateDict *d,
                                    const char *prefix)
{
    if (!s || !d)
        return ct_error(CT_ERR_NULL, "data_scaler_state_dict_add: NULL argument");
    const double *stats[2] = {s->a, s->b};
    CtStatus st = CT_OK;
    for (int k = 0; k < 2 && st == CT_OK; k++) {
        char key[256];
        stat_key(key, sizeof key, prefix, stat_names[s->kind][k]);
        CtScope *sc = ct_scope_open();
        Tensor *t = sc ? tensor_from_data(stats[k], 1, &s->n, CT_F64, ct_cpu()) : NULL;
        st = t ? ct_state_dict_add(d, key, t) : ct_last_status();
        ct_scope_close(sc);
    }
    return st;
}

/* Copies a (n) statistic of any float dtype into out (f64). */
static CtStatus read_stat(Tensor *t, const char *key, int64_t n, double *out)
{
    char buf[96];
    if (tensor_ndim(t) != 1 || tensor_size(t, 0) != n)
        return ct_error(CT_ERR_SHAPE, "DataScaler: \"%s\" is %s, expected (%lld)", key,
                        tensor_describe(t, buf, sizeof buf), (long long)n);
    return tensor_copy_to_host(t, out, CT_F64);
}

DataScaler *data_scaler_from_state_dict(CtStateDict *d, const char *prefix)
{
    char keys[2][256];
    Tensor *t[2] = {NULL, NULL};
    int kind = 0;
    for (; kind < 2; kind++) {
        for (int k = 0; k < 2; k++) {
            stat_key(keys[k], sizeof keys[k], prefix, stat_names[kind][k]);
            t[k] = ct_state_dict_get(d, keys[k]);
        }
        if (t[0] && t[1]) break;
    }
    if (kind == 2) {
        ct_error(
            CT_ERR_INVALID,
            "DataScaler: no \"%smean\"/\"%sstd\" or \"%smin\"/\"%smax\" entries in the "
            "state dict",
            prefix ? prefix : "", prefix ? prefix : "", prefix ? prefix : "",
            prefix ? prefix : "");
        return NULL;
    }
    char buf[96];
    if (tensor_ndim(t[0]) != 1) {
        ct_error(CT_ERR_SHAPE, "DataScaler: \"%s\" is %s, expected a vector", keys[0],
                 tensor_describe(t[0], buf, sizeof buf));
        return NULL;
    }
    int64_t n = tensor_size(t[0], 0);
    DataScaler *s = scaler_alloc((DataScaleKind)kind, n);
    if (!s || read_stat(t[0], keys[0], n, s->a) != CT_OK ||
        read_stat(t[1], keys[1], n, s->b) != CT_OK) {
        data_scaler_free(s);
        return NULL;
    }
    derive(s);
    ct_state_dict_remove(d, keys[0]);
    ct_state_dict_remove(d, keys[1]);
    return s;
}
