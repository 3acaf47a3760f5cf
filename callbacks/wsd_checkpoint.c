/* WSDCheckpoint: a training state at each pre-decay step and the weights at
 * each period end of a WSD schedule (scheduler_wsd). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cb_internal.h"

typedef struct WsdCkpt {
    Callback base;
    char *dir;
    bool pre, post;
    int64_t last_pre, last_post; /* scheduler steps of the last saves (-1: none) */
    int64_t n_pre, n_post;       /* saves in this run */
} WsdCkpt;

static void wc_free(Callback *cb)
{
    free(((WsdCkpt *)cb)->dir);
    free(cb);
}

static CtStatus wc_run_start(Callback *cb, Trainer *t)
{
    WsdCkpt *c = (WsdCkpt *)cb;
    if (!t->scheduler)
        return ct_error(CT_ERR_INVALID,
                        "WSDCheckpoint: the run has no scheduler; it needs a "
                        "WSDLrScheduler (create_scheduler_fn returning scheduler_wsd)");
    if (scheduler_wsd_num_periods(t->scheduler) < 0)
        return ct_error(CT_ERR_INVALID,
                        "WSDCheckpoint: the run's scheduler is %s; it needs a "
                        "WSDLrScheduler (create_scheduler_fn returning scheduler_wsd)",
                        scheduler_name(t->scheduler));
    c->last_pre = c->last_post = -1;
    c->n_pre = c->n_post = 0;
    return cb_is_main(t) ? cb_make_dirs("WSDCheckpoint", c->dir) : CT_OK;
}

static CtStatus save_pre(WsdCkpt *c, Trainer *t, int64_t step)
{
    size_t n = strlen(c->dir) + 64;
    char *path = malloc(n);
    if (!path) return ct_error(CT_ERR_OOM, "WSDCheckpoint: out of memory");
    snprintf(path, n, "%s/checkpoint_%lld_wsd_pre_decay", c->dir, (long long)step);
    int64_t prev = c->last_pre;
    c->last_pre = step; /* saved in the state, so a resume does not save again */
    CtStatus st = trainer_save_state(t, path);
    free(path);
    if (st != CT_OK)
        c->last_pre = prev;
    else
        c->n_pre++;
    return st;
}

static CtStatus write_post(Trainer *t, int64_t step, const char *path)
{
    WsdArgs a;
    CtStatus st = scheduler_wsd_args(t->scheduler, &a);
    if (st != CT_OK) return st;
    CtStateDict *sd = nn_module_state_dict(t->model);
    if (!sd) return ct_last_status();
    char s_step[24], s_total[24], s_frac[40];
    snprintf(s_step, sizeof s_step, "%lld", (long long)step);
    snprintf(s_total, sizeof s_total, "%lld", (long long)a.total_steps);
    snprintf(s_frac, sizeof s_frac, "%.17g", a.decay_fraction);
    const char *keys[5] = {"format", "step", "type", "total_steps", "decay_fraction"};
    const char *vals[5] = {"pt", s_step, "post_decay", s_total, s_frac};
    st = nn_safetensors_save(path, sd, 5, keys, vals);
    ct_state_dict_free(sd);
    return st;
}

static CtStatus save_post(WsdCkpt *c, Trainer *t, int64_t step)
{
    CtStatus st = CT_OK;
    if (cb_is_main(t)) {
        size_t n = strlen(c->dir) + 64;
        char *path = malloc(n);
        if (!path) return ct_error(CT_ERR_OOM, "WSDCheckpoint: out of memory");
        snprintf(path, n, "%s/checkpoint_%lld_wsd_post_decay.safetensors", c->dir,
                 (long long)step);
        st = write_post(t, step, path);
        free(path);
    }
    if (st == CT_OK) {
        c->last_post = step;
        c->n_post++;
    }
    return st;
}

/* Saves what the scheduler's step calls for. allow_pre: the trainer's
 * position is exact here (trainer_save_state). */
