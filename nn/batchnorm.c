/* BatchNorm1d / BatchNorm2d, with or without weight and bias (affine) and
 * running statistics (track_running_stats). */
#include <string.h>

#include "nn_internal.h"

typedef struct BatchNorm {
    Module base;
    int64_t features;
    double eps, momentum;
    bool affine, track;
    /* NULL when !affine / !track */
    Tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
} BatchNorm;

/* num_batches_tracked += 1 (not recorded by autograd). */
static CtStatus count_batch(Tensor *n)
{
    if (tensor_device(n).type == CT_DEVICE_CPU) {
        (*(int64_t *)tensor_data(n))++;
        return CT_OK;
    }
    CtScope *s = ct_scope_open();
    if (!s) return ct_last_status();
    bool prev = ct_set_grad_enabled(false);
    CtStatus st = tensor_copy_(n, tensor_add_scalar(n, 1));
    ct_set_grad_enabled(prev);
    ct_scope_close(s);
    return st;
}

static Tensor *batch_norm_run(Module *m, Tensor *x, bool relu)
{
    BatchNorm *bn = (BatchNorm *)m;
    bool is2d = !strcmp(m->vt->type, "BatchNorm2d");
    int nd = x ? tensor_ndim(x) : 0;
    if (x && (is2d ? nd != 4 : (nd != 2 && nd != 3))) {
        char d[96];
        ct_error(CT_ERR_SHAPE, "%s(%lld): expected %s input, got %s", m->vt->type,
                 (long long)bn->features,
                 is2d ? "4-d (N, C, H, W)" : "2-d or 3-d (N, C[, L])",
                 tensor_describe(x, d, sizeof d));
        return NULL;
    }
    Tensor *y = (relu ? tensor_batch_norm_relu : tensor_batch_norm)(
        x, bn->running_mean, bn->running_var, bn->weight, bn->bias, m->training,
        bn->momentum, bn->eps);
    /* without running statistics, tensor_batch_norm uses batch statistics in
     * eval mode too (PyTorch's track_running_stats=False) */
    if (y && m->training && bn->track && count_batch(bn->num_batches_tracked) != CT_OK)
        return NULL;
    return y;
}

static Tensor *batch_norm_forward(Module *m, Tensor *x)
{
    return batch_norm_run(m, x, false);
}

static Tensor *batch_norm_forward_relu(Module *m, Tensor *x)
{
    return batch_norm_run(m, x, true);
}

static void batch_norm_extra_repr(const Module *m, char *buf, size_t n)
{
    const BatchNorm *bn = (const BatchNorm *)m;
    char e[32], mo[32];
    snprintf(buf, n, "%lld, eps=%s, momentum=%s, affine=%s, track_running_stats=%s",
             (long long)bn->features, nn_format_float(bn->eps, e, sizeof e),
             nn_format_float(bn->momentum, mo, sizeof mo), bn->affine ? "True" : "False",
             bn->track ? "True" : "False");
}

static const ModuleVtable bn1d_vt = {.type = "BatchNorm1d",
                                     .forward = batch_norm_forward,
                                     .extra_repr = batch_norm_extra_repr,
                                     .forward_relu = batch_norm_forward_relu};
static const ModuleVtable bn2d_vt = {.type = "BatchNorm2d",
                                     .forward = batch_norm_forward,
                                     .extra_repr = batch_norm_extra_repr,
                                     .forward_relu = batch_norm_forward_relu};

bool nn_is_batch_norm(const Module *m)
{
    return m && (m->vt == &bn1d_vt || m->vt == &bn2d_vt);
}

/* Registers weight (ones) and bias (zeros) when affine, then running_mean
 * (zeros), running_var (ones) and num_batches_tracked (0-d i64) when
 * tracking, in PyTorch's order. */
static CtStatus register_tensors(BatchNorm *bn)
{
    const int64_t c = bn->features;
    Tensor *t[5] = {NULL};
    CtScope *s = ct_scope_open();
    if (s) {
        if (bn->affine) {
            t[0] = nn_keep(tensor_ones(1, &c, CT_F32, ct_cpu()));
            t[1] = nn_keep(tensor_zeros(1, &c, CT_F32, ct_cpu()));
        }
        if (bn->track) {
            t[2] = nn_keep(tensor_zeros(1, &c, CT_F32, ct_cpu()));
            t[3] = nn_keep(tensor_ones(1, &c, CT_F32, ct_cpu()));
            t[4] = nn_keep(tensor_zeros(0, NULL, CT_I64, ct_cpu()));
        }
        ct_scope_close(s);
    }
    const NnSlot all[5] = {{"weight", t[0], &bn->weight, false},
                           {"bias", t[1], &bn->bias, false},
                           {"running_mean", t[2], &bn->running_mean, true},
                           {"running_var", t[3], &bn->running_var, true},
                           {"num_batches_tracked", t[4], &bn->num_batches_tracked, true}};
    const NnSlot *first = bn->affine ? all : all + 2;
    int n = (bn->affine ? 2 : 0) + (bn->track ? 3 : 0);
    return nn_register_slots(&bn->base, n, first);
}

static Module *batch_norm(const ModuleVtable *vt, int64_t c, double eps, double momentum,
                          bool affine, bool track)
{
    if (c <= 0 || !(eps > 0) || !(momentum >= 0 && momentum <= 1)) {
        ct_error(
            CT_ERR_INVALID,
            "%s: need num_features > 0, eps > 0 and momentum in [0, 1], got %lld, %g, %g",
            vt->type, (long long)c, eps, momentum);
        return NULL;
    }
    BatchNorm *bn = (BatchNorm *)nn_module_alloc(sizeof(BatchNorm), vt);
    if (!bn) return NULL;
    bn->features = c;
    bn->eps = eps;
    bn->momentum = momentum;
    bn->affine = affine;
    bn->track = track;
    if ((affine || track) && register_tensors(bn) != CT_OK) {
        nn_module_free(&bn->base);
        return NULL;
    }
    return &bn->base;
}

Module *nn_batch_norm1d(int64_t num_features, double eps, double momentum)
{
    return batch_norm(&bn1d_vt, num_features, eps, momentum, true, true);
}

Module *nn_batch_norm2d(int64_t num_features, double eps, double momentum)
{
    return batch_norm(&bn2d_vt, num_features, eps, momentum, true, true);
}

Module *nn_batch_norm1d_ex(int64_t num_features, double eps, double momentum, bool affine,
                           bool track_running_stats)
{
    return batch_norm(&bn1d_vt, num_features, eps, momentum, affine, track_running_stats);
}

Module *nn_batch_norm2d_ex(int64_t num_features, double eps, double momentum, bool affine,
                           bool track_running_stats)
{
    return batch_norm(&bn2d_vt, num_features, eps, momentum, affine, track_running_stats);
}
