/* Callback lists and event dispatch (callback.h). */
#include <stdlib.h>
#include <string.h>

#include "ctrainer/callback.h"
#include "ctrainer/trainer.h"

struct CallbackList {
    Callback **items;
    int n, cap;
};

static const char *const event_names[CB_EVENT_COUNT] = {
    [CB_ON_INIT_END] = "on_init_end",
    [CB_ON_TRAINING_RUN_START] = "on_training_run_start",
    [CB_ON_TRAIN_EPOCH_START] = "on_train_epoch_start",
    [CB_ON_TRAIN_STEP_START] = "on_train_step_start",
    [CB_ON_TRAIN_STEP_END] = "on_train_step_end",
    [CB_ON_TRAIN_EPOCH_END] = "on_train_epoch_end",
    [CB_ON_EVAL_EPOCH_START] = "on_eval_epoch_start",
    [CB_ON_EVAL_STEP_START] = "on_eval_step_start",
    [CB_ON_EVAL_STEP_END] = "on_eval_step_end",
    [CB_ON_EVAL_EPOCH_END] = "on_eval_epoch_end",
    [CB_ON_TRAINING_RUN_EPOCH_END] = "on_training_run_epoch_end",
    [CB_ON_TRAINING_RUN_END] = "on_training_run_end",
    [CB_ON_EVALUATION_RUN_START] = "on_evaluation_run_start",
    [CB_ON_EVALUATION_RUN_END] = "on_evaluation_run_end",
    [CB_ON_STOP_TRAINING_ERROR] = "on_stop_training_error",
};

const char *callback_event_name(CallbackEvent ev)
{
    return ev >= 0 && ev < CB_EVENT_COUNT ? event_names[ev] : NULL;
}

void callback_free(Callback *cb)
{
    if (!cb) return;
    if (cb->vt && cb->vt->free)
        cb->vt->free(cb);
    else
        free(cb);
}

const char *callback_type(const Callback *cb)
{
    return cb && cb->vt && cb->vt->type ? cb->vt->type : "";
}

CallbackList *callback_list_create(void)
{
    CallbackList *l = calloc(1, sizeof *l);
    if (!l) ct_error(CT_ERR_OOM, "callback_list_create: out of memory");
    return l;
}

void callback_list_free(CallbackList *l)
{
    if (!l) return;
    for (int i = 0; i < l->n; i++) callback_free(l->items[i]);
    free(l->items);
    free(l);
}

Callback *callback_list_find(const CallbackList *l, const char *type)
{
    if (!l || !type) return NULL;
    for (int i = 0; i < l->n; i++)
        if (strcmp(callback_type(l->items[i]), type) == 0) return l->items[i];
    return NULL;
}

CtStatus callback_list_add(CallbackList *l, Callback *cb)
{
    if (!cb) {
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERR_NULL, "callback_list_add: NULL callback");
        return ct_last_status();
    }
    CtStatus st = CT_OK;
    if (!l)
        st = ct_error(CT_ERR_NULL, "callback_list_add: NULL list");
    else if (!cb->vt || !cb->vt->type || !cb->vt->type[0])
        st = ct_error(CT_ERR_INVALID,
                      "callback_list_add: the callback's vtable has no type "
                      "name (CallbackVtable.type is required)");
    else if (callback_list_find(l, cb->vt->type))
        st = ct_error(CT_ERR_INVALID,
                      "callback_list_add: a %s callback is already in the "
                      "list (one callback per type)",
                      cb->vt->type);
    if (st == CT_OK && l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        Callback **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items)
            st = ct_error(CT_ERR_OOM, "callback_list_add: out of memory");
        else {
            l->items = items;
            l->cap = cap;
        }
    }
    if (st != CT_OK) {
        callback_free(cb);
        return st;
    }
    l->items[l->n++] = cb;
    return CT_OK;
}

int callback_list_count(const CallbackList *l)
{
    return l ? l->n : 0;
}

Callback *callback_list_at(const CallbackList *l, int i)
{
    return l && i >= 0 && i < l->n ? l->items[i] : NULL;
}

Callback *callback_list_remove(CallbackList *l, const char *type)
{
    if (!l || !type) return NULL;
    for (int i = 0; i < l->n; i++) {
        Callback *cb = l->items[i];
        if (strcmp(callback_type(cb), type) != 0) continue;
        memmove(l->items + i, l->items + i + 1,
                (size_t)(l->n - i - 1) * sizeof *l->items);
        l->n--;
        return cb;
    }
    return NULL;
}

