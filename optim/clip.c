/* Gradient clipping: torch.nn.utils.clip_grad_norm_ and clip_grad_value_.
 *
 * The 2-norm is accumulated in f64 in fixed chunks summed in order, so the
 * result does not depend on the number of threads. */
#include <math.h>
#include <stdlib.h>

#include "optim_internal.h"

#define CLIP_CHUNK 65536

/* The gradients clipping touches: every param's grad, validated up front so
 * that nothing is scaled when one of them cannot be handled. */
static CtStatus check_grads(Tensor *const *params, int64_t n, const char *fn)
{
    if (n < 0 || (n > 0 && !params))
        return ct_error(CT_ERR_NULL, "%s: params NULL or n %lld < 0", fn, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        if (!params[i])
            return ct_error(CT_ERR_NULL, "%s: parameter %lld is NULL", fn, (long long)i);
        const Tensor *g = tensor_grad(params[i]);
        if (!g) continue;
        CtDType dt = tensor_dtype(g);
        char gb[96];
        if (tensor_device(g).type != CT_DEVICE_CPU || !tensor_is_contiguous(g) ||
            (dt != CT_F32 && dt != CT_F64))
            return ct_error(
                CT_ERR_UNSUPPORTED,
                "%s: gradient of parameter %lld \"%s\" is %s: only contiguous "
                "CPU f32 and f64 gradients are supported so far",
                fn, (long long)i, tensor_name(params[i]),
                tensor_describe(g, gb, sizeof gb));
    }
    return CT_OK;
}

/* x[i] read as double, for f32 or f64 data. */
static inline double at(const void *x, CtDType dt, int64_t i)
{
    return dt == CT_F32 ? (double)((const float *)x)[i] : ((const double *)x)[i];
}

static double chunk_sumsq(const void *x, CtDType dt, int64_t lo, int64_t hi)
{
    double s = 0;
    if (dt == CT_F32)
        for (int64_t i = lo; i < hi; i++)
            s += (double)((const float *)x)[i] * ((const float *)x)[i];
    else
        for (int64_t i = lo; i < hi; i++)
            s += ((const double *)x)[i] * ((const double *)x)[i];
    return s;
}

static double sumsq(const Tensor *g)
{
    const void *x = tensor_data(g);
    CtDType dt = tensor_dtype(g);
    int64_t n = tensor_numel(g), nch = (n + CLIP_CHUNK - 1) / CLIP_CHUNK;
    if (nch <= 1) return chunk_sumsq(x, dt, 0, n);
    double *part = malloc((size_t)nch * sizeof *part);
    if (!part) {
        double s = 0; /* same chunked order without the parallel loop */
        for (int64_t c = 0; c < nch; c++)
            s += chunk_sumsq(x, dt, c * CLIP_CHUNK,
                             c * CLIP_CHUNK + CLIP_CHUNK < n ? c * CLIP_CHUNK + CLIP_CHUNK
                                                             : n);
        return s;
    }
#pragma omp parallel for if (n >= OPTIM_PAR_MIN)
    for (int64_t c = 0; c < nch; c++) {
        int64_t hi = c * CLIP_CHUNK + CLIP_CHUNK < n ? c * CLIP_CHUNK + CLIP_CHUNK : n;
        part[c] = chunk_sumsq(x, dt, c * CLIP_CHUNK, hi);
    }
    double s = 0;
    for (int64_t c = 0; c < nch; c++) s += part[c];
    free(part);
    return s;
}

static double maxabs(const Tensor *g)
{
    const void *x = tensor_data(g);
    CtDType dt = tensor_dtype(g);
    double m = 0;
    for (int64_t i = 0, n = tensor_numel(g); i < n; i++) {
        double a = fabs(at(x, dt, i));
        if (a > m || isnan(a)) m = a;
        if (isnan(m)) break;
    }
    return m;
}

static void scale(Tensor *g, double coef)
{
    int64_t n = tensor_numel(g);
    if (tensor_dtype(g) == CT_F32) {
        float *x = tensor_data(g), c = (float)coef;
#pragma omp parallel for if (n >= OPTIM_PAR_MIN)
        for (int64_t i = 0; i < n; i++) x[i] *= c;
    } else {
        double *x = tensor_data(g);
#pragma omp parallel for if (n >= OPTIM_PAR_MIN)
        for (int64_t i = 0; i < n; i++) x[i] *= coef;
    }
}

double optim_clip_grad_norm(Tensor *const *params, int64_t n, double max_norm,
                            double norm_type)
{
    const char *fn = "optim_clip_grad_norm";
    bool inf = isinf(norm_type) && norm_type > 0;
    if (norm_type != 2 && !inf) {
        ct_error(CT_ERR_INVALID, "%s: norm_type %g is not supported (2 or INFINITY)", fn,
                 norm_type);
        return NAN;
    }
    if (!(max_norm >= 0)) {
        ct_error(CT_ERR_INVALID, "%s: max_norm %g must be >= 0", fn, max_norm);
        return NAN;
    }
    if (check_grads(params, n, fn) != CT_OK) return NAN;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) {
        const Tensor *g = tensor_grad(params[i]);
        if (!g) continue;
        if (inf) {
            double m = maxabs(g);
            acc = (m > acc || isnan(m)) && !isnan(acc) ? m : acc;
        } else {
            acc += sumsq(g);
        }
    }
    double total = inf ? acc : sqrt(acc);
    if (!isfinite(total)) {
        ct_error(CT_ERR_INVALID,
                 "%s: the total %s-norm of the gradients is %g (non-finite); gradients "
                 "left unchanged",
                 fn, inf ? "inf" : "2", total);
        return total;
    }
    double coef = max_norm / (total + 1e-6);
    if (coef < 1)
        for (int64_t i = 0; i < n; i++)
            if (tensor_grad(params[i])) scale(tensor_grad(params[i]), coef);
    return total;
}

CtStatus optim_clip_grad_value(Tensor *const *params, int64_t n, double clip)
{
    const char *fn = "optim_clip_grad_value";
    if (!(clip >= 0))
        return ct_error(CT_ERR_INVALID, "%s: clip %g must be >= 0", fn, clip);
    CtStatus st = check_grads(params, n, fn);
    if (st != CT_OK) return st;
    for (int64_t i = 0; i < n; i++) {
        Tensor *g = tensor_grad(params[i]);
        if (!g) continue;
        int64_t m = tensor_numel(g);
        if (tensor_dtype(g) == CT_F32) {
            float *x = tensor_data(g), c = (float)clip;
#pragma omp parallel for if (m >= OPTIM_PAR_MIN)
            for (int64_t k = 0; k < m; k++) x[k] = x[k] > c ? c : x[k] < -c ? -c : x[k];
        } else {
            double *x = tensor_data(g);
#pragma omp parallel for if (m >= OPTIM_PAR_MIN)
            for (int64_t k = 0; k < m; k++)
                x[k] = x[k] > clip ? clip : x[k] < -clip ? -clip : x[k];
        }
    }
    return CT_OK;
}
