/* gather_for_metrics: a gather without the rows a sharded loader repeated
 * to give every process the same number of samples. */
#include "runtime_internal.h"

Tensor *runtime_gather_for_metrics(Runtime *rt, Tensor *t, int64_t num_padding_rows)
{
    if (!rt) {
        ct_error(CT_ERR_NULL, "runtime_gather_for_metrics: NULL runtime");
        return NULL;
    }
    if (!t) return NULL; /* sticky: keep the first error */
    if (tensor_ndim(t) < 1) {
        ct_error(CT_ERR_SHAPE, "runtime_gather_for_metrics: a 0-d tensor has no rows "
                               "to drop padding from (unsqueeze it first)");
        return NULL;
    }
    int64_t rows = tensor_shape(t)[0];
    if (num_padding_rows < 0 || num_padding_rows > rows) {
        ct_error(CT_ERR_INVALID,
                 "runtime_gather_for_metrics: %lld padding rows outside [0, %lld] "
                 "(the tensor's rows)",
                 (long long)num_padding_rows, (long long)rows);
        return NULL;
    }
    if (!num_padding_rows) return runtime_gather_padded(rt, t, 0);
    /* the view is ours alone, whether or not the caller has a scope open */
    CtScope *s = ct_scope_open();
    if (!s) {
        ct_error(CT_ERR_OOM, "runtime_gather_for_metrics: out of memory");
        return NULL;
    }
    Tensor *real = tensor_slice(t, 0, 0, rows - num_padding_rows, 1);
    if (real) tensor_retain(real);
    ct_scope_close(s);
    Tensor *out = runtime_gather_padded(rt, real, 0);
    tensor_free(real);
    return out;
}
