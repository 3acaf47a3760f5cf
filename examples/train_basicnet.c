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
 * The Trainer version of the BasicNet progression (basicnet_ddp.c: a raw
 * data-parallel loop; basicnet_runtime.c: the runtime as accelerate's
 * Accelerator); run it on several processes with
 * `ctrainer launch --num_processes 2 ./build/examples/train_basicnet`.
 *
 * Prints the test accuracy last, once. Exits non-zero when training fails or
 * TerminateOnNaN stopped it. About 30 s per epoch on 2 cores; for
 * conv-heavy models on small VMs, OMP_WAIT_POLICY=passive helps (see
 * docs/benchmarks.md).
 */
#include "fashion_mnist.h"

int main(int argc, char **argv)
{
    Example ex = {.name = "train_basicnet", .o = {.epochs = 1}};
    int rc = example_begin(&ex, argc, argv, false);
    if (rc) return rc;

    CtGenerator g = ct_generator(ex.o.seed, 0); /* weights, then dropout */
    /* no callbacks given: the trainer gets the default list */
    Trainer *t = example_basicnet(&ex, &g)
                     ? trainer_create(&(TrainerConfig){
                           .model = ex.model, .loss = ex.loss, .optimizer = ex.opt})
                     : NULL;
    if (t && example_trainer_ready(&ex, t) == CT_OK) {
        double t0 = example_now();
        CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = ex.train,
                                                    .num_epochs = ex.o.epochs,
                                                    .per_device_batch_size = 64,
                                                    .collate_fn = collate_normalized});
        double t1 = example_now();
        rc = example_status(t, st);
        if (rc == 0) rc = example_test(&ex, t, 1000, collate_normalized);
        if (rc == 0) {
            /* once per run, by the main process */
            trainer_print(t, "training took %.2f s (%.2f s per epoch)\n", t1 - t0,
                          (t1 - t0) / (double)ex.o.epochs);
            trainer_print(t, "test accuracy %.2f%%\n", 100.0 * test_accuracy_value(t));
        }
    } else {
        rc = example_fail(&ex);
    }
    trainer_free(t);
    example_end(&ex);
    return rc;
}
