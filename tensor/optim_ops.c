/* Front-ends of the optimizer block ops (ctrainer/tensor_optim.h): operand
 * checks, the host-side terms, then one dispatch on the operands' device. */
#include <math.h>
#include <stdlib.h>

#include "ctrainer/tensor_optim.h"
#include "internal.h"

/* Checks operand k (named names[k]) against operand 0; NULL operands past
 * the required ones are skipped. */
static CtStatus check_operands(const char *op, const Tensor *const *t,
                               const char *const *names, int n, int required)
{
    char d0[96], dk[96];
    for (int k = 0; k < n; k++) {
        if (!t[k]) {
            if (k >= required) continue;
            CtStatus st = ct_last_status();
            return st != CT_OK ? st
                               : ct_error(CT_ERR_NULL, "%s: %s is NULL", op, names[k]);
        }
        const char *why = NULL;
        CtStatus code = CT_ERR_DTYPE;
        if (t[k]->dtype != CT_F32 && t[k]->dtype != CT_F64)
            why = "must be f32 or f64";
        else if (!tensor_is_contiguous(t[k]))
            why = "must be contiguous", code = CT_ERR_INVALID;
        else if (k > 0 && t[k]->dtype != t[0]->dtype)
            why = "has another dtype than";
        else if (k > 0 && tensor_numel(t[k]) != tensor_numel(t[0]))
            why = "has another numel than", code = CT_ERR_SHAPE;
        else if (k > 0 && !ct_device_eq(tensor_device(t[k]), tensor_device(t[0])))
            why = "is on another device than", code = CT_ERR_DEVICE;
        if (!why) continue;
        tensor_describe(t[k], dk, sizeof dk);
        if (why[0] == 'm') return ct_error(code, "%s: %s %s %s", op, names[k], dk, why);
        return ct_error(code, "%s: %s %s %s %s %s", op, names[k], dk, why, names[0],
                        tensor_describe(t[0], d0, sizeof d0));
    }
    return CT_OK;
}

/* Checks param, grad and the state buffers (the first `required` of them
 * must be given; names[] lists all operands in that order), then runs
 * `kind` with out = {param, bufs...} and in = {grad}; with zero_grad, grad
 * is out[CT_OPTIM_ZERO_GRAD] too, and counts as zero-filled after it. */
static CtStatus run_step(CtOp kind, const char *op, const char *const *names,
                         Tensor *param, Tensor *grad, Tensor *const *bufs, int nbuf,
                         int required, bool zero_grad, const void *params)
{
    const Tensor *t[2 + CT_CALL_MAX_OUT] = {param, grad};
    CtOpCall c = {.op = kind, .out = {param}, .in = {grad}, .params = params};
    for (int b = 0; b < nbuf; b++) t[2 + b] = c.out[1 + b] = bufs[b];
    if (zero_grad) c.out[CT_OPTIM_ZERO_GRAD] = grad;
    CtStatus st = check_operands(op, t, names, 2 + nbuf, 2 + required);
    if (st == CT_OK) st = ct_dispatch(&c);
    if (st == CT_OK && zero_grad && !ct_in_backward()) ct_storage_zeroed(grad);
    return st;
}

static CtStatus null_args(const char *op)
{
    return ct_error(CT_ERR_NULL, "%s: NULL args", op);
}

CtStatus tensor_sgd_step_(Tensor *param, Tensor *grad, Tensor *momentum_buf,
                          const TensorSgdArgs *a)
{
    const char *op = "tensor_sgd_step_";
    static const char *const names[] = {"param", "grad", "momentum_buf"};
    if (!a) return null_args(op);
    if (a->nesterov && !momentum_buf)
        return ct_error(CT_ERR_INVALID, "%s: nesterov needs a momentum_buf", op);
    CtSgdParams p = {.lr = a->lr,
                     .weight_decay = a->weight_decay,
                     .momentum = a->momentum,
                     .one_minus_dampening = 1.0 - a->dampening,
                     .first = a->first,
                     .nesterov = a->nesterov};
    return run_step(CT_OP_OPTIM_SGD, op, names, param, grad, &momentum_buf, 1, 0,
                    a->zero_grad, &p);
}

