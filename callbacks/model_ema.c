/* ModelEma: an exponential moving average of the model's weights, evaluated
 * alongside the model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cb_internal.h"

typedef struct ModelEma {
    Callback base;
    double decay;
    bool every_step, average_buffers, evaluate, greater;
    CallbackList *callbacks; /* the EMA evaluation's callbacks (owned) */
    char *save_path, *watch;
    double best;
    /* EMA tensors: parameters then buffers, in nn_module_parameters /
     * nn_module_buffers order; all = both under state-dict names */
    CtStateDict *params, *buffers, *all;
    Tensor **backup; /* the live values during a swap (persistent) */
    int64_t n_backup;
    int64_t updates, last_step;
} ModelEma;

static void free_state(ModelEma *e)
{
    ct_state_dict_free(e->params);
    ct_state_dict_free(e->buffers);
    ct_state_dict_free(e->all);
    for (int64_t i = 0; i < e->n_backup; i++) tensor_free(e->backup[i]);
    free(e->backup);
    e->params = e->buffers = e->all = NULL;
    e->backup = NULL;
    e->n_backup = 0;
}

static void me_free(Callback *cb)
{
    ModelEma *e = (ModelEma *)cb;
    free_state(e);
    callback_list_free(e->callbacks);
    free(e->save_path);
    free(e->watch);
    free(e);
}

/* A persistent detached copy of every tensor of src, same names. */
static CtStatus clone_dict(const CtStateDict *src, CtStateDict **out)
{
    CtStateDict *d = ct_state_dict_create();
    if (!d) return ct_error(CT_ERR_OOM, "ModelEma: out of memory");
    bool grad = ct_set_grad_enabled(false);
    CtScope *sc = ct_scope_open();
    CtStatus st = sc ? CT_OK : ct_error(CT_ERR_OOM, "ModelEma: out of memory");
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(src); i++) {
        Tensor *c = tensor_clone(tensor_detach(ct_state_dict_tensor(src, i)));
        st = c ? ct_state_dict_add(d, ct_state_dict_name(src, i), c) : ct_last_status();
    }
    if (sc) ct_scope_close(sc); /* the dict keeps its own references */
    ct_set_grad_enabled(grad);
    if (st != CT_OK) {
        ct_state_dict_free(d);
        return st;
    }
    *out = d;
    return CT_OK;
}

static CtStatus me_run_start(Callback *cb, Trainer *t)
{
    ModelEma *e = (ModelEma *)cb;
    free_state(e);
    e->updates = 0;
    e->best = NAN;
    e->last_step = trainer_global_step(t);
    CtStateDict *p = nn_module_parameters(t->model), *b = nn_module_buffers(t->model);
    CtStatus st = p && b ? CT_OK : ct_last_status();
    if (st == CT_OK) st = clone_dict(p, &e->params);
    if (st == CT_OK) st = clone_dict(b, &e->buffers);
    ct_state_dict_free(p);
    ct_state_dict_free(b);
    if (st == CT_OK) e->all = ct_state_dict_create();
    if (st == CT_OK && !e->all) st = ct_error(CT_ERR_OOM, "ModelEma: out of memory");
    for (int k = 0; st == CT_OK && k < 2; k++) {
        CtStateDict *d = k ? e->buffers : e->params;
        for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(d); i++)
            st = ct_state_dict_add(e->all, ct_state_dict_name(d, i),
                                   ct_state_dict_tensor(d, i));
    }
    if (st != CT_OK) free_state(e);
    return st;
}

static bool is_float(CtDType dt)
{
    return dt == CT_F32 || dt == CT_F64 || dt == CT_BF16 || dt == CT_F16;
}

/* ema <- decay * ema + (1 - decay) * w, as tensor ops on the tensors' own
 * device (the same code on the CPU as on a GPU) */
static CtStatus ema_lerp(Tensor *ema, Tensor *w, double decay)
{
    CtScope *sc = ct_scope_open();
    if (!sc) return ct_error(CT_ERR_OOM, "ModelEma: out of memory");
    Tensor *v = tensor_add(tensor_mul_scalar(ema, decay),
                           tensor_mul_scalar(tensor_detach(w), 1.0 - decay));
    CtStatus st = v ? tensor_copy_(ema, v) : ct_last_status();
    ct_scope_close(sc);
    return st;
}

static CtStatus ema_update(ModelEma *e, Trainer *t)
{
    if (!e->params)
        return ct_error(CT_ERR_STATE, "ModelEma: no EMA (training run not started)");
    CtStateDict *p = nn_module_parameters(t->model), *b = nn_module_buffers(t->model);
    CtStatus st = p && b ? CT_OK : ct_last_status();
    if (st == CT_OK && (ct_state_dict_size(p) != ct_state_dict_size(e->params) ||
                        ct_state_dict_size(b) != ct_state_dict_size(e->buffers)))
        st = ct_error(CT_ERR_STATE,
                      "ModelEma: the model's parameters changed during the run");
    bool grad = ct_set_grad_enabled(false);
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(p); i++)
        st = ema_lerp(ct_state_dict_tensor(e->params, i), ct_state_dict_tensor(p, i),
                      e->decay);
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(b); i++) {
        Tensor *eb = ct_state_dict_tensor(e->buffers, i), *w = ct_state_dict_tensor(b, i);
        st = e->average_buffers && is_float(tensor_dtype(eb)) ? ema_lerp(eb, w, e->decay)
                                                              : tensor_copy_(eb, w);
    }
    ct_set_grad_enabled(grad);
    ct_state_dict_free(p);
    ct_state_dict_free(b);
    if (st == CT_OK) e->updates++;
    return st;
}

