/* Conv2d: weight (out, in/groups, kh, kw), bias (out); explicit, "valid" or
 * "same" padding. "same" with an odd total padding in a dim pads one more
 * on both sides and drops the first output row (column): PyTorch puts the
 * extra zero at the end, and the window of output i then starts at the
 * same input position as output i + 1 of the wider symmetric padding. */
#include <math.h>
#include <string.h>

#include "nn_internal.h"

typedef struct Conv2d {
    Module base;
    int64_t in, out;
    int kh, kw;
    NnConvPadding mode;
    bool cut[2];       /* "same": drop the first output row / column */
    CtConv2dArgs args; /* zero fields resolved to PyTorch's defaults */
    Tensor *weight, *bias;
} Conv2d;

/* Checks x against c; records an error and returns false otherwise. */
static bool input_ok(Module *m, const Tensor *x)
{
    const Conv2d *c = (const Conv2d *)m;
    if (x && (tensor_ndim(x) != 4 || tensor_size(x, 1) != c->in)) {
        char d[96], self[256];
        ct_error(CT_ERR_SHAPE, "%s: expected input (N, %lld, H, W), got %s",
                 nn_module_describe(m, self, sizeof self), (long long)c->in,
                 tensor_describe(x, d, sizeof d));
        return false;
    }
    return true;
}

static Tensor *run(Conv2d *c, Tensor *x, bool relu)
{
    if (!input_ok(&c->base, x)) return NULL;
    CtConv2dArgs a = c->args;
    a.relu = relu;
    Tensor *y = tensor_conv2d(x, c->weight, c->bias, &a);
    for (int i = 0; i < 2; i++)
        if (y && c->cut[i]) y = tensor_slice(y, 2 + i, 1, tensor_size(y, 2 + i), 1);
    return y;
}

static Tensor *conv2d_forward(Module *m, Tensor *x)
{
    return run((Conv2d *)m, x, false);
}

static Tensor *conv2d_forward_relu(Module *m, Tensor *x)
{
    return run((Conv2d *)m, x, true);
}

/* PyTorch's Conv2d repr: stride always, the rest only when not default. */
static void conv2d_extra_repr(const Module *m, char *buf, size_t n)
{
    const Conv2d *c = (const Conv2d *)m;
    const CtConv2dArgs *a = &c->args;
    int len = snprintf(buf, n, "%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d)",
                       (long long)c->in, (long long)c->out, c->kh, c->kw, a->stride[0],
                       a->stride[1]);
#define CONV_APPEND(...)                                                                 \
    if (len >= 0 && (size_t)len < n)                                                     \
    len += snprintf(buf + len, n - (size_t)len, __VA_ARGS__)
    if (c->mode != NN_CONV_PADDING_EXPLICIT) {
        CONV_APPEND(", padding=%s", c->mode == NN_CONV_PADDING_SAME ? "same" : "valid");
    } else if (a->padding[0] || a->padding[1]) {
        CONV_APPEND(", padding=(%d, %d)", a->padding[0], a->padding[1]);
    }
    if (a->dilation[0] != 1 || a->dilation[1] != 1)
        CONV_APPEND(", dilation=(%d, %d)", a->dilation[0], a->dilation[1]);
    if (a->groups != 1) CONV_APPEND(", groups=%d", a->groups);
    if (!c->bias) CONV_APPEND(", bias=False");
#undef CONV_APPEND
}

static const ModuleVtable conv2d_vt = {.type = "Conv2d",
                                       .forward = conv2d_forward,
                                       .extra_repr = conv2d_extra_repr,
                                       .forward_relu = conv2d_forward_relu};

static CtConv2dArgs resolve(const CtConv2dArgs *args)
{
    CtConv2dArgs a;
    memset(&a, 0, sizeof a);
    if (args) a = *args;
    for (int i = 0; i < 2; i++) {
        if (a.stride[i] == 0) a.stride[i] = 1;
        if (a.dilation[i] == 0) a.dilation[i] = 1;
    }
    if (a.groups == 0) a.groups = 1;
    return a;
}

