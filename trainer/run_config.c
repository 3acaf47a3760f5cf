/* The run config (fixed for a run), placeholder values and its JSON form. */
#include <jansson.h>
#include <math.h>

#include "trainer_internal.h"

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

CtStatus trainer_make_run_config(Trainer *t, const TrainArgs *a)
{
    TrainerState *s = t->state;
    TrainerRunConfig *rc = &s->rc;
    int world = runtime_world_size(s->rt);
    *rc = (TrainerRunConfig){0};
    /* from the loaders the hooks returned, however they were built */
    if (s->train_dl) rc->train_dl_args = *data_loader_args(s->train_dl);
    if (s->eval_dl) rc->eval_dl_args = *data_loader_args(s->eval_dl);
    rc->has_eval = s->eval_dl != NULL;
    rc->is_local_process_zero = runtime_is_local_main_process(s->rt);
    rc->is_world_process_zero = runtime_is_main_process(s->rt);
    rc->is_distributed = runtime_is_distributed(s->rt);
    rc->mixed_precision = runtime_mixed_precision(s->rt);
    rc->num_processes = world;
    if (rc->has_eval) {
        rc->eval_per_device_batch_size = rc->eval_dl_args.batch_size;
        rc->eval_total_batch_size = rc->eval_per_device_batch_size * world;
    }
    if (!a) { /* an evaluation run: one epoch, no updates */
        rc->num_epochs = 1;
        rc->gradient_accumulation_steps = 1;
        rc->train_per_device_batch_size = rc->eval_per_device_batch_size;
        s->have_rc = true;
        return CT_OK;
    }
    int64_t k = a->gradient_accumulation_steps > 0
                    ? a->gradient_accumulation_steps
                    : runtime_gradient_accumulation_steps(s->rt);
    int64_t len = trainer_train_dataloader_len(t);
    if (len <= 0)
        return ct_error(CT_ERR_INVALID,
                        "trainer_train: the train loader has no batches: %s",
                        rc->train_dl_args.drop_last
                            ? "its samples (this process's shard) are fewer than one "
                              "batch, which drop_last drops"
                            : "it has no samples");
    rc->train_per_device_batch_size = rc->train_dl_args.batch_size;
    rc->gradient_accumulation_steps = k;
    rc->gradient_clip_value = a->gradient_clip_value;
    rc->gradient_clip_norm = a->gradient_clip_norm;
    rc->train_total_batch_size = rc->train_per_device_batch_size * world * k;
    /* every process takes ceil(len / k) updates per epoch, in lockstep */
    rc->num_update_steps_per_epoch = ceil_div(len, k);
    if (a->max_num_train_steps > 0) {
        rc->max_num_train_steps = a->max_num_train_steps;
        rc->num_epochs = ceil_div(a->max_num_train_steps, rc->num_update_steps_per_epoch);
    } else {
        rc->num_epochs = a->num_epochs;
        rc->max_num_train_steps = a->num_epochs * rc->num_update_steps_per_epoch;
    }
    s->have_rc = true;
    return CT_OK;
}

static const char *const placeholder_names[] = {
    [TRAINER_CONSTANT] = "CONSTANT",
    [TRAINER_NUM_EPOCHS] = "NUM_EPOCHS",
    [TRAINER_NUM_UPDATE_STEPS_PER_EPOCH] = "NUM_UPDATE_STEPS_PER_EPOCH",
    [TRAINER_TRAIN_DATALOADER_LEN] = "TRAIN_DATALOADER_LEN",
    [TRAINER_EVAL_DATALOADER_LEN] = "EVAL_DATALOADER_LEN",
};

/* The value of a known placeholder p in this run, or an error named after
 * `fn` when the run lacks the loader it counts. */
static CtStatus placeholder_value(const Trainer *t, TrainerPlaceholder p, double *out,
                                  const char *fn)
{
    const TrainerState *s = t->state;
    bool eval = p == TRAINER_EVAL_DATALOADER_LEN;
    switch (p) {
    case TRAINER_NUM_EPOCHS: *out = (double)s->rc.num_epochs; break;
    case TRAINER_NUM_UPDATE_STEPS_PER_EPOCH:
        *out = (double)s->rc.num_update_steps_per_epoch;
        break;
    case TRAINER_TRAIN_DATALOADER_LEN:
    case TRAINER_EVAL_DATALOADER_LEN:
        if (!(eval ? s->eval_dl : s->train_dl))
            return ct_error(CT_ERR_INVALID, "%s: %s: this run has no %s loader", fn,
                            placeholder_names[p], eval ? "eval" : "train");
        *out = (double)(eval ? trainer_eval_dataloader_len(t)
                             : trainer_train_dataloader_len(t));
        break;
    default: *out = 0; break; /* TRAINER_CONSTANT */
    }
    return CT_OK;
}

