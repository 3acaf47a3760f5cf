/* Gradient clipping: torch.nn.utils.clip_grad_norm_ and clip_grad_value_,
 * as block ops on the gradients' device (ctrainer/tensor_optim.h). When the
 * gradients lie back to back (a packed model) they are one operand: one
 * reduce and one scale. The 2-norm is accumulated in f64 in fixed chunks
 * summed in order, so it does not depend on the device or thread count. */
#include <math.h>
#include <stdlib.h>

#include "optim_internal.h"

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
        if (!tensor_is_contiguous(g) || (dt != CT_F32 && dt != CT_F64))
            return ct_error(
                CT_ERR_UNSUPPORTED,
                "%s: gradient of parameter %lld \"%s\" is %s: only contiguous "
                "f32 and f64 gradients are supported",
                fn, (long long)i, tensor_name(params[i]),
                tensor_describe(g, gb, sizeof gb));
    }
    return CT_OK;
}

/* The gradients as operands: one span over all of them when they lie back
 * to back (*span, caller frees), else each present gradient in turn. */
typedef struct Grads {
    Tensor *const *params;
    int64_t n;
    Tensor *span;
} Grads;

static Grads grads_of(Tensor *const *params, int64_t n)
{
    Grads g = {params, n, NULL};
    Tensor **list = n > 1 ? malloc((size_t)n * sizeof *list) : NULL;
    bool all = list != NULL;
    for (int64_t i = 0; i < n && all; i++)
        all = (list[i] = tensor_grad(params[i])) != NULL;
    if (all) g.span = tensor_span(list, n);
    free(list);
    return g;
}

/* The k-th operand (k from 0) or NULL after the last. */
static Tensor *grads_at(const Grads *g, int64_t *k)
{
    if (g->span) return (*k)++ == 0 ? g->span : NULL;
    while (*k < g->n && !tensor_grad(g->params[*k])) (*k)++;
    return *k < g->n ? tensor_grad(g->params[(*k)++]) : NULL;
}

/* The total 2-norm squared, or inf-norm, over all operands. */
static CtStatus total_norm(const Grads *g, bool inf, double *acc)
{
    *acc = 0;
    int64_t k = 0;
    for (Tensor *t; (t = grads_at(g, &k));) {
        double m;
        CtStatus st = tensor_norm_parts(t, inf ? INFINITY : 2, &m);
        if (st != CT_OK) return st;
        if (!inf)
            *acc += m;
        else if ((m > *acc || isnan(m)) && !isnan(*acc))
            *acc = m;
    }
    return CT_OK;
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
    Grads g = grads_of(params, n);
    double acc;
    CtStatus st = total_norm(&g, inf, &acc);
    double total = inf ? acc : sqrt(acc);
    if (st == CT_OK && !isfinite(total))
        ct_error(CT_ERR_INVALID,
                 "%s: the total %s-norm of the gradients is %g (non-finite); gradients "
                 "left unchanged",
                 fn, inf ? "inf" : "2", total);
    double coef = max_norm / (total + 1e-6);
    int64_t k = 0;
    for (Tensor *t; st == CT_OK && isfinite(total) && coef < 1 && (t = grads_at(&g, &k));)
        st = tensor_scale_(t, coef);
    tensor_free(g.span);
    return st == CT_OK ? total : NAN;
}

CtStatus optim_clip_grad_value(Tensor *const *params, int64_t n, double clip)
{
    const char *fn = "optim_clip_grad_value";
    if (!(clip >= 0))
        return ct_error(CT_ERR_INVALID, "%s: clip %g must be >= 0", fn, clip);
    CtStatus st = check_grads(params, n, fn);
    if (st != CT_OK) return st;
    Grads g = grads_of(params, n);
    int64_t k = 0;
    for (Tensor *t; st == CT_OK && (t = grads_at(&g, &k));)
        st = tensor_clamp_abs_(t, clip);
    tensor_free(g.span);
    return st;
}