/* Update when an optimizer update happened since the last one. */
static CtStatus maybe_update(ModelEma *e, Trainer *t)
{
    int64_t g = trainer_global_step(t);
    if (g == e->last_step) return CT_OK;
    e->last_step = g;
    return ema_update(e, t);
}

static CtStatus me_step_start(Callback *cb, Trainer *t)
{
    ModelEma *e = (ModelEma *)cb;
    return e->every_step ? maybe_update(e, t) : CT_OK;
}

static CtStatus me_train_epoch_end(Callback *cb, Trainer *t)
{
    ModelEma *e = (ModelEma *)cb;
    return e->every_step ? maybe_update(e, t) : ema_update(e, t);
}

/* Exchanges the model's values with the EMA's (in: model gets the EMA,
 * out: the model gets its own values back). */
static CtStatus swap(ModelEma *e, Trainer *t, bool in)
{
    CtStateDict *live = nn_module_state_dict(t->model);
    if (!live) return ct_last_status();
    int64_t n = ct_state_dict_size(e->all);
    CtStatus st = CT_OK;
    if (!e->backup) {
        e->backup = calloc((size_t)n, sizeof *e->backup);
        if (!e->backup)
            st = ct_error(CT_ERR_OOM, "ModelEma: out of memory");
        else
            e->n_backup = n;
    }
    bool grad = ct_set_grad_enabled(false);
    for (int64_t i = 0; st == CT_OK && i < n; i++) {
        const char *name = ct_state_dict_name(e->all, i);
        Tensor *m = ct_state_dict_get(live, name);
        if (!m) {
            st = ct_error(CT_ERR_STATE, "ModelEma: the model has no '%s' any more", name);
            break;
        }
        if (in) {
            if (!e->backup[i]) {
                /* cloned in our own scope and retained: one reference, ours */
                CtScope *sc = ct_scope_open();
                Tensor *c = sc ? tensor_clone(tensor_detach(m)) : NULL;
                e->backup[i] = c ? tensor_retain(c) : NULL;
                if (sc) ct_scope_close(sc);
                if (!e->backup[i])
                    st = sc ? ct_last_status()
                            : ct_error(CT_ERR_OOM, "ModelEma: out of memory");
            } else {
                st = tensor_copy_(e->backup[i], m);
            }
            if (st == CT_OK) st = tensor_copy_(m, ct_state_dict_tensor(e->all, i));
        } else {
            st = tensor_copy_(m, e->backup[i]);
        }
    }
    ct_set_grad_enabled(grad);
    ct_state_dict_free(live);
    return st;
}

static CtStatus ema_evaluate(ModelEma *e, Trainer *t)
{
    RunHistory *h = trainer_run_history(t);
    char old_prefix[RUN_HISTORY_MAX_NAME];
    snprintf(old_prefix, sizeof old_prefix, "%s", run_history_prefix(h));
    CtStatus st = swap(e, t, true);
    if (st != CT_OK) return st;
    CallbackList *old = trainer_set_callbacks(t, e->callbacks);
    st = run_history_set_prefix(h, "ema_model_");
    if (st == CT_OK) st = trainer_run_eval_epoch(t, false);
    run_history_set_prefix(h, old_prefix);
    e->callbacks = trainer_set_callbacks(t, old);
    CtStatus st2 = swap(e, t, false);
    return st != CT_OK ? st : st2;
}

static CtStatus me_eval_epoch_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    ModelEma *e = (ModelEma *)cb;
    /* only evaluations inside a training run, not trainer_evaluate */
    if (!e->evaluate || is_intermediate || !e->params || !trainer_train_dataloader(t))
        return CT_OK;
    return ema_evaluate(e, t);
}

static CtStatus me_epoch_end(Callback *cb, Trainer *t)
{
    ModelEma *e = (ModelEma *)cb;
    if (!e->save_path || !e->params) return CT_OK;
    RunHistory *h = trainer_run_history(t);
    if (e->evaluate && run_history_has_metric(h, e->watch)) {
        double cur = run_history_latest(h, e->watch);
        if (!cb_improved(cur, e->best, e->greater)) return CT_OK;
        e->best = cur;
    }
    if (!cb_is_main(t)) return CT_OK;
    CtStatus st = swap(e, t, true);
    if (st != CT_OK) return st;
    st = nn_module_save(t->model, e->save_path);
    CtStatus st2 = swap(e, t, false);
    return st != CT_OK ? st : st2;
}

/* The EMA weights ("ema.<name>"), the update count, the step of the last
 * update and the best EMA metric. */
