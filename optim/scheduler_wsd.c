/* Warmup-Stable-Decay: pytorch-accelerated's WSDLrScheduler, counted in
 * update steps, with its checkpoint spacing, zero-length decay and
 * off-by-one decay fixed.
 *
 * With T = total_steps, n = num_checkpoints, f = decay_fraction, W =
 * warmup_steps (0 in continuation mode), m = min_lr_ratio, s0 =
 * warmup_start_lr, and per group b = base LR:
 *   period ends   e_i = floor(T / 2^(n-1-i)), i = 0..n-1 (e_{n-1} = T),
 *                 periods [e_{i-1}, e_i) with e_{-1} = 0, length L_i;
 *   decay steps   D_i = floor(L_i * f) (>= 1), pre-decay step e_i - D_i;
 * the LR after t updates is
 *   t < W:        s0 + (t / W) * (b - s0)                      (linear warmup)
 *   t >= T:       b * shape(1) = m * b                         (after the run)
 *   otherwise, in the period holding t, with u = t - e_{i-1}:
 *     u < L_i - D_i:  b                                        (stable)
 *     else:           b * shape(r), r = (u - (L_i - D_i) + 1) / D_i in (0, 1]
 * where shape(r) is (WsdDecayShape)
 *   sqrt:    m + (1 - m) * (1 - sqrt(r))      the reference's default
 *   inverse: 1 / (r * (1 / m) + (1 - r))      the paper's (b / that)
 *   linear:  m + (1 - m) * (1 - r)
 *   cosine:  m + (1 - m) * (1 + cos(pi r)) / 2
 * so the D_i updates after the pre-decay step run at decayed LRs, the last
 * of them at shape(1) = m (the reference's r = (u - (L_i - D_i)) / D_i runs
 * the first decay update at b and never reaches m inside a period: with
 * D_i = 1 nothing decays), and the next period starts again at b (the last
 * period's end is T). The sqrt, inverse and warmup expressions are the
 * reference's (wsd_scheduler.py, get_updated_values), in the same order of
 * operations. */
#include <math.h>

#include "scheduler_internal.h"

#define WSD_MAX_PERIODS 63 /* T >= 2^(n-1) with T < 2^63 */

typedef struct Wsd {
    Scheduler base;
    WsdArgs a; /* resolved: defaults filled, warmup 0 in continuation */
    double m;  /* min_lr_ratio as a number */
    int n;
    WsdPeriod p[WSD_MAX_PERIODS];
} Wsd;

static const char *const who = "WSDLrScheduler";

/* The LR of base LR b at fraction r of a decay (r = 1: its end). */
static double decayed(const Wsd *w, double b, double r)
{
    double m = w->m;
    switch (w->a.decay_shape) {
    case WSD_DECAY_INVERSE_PROPORTIONAL: return b / (r * (1.0 / m) + (1.0 - r) * 1.0);
    case WSD_DECAY_LINEAR: return b * (m + (1 - m) * (1 - r));
    case WSD_DECAY_COSINE: return b * (m + (1 - m) * (1 + cos(M_PI * r)) / 2);
    case WSD_DECAY_SQRT:
    default: return b * (m + (1 - m) * (1 - sqrt(r)));
    }
}

/* The period holding step t (0 <= t < T). */
static const WsdPeriod *period_of(const Wsd *w, int64_t t)
{
    int i = 0;
    while (i < w->n - 1 && t >= w->p[i].end) i++;
    return &w->p[i];
}

static double wsd_lr_at(const Scheduler *s, int64_t t, int g)
{
    const Wsd *w = (const Wsd *)s;
    double b = s->base_lrs[g];
    if (t < w->a.warmup_steps) {
        double s0 = w->a.warmup_start_lr;
        return s0 + ((double)t / (double)w->a.warmup_steps) * (b - s0);
    }
    if (t >= w->a.total_steps) return decayed(w, b, 1.0);
    const WsdPeriod *p = period_of(w, t);
    if (t < p->pre_decay_step) return b;
    return decayed(w, b, (double)(t - p->pre_decay_step + 1) / (double)p->decay_steps);
}

/* ------------------------------------------------------------ state */

enum { N_EXTRA = 8 };

static int wsd_n_extra(const Scheduler *s)
{
    (void)s;
    return N_EXTRA;
}

