/* RMSprop (torch.optim.RMSprop), alpha in OptimGroup.beta2:
 *   g += wd * p
 *   sq = alpha sq + (1 - alpha) g²
 *   centered: ga = alpha ga + (1 - alpha) g;  avg = sqrt(sq - ga²) + eps
 *   else:     avg = sqrt(sq) + eps
 *   momentum > 0: buf = momentum buf + g / avg;  p -= lr buf
 *   else:         p -= lr g / avg
 */
#include "optim_internal.h"

enum { RMS_SQUARE_AVG, RMS_MOMENTUM_BUFFER, RMS_GRAD_AVG };

static CtStatus rms_update(const Optimizer *o, const OptimGroupHp *h, const OptimStep *s)
{
    (void)o;
    TensorRmspropArgs a = {.lr = h->lr,
                           .weight_decay = h->weight_decay,
                           .alpha = h->beta2,
                           .eps = h->eps,
                           .momentum = h->momentum,
                           .zero_grad = s->zero_grad};
    return tensor_rmsprop_step_(s->param, s->grad, s->buf[RMS_SQUARE_AVG],
                                s->buf[RMS_MOMENTUM_BUFFER], s->buf[RMS_GRAD_AVG], &a);
}

static bool rms_uses_buf(const Optimizer *o, const OptimGroupHp *h, int b)
{
    switch (b) {
    case RMS_MOMENTUM_BUFFER: return h->momentum > 0;
    case RMS_GRAD_AVG: return o->flags.centered;
    default: return true;
    }
}

static CtStatus rms_check(const Optimizer *o, const OptimGroupHp *h, int gi)
{
    (void)o;
    if (!optim_nonneg(h->momentum))
        return ct_error(CT_ERR_INVALID,
                        "RMSprop: group %d: momentum %g must be finite and >= 0", gi,
                        h->momentum);
    if (!optim_nonneg(h->beta2))
        return ct_error(CT_ERR_INVALID,
                        "RMSprop: group %d: alpha (beta2) %g must be finite and >= 0", gi,
                        h->beta2);
    return CT_OK;
}

const OptimVtable optim_rmsprop_vt = {
    .name = "RMSprop",
    .nbuf = 3,
    .buf_names = {"square_avg", "momentum_buffer", "grad_avg"},
    .has_step = true,
    .uses_buf = rms_uses_buf,
    .check = rms_check,
    .update = rms_update};

void optim_rmsprop_settings(const RmspropArgs *a, OptimDefaults *d, OptimFlags *f)
{
    *d = (OptimDefaults){.lr = a->lr,
                         .weight_decay = a->weight_decay,
                         .momentum = a->momentum,
                         .beta2 = a->alpha,
                         .eps = a->eps};
    *f = (OptimFlags){.centered = a->centered};
}

Optimizer *optim_rmsprop_create_groups(int ngroups, const OptimGroup *groups,
                                       const RmspropArgs *args)
{
    if (!args) {
        ct_error(CT_ERR_NULL, "optim_rmsprop_create_groups: NULL args");
        return NULL;
    }
    OptimDefaults d;
    OptimFlags f;
    optim_rmsprop_settings(args, &d, &f);
    return optim_create_common(&optim_rmsprop_vt, "optim_rmsprop_create_groups", ngroups,
                               groups, &d, &f);
}
