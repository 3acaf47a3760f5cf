/* Trainer construction, ownership, stop requests, callbacks and accessors.
 * The loops (with their stop points and event firing) are in loop.c, the
 * default hooks in hooks.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_internal.h"

static CtStatus check_config(const TrainerConfig *cfg)
{
    if (!cfg) return ct_error(CT_ERR_NULL, "trainer_init: NULL config");
    if (!cfg->model)
        return ct_error(CT_ERR_NULL, "trainer_init: TrainerConfig.model is NULL");
    if (!cfg->optimizer)
        return ct_error(CT_ERR_NULL, "trainer_init: TrainerConfig.optimizer is NULL");
    bool own_loss_hooks =
        cfg->hooks.calculate_train_batch_loss && cfg->hooks.calculate_eval_batch_loss;
    if (!cfg->loss && !cfg->loss_fn && !own_loss_hooks)
        return ct_error(CT_ERR_NULL, "trainer_init: no loss: set TrainerConfig.loss or "
                                     ".loss_fn (or override both calculate_*_batch_loss "
                                     "hooks)");
    if (cfg->n_callbacks < 0 || (cfg->n_callbacks > 0 && !cfg->callbacks))
        return ct_error(CT_ERR_INVALID, "trainer_init: %d callbacks at %p",
                        cfg->n_callbacks, (void *)cfg->callbacks);
    return CT_OK;
}

/* Frees the callbacks of a config that could not be taken over. */
static void free_config_callbacks(const TrainerConfig *cfg)
{
    if (!cfg || cfg->n_callbacks <= 0 || !cfg->callbacks) return;
    for (int i = 0; i < cfg->n_callbacks; i++) callback_free(cfg->callbacks[i]);
}

/* CTRAINER_LIMIT_BATCHES (pytorch-accelerated's PT_ACC_LIMIT_BATCHES): caps
 * train and eval batches per epoch, as trainer_limit_batches does. A
 * LimitBatches callback sets its own cap at its events, so it wins. */
static CtStatus limit_batches_from_env(Trainer *t)
{
    const char *v = getenv("CTRAINER_LIMIT_BATCHES");
    if (!v || !*v || strcmp(v, "none") == 0) return CT_OK;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n <= 0)
        return ct_error(CT_ERR_INVALID,
                        "CTRAINER_LIMIT_BATCHES=\"%s\": expected a positive integer or "
                        "\"none\"",
                        v);
    trainer_limit_batches(t, n, n);
    return CT_OK;
}

static CtStatus take_callbacks(TrainerState *s, const TrainerConfig *cfg)
{
    CtStatus st = CT_OK;
    for (int i = 0; i < cfg->n_callbacks; i++) {
        /* the list takes every entry, also after a failure, so none leaks */
        Callback *cb = cfg->callbacks[i];
        if (st != CT_OK) {
            callback_free(cb);
            continue;
        }
        if (!cb && ct_last_status() == CT_OK)
            ct_error(CT_ERR_NULL, "trainer_init: callback %d is NULL", i);
        st = callback_list_add(s->callbacks, cb);
    }
    return st;
}

/* The config's loss scaler, or an owned one with the defaults for an fp16
 * run. */
static CtStatus take_scaler(TrainerState *s, const TrainerConfig *cfg)
{
    s->scaler = cfg->scaler;
    if (s->scaler || strcmp(runtime_mixed_precision(s->rt), "fp16") != 0) return CT_OK;
    s->scaler = scaler_create(NULL);
    s->own_scaler = true;
    return s->scaler ? CT_OK : ct_last_status();
}

