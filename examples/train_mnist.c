/* train_mnist — pytorch-accelerated's quickstart (examples/core/train_mnist.py)
 * with the C Trainer: the 784-128-64-10 MLP on Fashion-MNIST, CrossEntropy,
 * SGD (lr 0.001, momentum 0.9), batch 32, 8 epochs, the default callbacks,
 * a seeded 55 000 / 5 000 train / validation split of the training set, then
 * trainer_evaluate on the 10 000 test images.
 *
 *   train_mnist [--data DIR] [--epochs N] [--limit-batches N] [--seed N]
 *               [--no-progress-bar]
 *
 * Prints the test accuracy last ("test accuracy 84.93%"). Exits non-zero
 * when training fails or TerminateOnNaN stopped it. For a quick run, limit
 * the batches per epoch with --limit-batches N or CTRAINER_LIMIT_BATCHES=N.
 */
#include "fashion_mnist.h"

int main(int argc, char **argv)
{
    ExampleOptions o = {
        .data = DATA_FASHION_MNIST_DIR, .epochs = 8, .progress_bar = true};
    if (!example_parse(argc, argv, &o)) return 2;

    Dataset *full = NULL, *test = NULL, *split[2] = {NULL, NULL};
    if (!example_load(o.data, &full, &test) ||
        data_random_split(full, 2, (int64_t[]){55000, 5000}, o.seed, split) != CT_OK) {
        fprintf(stderr, "train_mnist: %s\n", ct_last_error());
        data_dataset_free(test);
        data_dataset_free(full);
        return 1;
    }

    CtGenerator g = ct_generator(o.seed, 0);
    Module *model = nn_model_mlp(784, 2, (int64_t[]){128, 64}, 10, &g);
    Optimizer *opt =
        model ? optim_sgd_create(model, &(SgdArgs){.lr = 0.001, .momentum = 0.9}) : NULL;
    NnLoss *loss = nn_loss_cross_entropy(NULL);
    Callback *cbs[8];
    int ncb = example_callbacks(cbs, 8, o.limit_batches, o.progress_bar, 0, NULL);
    Trainer *t = opt && loss && ncb > 0
                     ? trainer_create(&(TrainerConfig){.model = model,
                                                       .loss = loss,
                                                       .optimizer = opt,
                                                       .callbacks = cbs,
                                                       .n_callbacks = ncb})
                     : NULL;
    int rc = 1;
    if (t) {
        double t0 = example_now();
        CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = split[0],
                                                    .eval_dataset = split[1],
                                                    .num_epochs = o.epochs,
                                                    .per_device_batch_size = 32,
                                                    .collate_fn = collate_flat_scaled});
        double t1 = example_now();
        rc = example_status(t, st);
        if (rc == 0) {
            st = trainer_evaluate(t, &(EvalArgs){.dataset = test,
                                                 .per_device_batch_size = 64,
                                                 .collate_fn = collate_flat_scaled});
            rc = example_status(t, st);
        }
        if (rc == 0) {
            /* once per run, by the main process */
            Runtime *rt = trainer_runtime(t);
            runtime_print(rt,
                          "training took %.2f s (%.2f s per epoch, with validation)\n",
                          t1 - t0, (t1 - t0) / (double)o.epochs);
            runtime_print(rt, "test accuracy %.2f%%\n", 100.0 * test_accuracy_value(t));
        }
    } else {
        if (ncb > 0 && !(opt && loss)) /* trainer_create was not called */
            for (int i = 0; i < ncb; i++) callback_free(cbs[i]);
        fprintf(stderr, "train_mnist: %s\n", ct_last_error());
    }

    trainer_free(t);
    nn_loss_free(loss);
    optim_free(opt);
    nn_module_free(model);
    data_dataset_free(split[0]);
    data_dataset_free(split[1]);
    data_dataset_free(test);
    data_dataset_free(full);
    return rc;
}