CtStatus tensor_adam_step_(Tensor *param, Tensor *grad, Tensor *exp_avg,
                           Tensor *exp_avg_sq, Tensor *max_exp_avg_sq,
                           const TensorAdamArgs *a)
{
    const char *op = "tensor_adam_step_";
    static const char *const names[] = {"param", "grad", "exp_avg", "exp_avg_sq",
                                        "max_exp_avg_sq"};
    if (!a) return null_args(op);
    if (a->step < 1)
        return ct_error(CT_ERR_INVALID, "%s: step %lld must be >= 1", op,
                        (long long)a->step);
    double t = (double)a->step;
    CtAdamParams p = {.decay_mul = a->decoupled ? 1.0 - a->lr * a->weight_decay : 1.0,
                      .l2 = a->decoupled ? 0.0 : a->weight_decay,
                      .beta1 = a->beta1,
                      .beta2 = a->beta2,
                      .one_minus_beta1 = 1.0 - a->beta1,
                      .one_minus_beta2 = 1.0 - a->beta2,
                      .step_size = a->lr / (1.0 - pow(a->beta1, t)),
                      .bc2_sqrt = sqrt(1.0 - pow(a->beta2, t)),
                      .eps = a->eps};
    Tensor *bufs[] = {exp_avg, exp_avg_sq, max_exp_avg_sq};
    return run_step(CT_OP_OPTIM_ADAM, op, names, param, grad, bufs, 3, 2, a->zero_grad,
                    &p);
}

CtStatus tensor_rmsprop_step_(Tensor *param, Tensor *grad, Tensor *square_avg,
                              Tensor *momentum_buf, Tensor *grad_avg,
                              const TensorRmspropArgs *a)
{
    const char *op = "tensor_rmsprop_step_";
    static const char *const names[] = {"param", "grad", "square_avg", "momentum_buf",
                                        "grad_avg"};
    if (!a) return null_args(op);
    CtRmspropParams p = {.lr = a->lr,
                         .weight_decay = a->weight_decay,
                         .momentum = a->momentum,
                         .alpha = a->alpha,
                         .one_minus_alpha = 1.0 - a->alpha,
                         .eps = a->eps};
    Tensor *bufs[] = {square_avg, momentum_buf, grad_avg};
    return run_step(CT_OP_OPTIM_RMSPROP, op, names, param, grad, bufs, 3, 1, a->zero_grad,
                    &p);
}

/* ------------------------------------------------------------ clipping */

static CtStatus in_place(CtOp kind, const char *op, Tensor *t, double value)
{
    const Tensor *ts[] = {t};
    const char *names[] = {"t"};
    CtStatus st = check_operands(op, ts, names, 1, 1);
    if (st != CT_OK) return st;
    CtFillParams p = {value};
    CtOpCall c = {.op = kind, .out = {t}, .params = &p};
    return tensor_numel(t) ? ct_dispatch(&c) : CT_OK;
}

CtStatus tensor_scale_(Tensor *t, double scale)
{
    return in_place(CT_OP_BLOCK_SCALE, "tensor_scale_", t, scale);
}

CtStatus tensor_clamp_abs_(Tensor *t, double clip)
{
    if (!(clip >= 0))
        return ct_error(CT_ERR_INVALID, "tensor_clamp_abs_: clip %g must be >= 0", clip);
    return in_place(CT_OP_BLOCK_CLAMP, "tensor_clamp_abs_", t, clip);
}

CtStatus tensor_norm_parts(const Tensor *t, double norm_type, double *out)
{
    const char *op = "tensor_norm_parts";
    const Tensor *ts[] = {t};
    const char *names[] = {"t"};
    CtStatus st = check_operands(op, ts, names, 1, 1);
    if (st != CT_OK) return st;
    bool max_abs = isinf(norm_type) && norm_type > 0;
    if (!out || (norm_type != 2 && !max_abs))
        return ct_error(out ? CT_ERR_INVALID : CT_ERR_NULL,
                        "%s: %s (norm_type %g: 2 or INFINITY)", op,
                        out ? "unsupported norm_type" : "NULL out", norm_type);
    int64_t nch = (tensor_numel(t) + CT_NORM_CHUNK - 1) / CT_NORM_CHUNK;
    *out = 0;
    if (nch == 0) return CT_OK;
    Tensor *part = ct_tensor_new_persistent(1, &nch, CT_F64, tensor_device(t));
    double *host = malloc((size_t)nch * sizeof *host);
    if (!part || !host) {
        tensor_free(part);
        free(host);
        return ct_error(CT_ERR_OOM, "%s: out of memory for %lld partials", op,
                        (long long)nch);
    }
    CtBlockNormParams p = {max_abs};
    CtOpCall c = {.op = CT_OP_BLOCK_NORM, .out = {part}, .in = {t}, .params = &p};
    st = ct_dispatch(&c);
    if (st == CT_OK) st = tensor_copy_to_host(part, host, CT_F64);
    double acc = 0;
    for (int64_t i = 0; i < nch && st == CT_OK; i++)
        if (!max_abs)
            acc += host[i];
        else if (host[i] > acc || isnan(host[i]))
            acc = isnan(acc) ? acc : host[i];
    if (st == CT_OK) *out = acc;
    tensor_free(part);
    free(host);
    return st;
}
