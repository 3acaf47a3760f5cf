/* Linear: y = x Wᵀ + b, W (out, in), b (out). */
#include <math.h>

#include "nn_internal.h"

typedef struct Linear {
    Module base;
    int64_t in, out;
    Tensor *weight, *bias;
} Linear;

/* Checks x against l; records an error and returns false otherwise. */
static bool input_ok(Module *m, const Tensor *x)
{
    const Linear *l = (const Linear *)m;
    if (x && (tensor_ndim(x) < 1 || tensor_size(x, -1) != l->in)) {
        char d[96], self[128];
        ct_error(CT_ERR_SHAPE, "%s: input %s has %lld features, expected %lld",
                 nn_module_describe(m, self, sizeof self),
                 tensor_describe(x, d, sizeof d),
                 tensor_ndim(x) ? (long long)tensor_size(x, -1) : 0LL, (long long)l->in);
        return false;
    }
    return true;
}

static Tensor *linear_forward(Module *m, Tensor *x)
{
    Linear *l = (Linear *)m;
    return input_ok(m, x) ? tensor_linear(x, l->weight, l->bias) : NULL;
}

static Tensor *linear_forward_relu(Module *m, Tensor *x)
{
    Linear *l = (Linear *)m;
    return input_ok(m, x) ? tensor_linear_relu(x, l->weight, l->bias) : NULL;
}

static Tensor *linear_forward_gelu(Module *m, Tensor *x, CtGeluApprox approx)
{
    Linear *l = (Linear *)m;
    return input_ok(m, x) ? tensor_linear_gelu(x, l->weight, l->bias, approx) : NULL;
}

static void linear_extra_repr(const Module *m, char *buf, size_t n)
{
    const Linear *l = (const Linear *)m;
    snprintf(buf, n, "in_features=%lld, out_features=%lld, bias=%s", (long long)l->in,
             (long long)l->out, l->bias ? "True" : "False");
}

static const ModuleVtable linear_vt = {.type = "Linear",
                                       .forward = linear_forward,
                                       .extra_repr = linear_extra_repr,
                                       .forward_relu = linear_forward_relu,
                                       .forward_gelu = linear_forward_gelu};

Module *nn_linear(int64_t in_features, int64_t out_features, bool bias, CtGenerator *g)
{
    if (in_features <= 0 || out_features <= 0) {
        ct_error(CT_ERR_INVALID,
                 "Linear: features must be positive, got in=%lld, out=%lld",
                 (long long)in_features, (long long)out_features);
        return NULL;
    }
    if (!g) {
        ct_error(CT_ERR_NULL, "Linear: NULL generator");
        return NULL;
    }
    Linear *l = (Linear *)nn_module_alloc(sizeof(Linear), &linear_vt);
    if (!l) return NULL;
    l->in = in_features;
    l->out = out_features;
    /* kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
     * the bias bound PyTorch uses too */
    double bound = 1.0 / sqrt((double)in_features);
    CtScope *s = ct_scope_open();
    Tensor *w = NULL, *b = NULL;
    if (s) {
        w = nn_keep(tensor_uniform(g, 2, (const int64_t[]){out_features, in_features},
                                   -bound, bound, CT_F32, ct_cpu()));
        if (bias && w)
            b = nn_keep(
                tensor_uniform(g, 1, &out_features, -bound, bound, CT_F32, ct_cpu()));
        ct_scope_close(s);
    }
    const NnSlot slots[2] = {{"weight", w, &l->weight, false},
                             {"bias", b, &l->bias, false}};
    if (nn_register_slots(&l->base, bias ? 2 : 1, slots) != CT_OK) {
        nn_module_free(&l->base);
        return NULL;
    }
    return &l->base;
}