static CtStatus me_state_save(Callback *cb, Trainer *t, CtStateDict *out)
{
    (void)t;
    const ModelEma *e = (const ModelEma *)cb;
    CtStatus st = cb_state_put(out, "updates", (double)e->updates);
    if (st == CT_OK) st = cb_state_put(out, "last_step", (double)e->last_step);
    if (st == CT_OK) st = cb_state_put(out, "best", e->best);
    char key[512];
    for (int64_t i = 0; st == CT_OK && e->all && i < ct_state_dict_size(e->all); i++) {
        snprintf(key, sizeof key, "ema.%s", ct_state_dict_name(e->all, i));
        st = ct_state_dict_add(out, key, ct_state_dict_tensor(e->all, i));
    }
    return st;
}

static CtStatus me_state_load(Callback *cb, Trainer *t, const CtStateDict *in)
{
    (void)t;
    ModelEma *e = (ModelEma *)cb;
    double updates, last_step, best;
    CtStatus st = cb_state_get(in, "ModelEma", "updates", &updates);
    if (st == CT_OK) st = cb_state_get(in, "ModelEma", "last_step", &last_step);
    if (st == CT_OK) st = cb_state_get(in, "ModelEma", "best", &best);
    if (st != CT_OK) return st;
    int64_t n = e->all ? ct_state_dict_size(e->all) : 0;
    if (ct_state_dict_size(in) != n + 3)
        return ct_error(CT_ERR_INVALID,
                        "ModelEma: the state has %lld EMA tensors, the "
                        "model %lld",
                        (long long)ct_state_dict_size(in) - 3, (long long)n);
    char key[512];
    for (int pass = 0; pass < 2; pass++) /* check all, then copy */
        for (int64_t i = 0; i < n; i++) {
            snprintf(key, sizeof key, "ema.%s", ct_state_dict_name(e->all, i));
            Tensor *src = ct_state_dict_get(in, key),
                   *dst = ct_state_dict_tensor(e->all, i);
            if (!src || tensor_numel(src) != tensor_numel(dst))
                return ct_error(CT_ERR_INVALID, "ModelEma: state entry '%s' %s", key,
                                src ? "differs in size from the model's" : "is missing");
            if (pass == 1 && (st = tensor_copy_(dst, src)) != CT_OK) return st;
        }
    e->updates = (int64_t)updates;
    e->last_step = (int64_t)last_step;
    e->best = best;
    return CT_OK;
}

static const CallbackVtable model_ema_vt = {
    .type = "ModelEma",
    .state_save = me_state_save,
    .state_load = me_state_load,
    .free = me_free,
    .on_training_run_start = me_run_start,
    .on_train_step_start = me_step_start,
    .on_train_epoch_end = me_train_epoch_end,
    .on_eval_epoch_end = me_eval_epoch_end,
    .on_training_run_epoch_end = me_epoch_end,
};

Callback *callback_model_ema_create(const ModelEmaArgs *args)
{
    ModelEmaArgs a = args ? *args : (ModelEmaArgs){0};
    if (a.decay < 0 || a.decay >= 1 || isnan(a.decay)) {
        ct_error(CT_ERR_INVALID, "ModelEma: decay must be in [0, 1), got %g", a.decay);
        callback_list_free(a.callbacks);
        return NULL;
    }
    ModelEma *e = (ModelEma *)cb_alloc(sizeof *e, &model_ema_vt);
    if (!e) {
        callback_list_free(a.callbacks);
        return NULL;
    }
    e->decay = a.decay > 0 ? a.decay : 0.99;
    e->every_step = a.update_every_step;
    e->average_buffers = a.average_buffers;
    e->evaluate = !a.no_evaluation;
    e->greater = a.greater_is_better;
    e->best = NAN;
    e->callbacks = a.callbacks ? a.callbacks : callback_list_create();
    e->watch = cb_strdup(a.watch_metric, "ema_model_eval_loss_epoch");
    bool ok = e->callbacks && e->watch;
    if (ok && a.save_path) {
        e->save_path = cb_strdup(a.save_path, NULL);
        ok = e->save_path != NULL;
    }
    if (!ok) {
        if (!e->callbacks) ct_error(CT_ERR_OOM, "ModelEma: out of memory");
        me_free(&e->base);
        return NULL;
    }
    return &e->base;
}

const CtStateDict *callback_model_ema_state(const Callback *cb)
{
    return cb_is(cb, &model_ema_vt) ? ((const ModelEma *)cb)->all : NULL;
}

CtStatus callback_model_ema_copy_to(const Callback *cb, Module *m)
{
    if (!cb_is(cb, &model_ema_vt))
        return ct_error(CT_ERR_INVALID,
                        "callback_model_ema_copy_to: not a ModelEma callback");
    const ModelEma *e = (const ModelEma *)cb;
    if (!e->all) return ct_error(CT_ERR_STATE, "ModelEma: no EMA yet (train first)");
    return nn_module_load_state_dict(m, e->all, true, NULL);
}

int64_t callback_model_ema_num_updates(const Callback *cb)
{
    return cb_is(cb, &model_ema_vt) ? ((const ModelEma *)cb)->updates : 0;
}