static bool valid(int64_t in, int64_t out, int kh, int kw, const CtConv2dArgs *a,
                  NnConvPadding mode)
{
    if (in <= 0 || out <= 0 || kh <= 0 || kw <= 0) {
        ct_error(
            CT_ERR_INVALID,
            "Conv2d: channels and kernel size must be positive, got in=%lld, out=%lld, "
            "kernel_size=(%d, %d)",
            (long long)in, (long long)out, kh, kw);
        return false;
    }
    if (mode < NN_CONV_PADDING_EXPLICIT || mode > NN_CONV_PADDING_SAME) {
        ct_error(CT_ERR_INVALID, "Conv2d: unknown padding mode %d", (int)mode);
        return false;
    }
    if (mode != NN_CONV_PADDING_EXPLICIT && (a->padding[0] || a->padding[1])) {
        ct_error(CT_ERR_INVALID, "Conv2d: padding=%s with args->padding (%d, %d) set",
                 mode == NN_CONV_PADDING_SAME ? "same" : "valid", a->padding[0],
                 a->padding[1]);
        return false;
    }
    if (mode == NN_CONV_PADDING_SAME && (a->stride[0] != 1 || a->stride[1] != 1)) {
        ct_error(CT_ERR_INVALID,
                 "Conv2d: padding=same is not supported for strided convolutions "
                 "(stride (%d, %d))",
                 a->stride[0], a->stride[1]);
        return false;
    }
    if (a->groups < 0 || in % a->groups || out % a->groups) {
        ct_error(CT_ERR_INVALID, "Conv2d: groups=%d must divide in=%lld and out=%lld",
                 a->groups, (long long)in, (long long)out);
        return false;
    }
    if (a->relu) { /* the layer stays a plain Conv2d, as its repr says */
        ct_error(CT_ERR_INVALID,
                 "Conv2d: args.relu is for tensor_conv2d; follow the layer "
                 "with nn_relu() or call nn_forward_relu");
        return false;
    }
    for (int i = 0; i < 2; i++) {
        if (a->stride[i] < 0 || a->dilation[i] < 0 || a->padding[i] < 0) {
            ct_error(CT_ERR_INVALID, "Conv2d: negative stride, padding or dilation");
            return false;
        }
    }
    return true;
}

/* "same": dilation * (k - 1) zeros in all, half before; an odd total pads
 * one more on both sides and cuts the first output (see the top). */
static void same_padding(Conv2d *c)
{
    const int k[2] = {c->kh, c->kw};
    for (int i = 0; i < 2; i++) {
        int total = c->args.dilation[i] * (k[i] - 1);
        c->cut[i] = total % 2 != 0;
        c->args.padding[i] = total / 2 + c->cut[i];
    }
}

Module *nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                  const CtConv2dArgs *args, bool bias, CtGenerator *g)
{
    return nn_conv2d_ex(in_channels, out_channels, kernel_size, kernel_size, args,
                        NN_CONV_PADDING_EXPLICIT, bias, g);
}

Module *nn_conv2d_ex(int64_t in_channels, int64_t out_channels, int kernel_h,
                     int kernel_w, const CtConv2dArgs *args, NnConvPadding padding,
                     bool bias, CtGenerator *g)
{
    CtConv2dArgs a = resolve(args);
    if (!valid(in_channels, out_channels, kernel_h, kernel_w, &a, padding)) return NULL;
    if (!g) {
        ct_error(CT_ERR_NULL, "Conv2d: NULL generator");
        return NULL;
    }
    Conv2d *c = (Conv2d *)nn_module_alloc(sizeof(Conv2d), &conv2d_vt);
    if (!c) return NULL;
    c->in = in_channels;
    c->out = out_channels;
    c->kh = kernel_h;
    c->kw = kernel_w;
    c->mode = padding;
    c->args = a;
    if (padding == NN_CONV_PADDING_SAME) same_padding(c);
    /* kaiming_uniform(a=sqrt(5)) and the bias both give U(-1/sqrt(fan_in), ..)
     * with fan_in = in/groups * kh * kw */
    int64_t cin = in_channels / a.groups;
    double bound = 1.0 / sqrt((double)(cin * kernel_h * kernel_w));
    const int64_t shape[4] = {out_channels, cin, kernel_h, kernel_w};
    Tensor *w = NULL, *b = NULL;
    CtScope *s = ct_scope_open();
    if (s) {
        w = nn_keep(tensor_uniform(g, 4, shape, -bound, bound, CT_F32, ct_cpu()));
        if (bias && w)
            b = nn_keep(
                tensor_uniform(g, 1, &out_channels, -bound, bound, CT_F32, ct_cpu()));
        ct_scope_close(s);
    }
    const NnSlot slots[2] = {{"weight", w, &c->weight, false},
                             {"bias", b, &c->bias, false}};
    if (nn_register_slots(&c->base, bias ? 2 : 1, slots) != CT_OK) {
        nn_module_free(&c->base);
        return NULL;
    }
    return &c->base;
}
