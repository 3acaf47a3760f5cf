/* Backend registry and op dispatch. */
#include "internal.h"

#ifdef CTRAINER_HAVE_CUDA
const CtBackend *ct_cuda_backend(void); /* tensor/cuda/backend.cu */
#else
int ct_cuda_device_count(void)
{
    return 0;
}
bool ct_cuda_initialized(void)
{
    return false;
}
#endif

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
    };
    return (unsigned)op < CT_OP_COUNT && names[op] ? names[op] : "unknown-op";
}

const CtBackend *ct_backend_for(CtDevice dev)
{
    if (dev.type == CT_DEVICE_CPU) return ct_cpu_backend();
    char d[16];
#ifdef CTRAINER_HAVE_CUDA
    int n = ct_cuda_device_count();
    if (dev.type == CT_DEVICE_CUDA && dev.index >= 0 && dev.index < n)
        return ct_cuda_backend();
    ct_error(CT_ERR_DEVICE, "%s: no such device (%d CUDA device%s visible)",
             ct_device_str(dev, d), n, n == 1 ? "" : "s");
#else
    ct_error(CT_ERR_DEVICE,
             "%s: ctrainer was built without CUDA (configure with "
             "-DCTRAINER_CUDA=ON)",
             ct_device_str(dev, d));
#endif
    return NULL;
}

const CtBackend *ct_pinned_backend(void)
{
#ifdef CTRAINER_HAVE_CUDA
    if (ct_cuda_device_count() > 0) return ct_cuda_backend();
#endif
    return NULL;
}

static const Tensor *call_ref(const CtOpCall *c)
{
    return c->out[0] ? c->out[0] : c->in[0];
}

static bool backend_accepts(const CtBackend *be, const CtOpCall *c)
{
    if ((unsigned)c->op >= CT_OP_COUNT || !be->kernels[c->op]) return false;
    return !be->supports || !be->supports[c->op] || be->supports[c->op](c);
}

bool ct_backend_supports(CtDevice dev, const CtOpCall *c)
{
    const CtBackend *be = ct_backend_for(dev);
    return be && backend_accepts(be, c);
}

CtStatus ct_dispatch(const CtOpCall *c)
{
    const Tensor *ref = call_ref(c);
    const CtBackend *be = ct_backend_for(ref->storage->device);
    if (!be) return ct_last_status();
    if (!backend_accepts(be, c)) {
        const Tensor *typed = c->in[0] ? c->in[0] : c->out[0];
        char d[16];
        return ct_error(CT_ERR_UNSUPPORTED, "%s: not supported on %s for %s",
                        ct_op_name(c->op), ct_device_str(ref->storage->device, d),
                        ct_dtype_name(typed->dtype));
    }
    return be->kernels[c->op](c);
}
