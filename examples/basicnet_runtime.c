/* basicnet_runtime — basicnet_ddp's loop with the runtime used as accelerate's
 * Accelerator: prepare the model and the loaders, backward, gather for
 * metrics. The loop does not mention ranks, shards or all-reduces; it runs
 * unchanged on one process or many (basicnet_ddp.c spells those out,
 * train_basicnet.c hands the whole loop to the Trainer).
 *
 *   basicnet_runtime [--data DIR] [--epochs N] [--limit-batches N] [--seed N]
 *   ctrainer launch --num_processes 2 ./build/examples/basicnet_runtime
 *
 * Prints the test accuracy once, on the main process.
 */
#include "fashion_mnist.h"

static CtStatus run(Runtime *rt, Example *ex)
{
    int64_t limit = ex->o.limit_batches;
    CtStatus st = runtime_prepare_model(rt, ex->model);
    DataLoader *train =
        st == CT_OK
            ? runtime_prepare_dataloader(rt, ex->train,
                                         &(DataLoaderArgs){.batch_size = 64,
                                                           .shuffle = true,
                                                           .collate = collate_normalized})
            : NULL;
    DataLoader *test =
        train ? runtime_prepare_dataloader(
                    rt, ex->test,
                    &(DataLoaderArgs){.batch_size = 1000, .collate = collate_normalized})
              : NULL;
    Metric *acc =
        test ? metric_accuracy_create(&(MetricClassArgs){.num_classes = 10}) : NULL;
    if (!acc) st = ct_last_status();
    DataBatch b;
    for (int64_t e = 0; st == CT_OK && e < ex->o.epochs; e++) {
        nn_module_train(ex->model);
        st = data_loader_set_epoch(train, e);
        for (int64_t i = 0; st == CT_OK && (limit <= 0 || i < limit); i++) {
            if (!data_loader_next(train, &b)) break;
            CtScope *scope = ct_scope_open();
            Tensor *loss = nn_loss(ex->loss, nn_forward(ex->model, b.t[0]), b.t[1]);
            st = runtime_backward(rt, ex->model, loss);
            if (st == CT_OK) st = optim_step(ex->opt);
            if (st == CT_OK) st = optim_zero_grad(ex->opt);
            ct_scope_close(scope);
        }
        if (st == CT_OK) st = data_loader_status(train);
    }
    nn_module_eval(ex->model);
    bool grad = ct_set_grad_enabled(false);
    for (int64_t i = 0; st == CT_OK && (limit <= 0 || i < limit); i++) {
        if (!data_loader_next(test, &b)) break;
        CtScope *scope = ct_scope_open();
        int64_t pad = data_loader_batch_padding(test);
        st = metric_update(
            acc, runtime_gather_for_metrics(rt, nn_forward(ex->model, b.t[0]), pad),
            runtime_gather_for_metrics(rt, b.t[1], pad));
        ct_scope_close(scope);
    }
    ct_set_grad_enabled(grad);
    if (st == CT_OK) st = data_loader_status(test);
    double value = NAN;
    if (st == CT_OK) st = metric_compute(acc, &value);
    if (st == CT_OK) runtime_print(rt, "test accuracy %.2f%%\n", 100.0 * value);
    metric_free(acc);
    data_loader_free(test);
    data_loader_free(train);
    return st;
}

int main(int argc, char **argv)
{
    return example_basicnet_main("basicnet_runtime", argc, argv, run);
}
