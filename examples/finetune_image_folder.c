/* finetune_image_folder — fine-tuning a pretrained CNN on an image folder,
 * launched from the program itself on several processes (accelerate's
 * notebook_launcher example, with the Trainer).
 *
 *   finetune_image_folder FOLDER BACKBONE.safetensors [--processes N]
 *                         [--epochs N] [--limit-batches N] [--seed N]
 *                         [--no-progress-bar]
 *
 * FOLDER holds images named <class>_<index>.png (make_image_folder writes
 * Fashion-MNIST's that way); the label is the file name's
 * "^(.*)_[0-9]+\.png$" capture, and a seeded 80/20 split keeps 20% out.
 * BACKBONE is a torchvision resnet18/34/50 or timm resnet50d state dict
 * (pretrain_backbone writes a resnet18 one; the architecture is read from
 * the file): the model is that ResNet with a new head sized to the classes,
 * trained in two phases with OneCycleLR each: the head
 * alone with the backbone frozen (1 epoch, max lr 1e-3), then everything
 * (--epochs, default 2, max lr 2e-4). Training images are augmented with a
 * random resized crop and a horizontal flip; the forward runs under bf16
 * autocast. --processes N (default 2) runs the training on N processes
 * with runtime_launch; the held-out accuracy is counted over every
 * process's rows (trainer_gather_for_metrics) and printed once.
 */
#include "fashion_mnist.h"

#define LABEL_REGEX "^(.*)_[0-9]+\\.png$"

typedef struct Finetune {
    const char *folder, *backbone;
    int processes;
    ExampleOptions o;
} Finetune;

/* The folder's images through tf (owned by the caller), split 80/20 with
 * seed: out[0] train, out[1] held out (both owned by the caller). */
static CtStatus split_folder(const Finetune *f, const DataTransformer *tf, Dataset **all,
                             Dataset **out)
{
    *all = data_image_folder_create(
        f->folder, &(DataImageFolderArgs){.label_regex = LABEL_REGEX,
                                          .transform = data_transform_as_fn(tf)});
    if (!*all) return ct_last_status();
    return data_random_split_fractions(*all, 2, (double[]){0.8, 0.2}, f->o.seed, out);
}

/* ToTensor and Normalize with Fashion-MNIST's mean and std on every channel,
 * after the augmentation when `augment`. */
static DataTransformer *image_transform(bool augment)
{
    double mean = FASHION_MNIST_MEAN, std = FASHION_MNIST_STD;
    if (!augment)
        return data_transform_compose(
            2, (DataTransformer *const[]){data_transform_to_tensor(),
                                          data_transform_normalize(1, &mean, &std)});
    /* u8 (H, W, 3) -> f32 (3, 28, 28), normalised */
    return data_transform_compose(
        4, (DataTransformer *const[]){
               data_transform_random_resized_crop(
                   28, 28, &(DataRandomResizedCropArgs){.scale = {0.6, 1.0}}),
               data_transform_random_horizontal_flip(0.5), data_transform_to_tensor(),
               data_transform_normalize(1, &mean, &std)});
}

/* The pretrained ResNet (the architecture the file holds, named in *arch)
 * with a new head of num_classes outputs, initialised as nn.Linear. */
static Module *pretrained_resnet(const Finetune *f, int64_t num_classes, CtGenerator *g,
                                 const char **arch)
{
    /* on the GPU, channels last: cuDNN's NHWC kernels, no transposes */
    NnResNetArgs a = {.num_classes = num_classes, .channels_last = f->o.cuda};
    return nn_model_resnet_load(f->backbone, &a, g, arch);
}

typedef struct Phase {
    double max_lr;
} Phase;

/* OneCycleLR over the run's updates, as pytorch-accelerated's examples. */
static Scheduler *one_cycle(Trainer *t, Optimizer *o, void *user)
{
    int64_t total;
    if (trainer_resolve_product(t, TRAINER_NUM_EPOCHS, TRAINER_NUM_UPDATE_STEPS_PER_EPOCH,
                                &total) != CT_OK)
        return NULL;
    return scheduler_one_cycle_lr(
        o,
        &(OneCycleArgs){.max_lr = ((const Phase *)user)->max_lr, .total_steps = total});
}

