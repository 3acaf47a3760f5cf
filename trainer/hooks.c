/* The default hooks (trainer_default_<hook>): pytorch-accelerated's
 * "sensible defaults". Overrides call these as "super". */
#include <math.h>
#include <stdlib.h>

#include "trainer_internal.h"

/* ----------------------------------------------------------- data loaders */

static DataLoaderArgs default_dl_args(Trainer *t, int64_t batch_size, bool shuffle)
{
    TrainerState *s = t->state;
    return (DataLoaderArgs){
        .batch_size = batch_size,
        .shuffle = shuffle,
        .seed = runtime_base_seed(s->rt),
        .collate = s->collate,
        .collate_user = s->collate_user,
        .device = runtime_device(s->rt),
        .shard_rank = runtime_rank(s->rt),
        .shard_world_size = runtime_world_size(s->rt),
    };
}

DataLoaderArgs trainer_default_get_default_train_dl_args(Trainer *t, int64_t batch_size)
{
    return default_dl_args(t, batch_size, true);
}

DataLoaderArgs trainer_default_get_default_eval_dl_args(Trainer *t, int64_t batch_size)
{
    return default_dl_args(t, batch_size, false);
}

/* The user's overrides win over the defaults (zero fields keep them). */
static void apply_user_args(DataLoaderArgs *a, const TrainerLoaderArgs *u)
{
    if (!u) return;
    if (u->batch_size > 0) a->batch_size = u->batch_size;
    if (u->sampler) {
        a->sampler = u->sampler;
        a->shuffle = false; /* a sampler replaces the default shuffle */
    }
    if (u->shuffle != TRAINER_DEFAULT) a->shuffle = u->shuffle == TRAINER_YES;
    if (u->drop_last != TRAINER_DEFAULT) a->drop_last = u->drop_last == TRAINER_YES;
    if (u->seed) a->seed = u->seed;
    if (u->num_workers) a->num_workers = u->num_workers;
    if (u->prefetch) a->prefetch = u->prefetch;
}

static DataLoader *create_loader(const Dataset *ds, DataLoaderArgs a,
                                 const TrainerLoaderArgs *user, const char *what)
{
    apply_user_args(&a, user);
    if (!ds) {
        ct_error(CT_ERR_STATE, "trainer: no %s dataset to build a loader for", what);
        return NULL;
    }
    DataLoader *dl = data_loader_create(ds, &a);
    if (!dl) ct_error_wrap(CT_OK, "trainer: %s loader", what);
    return dl;
}

DataLoader *trainer_default_create_train_dataloader(Trainer *t, int64_t batch_size,
                                                    const TrainerLoaderArgs *user)
{
    DataLoaderArgs a = HOOK(t, get_default_train_dl_args)(t, batch_size);
    return create_loader(t->state->train_ds, a, user, "train");
}

DataLoader *trainer_default_create_eval_dataloader(Trainer *t, int64_t batch_size,
                                                   const TrainerLoaderArgs *user)
{
    DataLoaderArgs a = HOOK(t, get_default_eval_dl_args)(t, batch_size);
    return create_loader(t->state->eval_ds, a, user, "eval");
}

Scheduler *trainer_default_create_scheduler(Trainer *t)
{
    TrainerState *s = t->state;
    if (!s->scheduler_fn) {
        ct_error(CT_ERR_STATE, "trainer: create_scheduler called without "
                               "TrainArgs.create_scheduler_fn");
        return NULL;
    }
    Scheduler *sched = s->scheduler_fn(t, t->optimizer, s->scheduler_user);
    if (!sched && ct_last_status() == CT_OK)
        ct_error(CT_ERR_INVALID, "trainer: create_scheduler_fn returned NULL");
    return sched;
}

/* ---------------------------------------------------------------- losses */

/* The loss over the batch's first `rows` rows (all of them when rows is
 * the batch size), with the model outputs of every row. */
static CtStatus batch_loss(Trainer *t, const DataBatch *batch, int64_t rows,
                           TrainerBatchOutput *out, const char *hook)
{
    if (!batch || batch->n < 2)
        return ct_error(CT_ERR_INVALID,
                        "trainer: the default %s needs batches of (input, "
                        "target); this batch has %d field(s)",
                        hook, batch ? batch->n : 0);
    out->model_outputs = nn_forward(t->model, batch->t[0]);
    Tensor *y = out->model_outputs, *target = batch->t[1];
    if (rows < batch->size) {
        y = tensor_slice(y, 0, 0, rows, 1);
        target = tensor_slice(target, 0, 0, rows, 1);
    }
    out->loss = t->loss_fn ? t->loss_fn(t, y, target) : nn_loss(t->loss, y, target);
    out->batch_size = rows;
    if (!out->loss) {
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERR_INVALID, "trainer: %s: the loss function returned NULL",
                     hook);
        return ct_last_status();
    }
    return CT_OK;
}

