/* SaveBestModel: the model (and optimizer/scheduler state) at its best
 * epoch, as safetensors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cb_internal.h"

typedef struct SaveBest {
    Callback base;
    char *path, *opt_path, *scheduler_path, *watch;
    bool greater, reset_on_train, save_opt, save_sched, load_at_end;
    double best;
    int64_t saves; /* in this run */
    /* the files hold the best model (of this run, or of an earlier one
     * with no_reset_on_train); what the last save wrote besides */
    bool holds_best, saved_opt, saved_sched;
} SaveBest;

static void sb_free(Callback *cb)
{
    SaveBest *s = (SaveBest *)cb;
    free(s->path);
    free(s->opt_path);
    free(s->scheduler_path);
    free(s->watch);
    free(s);
}

/* <path without .safetensors><suffix> */
static char *derived_path(const char *path, const char *suffix)
{
    size_t n = strlen(path);
    const char *ext = ".safetensors";
    size_t e = strlen(ext);
    if (n > e && strcmp(path + n - e, ext) == 0) n -= e;
    char *p = malloc(n + strlen(suffix) + 1);
    if (!p) {
        ct_error(CT_ERR_OOM, "SaveBestModel: out of memory");
        return NULL;
    }
    memcpy(p, path, n);
    strcpy(p + n, suffix);
    return p;
}

static CtStatus save_state(const char *path,
                           CtStatus (*fill)(const void *, CtStateDict *), const void *obj)
{
    CtStateDict *d = ct_state_dict_create();
    if (!d) return ct_error(CT_ERR_OOM, "SaveBestModel: out of memory");
    CtStatus st = fill(obj, d);
    if (st == CT_OK) st = nn_safetensors_save(path, d, 0, NULL, NULL);
    ct_state_dict_free(d);
    return st;
}

static CtStatus fill_opt(const void *o, CtStateDict *d)
{
    return optim_state_save(o, d);
}

static CtStatus fill_sched(const void *s, CtStateDict *d)
{
    return scheduler_state_save(s, d);
}

static CtStatus save(SaveBest *s, Trainer *t, double value)
{
    s->saved_opt = s->save_opt && t->optimizer;
    s->saved_sched = s->save_sched && t->scheduler;
    CtStatus st = CT_OK;
    if (cb_is_main(t)) {
        CtStateDict *sd = nn_module_state_dict(t->model);
        if (!sd) return ct_last_status();
        char val[40], epoch[24];
        snprintf(val, sizeof val, "%.17g", value);
        snprintf(epoch, sizeof epoch, "%lld",
                 (long long)run_history_current_epoch(trainer_run_history(t)));
        const char *keys[3] = {"format", s->watch, "epoch"};
        const char *vals[3] = {"pt", val, epoch};
        st = nn_safetensors_save(s->path, sd, 3, keys, vals);
        ct_state_dict_free(sd);
        if (st == CT_OK && s->saved_opt)
            st = save_state(s->opt_path, fill_opt, t->optimizer);
        if (st == CT_OK && s->saved_sched)
            st = save_state(s->scheduler_path, fill_sched, t->scheduler);
    }
    if (st == CT_OK) {
        s->saves++;
        s->holds_best = true;
    }
    return st;
}

static CtStatus sb_run_start(Callback *cb, Trainer *t)
{
    SaveBest *s = (SaveBest *)cb;
    if (s->reset_on_train) {
        s->best = NAN;
        s->holds_best = false;
    }
    s->saves = 0;
    return CT_OK;
}

static CtStatus sb_epoch_end(Callback *cb, Trainer *t)
{
    SaveBest *s = (SaveBest *)cb;
    RunHistory *h = trainer_run_history(t);
    if (!run_history_has_metric(h, s->watch))
        return ct_error(CT_ERR_INVALID, "SaveBestModel: metric '%s' was never recorded",
                        s->watch);
    double cur = run_history_latest(h, s->watch);
    if (!cb_improved(cur, s->best, s->greater)) return CT_OK;
    s->best = cur;
    return save(s, t, cur);
}

static CtStatus load_state(const char *path,
                           CtStatus (*load)(void *, const CtStateDict *), void *obj)
{
    CtStateDict *d = nn_safetensors_load(path, ct_cpu());
    if (!d) return ct_last_status();
    CtStatus st = load(obj, d);
    ct_state_dict_free(d);
    return st;
}

static CtStatus load_opt(void *o, const CtStateDict *d)
{
    return optim_state_load(o, d);
}

static CtStatus load_sched(void *s, const CtStateDict *d)
{
    return scheduler_state_load(s, d);
}

