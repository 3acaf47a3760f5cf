/* Pooling layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d. */
#include "nn_internal.h"

typedef struct Pool2d {
    Module base;
    CtPool2dArgs args; /* stride resolved (0 -> kernel) */
    int out_h, out_w;  /* adaptive only */
} Pool2d;

static Tensor *max_pool_forward(Module *m, Tensor *x)
{
    return tensor_max_pool2d(x, &((Pool2d *)m)->args);
}

static Tensor *avg_pool_forward(Module *m, Tensor *x)
{
    return tensor_avg_pool2d(x, &((Pool2d *)m)->args);
}

static Tensor *adaptive_forward(Module *m, Tensor *x)
{
    Pool2d *p = (Pool2d *)m;
    return tensor_adaptive_avg_pool2d(x, p->out_h, p->out_w);
}

/* PyTorch prints ints for square settings built from ints. */
static void max_pool_extra_repr(const Module *m, char *buf, size_t n)
{
    const CtPool2dArgs *a = &((const Pool2d *)m)->args;
    char k[32], s[32], p[32];
    snprintf(buf, n, "kernel_size=%s, stride=%s, padding=%s, dilation=1, ceil_mode=%s",
             nn_format_pair(a->kernel[0], a->kernel[1], false, k, sizeof k),
             nn_format_pair(a->stride[0], a->stride[1], false, s, sizeof s),
             nn_format_pair(a->padding[0], a->padding[1], false, p, sizeof p),
             a->ceil_mode ? "True" : "False");
}

static void avg_pool_extra_repr(const Module *m, char *buf, size_t n)
{
    const CtPool2dArgs *a = &((const Pool2d *)m)->args;
    char k[32], s[32], p[32];
    snprintf(buf, n, "kernel_size=%s, stride=%s, padding=%s",
             nn_format_pair(a->kernel[0], a->kernel[1], false, k, sizeof k),
             nn_format_pair(a->stride[0], a->stride[1], false, s, sizeof s),
             nn_format_pair(a->padding[0], a->padding[1], false, p, sizeof p));
}

static void adaptive_extra_repr(const Module *m, char *buf, size_t n)
{
    const Pool2d *p = (const Pool2d *)m;
    char o[32];
    snprintf(buf, n, "output_size=%s",
             nn_format_pair(p->out_h, p->out_w, true, o, sizeof o));
}

static const ModuleVtable max_pool_vt = {
    .type = "MaxPool2d", .forward = max_pool_forward, .extra_repr = max_pool_extra_repr};
static const ModuleVtable avg_pool_vt = {
    .type = "AvgPool2d", .forward = avg_pool_forward, .extra_repr = avg_pool_extra_repr};
static const ModuleVtable adaptive_vt = {.type = "AdaptiveAvgPool2d",
                                         .forward = adaptive_forward,
                                         .extra_repr = adaptive_extra_repr};

static Module *pool(const ModuleVtable *vt, const CtPool2dArgs *args)
{
    if (!args) {
        ct_error(CT_ERR_NULL, "%s: NULL args (kernel size needed)", vt->type);
        return NULL;
    }
    CtPool2dArgs a = *args;
    for (int i = 0; i < 2; i++) {
        if (a.stride[i] == 0) a.stride[i] = a.kernel[i];
        if (a.kernel[i] <= 0 || a.stride[i] <= 0 || a.padding[i] < 0 ||
            a.padding[i] * 2 > a.kernel[i]) {
            ct_error(CT_ERR_INVALID,
                     "%s: need kernel > 0, stride > 0 and 0 <= padding <= kernel/2, got "
                     "kernel (%d, %d), stride (%d, %d), padding (%d, %d)",
                     vt->type, args->kernel[0], args->kernel[1], args->stride[0],
                     args->stride[1], args->padding[0], args->padding[1]);
            return NULL;
        }
    }
    Pool2d *p = (Pool2d *)nn_module_alloc(sizeof(Pool2d), vt);
    if (!p) return NULL;
    p->args = a;
    return &p->base;
}

Module *nn_max_pool2d(const CtPool2dArgs *args)
{
    return pool(&max_pool_vt, args);
}

Module *nn_avg_pool2d(const CtPool2dArgs *args)
{
    return pool(&avg_pool_vt, args);
}

Module *nn_adaptive_avg_pool2d(int out_h, int out_w)
{
    if (out_h <= 0 || out_w <= 0) {
        ct_error(CT_ERR_INVALID,
                 "AdaptiveAvgPool2d: output size must be positive, got (%d, %d)", out_h,
                 out_w);
        return NULL;
    }
    Pool2d *p = (Pool2d *)nn_module_alloc(sizeof(Pool2d), &adaptive_vt);
    if (!p) return NULL;
    p->out_h = out_h;
    p->out_w = out_w;
    return &p->base;
}
