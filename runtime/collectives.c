/* Collectives. With one process every collective is local: gathers and
 * reduces return a detached copy, the barrier returns at once. The argument
 * checks are the distributed ones, so code that is wrong for N processes
 * fails here too. */
#include "runtime_internal.h"

static Tensor *detached_copy(Tensor *t)
{
    return tensor_clone(tensor_detach(t));
}

CtStatus runtime_barrier(Runtime *rt)
{
    if (!rt) return ct_error(CT_ERR_NULL, "runtime_barrier: NULL runtime");
    return CT_OK;
}

static bool check_gather(const char *fn, Runtime *rt, Tensor *t)
{
    if (!rt) {
        ct_error(CT_ERR_NULL, "%s: NULL runtime", fn);
        return false;
    }
    if (!t) return false; /* sticky: keep the first error */
    if (tensor_ndim(t) < 1) {
        ct_error(CT_ERR_SHAPE,
                 "%s: a 0-d tensor has no dim 0 to concatenate along "
                 "(unsqueeze it first)",
                 fn);
        return false;
    }
    return true;
}

Tensor *runtime_gather(Runtime *rt, Tensor *t)
{
    if (!check_gather("runtime_gather", rt, t)) return NULL;
    return detached_copy(t);
}

Tensor *runtime_gather_padded(Runtime *rt, Tensor *t, double pad_value)
{
    if (!check_gather("runtime_gather_padded", rt, t)) return NULL;
    /* one process: the largest size is its own, nothing is padded */
    (void)pad_value;
    return detached_copy(t);
}

Tensor *runtime_reduce(Runtime *rt, Tensor *t, RuntimeReduceOp op)
{
    if (!rt) {
        ct_error(CT_ERR_NULL, "runtime_reduce: NULL runtime");
        return NULL;
    }
    if (!t) return NULL;
    if (op < RUNTIME_REDUCE_SUM || op > RUNTIME_REDUCE_MIN) {
        ct_error(CT_ERR_INVALID, "runtime_reduce: unknown reduce op %d", (int)op);
        return NULL;
    }
    if (op == RUNTIME_REDUCE_MEAN && !ct_dtype_is_float(tensor_dtype(t))) {
        ct_error(CT_ERR_DTYPE, "runtime_reduce: MEAN needs a float tensor, got %s",
                 ct_dtype_name(tensor_dtype(t)));
        return NULL;
    }
    if (tensor_dtype(t) == CT_BOOL) {
        ct_error(CT_ERR_DTYPE, "runtime_reduce: bool tensors cannot be reduced "
                               "(cast to an integer dtype)");
        return NULL;
    }
    return detached_copy(t);
}

CtStatus runtime_reduce_f64(Runtime *rt, double *values, int n, RuntimeReduceOp op)
{
    if (!rt) return ct_error(CT_ERR_NULL, "runtime_reduce_f64: NULL runtime");
    if (n < 0 || (n > 0 && !values))
        return ct_error(CT_ERR_INVALID, "runtime_reduce_f64: %d values at %p", n,
                        (void *)values);
    if (op < RUNTIME_REDUCE_SUM || op > RUNTIME_REDUCE_MIN)
        return ct_error(CT_ERR_INVALID, "runtime_reduce_f64: unknown reduce op %d",
                        (int)op);
    return CT_OK; /* one process: the values are already the result */
}