/* The checks both resolvers make first. */
static CtStatus check_resolvable(const Trainer *t, const void *out, const char *fn)
{
    if (!t || !out)
        return ct_error(CT_ERR_NULL, "%s: NULL %s", fn, t ? "out" : "trainer");
    if (!t->state || !t->state->have_rc)
        return ct_error(CT_ERR_STATE,
                        "%s: placeholders resolve only during a run (e.g. in "
                        "create_scheduler_fn), once the run config exists",
                        fn);
    return CT_OK;
}

/* v's value; the caller has checked t and out. */
static CtStatus resolve(const Trainer *t, TrainerValue v, double *out, const char *fn)
{
    unsigned p_index = (unsigned)v.placeholder;
    if (p_index > TRAINER_EVAL_DATALOADER_LEN)
        return ct_error(CT_ERR_INVALID, "%s: unknown placeholder %d", fn,
                        (int)v.placeholder);
    if (v.mul == 0 && v.placeholder != TRAINER_CONSTANT)
        return ct_error(CT_ERR_INVALID,
                        "%s: TrainerValue.mul is 0 for %s: use TRAINER_VALUE(p) for "
                        "the placeholder itself, or TRAINER_CONSTANT for a constant",
                        fn, placeholder_names[p_index]);
    double p = 0;
    CtStatus st = placeholder_value(t, v.placeholder, &p, fn);
    if (st == CT_OK) *out = p * v.mul + v.add;
    return st;
}

CtStatus trainer_resolve(const Trainer *t, TrainerValue v, double *out)
{
    static const char fn[] = "trainer_resolve";
    CtStatus st = check_resolvable(t, out, fn);
    return st == CT_OK ? resolve(t, v, out, fn) : st;
}

CtStatus trainer_resolve_product(const Trainer *t, TrainerPlaceholder a,
                                 TrainerPlaceholder b, int64_t *out)
{
    static const char fn[] = "trainer_resolve_product";
    double x = 0, y = 0;
    CtStatus st = check_resolvable(t, out, fn);
    if (st == CT_OK) st = resolve(t, TRAINER_VALUE(a), &x, fn);
    if (st == CT_OK) st = resolve(t, TRAINER_VALUE(b), &y, fn);
    if (st == CT_OK) *out = (int64_t)llround(x * y);
    return st;
}

static json_t *dl_args_json(const DataLoaderArgs *a)
{
    char dev[16];
    return json_pack("{sI sb sb sI si si ss}", "batch_size", (json_int_t)a->batch_size,
                     "shuffle", a->shuffle, "drop_last", a->drop_last, "seed",
                     (json_int_t)a->seed, "num_workers", a->num_workers, "prefetch",
                     a->prefetch, "device", ct_device_str(a->device, dev));
}

char *trainer_run_config_to_json(const TrainerRunConfig *rc)
{
    if (!rc) {
        ct_error(CT_ERR_NULL, "trainer_run_config_to_json: NULL run config");
        return NULL;
    }
    json_t *o = json_pack(
        "{sI sI sI so so sb sI sf sf sI sI sI sI sb sb sb ss si}", "num_epochs",
        (json_int_t)rc->num_epochs, "train_per_device_batch_size",
        (json_int_t)rc->train_per_device_batch_size, "eval_per_device_batch_size",
        (json_int_t)rc->eval_per_device_batch_size, "train_dl_args",
        dl_args_json(&rc->train_dl_args), "eval_dl_args",
        rc->has_eval ? dl_args_json(&rc->eval_dl_args) : json_null(), "has_eval",
        rc->has_eval, "gradient_accumulation_steps",
        (json_int_t)rc->gradient_accumulation_steps, "gradient_clip_value",
        rc->gradient_clip_value, "gradient_clip_norm", rc->gradient_clip_norm,
        "train_total_batch_size", (json_int_t)rc->train_total_batch_size,
        "eval_total_batch_size", (json_int_t)rc->eval_total_batch_size,
        "num_update_steps_per_epoch", (json_int_t)rc->num_update_steps_per_epoch,
        "max_num_train_steps", (json_int_t)rc->max_num_train_steps,
        "is_local_process_zero", rc->is_local_process_zero, "is_world_process_zero",
        rc->is_world_process_zero, "is_distributed", rc->is_distributed,
        "mixed_precision", rc->mixed_precision ? rc->mixed_precision : "no",
        "num_processes", rc->num_processes);
    char *s = o ? json_dumps(o, JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!s) ct_error(CT_ERR_OOM, "trainer_run_config_to_json: out of memory");
    return s;
}
