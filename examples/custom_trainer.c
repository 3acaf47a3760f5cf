/* custom_trainer — customising the Trainer three ways at once (after
 * pytorch-accelerated's examples/core/custom_callback_event.py):
 *
 *  1. an overridden hook: SmoothingTrainer's calculate_train_batch_loss does
 *     its own forward and a label-smoothed cross entropy (calling no
 *     default); evaluation keeps the default hook, plain cross entropy;
 *  2. a custom callback, BatchVerifier, with its own state and a free;
 *  3. a custom named event, "verify_train_batch", fired from that hook with
 *     the batch as payload and handled by the callback's `custom` slot,
 *     which checks that every batch is full (the train loader drops the last
 *     partial batch: drop_last) and counts the batches and labels it saw.
 *
 *   custom_trainer [--data DIR] [--epochs N] [--limit-batches N] [--seed N]
 *                  [--no-progress-bar]
 */
#include "fashion_mnist.h"

#define BATCH_SIZE 32

/* ------------------------------------------------------------- trainer */

typedef struct SmoothingTrainer {
    Trainer base; /* first */
    double label_smoothing;
} SmoothingTrainer;

static CtStatus st_calculate_train_batch_loss(Trainer *t, const DataBatch *batch,
                                              TrainerBatchOutput *out)
{
    SmoothingTrainer *s = (SmoothingTrainer *)t;
    /* the custom event first: a callback may reject the batch */
    CtStatus st = trainer_callback_event(t, "verify_train_batch", (void *)batch);
    if (st != CT_OK) return st;
    Tensor *logits = nn_forward(t->model, batch->t[0]);
    Tensor *loss = tensor_cross_entropy(
        logits, batch->t[1],
        &(CtCrossEntropyArgs){.label_smoothing = s->label_smoothing});
    if (!loss) return ct_last_status();
    *out = (TrainerBatchOutput){
        .loss = loss, .model_outputs = logits, .batch_size = batch->size};
    return CT_OK;
}

/* ------------------------------------------------------------ callback */

typedef struct BatchVerifier {
    Callback base; /* first */
    int64_t expected_size;
    int64_t batches;         /* verified in the current epoch */
    int64_t label_count[10]; /* over the whole run */
} BatchVerifier;

static CtStatus bv_custom(Callback *cb, Trainer *t, const char *event, void *payload)
{
    (void)t;
    if (strcmp(event, "verify_train_batch") != 0) return CT_OK; /* not ours */
    BatchVerifier *v = (BatchVerifier *)cb;
    const DataBatch *b = payload;
    if (b->size != v->expected_size)
        return ct_error(CT_ERR_INVALID,
                        "BatchVerifier: batch %lld has %lld samples, "
                        "expected %lld (drop_last should be on)",
                        (long long)b->index, (long long)b->size,
                        (long long)v->expected_size);
    /* (B) labels, on the CPU or (--cuda) the GPU: copied to the host, which
     * waits for the device; a check that needs no values would not */
    int64_t labels[BATCH_SIZE];
    if (b->size > BATCH_SIZE || tensor_numel(b->t[1]) != b->size)
        return ct_error(CT_ERR_INVALID, "BatchVerifier: batch %lld: %lld labels",
                        (long long)b->index, (long long)tensor_numel(b->t[1]));
    CtStatus st = tensor_copy_to_host(b->t[1], labels, CT_I64);
    if (st != CT_OK)
        return ct_error_wrap(st, "BatchVerifier: batch %lld", (long long)b->index);
    for (int64_t i = 0; i < b->size; i++)
        if (labels[i] >= 0 && labels[i] < 10) v->label_count[labels[i]]++;
    v->batches++;
    return CT_OK;
}

static CtStatus bv_train_epoch_start(Callback *cb, Trainer *t)
{
    (void)t;
    ((BatchVerifier *)cb)->batches = 0;
    return CT_OK;
}

static CtStatus bv_train_epoch_end(Callback *cb, Trainer *t)
{
    BatchVerifier *v = (BatchVerifier *)cb;
    trainer_print(t, "BatchVerifier: %lld full batches verified this epoch\n",
                  (long long)v->batches);
    if (v->batches != trainer_train_dataloader_len(t))
        return ct_error(CT_ERR_STATE, "BatchVerifier: saw %lld batches of %lld",
                        (long long)v->batches,
                        (long long)trainer_train_dataloader_len(t));
    return CT_OK;
}

static const CallbackVtable batch_verifier_vt = {
    .type = "BatchVerifier",
    .on_train_epoch_start = bv_train_epoch_start,
    .on_train_epoch_end = bv_train_epoch_end,
    .custom = bv_custom,
};

static Callback *batch_verifier_create(int64_t expected_size)
{
    BatchVerifier *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->base.vt = &batch_verifier_vt;
    v->expected_size = expected_size;
    return &v->base;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    Example ex = {.name = "custom_trainer", .o = {.epochs = 2}};
    int rc = example_begin(&ex, argc, argv, true);
    if (rc) return rc;

    /* BatchVerifier first, then the defaults: a list given in the config
     * replaces the default one. ex.loss is the eval loss (default hook). */
    SmoothingTrainer st = {.label_smoothing = 0.1};
    Trainer *t = NULL;
    if (example_mlp(&ex, 0.01)) {
        Callback *cbs[8];
        int ncb = example_callbacks(cbs, 8, ex.o.progress_bar, 1,
                                    (Callback *[]){batch_verifier_create(BATCH_SIZE)});
        if (ncb > 0 &&
            trainer_init(
                &st.base,
                &(TrainerConfig){.model = ex.model,
                                 .loss = ex.loss,
                                 .optimizer = ex.opt,
                                 .callbacks = cbs,
                                 .n_callbacks = ncb,
                                 .hooks = {.calculate_train_batch_loss =
                                               st_calculate_train_batch_loss}}) == CT_OK)
            t = &st.base;
    }
    if (t && example_trainer_ready(&ex, t) == CT_OK) {
        CtStatus s = trainer_train(
            t, &(TrainArgs){.train_dataset = ex.train,
                            .eval_dataset = ex.val,
                            .num_epochs = ex.o.epochs,
                            .per_device_batch_size = BATCH_SIZE,
                            .train_dataloader_args =
                                &(TrainerLoaderArgs){.drop_last = TRAINER_YES},
                            .collate_fn = collate_flat_scaled});
        rc = example_status(t, s);
        if (rc == 0) {
            BatchVerifier *v = (BatchVerifier *)callback_list_find(trainer_callbacks(t),
                                                                   "BatchVerifier");
            printf("labels seen in training:");
            for (int c = 0; c < 10; c++) printf(" %lld", (long long)v->label_count[c]);
            printf("\n");
            rc = example_test(&ex, t, 64, collate_flat_scaled);
        }
        if (rc == 0) printf("test accuracy %.2f%%\n", 100.0 * test_accuracy_value(t));
    } else {
        rc = example_fail(&ex);
    }
    trainer_deinit(t);
    example_end(&ex);
    return rc;
}
