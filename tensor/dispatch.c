/* Op dispatch through backend instances (tensor/backend.h). */
#include "internal.h"

const char *ct_op_name(CtOp op)
{
    static const char *names[CT_OP_COUNT] = {
        [CT_OP_FILL] = "fill",
        [CT_OP_COPY] = "copy",
        [CT_OP_RNG] = "rng",
        [CT_OP_BINARY] = "binary",
        [CT_OP_UNARY] = "unary",
        [CT_OP_UNARY_BWD] = "unary_backward",
        [CT_OP_WHERE] = "where",
        [CT_OP_REDUCE] = "reduce",
        [CT_OP_ARG_REDUCE] = "arg_reduce",
        [CT_OP_SOFTMAX] = "softmax",
        [CT_OP_SOFTMAX_BWD] = "softmax_backward",
        [CT_OP_CROSS_ENTROPY] = "cross_entropy",
        [CT_OP_CROSS_ENTROPY_BWD] = "cross_entropy_backward",
        [CT_OP_MATMUL] = "matmul",
        [CT_OP_CONV2D] = "conv2d",
        [CT_OP_CONV2D_BWD_DATA] = "conv2d_backward_data",
        [CT_OP_CONV2D_BWD_WEIGHT] = "conv2d_backward_weight",
        [CT_OP_POOL2D] = "pool2d",
        [CT_OP_POOL2D_BWD] = "pool2d_backward",
        [CT_OP_BATCH_NORM] = "batch_norm",
        [CT_OP_BATCH_NORM_BWD] = "batch_norm_backward",
        [CT_OP_LAYER_NORM] = "layer_norm",
        [CT_OP_LAYER_NORM_BWD] = "layer_norm_backward",
        [CT_OP_INDEX_SELECT] = "index_select",
        [CT_OP_INDEX_ADD] = "index_add",
        [CT_OP_GATHER] = "gather",
        [CT_OP_SCATTER_ADD] = "scatter_add",
        [CT_OP_ONE_HOT] = "one_hot",
        [CT_OP_UNSCALE] = "unscale",
        [CT_OP_OPTIM_SGD] = "optim_sgd",
        [CT_OP_OPTIM_ADAM] = "optim_adam",
        [CT_OP_OPTIM_RMSPROP] = "optim_rmsprop",
        [CT_OP_BLOCK_NORM] = "block_norm",
        [CT_OP_BLOCK_SCALE] = "block_scale",
        [CT_OP_BLOCK_CLAMP] = "block_clamp",
    };
    return (unsigned)op < CT_OP_COUNT && names[op] ? names[op] : "unknown-op";
}

static _Thread_local uint64_t ops_run;

uint64_t ct_op_count(void)
{
    return ops_run;
}

static const Tensor *call_ref(const CtOpCall *c)
{
    return c->out[0] ? c->out[0] : c->in[0];
}

/* Whether call->backend has a kernel that accepts the call. */
static bool accepts(const CtOpCall *call)
{
    const CtBackendIface *f = call->backend->iface;
    if ((unsigned)call->op >= CT_OP_COUNT || !f->kernels[call->op]) return false;
    return !f->supports || !f->supports[call->op] || f->supports[call->op](call);
}

bool ct_backend_supports(const CtBackend *be, const CtOpCall *c)
{
    CtOpCall call = *c; /* the query sees the instance, as the kernel would */
    call.backend = be;
    return accepts(&call);
}

CtStatus ct_backend_run(const CtBackend *be, const CtOpCall *c)
{
    CtOpCall call = *c;
    call.backend = be;
    if (!accepts(&call)) {
        const Tensor *typed = c->in[0] ? c->in[0] : c->out[0];
        char d[16];
        return ct_error(CT_ERR_UNSUPPORTED, "%s: not supported on %s for %s",
                        c->name ? c->name : ct_op_name(c->op),
                        ct_device_str(be->device, d), ct_dtype_name(typed->dtype));
    }
    bool prof = ct_op_profile_on();
    uint64_t t0 = prof ? ct_op_profile_clock() : 0;
    CtStatus st = be->iface->kernels[c->op](&call);
    if (prof) ct_op_profile_add(c->op, ct_op_profile_clock() - t0);
    ops_run++;
    for (int i = 0; i < CT_CALL_MAX_OUT; i++)
        if (c->out[i]) ct_storage_written(c->out[i]);
    /* a device failure, or a kernel's workspace that did not fit: say which
     * op, on what */
    if (st == CT_ERR_BACKEND || st == CT_ERR_OOM) {
        const Tensor *t = call_ref(c);
        char d[16], shape[96];
        ct_error_wrap(CT_OK, "%s on %s (%s %s %s)", ct_op_name(c->op),
                      ct_device_str(be->device, d), c->out[0] ? "out" : "in",
                      ct_shape_str(t->ndim, t->shape, shape, sizeof shape),
                      ct_dtype_name(t->dtype));
    }
    return st;
}

CtStatus ct_dispatch(const CtOpCall *c)
{
    const CtBackend *be = ct_backend_for(call_ref(c)->storage->device);
    return be ? ct_backend_run(be, c) : ct_last_status();
}

static bool low_float(const Tensor *t)
{
    return t && (t->dtype == CT_BF16 || t->dtype == CT_F16);
}

/* *w <- an f32 copy of t (caller-owned), or t itself when t is not bf16 or
 * f16. */
static CtStatus widened(const Tensor *t, Tensor **w)
{
    *w = (Tensor *)t;
    if (!low_float(t)) return CT_OK;
    *w = ct_tensor_new_persistent(t->ndim, t->shape, CT_F32, t->storage->device);
    if (!*w) return ct_last_status();
    CtOpCall cp = {.op = CT_OP_COPY, .out = {*w}, .in = {t}};
    return ct_dispatch(&cp);
}

CtStatus ct_dispatch_widening(const CtOpCall *c)
{
    const CtBackend *be = ct_backend_for(call_ref(c)->storage->device);
    if (!be) return ct_last_status();
    bool low = false;
    for (int i = 0; i < CT_CALL_MAX_IN; i++) low = low || low_float(c->in[i]);
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) low = low || low_float(c->out[i]);
    if (!low || ct_backend_supports(be, c)) return ct_backend_run(be, c);
    CtOpCall w = *c;
    CtStatus st = CT_OK;
    for (int i = 0; i < CT_CALL_MAX_IN && st == CT_OK; i++)
        st = widened(c->in[i], (Tensor **)&w.in[i]);
    for (int i = 0; i < CT_CALL_MAX_OUT && st == CT_OK; i++)
        st = widened(c->out[i], &w.out[i]);
    if (st == CT_OK) st = ct_backend_run(be, &w);
    for (int i = 0; i < CT_CALL_MAX_OUT; i++) {
        if (w.out[i] == c->out[i]) continue;
        CtOpCall back = {.op = CT_OP_COPY, .out = {c->out[i]}, .in = {w.out[i]}};
        if (st == CT_OK) st = ct_dispatch(&back);
        tensor_free(w.out[i]);
    }
    for (int i = 0; i < CT_CALL_MAX_IN; i++)
        if (w.in[i] != c->in[i]) tensor_free((Tensor *)w.in[i]);
    return st;
}
