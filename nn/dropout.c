/* Dropout: inverted dropout in training mode, identity in eval mode. */
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

Module *nn_dropout(double p, CtGenerator *g)
{
    if (!(p >= 0 && p <= 1)) {
        ct_error(CT_ERR_INVALID, "Dropout: p must be in [0, 1], got %g", p);
        return NULL;
    }
    if (!g && p > 0) {
        ct_error(CT_ERR_NULL, "Dropout(p=%g): NULL generator", p);
        return NULL;
    }
    Dropout *d = (Dropout *)nn_module_alloc(sizeof(Dropout), &dropout_vt);
    if (!d) return NULL;
    d->p = p;
    d->g = g;
    return &d->base;
}

CtGenerator *nn_module_generator(const Module *m)
{
    return m && m->vt == &dropout_vt ? ((const Dropout *)m)->g : NULL;
}
