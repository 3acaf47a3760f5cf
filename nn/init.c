/* Parameter initialisation: PyTorch's torch.nn.init functions.
 *
 * Values are drawn with tensor_uniform/tensor_normal into a temporary (f64
 * for f64 tensors, f32 otherwise, on t's device) and copied into t, so any
 * float dtype, device and layout works and the numbers do not depend on
 * them. Nothing here is recorded by autograd. */
#include <math.h>

#include "ctrainer/nn.h"

static bool check_tensor(const char *op, const Tensor *t)
{
    if (!t) {
        ct_error(CT_ERR_NULL, "%s: NULL tensor", op);
        return false;
    }
    if (!ct_dtype_is_float(tensor_dtype(t))) {
        char d[96];
        ct_error(CT_ERR_DTYPE, "%s: needs a floating-point tensor, got %s", op,
                 tensor_describe(t, d, sizeof d));
        return false;
    }
    return true;
}

/* The product of dims 2.. (1 for a matrix). */
static bool fan_parts(const char *op, const Tensor *t, int64_t *in, int64_t *out)
{
    if (!t) {
        ct_error(CT_ERR_NULL, "%s: NULL tensor", op);
        return false;
    }
    if (tensor_ndim(t) < 2) {
        char d[96];
        ct_error(CT_ERR_SHAPE,
                 "%s: fan in and fan out need a tensor of at least 2 dims, got %s", op,
                 tensor_describe(t, d, sizeof d));
        return false;
    }
    const int64_t *s = tensor_shape(t);
    int64_t receptive = 1;
    for (int i = 2; i < tensor_ndim(t); i++) receptive *= s[i];
    *in = s[1] * receptive;
    *out = s[0] * receptive;
    return true;
}

int64_t nn_init_fan_in(const Tensor *t)
{
    int64_t in, out;
    return fan_parts("nn_init_fan_in", t, &in, &out) ? in : -1;
}

int64_t nn_init_fan_out(const Tensor *t)
{
    int64_t in, out;
    return fan_parts("nn_init_fan_out", t, &in, &out) ? out : -1;
}

double nn_init_gain(NnNonlinearity nl, double a)
{
    switch (nl) {
    case NN_NONLIN_LEAKY_RELU: return sqrt(2.0 / (1.0 + a * a));
    case NN_NONLIN_RELU: return sqrt(2.0);
    case NN_NONLIN_LINEAR: return 1.0;
    case NN_NONLIN_TANH: return 5.0 / 3.0;
    }
    ct_error(CT_ERR_INVALID, "nn_init_gain: unknown nonlinearity %d", (int)nl);
    return NAN;
}

/* Draws into a temporary of a private scope and copies it into t. */
static CtStatus fill_random(Tensor *t, bool normal, double p0, double p1, CtGenerator *g)
{
    CtScope *sc = ct_scope_open();
    if (!sc) return ct_error(CT_ERR_OOM, "nn_init: out of memory opening a scope");
    CtDType dt = tensor_dtype(t) == CT_F64 ? CT_F64 : CT_F32;
    int nd = tensor_ndim(t);
    const int64_t *shape = tensor_shape(t);
    CtDevice dev = tensor_device(t);
    Tensor *r = normal ? tensor_normal(g, nd, shape, p0, p1, dt, dev)
                       : tensor_uniform(g, nd, shape, p0, p1, dt, dev);
    CtStatus st = r ? tensor_copy_(t, r) : ct_last_status();
    ct_scope_close(sc);
    return st;
}

CtStatus nn_init_uniform_(Tensor *t, double lo, double hi, CtGenerator *g)
{
    if (!check_tensor("nn_init_uniform_", t)) return ct_last_status();
    return fill_random(t, false, lo, hi, g);
}

CtStatus nn_init_normal_(Tensor *t, double mean, double std, CtGenerator *g)
{
    if (!check_tensor("nn_init_normal_", t)) return ct_last_status();
    return fill_random(t, true, mean, std, g);
}

CtStatus nn_init_constant_(Tensor *t, double value)
{
    if (!t) return ct_error(CT_ERR_NULL, "nn_init_constant_: NULL tensor");
    return tensor_fill_(t, value);
}

/* std = gain / sqrt(fan) for the chosen fan, as torch.nn.init.kaiming_*. */
static CtStatus kaiming_std(const char *op, const Tensor *t, double a, NnFanMode mode,
                            NnNonlinearity nl, double *std)
{
    int64_t in, out;
    if (!check_tensor(op, t) || !fan_parts(op, t, &in, &out)) return ct_last_status();
    if (mode != NN_FAN_IN && mode != NN_FAN_OUT)
        return ct_error(CT_ERR_INVALID, "%s: unknown fan mode %d", op, (int)mode);
    double gain = nn_init_gain(nl, a);
    if (isnan(gain)) return ct_last_status();
    *std = gain / sqrt((double)(mode == NN_FAN_IN ? in : out));
    return CT_OK;
}