CtStatus trainer_init_exact(Trainer *t, const TrainerConfig *cfg)
{
    if (!t) {
        free_config_callbacks(cfg);
        return ct_error(CT_ERR_NULL, "trainer_init: NULL trainer");
    }
    memset(t, 0, sizeof *t);
    CtStatus st = check_config(cfg);
    if (st != CT_OK) {
        free_config_callbacks(cfg);
        return st;
    }
    TrainerState *s = calloc(1, sizeof *s);
    if (!s) {
        free_config_callbacks(cfg);
        return ct_error(CT_ERR_OOM, "trainer_init: out of memory");
    }
    t->state = s;
    s->epoch_step = -1;
    s->callbacks = callback_list_create();
    s->history = run_history_create();
    s->pos_epoch = 1;
    if (!s->callbacks || !s->history) {
        free_config_callbacks(cfg);
        trainer_deinit(t);
        return CT_ERR_OOM;
    }
    st = take_callbacks(s, cfg);
    if (st == CT_OK) st = limit_batches_from_env(t);
    if (st == CT_OK) {
        s->rt = cfg->runtime;
        if (!s->rt) {
            s->rt = runtime_create(NULL);
            s->own_rt = true;
            if (!s->rt) st = ct_last_status();
        }
    }
    if (st == CT_OK) st = take_scaler(s, cfg);
    if (st != CT_OK) {
        trainer_deinit(t);
        return st;
    }
    t->hooks = cfg->hooks;
    t->model = cfg->model;
    t->loss = cfg->loss;
    t->loss_fn = cfg->loss_fn;
    t->optimizer = cfg->optimizer;
    t->user = cfg->user;
    st = trainer_fire(t, CB_ON_INIT_END, NULL);
    if (st != CT_OK) trainer_deinit(t);
    return st;
}

void trainer_deinit(Trainer *t)
{
    if (!t || !t->state) return;
    TrainerState *s = t->state;
    trainer_release_run(t);
    trainer_resume_clear(t);
    loss_tracker_reset(&s->train_loss);
    loss_tracker_reset(&s->eval_loss);
    loss_tracker_reset(&s->pos_loss);
    callback_list_free(s->callbacks);
    run_history_free(s->history);
    if (s->own_rt) runtime_free(s->rt);
    if (s->own_scaler) scaler_free(s->scaler);
    free(s);
    t->state = NULL;
}

void trainer_free(Trainer *t)
{
    if (!t) return;
    trainer_deinit(t);
    free(t);
}

void trainer_release_run(Trainer *t)
{
    TrainerState *s = t->state;
    data_loader_free(s->train_dl);
    data_loader_free(s->eval_dl);
    s->train_dl = s->eval_dl = NULL;
    scheduler_free(t->scheduler);
    t->scheduler = NULL;
    tensor_free(s->seed);
    s->seed = NULL;
    s->have_rc = false;
}

/* ------------------------------------------------------------- stopping */

void trainer_stop(Trainer *t, const char *reason)
{
    if (!t || !t->state) return;
    TrainerState *s = t->state;
    if (s->stop_requested) return; /* keep the first reason */
    s->stop_requested = true;
    snprintf(s->stop_reason, sizeof s->stop_reason, "%s",
             reason && reason[0] ? reason : "training stopped");
}

bool trainer_stop_requested(const Trainer *t)
{
    return t && t->state && t->state->stop_requested;
}

const char *trainer_stop_reason(const Trainer *t)
{
    return t && t->state ? t->state->stop_reason : "";
}

/* ------------------------------------------------------------ callbacks */

CtStatus trainer_add_callback(Trainer *t, Callback *cb)
{
    if (!t || !t->state) {
        callback_free(cb);
        return ct_error(CT_ERR_NULL, "trainer_add_callback: NULL trainer");
    }
    return callback_list_add(t->state->callbacks, cb);
}

CallbackList *trainer_callbacks(const Trainer *t)
{
    return t && t->state ? t->state->callbacks : NULL;
}

CallbackList *trainer_set_callbacks(Trainer *t, CallbackList *list)
{
    if (!t || !t->state || !list) {
        ct_error(CT_ERR_NULL, "trainer_set_callbacks: NULL %s",
                 list ? "trainer" : "list");
        return NULL;
    }
    CallbackList *old = t->state->callbacks;
    t->state->callbacks = list;
    return old;
}

