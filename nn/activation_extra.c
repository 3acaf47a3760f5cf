/* More parameter-free layers: LeakyReLU, ELU, Hardsigmoid, Hardswish,
 * Softmax, LogSoftmax. Those without a tensor op of their own are composed
 * of tensor ops chosen to give PyTorch 1.13's values and gradients,
 * boundaries included, on every backend. */
#include <math.h>

#include "nn_internal.h"

/* A layer with one number of configuration: a slope, an alpha or a dim. */
typedef struct ScalarLayer {
    Module base;
    double v;
} ScalarLayer;

static double layer_value(const Module *m)
{
    return ((const ScalarLayer *)m)->v;
}

static Module *scalar_layer(const ModuleVtable *vt, double v)
{
    ScalarLayer *l = (ScalarLayer *)nn_module_alloc(sizeof(ScalarLayer), vt);
    if (!l) return NULL;
    l->v = v;
    return &l->base;
}

/* ------------------------------------------------------------ LeakyReLU */

static Tensor *leaky_relu_forward(Module *m, Tensor *x)
{
    return tensor_leaky_relu(x, layer_value(m));
}

static void leaky_relu_extra_repr(const Module *m, char *buf, size_t n)
{
    char v[32];
    snprintf(buf, n, "negative_slope=%s", nn_format_float(layer_value(m), v, sizeof v));
}

static const ModuleVtable leaky_relu_vt = {.type = "LeakyReLU",
                                           .forward = leaky_relu_forward,
                                           .extra_repr = leaky_relu_extra_repr};

Module *nn_leaky_relu(double negative_slope)
{
    if (!isfinite(negative_slope)) {
        ct_error(CT_ERR_INVALID, "LeakyReLU: negative_slope must be finite, got %g",
                 negative_slope);
        return NULL;
    }
    return scalar_layer(&leaky_relu_vt, negative_slope);
}

/* ------------------------------------------------------------------ ELU */

/* relu(x) + alpha * (exp(min(x, 0)) - 1): x where x > 0, alpha (e^x - 1)
 * elsewhere. The exponent never exceeds 0, so no inf reaches backward; the
 * gradient is 1 for x > 0 and alpha e^x for x <= 0 (relu's gradient at 0 is
 * 0, clamp's is 1), as PyTorch's elu_backward. */
static Tensor *elu_forward(Module *m, Tensor *x)
{
    Tensor *neg = tensor_sub_scalar(tensor_exp(tensor_clamp(x, -INFINITY, 0)), 1);
    return tensor_add(tensor_relu(x), tensor_mul_scalar(neg, layer_value(m)));
}

static void elu_extra_repr(const Module *m, char *buf, size_t n)
{
    char v[32];
    snprintf(buf, n, "alpha=%s", nn_format_float(layer_value(m), v, sizeof v));
}

static const ModuleVtable elu_vt = {
    .type = "ELU", .forward = elu_forward, .extra_repr = elu_extra_repr};

Module *nn_elu(double alpha)
{
    if (!isfinite(alpha)) {
        ct_error(CT_ERR_INVALID, "ELU: alpha must be finite, got %g", alpha);
        return NULL;
    }
    return scalar_layer(&elu_vt, alpha);
}

/* ----------------------------------------------------- Hardsigmoid/swish */

/* t with `value` where x cmp c (one of tensor_le/tensor_ge), c a 0-d
 * tensor of x's dtype and device. */
static Tensor *fill_where(Tensor *t, Tensor *x, Tensor *(*cmp)(Tensor *, Tensor *),
                          double c, double value)
{
    if (!x) return NULL;
    Tensor *bound = tensor_scalar(c, tensor_dtype(x), tensor_device(x));
    return tensor_masked_fill(t, cmp(x, bound), value);
}

/* (x + 3) / 6 for -3 < x < 3, 0 below, 1 above, with gradient 1/6 strictly
 * inside (-3, 3) and 0 elsewhere, as PyTorch's hardsigmoid_backward. */
static Tensor *hardsigmoid_forward(Module *m, Tensor *x)
{
    Tensor *y = tensor_div_scalar(tensor_add_scalar(x, 3), 6);
    return fill_where(fill_where(y, x, tensor_le, -3, 0), x, tensor_ge, 3, 1);
}

/* x * clamp(x + 3, 0, 6) / 6. clamp's gradient is 1 on [0, 6] inclusive, so
 * the gradient is x/3 + 1/2 on [-3, 3], 0 below and 1 above, as PyTorch's
 * hardswish_backward (-0.5 at -3 and 1.5 at 3). */
static Tensor *hardswish_forward(Module *m, Tensor *x)
{
    return tensor_div_scalar(tensor_mul(x, tensor_clamp(tensor_add_scalar(x, 3), 0, 6)),
                             6);
}

static const ModuleVtable hardsigmoid_vt = {.type = "Hardsigmoid",
                                            .forward = hardsigmoid_forward};
static const ModuleVtable hardswish_vt = {.type = "Hardswish",
                                          .forward = hardswish_forward};

Module *nn_hardsigmoid(void)
{
    return nn_module_alloc(sizeof(Module), &hardsigmoid_vt);
}

Module *nn_hardswish(void)
{
    return nn_module_alloc(sizeof(Module), &hardswish_vt);
}

/* --------------------------------------------------- Softmax/LogSoftmax */

static Tensor *softmax_forward(Module *m, Tensor *x)
{
    return tensor_softmax(x, (int)layer_value(m));
}

static Tensor *log_softmax_forward(Module *m, Tensor *x)
{
    return tensor_log_softmax(x, (int)layer_value(m));
}

static void dim_extra_repr(const Module *m, char *buf, size_t n)
{
    snprintf(buf, n, "dim=%d", (int)layer_value(m));
}

static const ModuleVtable softmax_vt = {
    .type = "Softmax", .forward = softmax_forward, .extra_repr = dim_extra_repr};
static const ModuleVtable log_softmax_vt = {
    .type = "LogSoftmax", .forward = log_softmax_forward, .extra_repr = dim_extra_repr};

Module *nn_softmax(int dim)
{
    return scalar_layer(&softmax_vt, dim);
}

Module *nn_log_softmax(int dim)
{
    return scalar_layer(&log_softmax_vt, dim);
}