CtStatus nn_init_kaiming_uniform_(Tensor *t, double a, NnFanMode mode, NnNonlinearity nl,
                                  CtGenerator *g)
{
    /* PyTorch leaves tensors with a zero-size dim untouched (with a warning) */
    if (t && tensor_numel(t) == 0 && tensor_ndim(t) >= 2) return CT_OK;
    double std = 0;
    CtStatus st = kaiming_std("nn_init_kaiming_uniform_", t, a, mode, nl, &std);
    if (st != CT_OK) return st;
    double bound = sqrt(3.0) * std;
    return fill_random(t, false, -bound, bound, g);
}

CtStatus nn_init_kaiming_normal_(Tensor *t, double a, NnFanMode mode, NnNonlinearity nl,
                                 CtGenerator *g)
{
    if (t && tensor_numel(t) == 0 && tensor_ndim(t) >= 2) return CT_OK;
    double std = 0;
    CtStatus st = kaiming_std("nn_init_kaiming_normal_", t, a, mode, nl, &std);
    if (st != CT_OK) return st;
    return fill_random(t, true, 0.0, std, g);
}

/* std = gain * sqrt(2 / (fan_in + fan_out)), as torch.nn.init.xavier_*. */
static CtStatus xavier_std(const char *op, const Tensor *t, double gain, double *std)
{
    int64_t in, out;
    if (!check_tensor(op, t) || !fan_parts(op, t, &in, &out)) return ct_last_status();
    if (in + out == 0) return ct_error(CT_ERR_SHAPE, "%s: fan_in + fan_out is 0", op);
    *std = gain * sqrt(2.0 / (double)(in + out));
    return CT_OK;
}

CtStatus nn_init_xavier_uniform_(Tensor *t, double gain, CtGenerator *g)
{
    double std = 0;
    CtStatus st = xavier_std("nn_init_xavier_uniform_", t, gain, &std);
    if (st != CT_OK) return st;
    double bound = sqrt(3.0) * std;
    return fill_random(t, false, -bound, bound, g);
}

CtStatus nn_init_xavier_normal_(Tensor *t, double gain, CtGenerator *g)
{
    double std = 0;
    CtStatus st = xavier_std("nn_init_xavier_normal_", t, gain, &std);
    if (st != CT_OK) return st;
    return fill_random(t, true, 0.0, std, g);
}

/* erf⁻¹(y) for y in [-1, 1] (±inf at ±1, NaN outside): Giles' single-
 * precision approximation ("Approximating the erfinv function", 2010)
 * refined by two Newton steps, on erfc where |y| >= 0.5 so that the step
 * keeps its precision near ±1. */
static double erfinv(double y)
{
    if (!(y >= -1 && y <= 1)) return NAN;
    if (y < 0) return -erfinv(-y);
    if (y == 1) return INFINITY;
    double w = -log((1 - y) * (1 + y)), p;
    if (w < 5) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    double x = p * y;
    for (int i = 0; i < 2; i++) {
        double f = y < 0.5 ? erf(x) - y : (1 - y) - erfc(x); /* 1 - y is exact */
        x -= f / (M_2_SQRTPI * exp(-x * x));
    }
    return x;
}

/* Φ(x), the standard normal CDF. */
static double norm_cdf(double x)
{
    return 0.5 * erfc(-x / M_SQRT2);
}

/* torch.nn.init.trunc_normal_'s inverse-CDF method, in f64: u ~ U(2Φ(α) - 1,
 * 2Φ(β) - 1) with α = (a - mean)/std, β = (b - mean)/std, then
 * clamp(mean + std·√2·erfinv(u), a, b). */
CtStatus nn_init_trunc_normal_(Tensor *t, double mean, double std, double a, double b,
                               CtGenerator *g)
{
    static const char op[] = "nn_init_trunc_normal_";
    if (!check_tensor(op, t)) return ct_last_status();
    if (!isfinite(mean) || !(std > 0) || !isfinite(std) || isnan(a) || isnan(b) ||
        !(a < b))
        return ct_error(
            CT_ERR_INVALID,
            "%s: need a finite mean, a finite std > 0 and a < b, got mean %g, "
            "std %g, a %g, b %g",
            op, mean, std, a, b);
    double lo = 2 * norm_cdf((a - mean) / std) - 1,
           hi = 2 * norm_cdf((b - mean) / std) - 1;
    CtScope *sc = ct_scope_open();
    if (!sc) return ct_error(CT_ERR_OOM, "%s: out of memory opening a scope", op);
    Tensor *r =
        tensor_uniform(g, tensor_ndim(t), tensor_shape(t), lo, hi, CT_F64, ct_cpu());
    CtStatus st = r ? CT_OK : ct_last_status();
    if (r) {
        double *v = tensor_data(r);
        for (int64_t i = 0; i < tensor_numel(r); i++)
            v[i] = fmin(fmax(mean + std * M_SQRT2 * erfinv(v[i]), a), b);
        st = tensor_copy_(t, r);
    }
    ct_scope_close(sc);
    return st;
}
