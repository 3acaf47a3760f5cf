/* ctrainer — the callback interface: the event vtable, callback lists and
 * dispatch. Part of the trainer layer, which fires the events; the built-in
 * callbacks (callbacks.h) sit one layer above and use only this interface
 * and the trainer's public API.
 *
 * A callback is an object with its own state and a const vtable of event
 * handlers, like pytorch-accelerated's TrainerCallback. Your callback embeds
 * Callback as its FIRST member, is allocated on the heap, and fills the
 * slots it cares about (NULL slots mean "nothing to do"):
 *
 *     typedef struct Counter { Callback base; int64_t steps; } Counter;
 *     static CtStatus counter_step_end(Callback *cb, Trainer *t, const DataBatch *b,
 *                                      const TrainerBatchOutput *out, int64_t step) {
 *         ((Counter *)cb)->steps++;
 *         return CT_OK;
 *     }
 *     static const CallbackVtable counter_vt = {
 *         .type = "Counter", .free = NULL, .on_train_step_end = counter_step_end};
 *     Counter *c = calloc(1, sizeof *c);
 *     c->base.vt = &counter_vt;
 *     trainer_add_callback(t, &c->base);   // the trainer now owns it
 *
 * Events fire AFTER the trainer hook of the same name, so a hook can update
 * state that callbacks then read; callbacks run in list order. Every
 * handler returns CT_OK or an error: an error aborts the run (trainer_train
 * returns it). To end training early, call trainer_stop(t, "why") instead
 * (see trainer.h: "Stopping"); the callbacks after the requesting one in the
 * list do not receive that event, as with pytorch-accelerated's
 * StopTrainingError.
 *
 * Besides the 15 built-in events, callbacks can handle CUSTOM NAMED EVENTS:
 * a hook (or another callback) calls trainer_callback_event(t, "my_event",
 * payload) and every callback's `custom` slot receives the name and payload
 * (a callback ignores names it does not know).
 */
#ifndef CTRAINER_CALLBACK_H
#define CTRAINER_CALLBACK_H

#include <stdio.h>

#include "ctrainer/data.h"
#include "ctrainer/nn.h"
#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Trainer Trainer;                       /* trainer.h */
typedef struct TrainerBatchOutput TrainerBatchOutput; /* trainer.h */
typedef struct Callback Callback;

/* The events, in the order a training run fires them (§3.1 of
 * pytorch-accelerated). Arguments beyond (callback, trainer):
 *   on_train_step_end   batch, batch output, step (0-based micro-batch index
 *                       within the epoch); fires after the loss is computed
 *                       and tracked, BEFORE backward
 *   on_eval_epoch_start is_intermediate (an evaluation run from inside a
 *   on_eval_epoch_end   training epoch, e.g. every n steps)
 *   on_eval_step_end    batch, batch output, step (0-based eval batch index)
 * The batch and batch output are valid only during the call (they belong to
 * the step's scope); tensor_retain what you keep. */
typedef struct CallbackVtable {
    /* The callback's type name: required, shown in errors. A callback list
     * holds at most one callback per type name. */
    const char *type;
    /* Releases what the callback owns, then the struct itself. NULL: free(). */
    void (*free)(Callback *cb);

    CtStatus (*on_init_end)(Callback *cb, Trainer *t);
    CtStatus (*on_training_run_start)(Callback *cb, Trainer *t);
    CtStatus (*on_train_epoch_start)(Callback *cb, Trainer *t);
    CtStatus (*on_train_step_start)(Callback *cb, Trainer *t);
    CtStatus (*on_train_step_end)(Callback *cb, Trainer *t, const DataBatch *batch,
                                  const TrainerBatchOutput *out, int64_t step);
    CtStatus (*on_train_epoch_end)(Callback *cb, Trainer *t);
    CtStatus (*on_eval_epoch_start)(Callback *cb, Trainer *t, bool is_intermediate);
    CtStatus (*on_eval_step_start)(Callback *cb, Trainer *t);
    CtStatus (*on_eval_step_end)(Callback *cb, Trainer *t, const DataBatch *batch,
                                 const TrainerBatchOutput *out, int64_t step);
    CtStatus (*on_eval_epoch_end)(Callback *cb, Trainer *t, bool is_intermediate);
    CtStatus (*on_training_run_epoch_end)(Callback *cb, Trainer *t);
    CtStatus (*on_training_run_end)(Callback *cb, Trainer *t);
    CtStatus (*on_evaluation_run_start)(Callback *cb, Trainer *t);
    CtStatus (*on_evaluation_run_end)(Callback *cb, Trainer *t);
    CtStatus (*on_stop_training_error)(Callback *cb, Trainer *t);

    /* A custom named event (trainer_callback_event). payload is whatever the
     * caller passed (borrowed for the call). */
    CtStatus (*custom)(Callback *cb, Trainer *t, const char *event, void *payload);

    /* Optional state for training-state checkpoints (trainer_save_state).
     * state_save appends the callback's state to `out` as named tensors
     * (0-d tensors for scalars; live tensors are fine, they are written
     * before the call returns); names are the callback's own, the
     * checkpoint stores them as "<type>.<name>". state_load gets back
     * exactly those entries when a run resumes, AFTER on_training_run_start
     * (which may reset the callback); it must check them all before changing
     * anything and report a mismatch as an error. NULL: no state. */
    CtStatus (*state_save)(Callback *cb, Trainer *t, CtStateDict *out);
    CtStatus (*state_load)(Callback *cb, Trainer *t, const CtStateDict *in);
} CallbackVtable;

