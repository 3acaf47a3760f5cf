/* BatchNorm1d / BatchNorm2d, with or without weight and bias (affine) and
 * running statistics (track_running_stats), and SyncBatchNorm: the same
 * module converted in place (nn_convert_sync_batch_norm) to take its
 * training statistics over every process of a group. */
#include <string.h>

#include "nn_internal.h"

typedef struct BatchNorm {
    Module base;
    int64_t features;
    double eps, momentum;
    bool affine, track;
    bool is2d; /* made as BatchNorm2d (the input check of the plain layer) */
    /* NULL when !affine / !track */
    Tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
    /* SyncBatchNorm: the group's all-reduce, NULL for a single process */
    NnAllReduceFn all_reduce;
    void *all_reduce_ctx;
} BatchNorm;

static const ModuleVtable sync_vt;

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

static bool check_input(const Module *m, const Tensor *x)
{
    const BatchNorm *bn = (const BatchNorm *)m;
    const int nd = tensor_ndim(x);
    const bool sync = m->vt == &sync_vt;
    /* PyTorch's SyncBatchNorm takes any input of at least 2 dims */
    if (sync ? nd >= 2 : bn->is2d ? nd == 4 : (nd == 2 || nd == 3)) return true;
    char d[96];
    ct_error(CT_ERR_SHAPE, "%s(%lld): expected %s input, got %s", m->vt->type,
             (long long)bn->features,
             sync       ? "at least 2-d (N, C, *)"
             : bn->is2d ? "4-d (N, C, H, W)"
                        : "2-d or 3-d (N, C[, L])",
             tensor_describe(x, d, sizeof d));
    return false;
}

static Tensor *batch_norm_run(Module *m, Tensor *x, bool relu)
{
    BatchNorm *bn = (BatchNorm *)m;
    if (x && !check_input(m, x)) return NULL;
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
    return m && (m->vt == &bn1d_vt || m->vt == &bn2d_vt || m->vt == &sync_vt);
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
    bn->is2d = vt == &bn2d_vt;
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

/* ---------------------------------------------------------- SyncBatchNorm */

/* The per-channel sum of x over every dim but 1. x: (N, C, *) -> (C) */
static Tensor *channel_sum(Tensor *x)
{
    int dims[CT_MAX_DIMS], k = 0;
    dims[k++] = 0;
    for (int i = 2; i < tensor_ndim(x); i++) dims[k++] = i;
    return tensor_sum(x, k, dims, false);
}

/* t: (C) as (1, C, 1, ...) with nd dims, to broadcast against the input. */
static Tensor *per_channel(Tensor *t, int nd)
{
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) shape[i] = 1;
    shape[1] = tensor_numel(t);
    return tensor_reshape(t, nd, shape);
}

/* r = (1 - momentum) r + momentum * stat, outside autograd. */
/* running <- (1 - momentum) running + momentum stat for both statistics:
 * both new values are computed before either is written, so a failure
 * leaves both as they were. */
static CtStatus update_running(Tensor *const r[2], Tensor *const stat[2], double momentum)
{
    CtScope *s = ct_scope_open();
    if (!s) return ct_last_status();
    bool prev = ct_set_grad_enabled(false);
    Tensor *v[2];
    for (int i = 0; i < 2; i++)
        v[i] = tensor_add(tensor_mul_scalar(r[i], 1 - momentum),
                          tensor_mul_scalar(tensor_detach(stat[i]), momentum));
    CtStatus st = v[0] && v[1] ? tensor_copy_(r[0], v[0]) : ct_last_status();
    if (st == CT_OK) st = tensor_copy_(r[1], v[1]);
    ct_set_grad_enabled(prev);
    ct_scope_close(s);
    return st;
}

/* The count of samples per channel over every process, from the last entry
 * of the all-reduced [sums..., count]. Fails alike on every process: each
 * reads the same total. */
static bool global_count(Tensor *reduced, int64_t c, double *total)
{
    Tensor *last = tensor_slice(reduced, 0, c, c + 1, 1);
    if (!last || tensor_copy_to_host(last, total, CT_F64) != CT_OK) return false;
    if (*total > 1) return true;
    ct_error(CT_ERR_SHAPE,
             "SyncBatchNorm: expected more than 1 value per channel when training, "
             "got %.0f over all processes (%lld channels)",
             *total, (long long)c);
    return false;
}

