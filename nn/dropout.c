/* Dropout and Dropout2d: inverted dropout in training mode (of single
 * elements, of whole channels), identity in eval mode. */
#include "nn_internal.h"

typedef struct Dropout {
    Module base;
    double p;
    CtGenerator *g; /* borrowed; advanced by each draw */
} Dropout;

static Tensor *dropout_forward(Module *m, Tensor *x)
{
    Dropout *d = (Dropout *)m;
    return tensor_dropout(x, d->p, m->training, d->g);
}

static void dropout_extra_repr(const Module *m, char *buf, size_t n)
{
    char p[32];
    snprintf(buf, n, "p=%s, inplace=False",
             nn_format_float(((const Dropout *)m)->p, p, sizeof p));
}

static const ModuleVtable dropout_vt = {
    .type = "Dropout", .forward = dropout_forward, .extra_repr = dropout_extra_repr};

/* Whole channels of x (N, C, *) zeroed with probability p, the rest scaled
 * by 1/(1-p), as PyTorch's feature dropout: the mask is a Bernoulli draw
 * from g of shape (N, C, 1, ...) in x's dtype and device, broadcast over
 * the positions, so backward multiplies by the same mask. */
static Tensor *dropout2d_forward(Module *m, Tensor *x)
{
    Dropout *d = (Dropout *)m;
    if (!x) return NULL;
    if (!m->training || d->p == 0) return tensor_contiguous(x);
    if (tensor_ndim(x) < 2) {
        char desc[96];
        ct_error(CT_ERR_SHAPE, "Dropout2d: input %s has fewer than 2 dims (N, C, *)",
                 tensor_describe(x, desc, sizeof desc));
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    const int ndim = tensor_ndim(x);
    for (int i = 0; i < ndim; i++) shape[i] = i < 2 ? tensor_size(x, i) : 1;
    double scale = d->p == 1 ? 0.0 : 1.0 / (1.0 - d->p);
    Tensor *mask =
        tensor_bernoulli(d->g, ndim, shape, 1 - d->p, tensor_dtype(x), tensor_device(x));
    return tensor_mul(x, tensor_mul_scalar(mask, scale));
}

static const ModuleVtable dropout2d_vt = {
    .type = "Dropout2d", .forward = dropout2d_forward, .extra_repr = dropout_extra_repr};

static Module *dropout_new(const ModuleVtable *vt, double p, CtGenerator *g)
{
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "%s: p must be in [0, 1], got %g", vt->type, p);
        return NULL;
    }
    if (!g && p > 0) {
        ct_error(CT_ERR_NULL, "%s(p=%g): NULL generator", vt->type, p);
        return NULL;
    }
    Dropout *d = (Dropout *)nn_module_alloc(sizeof(Dropout), vt);
    if (!d) return NULL;
    d->p = p;
    d->g = g;
    return &d->base;
}

Module *nn_dropout(double p, CtGenerator *g)
{
    return dropout_new(&dropout_vt, p, g);
}

Module *nn_dropout2d(double p, CtGenerator *g)
{
    return dropout_new(&dropout2d_vt, p, g);
}

CtGenerator *nn_module_generator(const Module *m)
{
    return m && (m->vt == &dropout_vt || m->vt == &dropout2d_vt) ? ((const Dropout *)m)->g
                                                                 : NULL;
}
