/* The default collate function: stack each field along a new dim 0.
 *
 * The common case (every sample's field a contiguous CPU tensor of one dtype
 * and shape, none requiring grad) copies the rows straight into the batch
 * tensor: one allocation and n memcpys per field, instead of an unsqueezed
 * view per sample plus tensor_stack's bookkeeping. Anything else (other
 * devices, strided samples, autograd, mismatched shapes, whose error
 * messages tensor_stack words) goes through tensor_stack; the result is the
 * same either way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

/* Whether field f of every sample can be copied row by row. */
static bool rows_copyable(const DataSample *samples, int64_t n, int f)
{
    const Tensor *a = samples[0].t[f];
    if (!a || tensor_device(a).type != CT_DEVICE_CPU) return false;
    int nd = tensor_ndim(a);
    for (int64_t i = 0; i < n; i++) {
        const Tensor *b = samples[i].t[f];
        if (!b || tensor_device(b).type != CT_DEVICE_CPU || !tensor_is_contiguous(b) ||
            tensor_requires_grad(b) || tensor_dtype(b) != tensor_dtype(a) ||
            tensor_ndim(b) != nd ||
            memcmp(tensor_shape(b), tensor_shape(a), (size_t)nd * sizeof(int64_t)))
            return false;
    }
    return true;
}

static Tensor *stack_rows(const DataSample *samples, int64_t n, int f, bool pinned)
{
    const Tensor *a = samples[0].t[f];
    int nd = tensor_ndim(a);
    int64_t shape[CT_MAX_DIMS];
    shape[0] = n;
    memcpy(shape + 1, tensor_shape(a), (size_t)nd * sizeof *shape);
    Tensor *out = pinned ? tensor_empty_pinned(nd + 1, shape, tensor_dtype(a))
                         : tensor_empty(nd + 1, shape, tensor_dtype(a), ct_cpu());
    if (!out) return NULL;
    size_t row = (size_t)tensor_numel(a) * ct_dtype_size(tensor_dtype(a));
    char *dst = tensor_data(out);
    for (int64_t i = 0; i < n && row; i++)
        memcpy(dst + (size_t)i * row, tensor_data(samples[i].t[f]), row);
    return out;
}

static Tensor *stack_field(const DataSample *samples, int64_t n, int f, bool pinned,
                           Tensor **ts)
{
    /* the batch dim comes on top of the samples' dims */
    const Tensor *a = samples[0].t[f];
    if (a && tensor_ndim(a) >= CT_MAX_DIMS) {
        ct_error(CT_ERR_UNSUPPORTED,
                 "samples of %d dims make a batch of %d, over the limit of %d dims",
                 tensor_ndim(a), tensor_ndim(a) + 1, CT_MAX_DIMS);
        return NULL;
    }
    if (rows_copyable(samples, n, f)) return stack_rows(samples, n, f, pinned);
    for (int64_t i = 0; i < n; i++) ts[i] = samples[i].t[f];
    Tensor *t = tensor_stack((int)n, ts, 0);
    /* rare (strided or autograd samples): one more copy into pinned memory */
    if (t && pinned && tensor_device(t).type == CT_DEVICE_CPU) t = tensor_pin_memory(t);
    return t;
}

CtStatus data_collate_into(const DataSample *samples, int64_t n, DataBatch *out,
                           bool pinned)
{
    if (!samples || !out) return ct_error(CT_ERR_NULL, "collate: NULL argument");
    if (n < 1 || n > INT32_MAX)
        return ct_error(CT_ERR_INVALID, "collate: %lld samples", (long long)n);
    int nf = samples[0].n;
    if (nf < 1 || nf > DATA_MAX_FIELDS)
        return ct_error(CT_ERR_INVALID, "collate: sample 0 of the batch has %d fields",
                        nf);
    for (int64_t i = 1; i < n; i++) {
        if (samples[i].n != nf)
            return ct_error(CT_ERR_SHAPE,
                            "collate: sample %lld of the batch has %d fields, sample 0 "
                            "has %d",
                            (long long)i, samples[i].n, nf);
    }
    Tensor **ts = malloc((size_t)n * sizeof *ts);
    if (!ts) return ct_error(CT_ERR_OOM, "collate: out of memory");
    CtStatus st = CT_OK;
    for (int f = 0; f < nf && st == CT_OK; f++) {
        out->t[f] = stack_field(samples, n, f, pinned, ts);
        if (!out->t[f]) st = ct_error_wrap(CT_OK, "collate: field %d", f);
    }
    free(ts);
    out->n = st == CT_OK ? nf : 0;
    return st;
}

CtStatus data_collate_default(const DataSample *samples, int64_t n, DataBatch *out,
                              void *user)
{
    (void)user;
    return data_collate_into(samples, n, out, false);
}
