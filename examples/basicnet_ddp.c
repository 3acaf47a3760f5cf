/* basicnet_ddp — train_basicnet's model, data and optimizer in a hand-written
 * data-parallel loop: every runtime call is explicit (the torch DDP script of
 * the BasicNet progression; basicnet_runtime.c is the same loop with the
 * runtime as accelerate's Accelerator, train_basicnet.c the Trainer).
 *
 *   basicnet_ddp [--data DIR] [--epochs N] [--limit-batches N] [--seed N]
 *   ctrainer launch --num_processes 2 ./build/examples/basicnet_ddp
 *
 * Each process trains on its rank::world shard of the 60 000 training
 * images (batch 64 per process), averages the gradients over the processes
 * before every optimizer step, and counts test accuracy over the rows of
 * every process without the sharded loader's duplicates. Prints the test
 * accuracy once, on the main process. docs/distributed.md compares the
 * three programs.
 */
#include "fashion_mnist.h"

/* One epoch over this process's shard (at most `limit` batches, 0: all). */
static CtStatus train_epoch(Runtime *rt, Example *ex, DataLoader *dl, int64_t limit)
{
    nn_module_train(ex->model);
    DataBatch b;
    CtStatus st = CT_OK;
    for (int64_t i = 0; st == CT_OK && (limit <= 0 || i < limit); i++) {
        if (!data_loader_next(dl, &b)) return data_loader_status(dl);
        CtScope *scope = ct_scope_open();
        Tensor *loss = nn_loss(ex->loss, nn_forward(ex->model, b.t[0]), b.t[1]);
        st = tensor_backward(loss, NULL);
        /* the gradient of the whole global batch: the mean over processes */
        if (st == CT_OK) st = runtime_reduce_gradients(rt, ex->model);
        if (st == CT_OK) st = optim_step(ex->opt);
        if (st == CT_OK) st = optim_zero_grad(ex->opt);
        ct_scope_close(scope);
    }
    return st;
}

/* Accuracy over the whole test set, the same value on every process. */
static CtStatus test_accuracy(Runtime *rt, Example *ex, DataLoader *dl, int64_t limit,
                              double *acc)
{
    Metric *m = metric_accuracy_create(&(MetricClassArgs){.num_classes = 10});
    if (!m) return ct_last_status();
    nn_module_eval(ex->model);
    bool grad = ct_set_grad_enabled(false);
    DataBatch b;
    CtStatus st = CT_OK;
    for (int64_t i = 0; st == CT_OK && (limit <= 0 || i < limit); i++) {
        if (!data_loader_next(dl, &b)) {
            st = data_loader_status(dl);
            break;
        }
        CtScope *scope = ct_scope_open();
        /* every process's rows, without the wrap-around duplicates */
        int64_t pad = data_loader_batch_padding(dl);
        st = metric_update(
            m, runtime_gather_for_metrics(rt, nn_forward(ex->model, b.t[0]), pad),
            runtime_gather_for_metrics(rt, b.t[1], pad));
        ct_scope_close(scope);
    }
    ct_set_grad_enabled(grad);
    if (st == CT_OK) st = metric_compute(m, acc);
    metric_free(m);
    return st;
}

static CtStatus run(Runtime *rt, Example *ex)
{
    int rank = runtime_rank(rt), world = runtime_world_size(rt);
    /* batches arrive on this process's device (the loader copies them) */
    CtDevice dev = runtime_device(rt);
    /* the same initial weights everywhere: rank 0's, broadcast */
    CtStatus st = runtime_prepare_model(rt, ex->model);
    DataLoader *train =
        st == CT_OK ? data_loader_create(ex->train,
                                         &(DataLoaderArgs){.batch_size = 64,
                                                           .shuffle = true,
                                                           .seed = runtime_base_seed(rt),
                                                           .collate = collate_normalized,
                                                           .shard_rank = rank,
                                                           .shard_world_size = world,
                                                           .device = dev})
                    : NULL;
    DataLoader *test =
        train ? data_loader_create(ex->test,
                                   &(DataLoaderArgs){.batch_size = 1000,
                                                     .collate = collate_normalized,
                                                     .shard_rank = rank,
                                                     .shard_world_size = world,
                                                     .device = dev})
              : NULL;
    if (!test) st = ct_last_status();
    for (int64_t e = 0; st == CT_OK && e < ex->o.epochs; e++) {
        /* a new order each epoch, the same on every process */
        st = data_loader_set_epoch(train, e);
        if (st == CT_OK) st = train_epoch(rt, ex, train, ex->o.limit_batches);
    }
    double acc = NAN;
    if (st == CT_OK) st = test_accuracy(rt, ex, test, ex->o.limit_batches, &acc);
    if (st == CT_OK) runtime_print(rt, "test accuracy %.2f%%\n", 100.0 * acc);
    data_loader_free(test);
    data_loader_free(train);
    return st;
}

int main(int argc, char **argv)
{
    return example_basicnet_main("basicnet_ddp", argc, argv, run);
}
