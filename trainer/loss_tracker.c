/* The running epoch loss (trainer_internal.h, LossTracker), kept on the
 * loss's device so that a step never waits for the device. */
#include "trainer_internal.h"

/* A persistent f64[1] holding v on dev (one reference, the caller's). */
static Tensor *scalar_on(CtDevice dev, double v)
{
    CtScope *sc = ct_scope_open();
    if (!sc) {
        ct_error(CT_ERR_OOM, "trainer: out of memory for the loss tracker");
        return NULL;
    }
    Tensor *x = tensor_retain(tensor_full(1, (const int64_t[]){1}, v, CT_F64, dev));
    ct_scope_close(sc);
    return x;
}

CtStatus loss_tracker_add(LossTracker *lt, Tensor *loss, int64_t batch_size)
{
    if (!lt->sum) {
        lt->sum = scalar_on(tensor_device(loss), lt->total);
        if (!lt->sum) return ct_last_status();
    }
    /* total += loss * batch_size in f64, in step order: the same bits as a
     * host-side sum of the values read back. The sum is a new tensor, never
     * an update in place, so a tracker assigned from this one keeps its
     * value by sharing the old tensor. */
    bool grad = ct_set_grad_enabled(false);
    Tensor *w =
        tensor_mul_scalar(tensor_cast(tensor_detach(loss), CT_F64), (double)batch_size);
    Tensor *next = w ? tensor_retain(tensor_add(lt->sum, w)) : NULL;
    ct_set_grad_enabled(grad);
    if (!next) return ct_last_status();
    tensor_free(lt->sum);
    lt->sum = next;
    lt->count += (double)batch_size;
    return CT_OK;
}

CtStatus loss_tracker_total(const LossTracker *lt, double *total)
{
    if (!lt->sum) {
        *total = lt->total;
        return CT_OK;
    }
    return tensor_copy_to_host(lt->sum, total, CT_F64);
}

CtStatus loss_tracker_assign(LossTracker *dst, const LossTracker *src)
{
    if (dst == src) return CT_OK;
    dst->total = src->total;
    dst->count = src->count;
    /* sums are never changed in place (loss_tracker_add): sharing the
     * tensor is a copy, without an op */
    Tensor *sum = tensor_retain(src->sum);
    tensor_free(dst->sum);
    dst->sum = sum;
    return CT_OK;
}

void loss_tracker_reset(LossTracker *lt)
{
    tensor_free(lt->sum);
    *lt = (LossTracker){0};
}
