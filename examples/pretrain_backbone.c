/* pretrain_backbone — a "pretrained" ResNet-18 to fine-tune, made here since
 * no hub weights can be downloaded: torchvision's resnet18 (3 input
 * channels, 10 classes) trained with the Trainer on the 60 000 Fashion-MNIST
 * training images, each grey image fed as RGB (the value in all three
 * channels, as make_image_folder writes the test images), normalised with
 * the dataset's mean and std; AdamW (lr 1e-3, PyTorch's defaults
 * otherwise), batch 64, 1 epoch. Saves the weights as safetensors with
 * torchvision's parameter names (conv1.weight, layer1.0.bn1.running_mean,
 * ..., fc.bias), so a fine-tuning program loads this file or a torchvision
 * resnet18 one the same way. With --cuda the network runs channels last
 * (NnResNetArgs.channels_last).
 *
 *   pretrain_backbone [--out PATH] [--data DIR] [--epochs N]
 *                     [--limit-batches N] [--seed N] [--no-progress-bar]
 *
 * --out defaults to resnet18_fashion_mnist.safetensors. Prints the test
 * accuracy last.
 */
#include "fashion_mnist.h"

/* collate_normalized, then the one grey channel as three: (B, 3, 28, 28) */
static CtStatus collate_rgb(const DataSample *s, int64_t n, DataBatch *out, void *user)
{
    CtStatus st = collate_normalized(s, n, out, user);
    if (st != CT_OK) return st;
    Tensor *grey = out->t[0];
    Tensor *x = tensor_cat(3, (Tensor *const[]){grey, grey, grey}, 1);
    if (!x) return ct_last_status();
    out->t[0] = x;
    return CT_OK;
}

int main(int argc, char **argv)
{
    const char *out =
        example_take_option(&argc, argv, "--out", "resnet18_fashion_mnist.safetensors");
    Example ex = {.name = "pretrain_backbone", .o = {.epochs = 1}};
    int rc = example_begin(&ex, argc, argv, false);
    if (rc) return rc;

    CtGenerator g = ct_generator(ex.o.seed, 0);
    /* on the GPU, channels last: cuDNN's NHWC kernels, no transposes */
    ex.model = nn_model_resnet18(
        &(NnResNetArgs){.num_classes = 10, .channels_last = ex.o.cuda}, &g);
    ex.opt = example_adamw(ex.model, 1e-3);
    ex.loss = ex.opt ? nn_loss_cross_entropy(NULL) : NULL;
    /* no callbacks given: the trainer gets the default list */
    Trainer *t = ex.loss ? trainer_create(&(TrainerConfig){
                               .model = ex.model, .loss = ex.loss, .optimizer = ex.opt})
                         : NULL;
    if (t && example_trainer_ready(&ex, t) == CT_OK) {
        CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = ex.train,
                                                    .num_epochs = ex.o.epochs,
                                                    .per_device_batch_size = 64,
                                                    .collate_fn = collate_rgb});
        rc = example_status(t, st);
        if (rc == 0 && runtime_is_main_process(trainer_runtime(t)) &&
            nn_module_save(ex.model, out) != CT_OK)
            rc = example_fail(&ex);
        if (rc == 0) rc = example_test(&ex, t, 256, collate_rgb);
        if (rc == 0) {
            trainer_print(t, "saved %s\n", out);
            trainer_print(t, "test accuracy %.2f%%\n", 100.0 * test_accuracy_value(t));
        }
    } else {
        rc = example_fail(&ex);
    }
    trainer_free(t);
    example_end(&ex);
    return rc;
}
