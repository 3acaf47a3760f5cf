/* train_basicnet — PyTorch's MNIST example network (nn_model_basicnet: two
 * convolutions, max-pool, dropouts, two linears, log_softmax) trained with
 * the Trainer on Fashion-MNIST: NLL loss on its log-probabilities, AdamW
 * (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0.01: PyTorch's
 * defaults), batch 64, 1 epoch, inputs normalised with Fashion-MNIST's mean
 * and std; then trainer_evaluate on the 10 000 test images.
 *
 *   train_basicnet [--data DIR] [--epochs N] [--limit-batches N] [--seed N]
 *                  [--no-progress-bar]
 *
 * Prints the test accuracy last. Exits non-zero when training fails or
 * TerminateOnNaN stopped it. About 30 s per epoch on 2 cores; for
 * conv-heavy models on small VMs, OMP_WAIT_POLICY=passive helps (see
 * docs/benchmarks.md).
 */
#include "fashion_mnist.h"

int main(int argc, char **argv)
{
    ExampleOptions o = {
        .data = DATA_FASHION_MNIST_DIR, .epochs = 1, .progress_bar = true};
    if (!example_parse(argc, argv, &o)) return 2;

    Dataset *train = NULL, *test = NULL;
    if (!example_load(o.data, &train, &test)) {
        fprintf(stderr, "train_basicnet: %s\n", ct_last_error());
        return 1;
    }

    /* g initialises the weights and then drives the dropouts: it must
     * outlive the model */
    CtGenerator g = ct_generator(o.seed, 0);
    Module *model = nn_model_basicnet(&g);
    Optimizer *opt = model ? optim_adamw_create(model, &(AdamArgs){.lr = 1e-3,
                                                                   .beta1 = 0.9,
                                                                   .beta2 = 0.999,
                                                                   .eps = 1e-8,
                                                                   .weight_decay = 0.01})
                           : NULL;
    NnLoss *loss = nn_loss_nll(NULL);
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
        CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = train,
                                                    .num_epochs = o.epochs,
                                                    .per_device_batch_size = 64,
                                                    .collate_fn = collate_normalized});
        double t1 = example_now();
        rc = example_status(t, st);
        if (rc == 0) {
            st = trainer_evaluate(t, &(EvalArgs){.dataset = test,
                                                 .per_device_batch_size = 1000,
                                                 .collate_fn = collate_normalized});
            rc = example_status(t, st);
        }
        if (rc == 0) {
            printf("training took %.2f s (%.2f s per epoch)\n", t1 - t0,
                   (t1 - t0) / (double)o.epochs);
            printf("test accuracy %.2f%%\n", 100.0 * test_accuracy_value(t));
        }
    } else {
        if (ncb > 0 && !(opt && loss)) /* trainer_create was not called */
            for (int i = 0; i < ncb; i++) callback_free(cbs[i]);
        fprintf(stderr, "train_basicnet: %s\n", ct_last_error());
    }

    trainer_free(t);
    nn_loss_free(loss);
    optim_free(opt);
    nn_module_free(model);
    data_dataset_free(test);
    data_dataset_free(train);
    return rc;
}
