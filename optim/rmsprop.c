/* RMSprop (torch.optim.RMSprop), alpha in OptimGroup.beta2:
 *   g += wd * p
 *   sq = alpha sq + (1 - alpha) g²
 *   centered: ga = alpha ga + (1 - alpha) g;  avg = sqrt(sq - ga²) + eps
 *   else:     avg = sqrt(sq) + eps
 *   momentum > 0: buf = momentum buf + g / avg;  p -= lr buf
 *   else:         p -= lr g / avg
 */
#include <math.h>

#include "optim_internal.h"

enum { RMS_SQUARE_AVG, RMS_MOMENTUM_BUFFER, RMS_GRAD_AVG };

/* The loop over [lo, hi) for element type T; centered and mom_on are
 * constants at each call. */
#define RMS_KERNEL(T, SQRT)                                                              \
    OPTIM_INLINE void rms_body_##T(const OptimGroupHp *h, const OptimParam *op,          \
                                   int64_t lo, int64_t hi, const bool centered,          \
                                   const bool mom_on)                                    \
    {                                                                                    \
        T *restrict p = op->p, *restrict sq = op->buf[RMS_SQUARE_AVG];                   \
        T *restrict mb = op->buf[RMS_MOMENTUM_BUFFER];                                   \
        T *restrict ga = op->buf[RMS_GRAD_AVG];                                          \
        const T *restrict g = op->g;                                                     \
        const T lr = (T)h->lr, wd = (T)h->weight_decay, mom = (T)h->momentum;            \
        const T al = (T)h->beta2, a1 = (T)(1.0 - h->beta2), eps = (T)h->eps;             \
        for (int64_t i = lo; i < hi; i++) {                                              \
            T gi = g[i] + wd * p[i];                                                     \
            T s = al * sq[i] + a1 * gi * gi;                                             \
            sq[i] = s;                                                                   \
            if (centered) {                                                              \
                T a = al * ga[i] + a1 * gi;                                              \
                ga[i] = a;                                                               \
                s -= a * a;                                                              \
            }                                                                            \
            T avg = SQRT(s) + eps;                                                       \
            if (mom_on) {                                                                \
                T b = mom * mb[i] + gi / avg;                                            \
                mb[i] = b;                                                               \
                p[i] -= lr * b;                                                          \
            } else {                                                                     \
                p[i] -= lr * (gi / avg);                                                 \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    static void rms_range_##T(const void *ctx, const OptimParam *op, int64_t lo,         \
                              int64_t hi)                                                \
    {                                                                                    \
        bool c = op->buf[RMS_GRAD_AVG] != NULL,                                          \
             m = op->buf[RMS_MOMENTUM_BUFFER] != NULL;                                   \
        if (c && m)                                                                      \
            rms_body_##T(ctx, op, lo, hi, true, true);                                   \
        else if (c)                                                                      \
            rms_body_##T(ctx, op, lo, hi, true, false);                                  \
        else if (m)                                                                      \
            rms_body_##T(ctx, op, lo, hi, false, true);                                  \
        else                                                                             \
            rms_body_##T(ctx, op, lo, hi, false, false);                                 \
    }

RMS_KERNEL(float, sqrtf)
RMS_KERNEL(double, sqrt)

static void rms_update(const Optimizer *o, const OptimGroupHp *h, OptimParam *op)
{
    (void)o;
    optim_parallel_for(op->dtype == CT_F32 ? rms_range_float : rms_range_double, h, op);
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
