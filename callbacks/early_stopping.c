/* EarlyStopping: stop when the watched metric stops improving. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "cb_internal.h"

typedef struct EarlyStopping {
    Callback base;
    int patience;
    double threshold;
    char *watch;
    bool greater;
    bool reset_on_train;
    int counter;
    bool have_best; /* best holds the first value (or a later, better one) */
    double best;    /* NAN only when the metric was */
} EarlyStopping;

static void es_free(Callback *cb)
{
    free(((EarlyStopping *)cb)->watch);
    free(cb);
}

static CtStatus es_run_start(Callback *cb, Trainer *t)
{
    EarlyStopping *e = (EarlyStopping *)cb;
    if (e->reset_on_train) {
        e->counter = 0;
        e->best = NAN;
        e->have_best = false;
    }
    return CT_OK;
}

static CtStatus es_epoch_end(Callback *cb, Trainer *t)
{
    EarlyStopping *e = (EarlyStopping *)cb;
    RunHistory *h = trainer_run_history(t);
    if (!run_history_has_metric(h, e->watch))
        return ct_error(CT_ERR_INVALID, "EarlyStopping: metric '%s' was never recorded",
                        e->watch);
    double cur = run_history_latest(h, e->watch);
    if (!e->have_best) {
        e->best = cur;
        e->have_best = true;
        return CT_OK;
    }
    /* a NaN metric never improves; any value improves on a NaN best */
    double delta = isnan(e->best) ? INFINITY : fabs(cur - e->best);
    if (!isnan(cur) && cb_improved(cur, e->best, e->greater) && delta > e->threshold) {
        trainer_print(t, "Improvement of %g observed, resetting counter\n", delta);
        e->best = cur;
        e->counter = 0;
        return CT_OK;
    }
    e->counter++;
    trainer_print(t, "Early stopping counter: %d/%d\n", e->counter, e->patience);
    if (e->counter >= e->patience) {
        char reason[256];
        snprintf(reason, sizeof reason,
                 "Stopping training early: no improvement of %s for %d epochs", e->watch,
                 e->counter);
        trainer_stop(t, reason);
    }
    return CT_OK;
}

static CtStatus es_state_save(Callback *cb, Trainer *t, CtStateDict *out)
{
    (void)t;
    const EarlyStopping *e = (const EarlyStopping *)cb;
    CtStatus st = cb_state_put(out, "counter", e->counter);
    if (st == CT_OK) st = cb_state_put(out, "have_best", e->have_best);
    return st == CT_OK ? cb_state_put(out, "best", e->best) : st;
}

static CtStatus es_state_load(Callback *cb, Trainer *t, const CtStateDict *in)
{
    (void)t;
    EarlyStopping *e = (EarlyStopping *)cb;
    double counter, best, have = -1;
    CtStatus st = cb_state_get(in, "EarlyStopping", "counter", &counter);
    if (st == CT_OK) st = cb_state_get(in, "EarlyStopping", "best", &best);
    /* states written before "have_best" existed: a NaN best was none */
    if (st == CT_OK && ct_state_dict_get(in, "have_best"))
        st = cb_state_get(in, "EarlyStopping", "have_best", &have);
    if (st != CT_OK) return st;
    if (!(counter >= 0 && counter <= INT_MAX))
        return ct_error(CT_ERR_INVALID, "EarlyStopping: state entry 'counter' is %g",
                        counter);
    e->counter = (int)counter;
    e->best = best;
    e->have_best = have < 0 ? !isnan(best) : have > 0;
    return CT_OK;
}

static const CallbackVtable early_stopping_vt = {
    .type = "EarlyStopping",
    .state_save = es_state_save,
    .state_load = es_state_load,
    .free = es_free,
    .on_training_run_start = es_run_start,
    .on_training_run_epoch_end = es_epoch_end,
};

Callback *callback_early_stopping_create(const EarlyStoppingArgs *args)
{
    EarlyStoppingArgs a = args ? *args : (EarlyStoppingArgs){0};
    if (a.patience < 0) {
        ct_error(CT_ERR_INVALID, "EarlyStopping: patience must be >= 0, got %d",
                 a.patience);
        return NULL;
    }
    if (isnan(a.threshold)) {
        ct_error(CT_ERR_INVALID, "EarlyStopping: threshold is NaN");
        return NULL;
    }
    EarlyStopping *e = (EarlyStopping *)cb_alloc(sizeof *e, &early_stopping_vt);
    if (!e) return NULL;
    e->patience = a.patience ? a.patience : 1;
    e->threshold = a.threshold == 0 ? 0.01 : a.threshold < 0 ? 0 : a.threshold;
    e->greater = a.greater_is_better;
    e->reset_on_train = !a.no_reset_on_train;
    e->best = NAN;
    e->watch = cb_strdup(a.watch_metric, "eval_loss_epoch");
    if (!e->watch) {
        free(e);
        return NULL;
    }
    return &e->base;
}

int callback_early_stopping_counter(const Callback *cb)
{
    return cb_is(cb, &early_stopping_vt) ? ((const EarlyStopping *)cb)->counter : 0;
}

double callback_early_stopping_best(const Callback *cb)
{
    return cb_is(cb, &early_stopping_vt) ? ((const EarlyStopping *)cb)->best : NAN;
}
