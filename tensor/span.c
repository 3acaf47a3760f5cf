/* tensor_span / tensor_is_span: one view over tensors packed back to back. */
#include "ctrainer/tensor_optim.h"
#include "internal.h"

/* Whether ts[0..n) are contiguous, of one dtype, and lie back to back in
 * one storage; *numel gets their total. */
static bool back_to_back(Tensor *const *ts, int64_t n, int64_t *numel)
{
    if (n < 1 || !ts || !ts[0]) return false;
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const Tensor *t = ts[i];
        if (!t || !tensor_is_contiguous(t) || t->storage != ts[0]->storage ||
            t->dtype != ts[0]->dtype || t->offset != ts[0]->offset + total)
            return false;
        total += tensor_numel(t);
    }
    *numel = total;
    return true;
}

Tensor *tensor_span(Tensor *const *ts, int64_t n)
{
    int64_t numel;
    if (!back_to_back(ts, n, &numel)) return NULL;
    Tensor *v = ct_tensor_alias(ts[0]);
    if (!v) return NULL;
    v->ndim = 1;
    v->shape[0] = numel;
    v->stride[0] = 1;
    v->requires_grad = false;
    return v;
}

bool tensor_is_span(const Tensor *span, Tensor *const *ts, int64_t n)
{
    int64_t numel;
    return span && back_to_back(ts, n, &numel) && span->storage == ts[0]->storage &&
           span->offset == ts[0]->offset && span->dtype == ts[0]->dtype &&
           span->ndim == 1 && span->shape[0] == numel && span->stride[0] == 1;
}