/* Calls one callback's handler for ev; CT_OK when its slot is NULL. */
static CtStatus call_one(Callback *cb, Trainer *t, CallbackEvent ev,
                         const CallbackEventArgs *a)
{
    const CallbackVtable *vt = cb->vt;
    switch (ev) {
    case CB_ON_INIT_END: return vt->on_init_end ? vt->on_init_end(cb, t) : CT_OK;
    case CB_ON_TRAINING_RUN_START:
        return vt->on_training_run_start ? vt->on_training_run_start(cb, t) : CT_OK;
    case CB_ON_TRAIN_EPOCH_START:
        return vt->on_train_epoch_start ? vt->on_train_epoch_start(cb, t) : CT_OK;
    case CB_ON_TRAIN_STEP_START:
        return vt->on_train_step_start ? vt->on_train_step_start(cb, t) : CT_OK;
    case CB_ON_TRAIN_STEP_END:
        return vt->on_train_step_end
                   ? vt->on_train_step_end(cb, t, a->batch, a->batch_output, a->step)
                   : CT_OK;
    case CB_ON_TRAIN_EPOCH_END:
        return vt->on_train_epoch_end ? vt->on_train_epoch_end(cb, t) : CT_OK;
    case CB_ON_EVAL_EPOCH_START:
        return vt->on_eval_epoch_start
                   ? vt->on_eval_epoch_start(cb, t, a->is_intermediate)
                   : CT_OK;
    case CB_ON_EVAL_STEP_START:
        return vt->on_eval_step_start ? vt->on_eval_step_start(cb, t) : CT_OK;
    case CB_ON_EVAL_STEP_END:
        return vt->on_eval_step_end
                   ? vt->on_eval_step_end(cb, t, a->batch, a->batch_output, a->step)
                   : CT_OK;
    case CB_ON_EVAL_EPOCH_END:
        return vt->on_eval_epoch_end ? vt->on_eval_epoch_end(cb, t, a->is_intermediate)
                                     : CT_OK;
    case CB_ON_TRAINING_RUN_EPOCH_END:
        return vt->on_training_run_epoch_end ? vt->on_training_run_epoch_end(cb, t)
                                             : CT_OK;
    case CB_ON_TRAINING_RUN_END:
        return vt->on_training_run_end ? vt->on_training_run_end(cb, t) : CT_OK;
    case CB_ON_EVALUATION_RUN_START:
        return vt->on_evaluation_run_start ? vt->on_evaluation_run_start(cb, t) : CT_OK;
    case CB_ON_EVALUATION_RUN_END:
        return vt->on_evaluation_run_end ? vt->on_evaluation_run_end(cb, t) : CT_OK;
    case CB_ON_STOP_TRAINING_ERROR:
        return vt->on_stop_training_error ? vt->on_stop_training_error(cb, t) : CT_OK;
    case CB_EVENT_COUNT: break;
    }
    return ct_error(CT_ERR_INVALID, "callback_list_dispatch: unknown event %d", (int)ev);
}

CtStatus callback_list_dispatch(CallbackList *l, Trainer *t, CallbackEvent ev,
                                const CallbackEventArgs *args)
{
    if (ev < 0 || ev >= CB_EVENT_COUNT)
        return ct_error(CT_ERR_INVALID, "callback_list_dispatch: unknown event %d",
                        (int)ev);
    if (!l) return CT_OK;
    CallbackEventArgs none = {0};
    const CallbackEventArgs *a = args ? args : &none;
    /* a stop request ends the dispatch after the requesting callback, as an
     * exception would; one already pending before the event does not */
    bool pending = trainer_stop_requested(t);
    for (int i = 0; i < l->n; i++) {
        CtStatus st = call_one(l->items[i], t, ev, a);
        if (st != CT_OK) return st;
        if (!pending && trainer_stop_requested(t)) break;
    }
    return CT_OK;
}

CtStatus callback_list_dispatch_custom(CallbackList *l, Trainer *t, const char *event,
                                       void *payload)
{
    if (!event || !event[0])
        return ct_error(CT_ERR_INVALID, "callback event: NULL or empty event name");
    if (!l) return CT_OK;
    bool pending = trainer_stop_requested(t);
    for (int i = 0; i < l->n; i++) {
        Callback *cb = l->items[i];
        if (!cb->vt->custom) continue;
        CtStatus st = cb->vt->custom(cb, t, event, payload);
        if (st != CT_OK) return st;
        if (!pending && trainer_stop_requested(t)) break;
    }
    return CT_OK;
}
