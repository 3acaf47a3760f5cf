/* train_mnist — pytorch-accelerated's quickstart (examples/core/train_mnist.py)
 * with the C Trainer: the 784-128-64-10 MLP on Fashion-MNIST, CrossEntropy,
 * SGD (lr 0.001, momentum 0.9), batch 32, 8 epochs, the default callbacks,
 * a seeded 55 000 / 5 000 train / validation split of the training set, then
 * trainer_evaluate on the 10 000 test images.
 *
 *   train_mnist [--data DIR] [--epochs N] [--limit-batches N] [--seed N]
 *               [--no-progress-bar] [--checkpoint-dir DIR] [--checkpoint-every N]
 *               [--resume-from DIR|latest] [--save-model PATH]
 *               [--mixed-precision no|bf16|fp16]
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
 * --mixed-precision runs the forward passes under autocast
 * (docs/mixed_precision.md); fp16 needs CUDA, so on the CPU it is an error
 * that suggests bf16. Without it, CTRAINER_MIXED_PRECISION decides.
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
    /* NULL when absent: the runtime then reads CTRAINER_MIXED_PRECISION */
    const char *mixed_precision =
        example_take_option(&argc, argv, "--mixed-precision", NULL);
    Example ex = {.name = "train_mnist", .o = {.epochs = 8}};
    CheckpointOptions co = {0};
    if (!parse_checkpoint_flags(&argc, argv, &co)) return 2;
    int rc = example_begin(&ex, argc, argv, true);
    if (rc) return rc;

    Runtime *rt = runtime_create(&(RuntimeArgs){.mixed_precision = mixed_precision});
    /* no callbacks given: the trainer gets the default list */
    Trainer *t =
        rt && example_mlp(&ex, 0.001)
            ? trainer_create(&(TrainerConfig){
                  .model = ex.model, .loss = ex.loss, .optimizer = ex.opt, .runtime = rt})
            : NULL;
    CtStatus ready = t ? example_trainer_ready(&ex, t) : CT_ERR_NULL;
    if (ready == CT_OK && co.dir) /* last, so it saves what the others have done */
        ready = trainer_add_callback(
            t, callback_checkpoint_create(&(CheckpointArgs){.dir = co.dir,
                                                            .every_n_updates = co.every,
                                                            .every_epoch = co.every == 0,
                                                            .total_limit = 3}));
    if (ready == CT_OK) {
        double t0 = example_now();
        CtStatus st =
            trainer_train(t, &(TrainArgs){.train_dataset = ex.train,
                                          .eval_dataset = ex.val,
                                          .num_epochs = ex.o.epochs,
                                          .per_device_batch_size = 32,
                                          .collate_fn = collate_flat_scaled,
                                          .train_dataloader_args =
                                              &(TrainerLoaderArgs){.seed = ex.o.seed},
                                          .resume_from = co.resume_from,
                                          .checkpoint_dir = co.dir});
        double t1 = example_now();
        rc = example_status(t, st);
        if (rc == 0 && co.save_model && runtime_is_main_process(trainer_runtime(t)) &&
            nn_module_save(ex.model, co.save_model) != CT_OK)
            rc = example_fail(&ex);
        if (rc == 0) rc = example_test(&ex, t, 64, collate_flat_scaled);
        if (rc == 0) {
            /* once per run, by the main process */
            Runtime *rt = trainer_runtime(t);
            runtime_print(rt,
                          "training took %.2f s (%.2f s per epoch, with validation)\n",
                          t1 - t0, (t1 - t0) / (double)ex.o.epochs);
            runtime_print(rt, "test accuracy %.2f%%\n", 100.0 * test_accuracy_value(t));
        }
    } else {
        rc = example_fail(&ex);
    }
    trainer_free(t);
    runtime_free(rt);
    example_end(&ex);
    return rc;
}
