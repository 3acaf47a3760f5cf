/* SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD):
 *   d = g + wd * p
 *   buf = d on the first step, else momentum * buf + (1 - dampening) * d
 *   d = nesterov ? d + momentum * buf : buf          (when momentum != 0)
 *   p -= lr * d
 */
#include "optim_internal.h"

enum { SGD_MOMENTUM_BUFFER };

/* One pass per parameter; T is float or double. */
#define SGD_KERNEL(T, NAME)                                                              \
    static void NAME(const OptimGroupHp *h, const OptimFlags *f, OptimParam *op)         \
    {                                                                                    \
        T *restrict p = op->p, *restrict buf = op->buf[SGD_MOMENTUM_BUFFER];             \
        const T *restrict g = op->g;                                                     \
        const T lr = (T)h->lr, wd = (T)h->weight_decay, mom = (T)h->momentum;            \
        const T damp = (T)(1.0 - f->dampening);                                          \
        const int first = (op->fresh >> SGD_MOMENTUM_BUFFER) & 1;                        \
        const int nesterov = f->nesterov;                                                \
        const int64_t n = op->numel;                                                     \
        if (!buf) {                                                                      \
            _Pragma("omp parallel for if (n >= OPTIM_PAR_MIN)") for (int64_t i = 0;      \
                                                                     i < n; i++) p[i] -= \
                lr * (g[i] + wd * p[i]);                                                 \
            return;                                                                      \
        }                                                                                \
        _Pragma("omp parallel for if (n >= OPTIM_PAR_MIN)") for (int64_t i = 0; i < n;   \
                                                                 i++)                    \
        {                                                                                \
            T d = g[i] + wd * p[i];                                                      \
            T b = first ? d : mom * buf[i] + damp * d;                                   \
            buf[i] = b;                                                                  \
            p[i] -= lr * (nesterov ? d + mom * b : b);                                   \
        }                                                                                \
    }

SGD_KERNEL(float, sgd_f32)
SGD_KERNEL(double, sgd_f64)

static void sgd_update(const Optimizer *o, const OptimGroupHp *h, OptimParam *op)
{
    if (op->dtype == CT_F32)
        sgd_f32(h, &o->flags, op);
    else
        sgd_f64(h, &o->flags, op);
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