CtStatus trainer_callback_event(Trainer *t, const char *event, void *payload)
{
    if (!t || !t->state)
        return ct_error(CT_ERR_NULL, "trainer_callback_event: NULL trainer");
    return callback_list_dispatch_custom(t->state->callbacks, t, event, payload);
}

/* ------------------------------------------------------------ accessors */

Runtime *trainer_runtime(const Trainer *t)
{
    return t->state->rt;
}
CtDevice trainer_device(const Trainer *t)
{
    return runtime_device(t->state->rt);
}
Module *trainer_model(const Trainer *t)
{
    return t->model;
}
RunHistory *trainer_run_history(const Trainer *t)
{
    return t->state->history;
}
DataLoader *trainer_train_dataloader(const Trainer *t)
{
    return t->state->train_dl;
}
DataLoader *trainer_eval_dataloader(const Trainer *t)
{
    return t->state->eval_dl;
}
int64_t trainer_global_step(const Trainer *t)
{
    return t->state->global_step;
}
int64_t trainer_epoch_step(const Trainer *t)
{
    return t->state->epoch_step;
}
bool trainer_in_eval(const Trainer *t)
{
    return t->state->in_eval;
}

CtStatus trainer_running_loss(const Trainer *t, double *mean)
{
    if (!t || !t->state || !mean)
        return ct_error(CT_ERR_NULL, "trainer_running_loss: NULL argument");
    const LossTracker *lt =
        t->state->in_eval ? &t->state->eval_loss : &t->state->train_loss;
    double total;
    CtStatus st = loss_tracker_total(lt, &total);
    if (st != CT_OK) return ct_error_wrap(st, "trainer_running_loss");
    *mean = lt->count > 0 ? total / lt->count : 0;
    return CT_OK;
}

const TrainerRunConfig *trainer_run_config(const Trainer *t)
{
    return t->state->have_rc ? &t->state->rc : NULL;
}

static int64_t capped(const DataLoader *dl, int64_t cap)
{
    if (!dl) return 0;
    int64_t n = data_loader_len(dl);
    return cap > 0 && cap < n ? cap : n;
}

int64_t trainer_train_dataloader_len(const Trainer *t)
{
    return capped(t->state->train_dl, t->state->limit_train);
}

int64_t trainer_eval_dataloader_len(const Trainer *t)
{
    return capped(t->state->eval_dl, t->state->limit_eval);
}

void trainer_limit_batches(Trainer *t, int64_t train_batches, int64_t eval_batches)
{
    t->state->limit_train = train_batches > 0 ? train_batches : 0;
    t->state->limit_eval = eval_batches > 0 ? eval_batches : 0;
}

void trainer_batch_limits(const Trainer *t, int64_t *train_batches, int64_t *eval_batches)
{
    if (train_batches) *train_batches = t->state->limit_train;
    if (eval_batches) *eval_batches = t->state->limit_eval;
}

/* ---------------------------------------------------------- utilities */

void trainer_print(const Trainer *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    runtime_vprint(t ? t->state->rt : NULL, fmt, ap);
    va_end(ap);
}

Tensor *trainer_gather(Trainer *t, Tensor *x)
{
    return runtime_gather(t->state->rt, x);
}

Tensor *trainer_gather_padded(Trainer *t, Tensor *x, double pad_value)
{
    return runtime_gather_padded(t->state->rt, x, pad_value);
}

int64_t trainer_batch_padding(const Trainer *t)
{
    const TrainerState *s = t->state;
    const DataLoader *dl = s->in_eval ? s->eval_dl : s->train_dl;
    return dl ? data_loader_batch_padding(dl) : 0;
}

Tensor *trainer_gather_for_metrics(Trainer *t, Tensor *x)
{
    return runtime_gather_for_metrics(t->state->rt, x, trainer_batch_padding(t));
}
