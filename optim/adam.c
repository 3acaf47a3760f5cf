/* Adam and AdamW (torch.optim.Adam / AdamW), with amsgrad. Per parameter,
 * with t its update count:
 *   Adam:  g += wd * p               AdamW: p *= 1 - lr * wd
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²;  vmax = max(vmax, v)
 *   p -= lr / (1 - b1^t) * m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps)
 */
#include "optim_internal.h"

enum { ADAM_EXP_AVG, ADAM_EXP_AVG_SQ, ADAM_MAX_EXP_AVG_SQ };

static CtStatus update(const OptimGroupHp *h, const OptimStep *s, bool decoupled)
{
    TensorAdamArgs a = {.lr = h->lr,
                        .weight_decay = h->weight_decay,
                        .beta1 = h->momentum,
                        .beta2 = h->beta2,
                        .eps = h->eps,
                        .decoupled = decoupled,
                        .step = s->step,
                        .zero_grad = s->zero_grad};
    return tensor_adam_step_(s->param, s->grad, s->buf[ADAM_EXP_AVG],
                             s->buf[ADAM_EXP_AVG_SQ], s->buf[ADAM_MAX_EXP_AVG_SQ], &a);
}

static CtStatus adam_update(const Optimizer *o, const OptimGroupHp *h, const OptimStep *s)
{
    (void)o;
    return update(h, s, false);
}

static CtStatus adamw_update(const Optimizer *o, const OptimGroupHp *h,
                             const OptimStep *s)
{
    (void)o;
    return update(h, s, true);
}

static bool adam_uses_buf(const Optimizer *o, const OptimGroupHp *h, int b)
{
    (void)h;
    return b != ADAM_MAX_EXP_AVG_SQ || o->flags.amsgrad;
}

static CtStatus adam_check(const Optimizer *o, const OptimGroupHp *h, int gi)
{
    const char *names[] = {"beta1 (momentum)", "beta2"};
    const double vals[] = {h->momentum, h->beta2};
    for (int k = 0; k < 2; k++)
        if (!(vals[k] >= 0 && vals[k] < 1))
            return ct_error(CT_ERR_INVALID, "%s: group %d: %s %g must be in [0, 1)",
                            o->vt->name, gi, names[k], vals[k]);
    return CT_OK;
}

const OptimVtable optim_adam_vt = {
    .name = "Adam",
    .nbuf = 3,
    .buf_names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    .has_step = true,
    .uses_buf = adam_uses_buf,
    .check = adam_check,
    .update = adam_update};

const OptimVtable optim_adamw_vt = {
    .name = "AdamW",
    .nbuf = 3,
    .buf_names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    .has_step = true,
    .uses_buf = adam_uses_buf,
    .check = adam_check,
    .update = adamw_update};

void optim_adam_settings(const AdamArgs *a, OptimDefaults *d, OptimFlags *f)
{
    *d = (OptimDefaults){.lr = a->lr,
                         .weight_decay = a->weight_decay,
                         .momentum = a->beta1,
                         .beta2 = a->beta2,
                         .eps = a->eps};
    *f = (OptimFlags){.amsgrad = a->amsgrad};
}

static Optimizer *create(const OptimVtable *vt, const char *who, int ngroups,
                         const OptimGroup *groups, const AdamArgs *args)
{
    if (!args) {
        ct_error(CT_ERR_NULL, "%s: NULL args", who);
        return NULL;
    }
    OptimDefaults d;
    OptimFlags f;
    optim_adam_settings(args, &d, &f);
    return optim_create_common(vt, who, ngroups, groups, &d, &f);
}

Optimizer *optim_adam_create_groups(int ngroups, const OptimGroup *groups,
                                    const AdamArgs *args)
{
    return create(&optim_adam_vt, "optim_adam_create_groups", ngroups, groups, args);
}

Optimizer *optim_adamw_create_groups(int ngroups, const OptimGroup *groups,
                                     const AdamArgs *args)
{
    return create(&optim_adamw_vt, "optim_adamw_create_groups", ngroups, groups, args);
}