CtStatus trainer_default_calculate_train_batch_loss(Trainer *t, const DataBatch *batch,
                                                    TrainerBatchOutput *out)
{
    return batch_loss(t, batch, batch ? batch->size : 0, out,
                      "calculate_train_batch_loss");
}

CtStatus trainer_default_calculate_eval_batch_loss(Trainer *t, const DataBatch *batch,
                                                   TrainerBatchOutput *out)
{
    const char *hook = "calculate_eval_batch_loss";
    if (!batch) return batch_loss(t, batch, 0, out, hook);
    /* the wrap-around duplicates stay out of the eval loss; a batch of them
     * only keeps its rows for the loss and counts nothing */
    int64_t real = batch->size - trainer_batch_padding(t);
    CtStatus st = batch_loss(t, batch, real > 0 ? real : batch->size, out, hook);
    if (real <= 0) out->batch_size = 0;
    return st;
}

/* ---------------------------------------------------------- optimization */

/* Ones like root (one element): the run's seed, kept while the losses
 * keep their shape, dtype and device, so a step's backward fills nothing. */
static Tensor *seed_like(TrainerState *s, const Tensor *root)
{
    Tensor *g = s->seed;
    bool same = g && tensor_dtype(g) == tensor_dtype(root) &&
                ct_device_eq(tensor_device(g), tensor_device(root)) &&
                tensor_ndim(g) == tensor_ndim(root);
    for (int d = 0; same && d < tensor_ndim(g); d++)
        same = tensor_shape(g)[d] == tensor_shape(root)[d];
    if (same) return g;
    tensor_free(s->seed);
    CtScope *sc = ct_scope_open();
    s->seed = sc ? tensor_retain(tensor_ones_like(root)) : NULL;
    ct_scope_close(sc);
    return s->seed;
}

CtStatus trainer_default_backward_step(Trainer *t, Tensor *loss)
{
    GradScaler *sc = t->state->scaler;
    Tensor *root = sc ? scaler_scale(sc, loss) : loss;
    if (!root || tensor_numel(root) != 1) return tensor_backward(root, NULL);
    Tensor *seed = seed_like(t->state, root);
    return seed ? tensor_backward(root, seed) : ct_last_status();
}

CtStatus trainer_default_clip_gradients(Trainer *t)
{
    const TrainerRunConfig *rc = &t->state->rc;
    CtStateDict *ps = nn_module_parameters(t->model);
    if (!ps) return ct_last_status();
    int64_t n = ct_state_dict_size(ps);
    Tensor **params = malloc((size_t)(n > 0 ? n : 1) * sizeof *params);
    CtStatus st = CT_OK;
    if (!params) st = ct_error(CT_ERR_OOM, "trainer: clip_gradients: out of memory");
    for (int64_t i = 0; st == CT_OK && i < n; i++)
        params[i] = ct_state_dict_tensor(ps, i);
    if (st == CT_OK && rc->gradient_clip_value > 0)
        st = optim_clip_grad_value(params, n, rc->gradient_clip_value);
    if (st == CT_OK && rc->gradient_clip_norm > 0) {
        double norm = optim_clip_grad_norm(params, n, rc->gradient_clip_norm, 2.0);
        /* a non-finite norm leaves the gradients alone: not a run error */
        if (isnan(norm) && ct_last_status() != CT_ERR_INVALID) st = ct_last_status();
        if (!isfinite(norm) && st == CT_OK) ct_clear_error();
    }
    free(params);
    ct_state_dict_free(ps);
    return st;
}

CtStatus trainer_default_optimizer_step(Trainer *t)
{
    return optim_step(t->optimizer);
}

CtStatus trainer_default_scheduler_step(Trainer *t)
{
    return t->scheduler ? scheduler_step(t->scheduler) : CT_OK;
}

CtStatus trainer_default_optimizer_zero_grad(Trainer *t)
{
    return optim_zero_grad(t->optimizer);
}

/* ----------------------------------------------------------- epoch hooks */

CtStatus trainer_default_train_epoch_start(Trainer *t)
{
    nn_module_train(t->model);
    return CT_OK;
}

CtStatus trainer_default_eval_epoch_start(Trainer *t)
{
    nn_module_eval(t->model);
    return CT_OK;
}

CtStatus trainer_default_training_run_start(Trainer *t)
{
    return CT_OK;
}
CtStatus trainer_default_train_epoch_end(Trainer *t)
{
    return CT_OK;
}
CtStatus trainer_default_eval_epoch_end(Trainer *t)
{
    return CT_OK;
}
CtStatus trainer_default_training_run_epoch_end(Trainer *t)
{
    return CT_OK;
}
CtStatus trainer_default_training_run_end(Trainer *t)
{
    return CT_OK;
}
CtStatus trainer_default_evaluation_run_start(Trainer *t)
{
    return CT_OK;
}
CtStatus trainer_default_evaluation_run_end(Trainer *t)
{
    return CT_OK;
}