static CtStatus check(WsdCkpt *c, Trainer *t, bool allow_pre)
{
    int64_t step = scheduler_step_count(t->scheduler);
    int n = scheduler_wsd_num_periods(t->scheduler);
    if (n < 0) return ct_last_status();
    CtStatus st = CT_OK;
    for (int i = 0; i < n && st == CT_OK; i++) {
        WsdPeriod p;
        st = scheduler_wsd_period(t->scheduler, i, &p);
        if (st == CT_OK && c->post && step == p.end && c->last_post != step)
            st = save_post(c, t, step);
        if (st == CT_OK && allow_pre && c->pre && step == p.pre_decay_step &&
            c->last_pre != step)
            st = save_pre(c, t, step);
    }
    return st;
}

static CtStatus wc_exact(Callback *cb, Trainer *t)
{
    return check((WsdCkpt *)cb, t, true);
}

/* After the epoch's last update, before its evaluation: weights only. */
static CtStatus wc_train_epoch_end(Callback *cb, Trainer *t)
{
    return check((WsdCkpt *)cb, t, false);
}

static CtStatus wc_state_save(Callback *cb, Trainer *t, CtStateDict *out)
{
    (void)t;
    WsdCkpt *c = (WsdCkpt *)cb;
    CtStatus st = cb_state_put(out, "last_pre_decay", (double)c->last_pre);
    if (st == CT_OK) st = cb_state_put(out, "last_post_decay", (double)c->last_post);
    return st;
}

static CtStatus get_step(const CtStateDict *in, const char *name, double *v)
{
    CtStatus st = cb_state_get(in, "WSDCheckpoint", name, v);
    if (st == CT_OK && !(*v >= -1 && *v < 0x1p53 && *v == floor(*v)))
        st = ct_error(CT_ERR_INVALID,
                      "WSDCheckpoint: state entry '%s' is %g, not a step (or -1)", name,
                      *v);
    return st;
}

static CtStatus wc_state_load(Callback *cb, Trainer *t, const CtStateDict *in)
{
    (void)t;
    double pre, post;
    CtStatus st = get_step(in, "last_pre_decay", &pre);
    if (st == CT_OK) st = get_step(in, "last_post_decay", &post);
    if (st != CT_OK) return st;
    ((WsdCkpt *)cb)->last_pre = (int64_t)pre;
    ((WsdCkpt *)cb)->last_post = (int64_t)post;
    return CT_OK;
}

static const CallbackVtable wsd_checkpoint_vt = {
    .type = "WSDCheckpoint",
    .free = wc_free,
    .state_save = wc_state_save,
    .state_load = wc_state_load,
    .on_training_run_start = wc_run_start,
    .on_train_step_start = wc_exact,
    .on_train_epoch_end = wc_train_epoch_end,
    .on_training_run_epoch_end = wc_exact,
    .on_training_run_end = wc_exact,
};

Callback *callback_wsd_checkpoint_create(const WsdCheckpointArgs *args)
{
    WsdCheckpointArgs a = args ? *args : (WsdCheckpointArgs){0};
    if (a.save_dir && !*a.save_dir) {
        ct_error(CT_ERR_INVALID, "WSDCheckpoint: save_dir is empty");
        return NULL;
    }
    WsdCkpt *c = (WsdCkpt *)cb_alloc(sizeof *c, &wsd_checkpoint_vt);
    if (!c) return NULL;
    c->dir = cb_strdup(a.save_dir, "checkpoints");
    if (!c->dir) {
        free(c);
        return NULL;
    }
    c->pre = !a.no_pre_decay;
    c->post = !a.no_post_decay;
    c->last_pre = c->last_post = -1;
    return &c->base;
}

int64_t callback_wsd_checkpoint_num_pre_decay(const Callback *cb)
{
    return cb_is(cb, &wsd_checkpoint_vt) ? ((const WsdCkpt *)cb)->n_pre : 0;
}

int64_t callback_wsd_checkpoint_num_post_decay(const Callback *cb)
{
    return cb_is(cb, &wsd_checkpoint_vt) ? ((const WsdCkpt *)cb)->n_post : 0;
}
