/* train_mnist — pytorch-accelerated's quickstart (examples/core/train_mnist.py)
 * with the C Trainer: the 784-128-64-10 MLP on Fashion-MNIST, CrossEntropy,
 * SGD (lr 0.001, momentum 0.9), batch 32, 8 epochs, the default callbacks,
 * a seeded 55 000 / 5 000 train / validation split of the training set, then
 * trainer_evaluate on the 10 000 test images.
 *
 *   train_mnist [--data DIR] [--epochs N] [--limit-batches N] [--seed N]
 *               [--no-progress-bar] [--checkpoint-dir DIR] [--checkpoint-every N]
 *               [--resume-from DIR|latest] [--save-model PATH]
 *
 * Checkpoints (docs/checkpoints.md): --checkpoint-dir DIR saves training
 * state there (checkpoint_<n>, the last 3 kept, a `latest` pointer) every
 * --checkpoint-every N optimizer updates, or every epoch without it, and at
 * the end. --resume-from latest (with --checkpoint-dir) or a checkpoint
 * directory continues a run where it stopped: `--epochs 2` in one go and
 * `--epochs 1` then `--epochs 2 --resume-from latest` give byte-identical
 * --save-model files (the final weights as safetensors). --seed N seeds the
 * weights, the validation split and the shuffle order.
 *
 * Prints the test accuracy last ("test accuracy 84.93%"). Exits non-zero
 * when training fails or TerminateOnNaN stopped it. For a quick run, limit
 * the batches per epoch with --limit-batches N or CTRAINER_LIMIT_BATCHES=N.
 */
#include "fashion_mnist.h"

typedef struct CheckpointOptions {
    const char *dir, *resume_from, *save_model;
    int64_t every;
} CheckpointOptions;

/* Takes the checkpoint flags out of argv (the rest go to example_parse). */
static bool parse_checkpoint_flags(int *argc, char **argv, CheckpointOptions *c)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        const char **dst = !strcmp(a, "--checkpoint-dir")     ? &c->dir
                           : !strcmp(a, "--resume-from")      ? &c->resume_from
                           : !strcmp(a, "--save-model")       ? &c->save_model
                           : !strcmp(a, "--checkpoint-every") ? &v
                                                              : NULL;
        if (!dst) {
            argv[out++] = argv[i];
            continue;
        }
        if (!v) {
            fprintf(stderr, "train_mnist: %s needs a value\n", a);
            return false;
        }
        if (dst != &v)
            *dst = v;
        else
            c->every = atoll(v);
        i++;
    }
    *argc = out;
    return c->every >= 0;
}

int main(int argc, char **argv)
{
    ExampleOptions o = {
        .data = DATA_FASHION_MNIST_DIR, .epochs = 8, .progress_bar = true};
    CheckpointOptions co = {0};
    if (!parse_checkpoint_flags(&argc, argv, &co) || !example_parse(argc, argv, &o))
        return 2;

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
    Callback *cbs[9];
    int ncb = example_callbacks(cbs, 8, o.limit_batches, o.progress_bar, 0, NULL);
    if (ncb > 0 && co.dir) /* last, so it saves what the others have done */
        cbs[ncb++] =
            callback_checkpoint_create(&(CheckpointArgs){.dir = co.dir,
                                                         .every_n_updates = co.every,
                                                         .every_epoch = co.every == 0,
                                                         .total_limit = 3});
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
        CtStatus st = trainer_train(
            t, &(TrainArgs){.train_dataset = split[0],
                            .eval_dataset = split[1],
                            .num_epochs = o.epochs,
                            .per_device_batch_size = 32,
                            .collate_fn = collate_flat_scaled,
                            .train_dataloader_args = &(TrainerLoaderArgs){.seed = o.seed},
                            .resume_from = co.resume_from,
                            .checkpoint_dir = co.dir});
        double t1 = example_now();
        rc = example_status(t, st);
        if (rc == 0 && co.save_model && nn_module_save(model, co.save_model) != CT_OK) {
            fprintf(stderr, "train_mnist: %s\n", ct_last_error());
            rc = 1;
        }
        if (rc == 0) {
            st = trainer_evaluate(t, &(EvalArgs){.dataset = test,
                                                 .per_device_batch_size = 64,
                                                 .collate_fn = collate_flat_scaled});
            rc = example_status(t, st);
        }
        if (rc == 0) {
            printf("training took %.2f s (%.2f s per epoch, with validation)\n", t1 - t0,
                   (t1 - t0) / (double)o.epochs);
            printf("test accuracy %.2f%%\n", 100.0 * test_accuracy_value(t));
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
