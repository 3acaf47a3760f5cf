/* The dynamic loss scaler (runtime.h, "loss scaler"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/runtime.h"

struct GradScaler {
    double scale, growth, backoff;
    int64_t interval;
    int64_t tracker; /* clean steps in a row */
    int64_t skipped;
    bool found_inf;
};

static CtStatus check_args(const char *fn, double scale, double growth, double backoff,
                           double interval)
{
    if (!(scale > 0) || !isfinite(scale))
        return ct_error(CT_ERR_INVALID, "%s: scale %g must be finite and > 0", fn, scale);
    if (!(growth > 1) || !isfinite(growth))
        return ct_error(CT_ERR_INVALID, "%s: growth_factor %g must be > 1", fn, growth);
    if (!(backoff > 0 && backoff < 1))
        return ct_error(CT_ERR_INVALID, "%s: backoff_factor %g must be in (0, 1)", fn,
                        backoff);
    if (!(interval >= 1) || interval != floor(interval))
        return ct_error(CT_ERR_INVALID, "%s: growth_interval %g must be an integer >= 1",
                        fn, interval);
    return CT_OK;
}

GradScaler *scaler_create(const ScalerArgs *args)
{
    ScalerArgs a = args ? *args : (ScalerArgs){0};
    double scale = a.init_scale ? a.init_scale : 65536.0;
    double growth = a.growth_factor ? a.growth_factor : 2.0;
    double backoff = a.backoff_factor ? a.backoff_factor : 0.5;
    int64_t interval = a.growth_interval ? a.growth_interval : 2000;
    if (check_args("scaler_create", scale, growth, backoff, (double)interval) != CT_OK)
        return NULL;
    GradScaler *s = calloc(1, sizeof *s);
    if (!s) {
        ct_error(CT_ERR_OOM, "scaler_create: out of memory");
        return NULL;
    }
    *s = (GradScaler){
        .scale = scale, .growth = growth, .backoff = backoff, .interval = interval};
    return s;
}

void scaler_free(GradScaler *s)
{
    free(s);
}

Tensor *scaler_scale(const GradScaler *s, Tensor *loss)
{
    if (!s) {
        ct_error(CT_ERR_NULL, "scaler_scale: NULL scaler");
        return NULL;
    }
    return tensor_mul_scalar(loss, s->scale);
}

CtStatus scaler_unscale(GradScaler *s, Tensor *grads)
{
    if (!s) return ct_error(CT_ERR_NULL, "scaler_unscale: NULL scaler");
    if (!grads)
        return ct_error(CT_ERR_NULL,
                        "scaler_unscale: NULL gradients (is the model packed?)");
    CtStatus st = tensor_unscale_(grads, 1.0 / s->scale, &s->found_inf);
    return st == CT_OK ? st : ct_error_wrap(st, "scaler_unscale");
}

bool scaler_found_inf(const GradScaler *s)
{
    return s && s->found_inf;
}

void scaler_update(GradScaler *s)
{
    if (!s) return;
    if (s->found_inf) {
        s->scale *= s->backoff;
        s->tracker = 0;
        s->skipped++;
    } else if (++s->tracker == s->interval) {
        /* PyTorch keeps the scale when growing would overflow */
        if (isfinite(s->scale * s->growth)) s->scale *= s->growth;
        s->tracker = 0;
    }
    s->found_inf = false;
}

double scaler_get_scale(const GradScaler *s)
{
    return s ? s->scale : 0.0;
}

int64_t scaler_skipped_steps(const GradScaler *s)
{
    return s ? s->skipped : 0;
}

/* ------------------------------------------------------------- state */

enum { N_FIELDS = 6 };
static const char *const FIELDS[N_FIELDS] = {"scale",          "growth_tracker",
                                             "skipped_steps",  "growth_factor",
                                             "backoff_factor", "growth_interval"};

static void field_name(char *buf, size_t cap, const char *prefix, int i)
{
    snprintf(buf, cap, "%s%s", prefix ? prefix : "", FIELDS[i]);
}

CtStatus scaler_state_save(const GradScaler *s, CtStateDict *d, const char *prefix)
{
    if (!s || !d) return ct_error(CT_ERR_NULL, "scaler_state_save: NULL argument");
    const double v[N_FIELDS] = {s->scale,  (double)s->tracker, (double)s->skipped,
                                s->growth, s->backoff,         (double)s->interval};
    /* d takes its own references; the scope drops the creation ones */
    CtScope *scope = ct_scope_open();
    if (!scope) return ct_error(CT_ERR_OOM, "scaler_state_save: out of memory");
    CtStatus st = CT_OK;
    for (int i = 0; st == CT_OK && i < N_FIELDS; i++) {
        char name[256];
        field_name(name, sizeof name, prefix, i);
        Tensor *t = tensor_full(1, (const int64_t[]){1}, v[i], CT_F64, ct_cpu());
        st = t ? ct_state_dict_add(d, name, t) : ct_last_status();
        if (st != CT_OK) st = ct_error_wrap(st, "scaler_state_save: '%s'", name);
    }
    ct_scope_close(scope);
    return st;
}

/* The counts of a state (growth_tracker, skipped_steps, growth_interval)
 * are integers in [0, 2^53], where a double holds every integer exactly
 * and the conversion to int64_t is defined. */
static CtStatus check_counts(const char *prefix, const double *v)
{
    static const int COUNTS[3] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        double x = v[COUNTS[k]];
        if (x >= 0 && x <= 0x1p53 && x == floor(x)) continue;
        char name[256];
        field_name(name, sizeof name, prefix, COUNTS[k]);
        return ct_error(CT_ERR_FORMAT,
                        "scaler_state_load: '%s' is %g, not a count (an integer in "
                        "[0, 2^53])",
                        name, x);
    }
    return CT_OK;
}

CtStatus scaler_state_load(GradScaler *s, const CtStateDict *d, const char *prefix)
{
    if (!s || !d) return ct_error(CT_ERR_NULL, "scaler_state_load: NULL argument");
    double v[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) {
        char name[256];
        field_name(name, sizeof name, prefix, i);
        Tensor *t = ct_state_dict_get(d, name);
        if (!t || tensor_numel(t) != 1)
            return ct_error(CT_ERR_FORMAT,
                            "scaler_state_load: '%s' is missing or not one value", name);
        CtStatus st = tensor_copy_to_host(t, &v[i], CT_F64);
        if (st != CT_OK) return ct_error_wrap(st, "scaler_state_load: '%s'", name);
    }
    CtStatus st = check_counts(prefix, v);
    if (st == CT_OK) st = check_args("scaler_state_load", v[0], v[3], v[4], v[5]);
    if (st != CT_OK) return st;
    if (!(v[1] >= 0 && v[1] < v[5]) || !(v[2] >= 0))
        return ct_error(CT_ERR_FORMAT,
                        "scaler_state_load: growth_tracker %g or skipped_steps %g out of "
                        "range",
                        v[1], v[2]);
    *s = (GradScaler){.scale = v[0],
                      .tracker = (int64_t)v[1],
                      .skipped = (int64_t)v[2],
                      .growth = v[3],
                      .backoff = v[4],
                      .interval = (int64_t)v[5]};
    return CT_OK;
}
