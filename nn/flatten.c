/* Flatten dims start_dim..end_dim into one (a view when possible). */
#include "nn_internal.h"

typedef struct Flatten {
    Module base;
    int start, end;
} Flatten;

static Tensor *flatten_forward(Module *m, Tensor *x)
{
    Flatten *f = (Flatten *)m;
    return tensor_flatten(x, f->start, f->end);
}

static void flatten_extra_repr(const Module *m, char *buf, size_t n)
{
    const Flatten *f = (const Flatten *)m;
    snprintf(buf, n, "start_dim=%d, end_dim=%d", f->start, f->end);
}

static const ModuleVtable flatten_vt = {
    .type = "Flatten", .forward = flatten_forward, .extra_repr = flatten_extra_repr};

Module *nn_flatten(int start_dim, int end_dim)
{
    Flatten *f = (Flatten *)nn_module_alloc(sizeof(Flatten), &flatten_vt);
    if (!f) return NULL;
    f->start = start_dim;
    f->end = end_dim;
    return &f->base;
}