static CtStatus sb_run_end(Callback *cb, Trainer *t)
{
    SaveBest *s = (SaveBest *)cb;
    if (!s->load_at_end || !s->holds_best) return CT_OK;
    Runtime *rt = trainer_runtime(t);
    if (rt && runtime_is_distributed(rt)) {
        CtStatus st = runtime_barrier(rt); /* the main process has written */
        if (st != CT_OK) return st;
    }
    CtStatus st = nn_module_load(t->model, s->path, true, NULL);
    if (st == CT_OK && s->saved_opt && t->optimizer)
        st = load_state(s->opt_path, load_opt, t->optimizer);
    if (st == CT_OK && s->saved_sched && t->scheduler)
        st = load_state(s->scheduler_path, load_sched, t->scheduler);
    return st;
}

/* What the files hold, as bits: 1 the best model, 2 the optimizer's
 * state, 4 the scheduler's. */
static double held_files(const SaveBest *s)
{
    return (double)(s->holds_best | s->saved_opt << 1 | s->saved_sched << 2);
}

static CtStatus sb_state_save(Callback *cb, Trainer *t, CtStateDict *out)
{
    (void)t;
    const SaveBest *s = (const SaveBest *)cb;
    CtStatus st = cb_state_put(out, "best", s->best);
    if (st == CT_OK) st = cb_state_put(out, "saves", (double)s->saves);
    return st == CT_OK ? cb_state_put(out, "files", held_files(s)) : st;
}

static CtStatus sb_state_load(Callback *cb, Trainer *t, const CtStateDict *in)
{
    (void)t;
    SaveBest *s = (SaveBest *)cb;
    double best, saves, files = -1;
    CtStatus st = cb_state_get(in, "SaveBestModel", "best", &best);
    if (st == CT_OK) st = cb_state_get(in, "SaveBestModel", "saves", &saves);
    /* states written before "files" existed: the files are this run's */
    if (st == CT_OK && ct_state_dict_get(in, "files"))
        st = cb_state_get(in, "SaveBestModel", "files", &files);
    if (st != CT_OK) return st;
    if (!(saves >= 0 && saves <= 1e15) || !(files >= -1 && files <= 7))
        return ct_error(CT_ERR_INVALID, "SaveBestModel: state entry '%s' is out of range",
                        saves >= 0 && saves <= 1e15 ? "files" : "saves");
    s->best = best;
    s->saves = (int64_t)saves;
    int bits = files >= 0 ? (int)files : s->saves > 0;
    s->holds_best = bits & 1;
    s->saved_opt = bits >> 1 & 1;
    s->saved_sched = bits >> 2 & 1;
    return CT_OK;
}

static const CallbackVtable save_best_vt = {
    .type = "SaveBestModel",
    .state_save = sb_state_save,
    .state_load = sb_state_load,
    .free = sb_free,
    .on_training_run_start = sb_run_start,
    .on_training_run_epoch_end = sb_epoch_end,
    .on_training_run_end = sb_run_end,
};

Callback *callback_save_best_model_create(const SaveBestModelArgs *args)
{
    SaveBestModelArgs a = args ? *args : (SaveBestModelArgs){0};
    SaveBest *s = (SaveBest *)cb_alloc(sizeof *s, &save_best_vt);
    if (!s) return NULL;
    s->greater = a.greater_is_better;
    s->reset_on_train = !a.no_reset_on_train;
    s->save_opt = !a.no_save_optimizer;
    s->save_sched = !a.no_save_scheduler;
    s->load_at_end = !a.no_load_saved_checkpoint;
    s->best = NAN;
    s->path = cb_strdup(a.save_path, "best_model.safetensors");
    s->watch = cb_strdup(a.watch_metric, "eval_loss_epoch");
    if (s->path) {
        s->opt_path = derived_path(s->path, ".optimizer.safetensors");
        s->scheduler_path = derived_path(s->path, ".scheduler.safetensors");
    }
    if (!s->path || !s->watch || !s->opt_path || !s->scheduler_path) {
        sb_free(&s->base);
        return NULL;
    }
    if (!*s->path) {
        sb_free(&s->base);
        ct_error(CT_ERR_INVALID, "SaveBestModel: empty save_path");
        return NULL;
    }
    return &s->base;
}

double callback_save_best_model_best(const Callback *cb)
{
    return cb_is(cb, &save_best_vt) ? ((const SaveBest *)cb)->best : NAN;
}

int64_t callback_save_best_model_num_saves(const Callback *cb)
{
    return cb_is(cb, &save_best_vt) ? ((const SaveBest *)cb)->saves : 0;
}
