/* train_mnist_metrics_subclass — accuracy, precision and recall computed in
 * the training loop itself, by "subclassing" the Trainer
 * (pytorch-accelerated's examples/core/train_with_metrics_in_loop.py).
 *
 * MetricsTrainer embeds Trainer as its first member and overrides three
 * hooks, each calling the exported default as "super":
 *   eval_epoch_start           default, then reset the metrics
 *   calculate_eval_batch_loss  default (forward + loss), then update the
 *                              metrics with the batch's outputs and labels
 *                              of every process (trainer_gather_for_metrics)
 *   eval_epoch_end             compute the metrics into the run history,
 *                              then default
 * Hooks run before the callback events of the same name, so LogMetrics
 * (a default callback) prints the values recorded in eval_epoch_end.
 *
 *   train_mnist_metrics_subclass [--data DIR] [--epochs N] [--limit-batches N]
 *                                [--seed N] [--no-progress-bar]
 */
#include "fashion_mnist.h"

typedef struct MetricsTrainer {
    Trainer base; /* first: a MetricsTrainer * is a Trainer * */
    MetricCollection *metrics;
} MetricsTrainer;

static CtStatus mt_eval_epoch_start(Trainer *t)
{
    CtStatus st = trainer_default_eval_epoch_start(t);
    metric_collection_reset(((MetricsTrainer *)t)->metrics);
    return st;
}

static CtStatus mt_calculate_eval_batch_loss(Trainer *t, const DataBatch *batch,
                                             TrainerBatchOutput *out)
{
    CtStatus st = trainer_default_calculate_eval_batch_loss(t, batch, out);
    if (st != CT_OK) return st;
    /* every process counts every sample once: the gathered rows of all
     * processes, without the loader's wrap-around duplicates */
    return metric_collection_update(((MetricsTrainer *)t)->metrics,
                                    trainer_gather_for_metrics(t, out->model_outputs),
                                    trainer_gather_for_metrics(t, batch->t[1]));
}

static CtStatus mt_eval_epoch_end(Trainer *t)
{
    MetricsTrainer *m = (MetricsTrainer *)t;
    MetricValue v[3];
    CtStatus st = metric_collection_compute(m->metrics, v, 3);
    for (int i = 0; st == CT_OK && i < 3; i++)
        st = run_history_update(trainer_run_history(t), v[i].name, v[i].value);
    return st != CT_OK ? st : trainer_default_eval_epoch_end(t);
}

/* Accuracy (micro, torchmetrics' multiclass default), and precision and
 * recall averaged over the classes (macro: with micro averaging both equal
 * the accuracy for single-label multiclass data). */
static MetricCollection *classification_metrics(void)
{
    MetricCollection *c = metric_collection_create();
    metric_collection_add(c, "accuracy",
                          metric_accuracy_create(&(MetricClassArgs){.num_classes = 10}));
    metric_collection_add(c, "precision",
                          metric_precision_create(&(MetricClassArgs){
                              .num_classes = 10, .average = METRIC_AVG_MACRO}));
    if (metric_collection_add(c, "recall",
                              metric_recall_create(&(MetricClassArgs){
                                  .num_classes = 10, .average = METRIC_AVG_MACRO})) ==
            CT_OK &&
        metric_collection_size(c) == 3)
        return c;
    metric_collection_free(c);
    return NULL;
}

int main(int argc, char **argv)
{
    Example ex = {.name = "train_mnist_metrics_subclass", .o = {.epochs = 8}};
    int rc = example_begin(&ex, argc, argv, true);
    if (rc) return rc;

    /* no callbacks given: the trainer gets the default list */
    MetricsTrainer mt = {.metrics = classification_metrics()};
    Trainer *t = NULL;
    if (mt.metrics && example_mlp(&ex, 0.001) &&
        trainer_init(&mt.base,
                     &(TrainerConfig){.model = ex.model,
                                      .loss = ex.loss,
                                      .optimizer = ex.opt,
                                      .hooks = {.eval_epoch_start = mt_eval_epoch_start,
                                                .calculate_eval_batch_loss =
                                                    mt_calculate_eval_batch_loss,
                                                .eval_epoch_end = mt_eval_epoch_end}}) ==
            CT_OK)
        t = &mt.base;
    if (t && example_trainer_ready(&ex, t) == CT_OK) {
        CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = ex.train,
                                                    .eval_dataset = ex.val,
                                                    .num_epochs = ex.o.epochs,
                                                    .per_device_batch_size = 32,
                                                    .collate_fn = collate_flat_scaled});
        rc = example_status(t, st);
        if (rc == 0) {
            /* the validation metrics of every epoch are in the run history */
            int64_t n = 0;
            const double *acc =
                run_history_values(trainer_run_history(t), "accuracy", &n);
            printf("validation accuracy per epoch:");
            for (int64_t i = 0; i < n; i++) printf(" %.4f", acc[i]);
            printf("\n");
            rc = example_test(&ex, t, 64, collate_flat_scaled);
        }
        if (rc == 0) {
            RunHistory *h = trainer_run_history(t);
            printf("test precision %.4f recall %.4f\n",
                   run_history_latest(h, "precision"), run_history_latest(h, "recall"));
            printf("test accuracy %.2f%%\n", 100.0 * run_history_latest(h, "accuracy"));
        }
    } else {
        rc = example_fail(&ex);
    }
    trainer_deinit(t);
    metric_collection_free(mt.metrics);
    example_end(&ex);
    return rc;
}