static CtStatus train_phase(Trainer *t, Dataset *train, int64_t epochs, Phase *phase)
{
    return trainer_train(t, &(TrainArgs){.train_dataset = train,
                                         .num_epochs = epochs,
                                         .per_device_batch_size = 32,
                                         .create_scheduler_fn = one_cycle,
                                         .scheduler_user = phase});
}

/* The training, on every process (runtime_launch). Returns the exit status. */
static int finetune(void *user)
{
    Finetune *f = user;
    Example ex = {.name = "finetune_image_folder", .o = f->o};
    DataTransformer *train_tf = image_transform(true), *eval_tf = image_transform(false);
    Dataset *all_train = NULL, *all_eval = NULL, *train[2] = {0}, *held_out[2] = {0};
    CtStatus st = train_tf && eval_tf ? split_folder(f, train_tf, &all_train, train)
                                      : ct_last_status();
    /* the same split of the same files, without augmentation */
    if (st == CT_OK) st = split_folder(f, eval_tf, &all_eval, held_out);
    ex.test = held_out[1];
    CtGenerator g = ct_generator(ex.o.seed, 0);
    const char *arch = NULL;
    ex.model =
        st == CT_OK
            ? pretrained_resnet(f, data_image_folder_num_classes(all_train), &g, &arch)
            : NULL;
    ex.opt = example_adamw(ex.model, 1e-3);
    ex.loss = ex.opt ? nn_loss_cross_entropy(NULL) : NULL;
    Runtime *rt =
        ex.loss ? runtime_create(&(RuntimeArgs){.mixed_precision = "bf16"}) : NULL;
    Trainer *t =
        rt ? trainer_create(&(TrainerConfig){
                 .model = ex.model, .loss = ex.loss, .optimizer = ex.opt, .runtime = rt})
           : NULL;
    st = t ? example_trainer_ready(&ex, t) : ct_last_status();
    int rc = 0;
    if (st == CT_OK) {
        trainer_print(t, "backbone: %s from %s\n", arch, f->backbone);
        /* phase 1: the new head only (batch norms frozen too) */
        Phase head = {.max_lr = 1e-3}, all = {.max_lr = 2e-4};
        st = nn_module_freeze_groups(ex.model, 1, false);
        if (st == CT_OK) st = train_phase(t, train[0], 1, &head);
        /* phase 2: everything */
        if (st == CT_OK) st = nn_module_unfreeze(ex.model);
        if (st == CT_OK) st = train_phase(t, train[0], ex.o.epochs, &all);
        rc = example_status(t, st);
        if (rc == 0) rc = example_test(&ex, t, 256, NULL);
        if (rc == 0)
            trainer_print(t, "held-out accuracy %.2f%% (%lld images)\n",
                          100.0 * test_accuracy_value(t),
                          (long long)data_dataset_len(held_out[1]));
    } else {
        rc = t ? runtime_abort(rt, st) : example_fail(&ex);
    }
    trainer_free(t);
    runtime_free(rt);
    ex.test = NULL; /* held_out[1], freed below */
    example_end(&ex);
    for (int i = 0; i < 2; i++) {
        data_dataset_free(train[i]);
        data_dataset_free(held_out[i]);
    }
    data_dataset_free(all_train);
    data_dataset_free(all_eval);
    data_transform_free(train_tf);
    data_transform_free(eval_tf);
    return rc;
}

int main(int argc, char **argv)
{
    Finetune f = {.processes = atoi(example_take_option(&argc, argv, "--processes", "2")),
                  .o = {.epochs = 2}};
    f.o.progress_bar = true;
    if (argc < 3 || !example_parse(argc - 2, argv + 2, &f.o)) {
        fprintf(stderr,
                "usage: %s FOLDER BACKBONE.safetensors [--processes N] [--epochs N] "
                "[--limit-batches N] [--seed N] [--no-progress-bar]\n",
                argv[0]);
        return 2;
    }
    f.folder = argv[1];
    f.backbone = argv[2];
    /* in each launched process (or here, with one) this calls finetune */
    CtStatus st = runtime_launch(finetune, &f, f.processes);
    if (st == CT_OK) return 0;
    fprintf(stderr, "finetune_image_folder: %s\n", ct_last_error());
    return 1;
}
