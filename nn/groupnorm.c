/* GroupNorm: each sample's channels split into num_groups groups, each
 * group normalised over its channels and positions, then a per-channel
 * affine transform. Built from tensor ops (a reshape to (N, G, rest) and
 * tensor_layer_norm over the last dim), so autograd and every backend come
 * with them. */
#include "nn_internal.h"

typedef struct GroupNorm {
    Module base;
    int64_t groups, channels;
    double eps;
    bool affine;
    Tensor *weight, *bias; /* (C), NULL unless affine */
} GroupNorm;

static bool group_norm_input_ok(const GroupNorm *gn, Tensor *x)
{
    if (tensor_ndim(x) < 2 || tensor_size(x, 1) != gn->channels) {
        char d[96];
        ct_error(
            CT_ERR_SHAPE,
            "GroupNorm(%lld, %lld): input %s is not (N, %lld, *) with at least 2 dims",
            (long long)gn->groups, (long long)gn->channels,
            tensor_describe(x, d, sizeof d), (long long)gn->channels);
        return false;
    }
    return true;
}

/* x * weight + bias with weight and bias (C) broadcast over (N, C, *). */
static Tensor *group_norm_affine(const GroupNorm *gn, Tensor *y, int ndim)
{
    int64_t shape[CT_MAX_DIMS];
    shape[0] = gn->channels;
    for (int i = 1; i < ndim - 1; i++) shape[i] = 1;
    Tensor *w = tensor_reshape(gn->weight, ndim - 1, shape);
    Tensor *b = tensor_reshape(gn->bias, ndim - 1, shape);
    return tensor_add(tensor_mul(y, w), b);
}

static Tensor *group_norm_forward(Module *m, Tensor *x)
{
    GroupNorm *gn = (GroupNorm *)m;
    if (!x) return NULL;
    if (!group_norm_input_ok(gn, x)) return NULL;
    const int ndim = tensor_ndim(x);
    /* (N, C, *) -> (N, G, C/G * prod(*)): each group is one row */
    int64_t row = gn->channels / gn->groups;
    for (int i = 2; i < ndim; i++) row *= tensor_size(x, i);
    const int64_t grouped[3] = {tensor_size(x, 0), gn->groups, row};
    Tensor *y = tensor_layer_norm(tensor_reshape(x, 3, grouped), 1, NULL, NULL, gn->eps);
    y = tensor_reshape(y, ndim, tensor_shape(x));
    return gn->affine ? group_norm_affine(gn, y, ndim) : y;
}

static void group_norm_extra_repr(const Module *m, char *buf, size_t n)
{
    const GroupNorm *gn = (const GroupNorm *)m;
    char e[32];
    snprintf(buf, n, "%lld, %lld, eps=%s, affine=%s", (long long)gn->groups,
             (long long)gn->channels, nn_format_float(gn->eps, e, sizeof e),
             gn->affine ? "True" : "False");
}

static const ModuleVtable group_norm_vt = {.type = "GroupNorm",
                                           .forward = group_norm_forward,
                                           .extra_repr = group_norm_extra_repr};

/* Registers weight (ones) and bias (zeros) of shape (C). */
static CtStatus register_affine(GroupNorm *gn)
{
    Tensor *w = NULL, *b = NULL;
    CtScope *s = ct_scope_open();
    if (s) {
        w = nn_keep(tensor_ones(1, &gn->channels, CT_F32, ct_cpu()));
        b = nn_keep(tensor_zeros(1, &gn->channels, CT_F32, ct_cpu()));
        ct_scope_close(s);
    }
    const NnSlot slots[2] = {{"weight", w, &gn->weight, false},
                             {"bias", b, &gn->bias, false}};
    return nn_register_slots(&gn->base, 2, slots);
}

Module *nn_group_norm(int64_t num_groups, int64_t num_channels, double eps, bool affine)
{
    if (num_groups <= 0 || num_channels <= 0 || !(eps > 0)) {
        ct_error(CT_ERR_INVALID,
                 "GroupNorm: need num_groups > 0, num_channels > 0 and eps > 0 "
                 "(num_groups = %lld, num_channels = %lld, eps = %g)",
                 (long long)num_groups, (long long)num_channels, eps);
        return NULL;
    }
    if (num_channels % num_groups != 0) {
        ct_error(CT_ERR_INVALID,
                 "GroupNorm: num_channels must be divisible by num_groups "
                 "(num_groups = %lld, num_channels = %lld)",
                 (long long)num_groups, (long long)num_channels);
        return NULL;
    }
    GroupNorm *gn = (GroupNorm *)nn_module_alloc(sizeof(GroupNorm), &group_norm_vt);
    if (!gn) return NULL;
    gn->groups = num_groups;
    gn->channels = num_channels;
    gn->eps = eps;
    gn->affine = affine;
    if (affine && register_affine(gn) != CT_OK) {
        nn_module_free(&gn->base);
        return NULL;
    }
    return &gn->base;
}