static void wsd_extra_get(const Scheduler *s, SchedulerExtra *x)
{
    const WsdArgs *a = &((const Wsd *)s)->a;
    const SchedulerExtra v[N_EXTRA] = {
        {"total_steps", (double)a->total_steps, true},
        {"warmup_steps", (double)a->warmup_steps, true},
        {"num_checkpoints", (double)a->num_checkpoints, true},
        {"decay_shape", (double)a->decay_shape, true},
        {"continuation", a->continuation ? 1.0 : 0.0, true},
        {"decay_fraction", a->decay_fraction, false},
        {"min_lr_ratio", ((const Wsd *)s)->m, false},
        {"warmup_start_lr", a->warmup_start_lr, false},
    };
    for (int i = 0; i < N_EXTRA; i++) x[i] = v[i];
}

/* The configuration is fixed at creation: a state of another one is refused. */
static CtStatus wsd_extra_set(Scheduler *s, const SchedulerExtra *in)
{
    SchedulerExtra mine[N_EXTRA];
    wsd_extra_get(s, mine);
    for (int i = 0; i < N_EXTRA; i++)
        if (in[i].value != mine[i].value)
            return ct_error(CT_ERR_INVALID,
                            "%s state load: saved %s %.17g, this scheduler has %.17g "
                            "(saved with another configuration)",
                            who, mine[i].name, in[i].value, mine[i].value);
    return CT_OK;
}

static const SchedulerOps wsd_ops = {.name = "WSDLrScheduler",
                                     .lr_at = wsd_lr_at,
                                     .n_extra = wsd_n_extra,
                                     .extra_get = wsd_extra_get,
                                     .extra_set = wsd_extra_set};

/* ------------------------------------------------------------ creation */

/* Defaults filled in; false (error recorded) for a bad value. */
static bool resolve(WsdArgs *a, double *m)
{
    if (a->decay_fraction == 0) a->decay_fraction = 0.1;
    if (a->num_checkpoints == 0) a->num_checkpoints = 1;
    *m = a->min_lr_ratio == 0                       ? 1e-6
         : a->min_lr_ratio == WSD_MIN_LR_RATIO_ZERO ? 0
                                                    : a->min_lr_ratio;
    if (a->continuation) a->warmup_steps = 0, a->warmup_start_lr = 0;
    if (a->total_steps < 1)
        return scheduler_fail(who, "total_steps must be >= 1, got %lld",
                              (long long)a->total_steps) != NULL;
    if (a->warmup_steps < 0)
        return scheduler_fail(who, "warmup_steps must be >= 0, got %lld",
                              (long long)a->warmup_steps) != NULL;
    if (!(a->decay_fraction > 0 && a->decay_fraction <= 1))
        return scheduler_fail(who, "decay_fraction must be in (0, 1], got %g",
                              a->decay_fraction) != NULL;
    if (!(*m >= 0 && *m <= 1))
        return scheduler_fail(who, "min_lr_ratio must be in [0, 1], got %g", *m) != NULL;
    if ((unsigned)a->decay_shape > WSD_DECAY_COSINE)
        return scheduler_fail(who, "unknown decay_shape %d", (int)a->decay_shape) != NULL;
    if (a->decay_shape == WSD_DECAY_INVERSE_PROPORTIONAL && *m == 0)
        return scheduler_fail(who, "the inverse-proportional decay needs min_lr_ratio "
                                   "> 0 (it divides by it)") != NULL;
    if (a->num_checkpoints < 1 || a->num_checkpoints > WSD_MAX_PERIODS)
        return scheduler_fail(who, "num_checkpoints must be in [1, %d], got %d",
                              WSD_MAX_PERIODS, a->num_checkpoints) != NULL;
    if (a->num_checkpoints > 1 && a->decay_fraction > 1.0 / 3)
        return scheduler_fail(who,
                              "decay_fraction %g is too large with %d checkpoints "
                              "(at most 1/3, as pytorch-accelerated)",
                              a->decay_fraction, a->num_checkpoints) != NULL;
    if (a->num_checkpoints > 1 && (a->total_steps >> (a->num_checkpoints - 1)) < 1)
        return scheduler_fail(who,
                              "total_steps %lld is too small for %d checkpoints "
                              "(needs >= 2^%d)",
                              (long long)a->total_steps, a->num_checkpoints,
                              a->num_checkpoints - 1) != NULL;
    if (!(isfinite(a->warmup_start_lr) && a->warmup_start_lr >= 0))
        return scheduler_fail(who, "warmup_start_lr must be finite and >= 0, got %g",
                              a->warmup_start_lr) != NULL;
    return true;
}

/* The periods; false (error recorded) when one has no decay step or the
 * warmup runs into the first decay. */
