/* SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD):
 *   d = g + wd * p
 *   buf = d on the first step, else momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf          (when momentum != 0)
 *   p -= lr * d
 */
#include "optim_internal.h"

enum { SGD_MOMENTUM_BUFFER };

typedef struct SgdCtx {
    const OptimGroupHp *h;
    const OptimFlags *f;
} SgdCtx;

/* The loop over [lo, hi) for element type T; mom_on, first and nesterov are
 * constants at each call, so every combination is its own plain loop. */
#define SGD_KERNEL(T)                                                                    \
    OPTIM_INLINE void sgd_body_##T(const SgdCtx *c, const OptimParam *op, int64_t lo,    \
                                   int64_t hi, const bool mom_on, const bool first,      \
                                   const bool nesterov)                                  \
    {                                                                                    \
        T *restrict p = op->p, *restrict buf = op->buf[SGD_MOMENTUM_BUFFER];             \
        const T *restrict g = op->g;                                                     \
        const T lr = (T)c->h->lr, wd = (T)c->h->weight_decay, mom = (T)c->h->momentum;   \
        const T damp = (T)(1.0 - c->f->dampening);                                       \
        for (int64_t i = lo; i < hi; i++) {                                              \
            T d = g[i] + wd * p[i];                                                      \
            if (mom_on) {                                                                \
                T b = first ? d : mom * buf[i] + damp * d;                               \
                buf[i] = b;                                                              \
                d = nesterov ? d + mom * b : b;                                          \
            }                                                                            \
            p[i] -= lr * d;                                                              \
        }                                                                                \
    }                                                                                    \
    static void sgd_range_##T(const void *ctx, const OptimParam *op, int64_t lo,         \
                              int64_t hi)                                                \
    {                                                                                    \
        const SgdCtx *c = ctx;                                                           \
        bool nesterov = c->f->nesterov;                                                  \
        if (!op->buf[SGD_MOMENTUM_BUFFER])                                               \
            sgd_body_##T(c, op, lo, hi, false, false, false);                            \
        else if ((op->fresh >> SGD_MOMENTUM_BUFFER) & 1)                                 \
            sgd_body_##T(c, op, lo, hi, true, true, nesterov);                           \
        else if (nesterov)                                                               \
            sgd_body_##T(c, op, lo, hi, true, false, true);                              \
        else                                                                             \
            sgd_body_##T(c, op, lo, hi, true, false, false);                             \
    }

SGD_KERNEL(float)
SGD_KERNEL(double)

static void sgd_update(const Optimizer *o, const OptimGroupHp *h, OptimParam *op)
{
    SgdCtx c = {h, &o->flags};
    optim_parallel_for(op->dtype == CT_F32 ? sgd_range_float : sgd_range_double, &c, op);
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
