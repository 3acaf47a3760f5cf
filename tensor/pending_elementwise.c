/* Placeholder until the elementwise group lands (deleted by its owner). */
#include "internal.h"
static Tensor *pending(const char *op)
{
    ct_error(CT_ERR_UNSUPPORTED, "%s: pending", op);
    return NULL;
}
Tensor *tensor_neg(Tensor *t)
{
    (void)t;
    return pending("neg");
}
Tensor *tensor_log(Tensor *t)
{
    (void)t;
    return pending("log");
}
Tensor *tensor_sub_scalar(Tensor *t, double s)
{
    (void)t;
    (void)s;
    return pending("sub_scalar");
}
Tensor *tensor_rsub_scalar(Tensor *t, double s)
{
    (void)t;
    (void)s;
    return pending("rsub_scalar");
}