static bool make_periods(Wsd *w)
{
    const WsdArgs *a = &w->a;
    w->n = a->num_checkpoints;
    int64_t start = 0;
    for (int i = 0; i < w->n; i++) {
        int64_t end = a->total_steps >> (w->n - 1 - i);
        int64_t d = (int64_t)floor((double)(end - start) * a->decay_fraction);
        if (d < 1)
            return scheduler_fail(who,
                                  "period %d [%lld, %lld) gets no decay step with "
                                  "decay_fraction %g (raise it or total_steps)",
                                  i, (long long)start, (long long)end,
                                  a->decay_fraction) != NULL;
        w->p[i] = (WsdPeriod){start, end - d, end, d};
        start = end;
    }
    if (a->warmup_steps > w->p[0].pre_decay_step)
        return scheduler_fail(
                   who, "warmup_steps %lld run past the first pre-decay step %lld",
                   (long long)a->warmup_steps, (long long)w->p[0].pre_decay_step) != NULL;
    return true;
}

Scheduler *scheduler_wsd(Optimizer *o, const WsdArgs *args)
{
    if (o && !args) {
        ct_error(CT_ERR_NULL, "%s: args is NULL", who);
        return NULL;
    }
    WsdArgs a = args ? *args : (WsdArgs){0};
    double m = 0;
    if (o && !resolve(&a, &m)) return NULL;
    Wsd *w = (Wsd *)scheduler_alloc(sizeof *w, &wsd_ops, o, who);
    if (!w) return NULL;
    w->a = a;
    w->m = m;
    bool ok = make_periods(w);
    for (int g = 0; ok && a.warmup_steps > 0 && g < w->base.ngroups; g++)
        if (a.warmup_start_lr > w->base.base_lrs[g])
            ok = scheduler_fail(who, "warmup_start_lr %g exceeds group %d's base LR %g",
                                a.warmup_start_lr, g, w->base.base_lrs[g]) != NULL;
    if (!ok) {
        scheduler_destroy(&w->base);
        return NULL;
    }
    return scheduler_start(&w->base);
}

/* ------------------------------------------------------------ queries */

static const Wsd *as_wsd(const Scheduler *s, const char *fn)
{
    if (!s) {
        ct_error(CT_ERR_NULL, "%s: scheduler is NULL", fn);
        return NULL;
    }
    if (s->ops != &wsd_ops) {
        ct_error(CT_ERR_INVALID, "%s: the scheduler is %s, not a WSDLrScheduler", fn,
                 s->ops->name);
        return NULL;
    }
    return (const Wsd *)s;
}

int scheduler_wsd_num_periods(const Scheduler *s)
{
    const Wsd *w = as_wsd(s, "scheduler_wsd_num_periods");
    return w ? w->n : -1;
}

CtStatus scheduler_wsd_period(const Scheduler *s, int i, WsdPeriod *out)
{
    const Wsd *w = as_wsd(s, "scheduler_wsd_period");
    if (!w) return ct_last_status();
    if (!out) return ct_error(CT_ERR_NULL, "scheduler_wsd_period: out is NULL");
    if (i < 0 || i >= w->n)
        return ct_error(CT_ERR_INVALID, "scheduler_wsd_period: period %d out of [0, %d)",
                        i, w->n);
    *out = w->p[i];
    return CT_OK;
}

CtStatus scheduler_wsd_phase_info(const Scheduler *s, int64_t step, WsdPeriod *out)
{
    const Wsd *w = as_wsd(s, "scheduler_wsd_phase_info");
    if (!w) return ct_last_status();
    if (!out) return ct_error(CT_ERR_NULL, "scheduler_wsd_phase_info: out is NULL");
    if (step < 0)
        return ct_error(CT_ERR_INVALID, "scheduler_wsd_phase_info: step %lld < 0",
                        (long long)step);
    int i = 0;
    while (i < w->n - 1 && step > w->p[i].end) i++;
    *out = w->p[i];
    return CT_OK;
}

CtStatus scheduler_wsd_args(const Scheduler *s, WsdArgs *out)
{
    const Wsd *w = as_wsd(s, "scheduler_wsd_args");
    if (!w) return ct_last_status();
    if (!out) return ct_error(CT_ERR_NULL, "scheduler_wsd_args: out is NULL");
    *out = w->a;
    out->min_lr_ratio = w->m == 0 ? WSD_MIN_LR_RATIO_ZERO : w->m;
    return CT_OK;
}
