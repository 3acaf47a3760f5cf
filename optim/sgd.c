/* SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD):
 *   d = g + wd * p
 *   buf = d on the first step, else momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf          (when momentum != 0)
 *   p -= lr * d
 */
#include "optim_internal.h"

enum { SGD_MOMENTUM_BUFFER };

static CtStatus sgd_update(const Optimizer *o, const OptimGroupHp *h, const OptimStep *s)
{
    Tensor *buf = s->buf[SGD_MOMENTUM_BUFFER];
    TensorSgdArgs a = {.lr = h->lr,
                       .weight_decay = h->weight_decay,
                       .momentum = h->momentum,
                       .dampening = o->flags.dampening,
                       .nesterov = buf && o->flags.nesterov,
                       .first = (s->fresh >> SGD_MOMENTUM_BUFFER) & 1,
                       .zero_grad = s->zero_grad};
    return tensor_sgd_step_(s->param, s->grad, buf, &a);
}

static bool sgd_uses_buf(const Optimizer *o, const OptimGroupHp *h, int b)
{
    (void)o;
    return b == SGD_MOMENTUM_BUFFER && h->momentum != 0;
}

static CtStatus sgd_check(const Optimizer *o, const OptimGroupHp *h, int gi)
{
    if (!optim_nonneg(h->momentum))
        return ct_error(CT_ERR_INVALID,
                        "SGD: group %d: momentum %g must be finite and >= 0", gi,
                        h->momentum);
    if (!(o->flags.dampening >= 0 && o->flags.dampening <= 1))
        return ct_error(CT_ERR_INVALID, "SGD: dampening %g must be in [0, 1]",
                        o->flags.dampening);
    if (o->flags.nesterov && (h->momentum <= 0 || o->flags.dampening != 0))
        return ct_error(CT_ERR_INVALID,
                        "SGD: group %d: nesterov needs momentum > 0 and dampening 0 "
                        "(momentum %g, dampening %g)",
                        gi, h->momentum, o->flags.dampening);
    return CT_OK;
}

const OptimVtable optim_sgd_vt = {.name = "SGD",
                                  .nbuf = 1,
                                  .buf_names = {"momentum_buffer"},
                                  .has_step = false,
                                  .uses_buf = sgd_uses_buf,
                                  .check = sgd_check,
                                  .update = sgd_update};

void optim_sgd_settings(const SgdArgs *a, OptimDefaults *d, OptimFlags *f)
{
    *d = (OptimDefaults){.lr = a->lr,
                         .weight_decay = a->weight_decay,
                         .momentum = a->momentum,
                         .beta2 = 0,
                         .eps = 0};
    *f = (OptimFlags){.dampening = a->dampening, .nesterov = a->nesterov};
}

Optimizer *optim_sgd_create_groups(int ngroups, const OptimGroup *groups,
                                   const SgdArgs *args)
{
    if (!args) {
        ct_error(CT_ERR_NULL, "optim_sgd_create_groups: NULL args");
        return NULL;
    }
    OptimDefaults d;
    OptimFlags f;
    optim_sgd_settings(args, &d, &f);
    return optim_create_common(&optim_sgd_vt, "optim_sgd_create_groups", ngroups, groups,
                               &d, &f);
}