typedef struct SyncArgs {
    Tensor *weight, *bias;
    double eps;
    NnAllReduceFn all_reduce;
    void *ctx;
} SyncArgs;

/* Statistics over the group. x: (N, C, *), N may differ between processes
 * and be 0. The mean comes from the all-reduced per-channel sums and
 * counts (one call), then the variance from the all-reduced sums of
 * squared deviations from it (a second call: exact where E[x^2] - mean^2
 * would cancel). Both all-reduces go through tensor_custom with the
 * all-reduce as its own backward (the adjoint of a sum over processes is
 * the sum of the gradients), so backward all-reduces the per-channel
 * gradient sums, in reverse order, on every process whose input requires
 * grad, and each process's input gradient is that of one process holding
 * the whole batch. Weight and bias gradients stay local, as PyTorch's (the
 * data-parallel gradient all-reduce combines them). */
static Tensor *sync_normalize(Tensor *x, const SyncArgs *a, double *total, Tensor **mean,
                              Tensor **var)
{
    const int64_t c = tensor_shape(x)[1];
    const int nd = tensor_ndim(x);
    const char *name = "SyncBatchNorm all-reduce";
    Tensor *cnt = tensor_full(1, (int64_t[]){1}, (double)(c ? tensor_numel(x) / c : 0),
                              tensor_dtype(x), tensor_device(x));
    Tensor *r1 = tensor_custom(tensor_cat(2, (Tensor *[]){channel_sum(x), cnt}, 0),
                               a->all_reduce, a->all_reduce, a->ctx, name);
    if (!r1 || !global_count(r1, c, total)) return NULL;
    *mean = tensor_div_scalar(tensor_slice(r1, 0, 0, c, 1), *total);
    Tensor *d = tensor_sub(x, per_channel(*mean, nd));
    Tensor *r2 = tensor_custom(channel_sum(tensor_mul(d, d)), a->all_reduce,
                               a->all_reduce, a->ctx, name);
    *var = tensor_div_scalar(r2, *total);
    Tensor *scale = tensor_pow_scalar(tensor_add_scalar(*var, a->eps), -0.5);
    if (a->weight) scale = tensor_mul(scale, a->weight);
    Tensor *y = tensor_mul(d, per_channel(scale, nd));
    if (a->bias) y = tensor_add(y, per_channel(a->bias, nd));
    return y;
}

/* x is float, at least 2-d; the per-channel tensors given have C elements;
 * both running statistics or neither. */
static bool check_sync_args(Tensor *x, Tensor *const per[4], double eps, double momentum)
{
    char d[96];
    if (tensor_ndim(x) < 2 || !ct_dtype_is_float(tensor_dtype(x))) {
        ct_error(CT_ERR_SHAPE,
                 "SyncBatchNorm: expected a float input of at least 2 dims "
                 "(N, C, *), got %s",
                 tensor_describe(x, d, sizeof d));
        return false;
    }
    static const char *const what[4] = {"running_mean", "running_var", "weight", "bias"};
    const int64_t c = tensor_shape(x)[1];
    for (int i = 0; i < 4; i++) {
        /* the running statistics are written: contiguous (not expanded) */
        if (!per[i] || (tensor_ndim(per[i]) == 1 && tensor_numel(per[i]) == c &&
                        (i > 1 || tensor_is_contiguous(per[i]))))
            continue;
        ct_error(CT_ERR_SHAPE, "SyncBatchNorm: %s is %s, expected (%lld)%s for input %s",
                 what[i], tensor_describe(per[i], d, sizeof d), (long long)c,
                 i < 2 ? " and contiguous" : "", tensor_describe(x, (char[96]){0}, 96));
        return false;
    }
    if (!per[0] != !per[1] || !(eps > 0) || !(momentum >= 0 && momentum <= 1)) {
        ct_error(CT_ERR_INVALID,
                 "SyncBatchNorm: need both running statistics or "
                 "neither, eps > 0 and momentum in [0, 1], got %s, %s, "
                 "%g, %g",
                 per[0] ? "running_mean" : "no running_mean",
                 per[1] ? "running_var" : "no running_var", eps, momentum);
        return false;
    }
    return true;
}