struct Callback {
    const CallbackVtable *vt;
};

/* Releases cb through its vtable's free (free() when NULL). NULL is a no-op. */
void callback_free(Callback *cb);
/* cb->vt->type. */
const char *callback_type(const Callback *cb);

/* ---------------------------------------------------------------- events */

typedef enum CallbackEvent {
    CB_ON_INIT_END = 0,
    CB_ON_TRAINING_RUN_START,
    CB_ON_TRAIN_EPOCH_START,
    CB_ON_TRAIN_STEP_START,
    CB_ON_TRAIN_STEP_END,
    CB_ON_TRAIN_EPOCH_END,
    CB_ON_EVAL_EPOCH_START,
    CB_ON_EVAL_STEP_START,
    CB_ON_EVAL_STEP_END,
    CB_ON_EVAL_EPOCH_END,
    CB_ON_TRAINING_RUN_EPOCH_END,
    CB_ON_TRAINING_RUN_END,
    CB_ON_EVALUATION_RUN_START,
    CB_ON_EVALUATION_RUN_END,
    CB_ON_STOP_TRAINING_ERROR,
    CB_EVENT_COUNT
} CallbackEvent;

/* "on_train_step_end", ...; NULL for an out-of-range value. */
const char *callback_event_name(CallbackEvent ev);

/* Arguments of an event; fields an event does not take are ignored. */
typedef struct CallbackEventArgs {
    const DataBatch *batch;
    const TrainerBatchOutput *batch_output;
    int64_t step;
    bool is_intermediate;
} CallbackEventArgs;

/* -------------------------------------------------------- callback lists
 *
 * An ordered list of callbacks that owns them. The trainer holds one; a
 * callback may swap in another for a nested run (trainer_set_callbacks),
 * as pytorch-accelerated's ModelEmaCallback does for its EMA evaluation. */
typedef struct CallbackList CallbackList;

CallbackList *callback_list_create(void);
/* Frees every callback, then the list. NULL is a no-op. */
void callback_list_free(CallbackList *l);
/* Appends cb; the list takes ownership in every case: on error (a callback
 * of the same type is already in the list: CT_ERR_INVALID naming the type;
 * a vtable without a type name) cb is freed. A NULL cb returns CT_ERR_NULL
 * keeping the first error, so a failed constructor can be passed straight
 * in: callback_list_add(l, my_callback_create(...)). */
CtStatus callback_list_add(CallbackList *l, Callback *cb);
int callback_list_count(const CallbackList *l);
Callback *callback_list_at(const CallbackList *l, int i);
/* The callback of this type name, or NULL (no error recorded). */
Callback *callback_list_find(const CallbackList *l, const char *type);
/* Removes (without freeing) and returns the callback of this type name, or
 * NULL. The caller owns it afterwards. */
Callback *callback_list_remove(CallbackList *l, const char *type);

/* Calls event ev on each callback in order, skipping NULL slots. Stops at
 * the first error (returned; later callbacks are not called), and after a
 * callback that requested a stop (trainer_stop_requested(t) turned true
 * during its call): the rest of the list does not see the event. args may
 * be NULL for events without arguments. */
CtStatus callback_list_dispatch(CallbackList *l, Trainer *t, CallbackEvent ev,
                                const CallbackEventArgs *args);
/* The same for a custom named event (each callback's `custom` slot). */
CtStatus callback_list_dispatch_custom(CallbackList *l, Trainer *t, const char *event,
                                       void *payload);

#ifdef __cplusplus
}
#endif
#endif
