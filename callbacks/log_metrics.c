/* LogMetrics: the run history's latest values after each train/eval epoch. */
#include <stdlib.h>
#include <string.h>

#include "cb_internal.h"

typedef struct LogMetrics {
    Callback base;
    FILE *out;
    LogMetricsFn fn;
    void *user;
} LogMetrics;

static CtStatus print_table(Trainer *t, const char *phase, int n,
                            const char *const *names, const double *values, void *user)
{
    LogMetrics *l = user;
    if (!cb_is_main(t) || n == 0) return CT_OK;
    FILE *f = cb_out(l->out);
    int w = 0;
    for (int i = 0; i < n; i++) {
        int k = (int)strlen(names[i]);
        if (k > w) w = k;
    }
    fprintf(f, "epoch %lld %s\n",
            (long long)run_history_current_epoch(trainer_run_history(t)), phase);
    for (int i = 0; i < n; i++) fprintf(f, "  %-*s  %.6g\n", w, names[i], values[i]);
    fflush(f);
    return CT_OK;
}

/* which: 0 train (names containing "train"), 1 eval (the others),
 * 2 intermediate (names containing "intermediate"), 3 all. */
static CtStatus log_phase(LogMetrics *l, Trainer *t, const char *phase, int which)
{
    RunHistory *h = trainer_run_history(t);
    int total = run_history_num_metrics(h);
    if (total == 0) return CT_OK;
    const char **names = malloc((size_t)total * sizeof *names);
    double *values = malloc((size_t)total * sizeof *values);
    if (!names || !values) {
        free(names);
        free(values);
        return ct_error(CT_ERR_OOM, "LogMetrics: out of memory");
    }
    int n = 0;
    for (int i = 0; i < total; i++) {
        const char *name = run_history_metric_name(h, i);
        bool is_train = strstr(name, "train") != NULL;
        bool keep = which == 3 || (which == 0 && is_train) || (which == 1 && !is_train) ||
                    (which == 2 && strstr(name, "intermediate"));
        int64_t cnt = 0;
        const double *v = run_history_values(h, name, &cnt);
        if (!keep || cnt == 0) continue;
        names[n] = name;
        values[n++] = v[cnt - 1];
    }
    CtStatus st = n ? (l->fn ? l->fn(t, phase, n, names, values, l->user)
                             : print_table(t, phase, n, names, values, l))
                    : CT_OK;
    free(names);
    free(values);
    return st;
}

static CtStatus lm_train_epoch_end(Callback *cb, Trainer *t)
{
    return log_phase((LogMetrics *)cb, t, "train", 0);
}

static CtStatus lm_eval_epoch_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    if (is_intermediate) return log_phase((LogMetrics *)cb, t, "intermediate", 2);
    /* trainer_evaluate has no train loader: everything is an evaluation */
    if (!trainer_train_dataloader(t))
        return log_phase((LogMetrics *)cb, t, "evaluation", 3);
    return log_phase((LogMetrics *)cb, t, "eval", 1);
}

static const CallbackVtable log_metrics_vt = {
    .type = "LogMetrics",
    .on_train_epoch_end = lm_train_epoch_end,
    .on_eval_epoch_end = lm_eval_epoch_end,
};

Callback *callback_log_metrics_create(const LogMetricsArgs *args)
{
    LogMetrics *l = (LogMetrics *)cb_alloc(sizeof *l, &log_metrics_vt);
    if (!l) return NULL;
    if (args) {
        l->out = args->out;
        l->fn = args->log_metrics;
        l->user = args->user;
    }
    return &l->base;
}
