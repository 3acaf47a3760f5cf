/* The per-thread autocast setting (tensor.h, "autocast"). */
#include "internal.h"

static _Thread_local CtDType autocast = CT_F32;

CtStatus tensor_autocast_begin(CtDType dtype, CtDType *prev)
{
    if (dtype != CT_F32 && dtype != CT_BF16 && dtype != CT_F16)
        return ct_error(CT_ERR_INVALID,
                        "tensor_autocast_begin: dtype %s is not one of bf16, f16, f32",
                        ct_dtype_name(dtype));
    if (prev) *prev = autocast;
    autocast = dtype;
    return CT_OK;
}

void tensor_autocast_end(CtDType prev)
{
    autocast = prev;
}

CtDType tensor_autocast_dtype(void)
{
    return autocast;
}

bool ct_autocast_pick(const char *op, const Tensor *x, CtDType *dtype)
{
    *dtype = CT_F32;
    if (autocast == CT_F32 || x->dtype != CT_F32) return true;
    if (autocast == CT_F16 && x->storage->device.type == CT_DEVICE_CPU) {
        ct_error(CT_ERR_UNSUPPORTED,
                 "%s: f16 autocast needs a CUDA device (the CPU has no f16 kernels); "
                 "use bf16 on the CPU",
                 op);
        return false;
    }
    *dtype = autocast;
    return true;
}
