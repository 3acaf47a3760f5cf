/* Adam and AdamW (torch.optim.Adam / AdamW), with amsgrad. Per parameter,
 * with t its update count:
 *   Adam:  g += wd * p               AdamW: p *= 1 - lr * wd
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²;  vmax = max(vmax, v)
 *   p -= lr / (1 - b1^t) * m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps)
 */
#include <math.h>

#include "optim_internal.h"

enum { ADAM_EXP_AVG, ADAM_EXP_AVG_SQ, ADAM_MAX_EXP_AVG_SQ };

/* Scalars of one update, computed once in f64. */
typedef struct AdamCoef {
    double decay_mul; /* AdamW: 1 - lr * wd; Adam: 1 */
    double l2;        /* Adam: wd; AdamW: 0 */
    double b1, b2, step_size, bc2_sqrt, eps;
} AdamCoef;

/* The loop over [lo, hi) for element type T; ams is a constant at each call. */
#define ADAM_KERNEL(T, SQRT)                                                             \
    OPTIM_INLINE void adam_body_##T(const AdamCoef *c, const OptimParam *op, int64_t lo, \
                                    int64_t hi, const bool ams)                          \
    {                                                                                    \
        T *restrict p = op->p, *restrict m = op->buf[ADAM_EXP_AVG];                      \
        T *restrict v = op->buf[ADAM_EXP_AVG_SQ];                                        \
        T *restrict vmax = op->buf[ADAM_MAX_EXP_AVG_SQ];                                 \
        const T *restrict g = op->g;                                                     \
        const T mul = (T)c->decay_mul, l2 = (T)c->l2, b1 = (T)c->b1, b2 = (T)c->b2;      \
        const T a1 = (T)(1.0 - c->b1), a2 = (T)(1.0 - c->b2);                            \
        const T step = (T)c->step_size, bc2 = (T)c->bc2_sqrt, eps = (T)c->eps;           \
        for (int64_t i = lo; i < hi; i++) {                                              \
            T pi = p[i] * mul;                                                           \
            T gi = g[i] + l2 * pi;                                                       \
            T mi = b1 * m[i] + a1 * gi;                                                  \
            T vi = b2 * v[i] + a2 * gi * gi;                                             \
            m[i] = mi;                                                                   \
            v[i] = vi;                                                                   \
            if (ams) {                                                                   \
                vi = vmax[i] > vi ? vmax[i] : vi;                                        \
                vmax[i] = vi;                                                            \
            }                                                                            \
            p[i] = pi - step * mi / (SQRT(vi) / bc2 + eps);                              \
        }                                                                                \
    }                                                                                    \
    static void adam_range_##T(const void *ctx, const OptimParam *op, int64_t lo,        \
                               int64_t hi)                                               \
    {                                                                                    \
        if (op->buf[ADAM_MAX_EXP_AVG_SQ])                                                \
            adam_body_##T(ctx, op, lo, hi, true);                                        \
        else                                                                             \
            adam_body_##T(ctx, op, lo, hi, false);                                       \
    }

ADAM_KERNEL(float, sqrtf)
ADAM_KERNEL(double, sqrt)

static void update(const OptimGroupHp *h, OptimParam *op, bool decoupled)
{
    double t = (double)op->step;
    AdamCoef c = {.decay_mul = decoupled ? 1.0 - h->lr * h->weight_decay : 1.0,
                  .l2 = decoupled ? 0.0 : h->weight_decay,
                  .b1 = h->momentum,
                  .b2 = h->beta2,
                  .step_size = h->lr / (1.0 - pow(h->momentum, t)),
                  .bc2_sqrt = sqrt(1.0 - pow(h->beta2, t)),
                  .eps = h->eps};
    optim_parallel_for(op->dtype == CT_F32 ? adam_range_float : adam_range_double, &c,
                       op);
}

static void adam_update(const Optimizer *o, const OptimGroupHp *h, OptimParam *op)
{
    (void)o;
    update(h, op, false);
}

static void adamw_update(const Optimizer *o, const OptimGroupHp *h, OptimParam *op)
{
    (void)o;
    update(h, op, true);
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