Tensor *nn_sync_batch_norm(Tensor *x, Tensor *running_mean, Tensor *running_var,
                           Tensor *weight, Tensor *bias, bool training, double momentum,
                           double eps, NnAllReduceFn all_reduce, void *ctx)
{
    if (!x) return NULL;
    if (!training || !all_reduce)
        return tensor_batch_norm(x, running_mean, running_var, weight, bias, training,
                                 momentum, eps);
    if (!check_sync_args(x, (Tensor *[]){running_mean, running_var, weight, bias}, eps,
                         momentum))
        return NULL;
    /* compute in the parameters' dtype (an autocast input is cast to it and
     * the result back) */
    const Tensor *like = weight ? weight : running_mean;
    const CtDType dt = like ? tensor_dtype(like) : tensor_dtype(x);
    Tensor *xc = tensor_dtype(x) == dt ? x : tensor_cast(x, dt);
    double total = 0;
    Tensor *mean = NULL, *var = NULL;
    const SyncArgs a = {weight, bias, eps, all_reduce, ctx};
    Tensor *y = xc ? sync_normalize(xc, &a, &total, &mean, &var) : NULL;
    if (y && tensor_dtype(y) != tensor_dtype(x)) y = tensor_cast(y, tensor_dtype(x));
    if (!y || !running_mean) return y;
    /* running_var takes the unbiased variance over the whole batch */
    Tensor *unbiased = tensor_mul_scalar(var, total / (total - 1));
    if (!unbiased || update_running((Tensor *[]){running_mean, running_var},
                                    (Tensor *[]){mean, unbiased}, momentum) != CT_OK)
        return NULL;
    return y;
}

static Tensor *sync_train(Module *m, Tensor *x, bool relu)
{
    BatchNorm *bn = (BatchNorm *)m;
    Tensor *y = nn_sync_batch_norm(x, bn->running_mean, bn->running_var, bn->weight,
                                   bn->bias, true, bn->momentum, bn->eps, bn->all_reduce,
                                   bn->all_reduce_ctx);
    if (y && relu) y = tensor_relu(y);
    if (y && bn->track && count_batch(bn->num_batches_tracked) != CT_OK) return NULL;
    return y;
}

/* Exactly BatchNorm in eval mode and with one process (no all-reduce), as
 * PyTorch's SyncBatchNorm falls back to F.batch_norm. */
static Tensor *sync_run(Module *m, Tensor *x, bool relu)
{
    BatchNorm *bn = (BatchNorm *)m;
    if (!x) return NULL;
    if (!m->training || !bn->all_reduce) return batch_norm_run(m, x, relu);
    if (!check_input(m, x)) return NULL;
    return sync_train(m, x, relu);
}

static Tensor *sync_forward(Module *m, Tensor *x)
{
    return sync_run(m, x, false);
}

static Tensor *sync_forward_relu(Module *m, Tensor *x)
{
    return sync_run(m, x, true);
}

static const ModuleVtable sync_vt = {.type = "SyncBatchNorm",
                                     .forward = sync_forward,
                                     .extra_repr = batch_norm_extra_repr,
                                     .forward_relu = sync_forward_relu};

bool nn_is_sync_batch_norm(const Module *m)
{
    return m && m->vt == &sync_vt;
}

static int64_t convert_tree(Module *m, NnAllReduceFn all_reduce, void *ctx)
{
    int64_t n = 0;
    if (nn_is_batch_norm(m)) {
        BatchNorm *bn = (BatchNorm *)m;
        m->vt = &sync_vt;
        bn->all_reduce = all_reduce;
        bn->all_reduce_ctx = ctx;
        n++;
    }
    for (int i = 0; i < nn_module_num_children(m); i++)
        n += convert_tree(nn_module_child_at(m, i), all_reduce, ctx);
    return n;
}

int64_t nn_convert_sync_batch_norm(Module *m, NnAllReduceFn all_reduce, void *ctx)
{
    if (!m) {
        ct_error(CT_ERR_NULL, "nn_convert_sync_batch_norm: NULL module");
        return -1;
    }
    return convert_tree(m, all_reduce, ctx);
}
