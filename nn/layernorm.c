/* LayerNorm over the trailing dims `shape`, with weight and bias of that
 * shape (elementwise_affine=True) or without (False). */
#include <string.h>

#include "nn_internal.h"

typedef struct LayerNorm {
    Module base;
    int nnorm;
    int64_t shape[CT_MAX_DIMS];
    double eps;
    bool affine;
    Tensor *weight, *bias; /* NULL unless affine */
} LayerNorm;

static void shape_str(const LayerNorm *ln, char *buf, size_t n)
{
    int len = snprintf(buf, n, "(");
    for (int i = 0; i < ln->nnorm && len >= 0 && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, "%s%lld", i ? ", " : "",
                        (long long)ln->shape[i]);
    if (len >= 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ln->nnorm == 1 ? ",)" : ")");
}

static Tensor *layer_norm_forward(Module *m, Tensor *x)
{
    LayerNorm *ln = (LayerNorm *)m;
    bool ok = x && tensor_ndim(x) >= ln->nnorm;
    for (int i = 0; ok && i < ln->nnorm; i++)
        ok = tensor_size(x, i - ln->nnorm) == ln->shape[i];
    if (x && !ok) {
        char d[96], s[128];
        shape_str(ln, s, sizeof s);
        ct_error(CT_ERR_SHAPE, "LayerNorm(%s): input %s does not end in dims %s", s,
                 tensor_describe(x, d, sizeof d), s);
        return NULL;
    }
    return tensor_layer_norm(x, ln->nnorm, ln->weight, ln->bias, ln->eps);
}

static void layer_norm_extra_repr(const Module *m, char *buf, size_t n)
{
    const LayerNorm *ln = (const LayerNorm *)m;
    char s[128], e[32];
    shape_str(ln, s, sizeof s);
    snprintf(buf, n, "%s, eps=%s, elementwise_affine=%s", s,
             nn_format_float(ln->eps, e, sizeof e), ln->affine ? "True" : "False");
}

static const ModuleVtable layer_norm_vt = {.type = "LayerNorm",
                                           .forward = layer_norm_forward,
                                           .extra_repr = layer_norm_extra_repr};

/* Registers weight (ones) and bias (zeros) of the normalized shape. */
static CtStatus register_affine(LayerNorm *ln)
{
    Tensor *w = NULL, *b = NULL;
    CtScope *s = ct_scope_open();
    if (s) {
        w = nn_keep(tensor_ones(ln->nnorm, ln->shape, CT_F32, ct_cpu()));
        b = nn_keep(tensor_zeros(ln->nnorm, ln->shape, CT_F32, ct_cpu()));
        ct_scope_close(s);
    }
    const NnSlot slots[2] = {{"weight", w, &ln->weight, false},
                             {"bias", b, &ln->bias, false}};
    return nn_register_slots(&ln->base, 2, slots);
}

Module *nn_layer_norm_ex(int nnorm, const int64_t *shape, double eps,
                         bool elementwise_affine)
{
    bool ok = nnorm >= 1 && nnorm <= CT_MAX_DIMS && shape && eps > 0;
    for (int i = 0; ok && i < nnorm; i++) ok = shape[i] > 0;
    if (!ok) {
        ct_error(
            CT_ERR_INVALID,
            "LayerNorm: need 1..%d positive normalized dims and eps > 0 (nnorm = %d, "
            "eps = %g)",
            CT_MAX_DIMS, nnorm, eps);
        return NULL;
    }
    LayerNorm *ln = (LayerNorm *)nn_module_alloc(sizeof(LayerNorm), &layer_norm_vt);
    if (!ln) return NULL;
    ln->nnorm = nnorm;
    memcpy(ln->shape, shape, (size_t)nnorm * sizeof *shape);
    ln->eps = eps;
    ln->affine = elementwise_affine;
    if (elementwise_affine && register_affine(ln) != CT_OK) {
        nn_module_free(&ln->base);
        return NULL;
    }
    return &ln->base;
}

Module *nn_layer_norm(int nnorm, const int64_t *shape, double eps)
{
    return nn_layer_norm_ex(nnorm, shape, eps, true);
}
