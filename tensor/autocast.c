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

bool ct_autocast_low_activations(const Tensor *x, CtDType *low)
{
    *low = autocast;
    return autocast != CT_F32 && x->storage->device.type == CT_DEVICE_CUDA;
}

bool ct_autocast_widens(const Tensor *t)
{
    return autocast != CT_F32 && t && (t->dtype == CT_BF16 || t->dtype == CT_F16);
}

static bool castable(CtDType dt)
{
    return dt == CT_F32 || dt == CT_BF16 || dt == CT_F16;
}

bool ct_promotes_to_f32(int n, Tensor *const *ts)
{
    bool f32 = false, low = false;
    for (int i = 0; i < n; i++) {
        if (!ts[i] || !castable(ts[i]->dtype)) return false;
        f32 = f32 || ts[i]->dtype == CT_F32;
        low = low || ts[i]->dtype != CT_F32;
    }
    return f32 && low;
}

bool ct_autocast_needs_cast(int n, Tensor *const *ts, CtDType dt)
{
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->dtype != dt && castable(ts[i]->dtype)) return true;
    return false;
}

static bool cast_all(int n, Tensor **ts, CtDType dt)
{
    for (int i = 0; i < n; i++) {
        if (!ts[i] || ts[i]->dtype == dt || !castable(ts[i]->dtype)) continue;
        if (!(ts[i] = tensor_cast(ts[i], dt))) return false;
    }
    return true;
}

Tensor *ct_autocast_call(int n, Tensor **ops, CtDType dt,
                         Tensor *(*fn)(Tensor **ops, const void *arg), const void *arg)
{
    /* the casts live in a scope of their own: the op's graph keeps what it
     * needs, and the result moves to the caller's scope */
    CtScope *s = ct_scope_open();
    if (!s) return NULL;
    Tensor *y = cast_all(n, ops, dt) ? tensor_retain(fn(ops, arg)) : NULL;
    ct_scope_close(s);
    return ct_scope_adopt(y);
}
