/* tensor_unscale_: the loss scaler's unscale + inf/NaN check. */
#include "internal.h"

CtStatus tensor_unscale_(Tensor *t, double inv_scale, bool *found_nonfinite)
{
    const char *op = "tensor_unscale_";
    if (!t || !found_nonfinite) {
        CtStatus st = ct_last_status();
        return st != CT_OK ? st : ct_error(CT_ERR_NULL, "%s: NULL argument", op);
    }
    char d[96];
    if (t->dtype != CT_F32 || !tensor_is_contiguous(t))
        return ct_error(CT_ERR_DTYPE, "%s: %s must be a contiguous f32 tensor", op,
                        tensor_describe(t, d, sizeof d));
    Tensor *flag =
        ct_tensor_new_persistent(1, (const int64_t[]){1}, CT_F32, t->storage->device);
    if (!flag) return ct_last_status();
    CtUnscaleParams p = {inv_scale};
    CtOpCall c = {.op = CT_OP_UNSCALE, .out = {t, flag}, .params = &p};
    float found = 0;
    CtStatus st = tensor_fill_(flag, 0.0);
    if (st == CT_OK) st = ct_dispatch(&c);
    if (st == CT_OK) st = tensor_copy_to_host(flag, &found, CT_F32);
    tensor_free(flag);
    *found_nonfinite = found != 0;
    return st;
}
