/* train_mnist_metrics_callback — accuracy, precision and recall computed by a
 * custom callback (pytorch-accelerated's
 * examples/core/train_with_metrics_in_callback.py). The Trainer is the
 * default one; ClassificationMetrics
 *   on_eval_step_end   updates its metrics with the step's outputs and labels
 *                      of every process (trainer_gather_for_metrics)
 *   on_eval_epoch_end  records them in the run history and resets them
 * It is placed BEFORE the default callbacks, so LogMetrics (which fires
 * after it on on_eval_epoch_end) prints its values.
 *
 *   train_mnist_metrics_callback [--data DIR] [--epochs N] [--limit-batches N]
 *                                [--seed N] [--no-progress-bar]
 */
#include "fashion_mnist.h"

typedef struct ClassificationMetrics {
    Callback base; /* first: a ClassificationMetrics * is a Callback * */
    MetricCollection *metrics;
} ClassificationMetrics;

static CtStatus cm_eval_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                                 const TrainerBatchOutput *out, int64_t step)
{
    (void)step;
    /* every process counts every sample once: the gathered rows of all
     * processes, without the loader's wrap-around duplicates */
    return metric_collection_update(((ClassificationMetrics *)cb)->metrics,
                                    trainer_gather_for_metrics(t, out->model_outputs),
                                    trainer_gather_for_metrics(t, batch->t[1]));
}

static CtStatus cm_eval_epoch_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    (void)is_intermediate;
    ClassificationMetrics *c = (ClassificationMetrics *)cb;
    MetricValue v[3];
    CtStatus st = metric_collection_compute(c->metrics, v, 3);
    for (int i = 0; st == CT_OK && i < 3; i++)
        st = run_history_update(trainer_run_history(t), v[i].name, v[i].value);
    metric_collection_reset(c->metrics);
    return st;
}

static void cm_free(Callback *cb)
{
    metric_collection_free(((ClassificationMetrics *)cb)->metrics);
    free(cb);
}

static const CallbackVtable classification_metrics_vt = {
    .type = "ClassificationMetrics",
    .free = cm_free,
    .on_eval_step_end = cm_eval_step_end,
    .on_eval_epoch_end = cm_eval_epoch_end,
};

/* Accuracy (micro), and precision and recall averaged over the classes
 * (macro: micro precision and recall equal the accuracy here). NULL on
 * failure. */
static Callback *classification_metrics_create(int64_t num_classes)
{
    ClassificationMetrics *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base.vt = &classification_metrics_vt;
    c->metrics = metric_collection_create();
    metric_collection_add(
        c->metrics, "accuracy",
        metric_accuracy_create(&(MetricClassArgs){.num_classes = num_classes}));
    metric_collection_add(c->metrics, "precision",
                          metric_precision_create(&(MetricClassArgs){
                              .num_classes = num_classes, .average = METRIC_AVG_MACRO}));
    metric_collection_add(c->metrics, "recall",
                          metric_recall_create(&(MetricClassArgs){
                              .num_classes = num_classes, .average = METRIC_AVG_MACRO}));
    if (metric_collection_size(c->metrics) == 3) return &c->base;
    cm_free(&c->base);
    return NULL;
}

int main(int argc, char **argv)
{
    Example ex = {.name = "train_mnist_metrics_callback", .o = {.epochs = 8}};
    int rc = example_begin(&ex, argc, argv, true);
    if (rc) return rc;

    /* the metrics callback first, then the defaults (LogMetrics last): a
     * list given in the config replaces the default one */
    Trainer *t = NULL;
    if (example_mlp(&ex, 0.001)) {
        Callback *cbs[8];
        int ncb = example_callbacks(cbs, 8, ex.o.progress_bar, 1,
                                    (Callback *[]){classification_metrics_create(10)});
        if (ncb > 0)
            t = trainer_create(&(TrainerConfig){.model = ex.model,
                                                .loss = ex.loss,
                                                .optimizer = ex.opt,
                                                .callbacks = cbs,
                                                .n_callbacks = ncb});
    }
    if (t && example_trainer_ready(&ex, t) == CT_OK) {
        CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = ex.train,
                                                    .eval_dataset = ex.val,
                                                    .num_epochs = ex.o.epochs,
                                                    .per_device_batch_size = 32,
                                                    .collate_fn = collate_flat_scaled});
        rc = example_status(t, st);
        if (rc == 0) rc = example_test(&ex, t, 64, collate_flat_scaled);
        if (rc == 0) {
            RunHistory *h = trainer_run_history(t);
            printf("test precision %.4f recall %.4f\n",
                   run_history_latest(h, "precision"), run_history_latest(h, "recall"));
            printf("test accuracy %.2f%%\n", 100.0 * run_history_latest(h, "accuracy"));
        }
    } else {
        rc = example_fail(&ex);
    }
    trainer_free(t);
    example_end(&ex);
    return rc;
}
