/* bench_trainer — the Trainer's training epoch on the example workloads,
 * for comparison with bench/bench_trainer_torch.py (a plain PyTorch loop):
 *
 *   mlp       train_mnist's: the 784-128-64-10 MLP, CrossEntropy, SGD lr 0.001
 *             momentum 0.9, batch 32, inputs v/255
 *   basicnet  train_basicnet's: nn_model_basicnet, NLL, AdamW lr 1e-3 (PyTorch
 *             defaults otherwise), batch 64, inputs (v/255 - mean) / std
 *   resnet18  nn_model_resnet18 with 10 classes on random 64x64 RGB images
 *             (uniform [0, 1), random labels), CrossEntropy, SGD lr 0.01
 *             momentum 0.9, batch 32
 *   resnet50  the same with nn_model_resnet50 on 224x224 images, batch 128
 *             (the GPU target's shape; add --mixed-precision bf16)
 *
 *   bench_trainer [--workload mlp|basicnet|resnet18|resnet50] [--epochs N]
 *                 [--batch N] [--batches N] [--data DIR] [--seed N]
 *                 [--mixed-precision no|bf16|fp16] [--cuda] [--channels-last]
 *
 * --cuda trains on cuda:0 (it sets CTRAINER_USE_CPU=false for the Trainer's
 * runtime), --channels-last runs resnet*'s stages channels last
 * (NnResNetArgs.channels_last), --mixed-precision sets CTRAINER_MIXED_PRECISION; resnet*
 * also print "images_per_s <n>" per epoch. resnet* on CUDA turn cuDNN's benchmark mode on
 * (CTRAINER_CUDNN_BENCHMARK=1 unless it is set), as the PyTorch script sets
 * cudnn.benchmark: both at their best for fixed shapes (BasicNet's small convolutions
 * measured faster with the heuristics).
 *
 * Each epoch is one shuffled pass over the 60 000 Fashion-MNIST training
 * images (resnet18: over --batches batches of random images) through
 * trainer_train (its loader and collate, the default callbacks without the
 * progress bar, TerminateOnNaN looking every 100 steps), no evaluation. --batch overrides
 * the batch size, --batches caps the batches per epoch (resnet18: 10 by default). Prints,
 * like the PyTorch script, "epoch_s <seconds> step_ms <ms> last_loss <loss>" per epoch
 * (timed from on_train_epoch_start to on_train_epoch_end; step_ms is that
 * over the batches), "ops_per_step <n> host_syncs_per_step <n>" (ct_op_count
 * and ct_host_sync_count on the training thread), with CTRAINER_PROFILE_OPS=1
 * the epoch's host time per op kind (ct_op_profile_print), and
 * "peak_rss_mib <MiB>" (getrusage ru_maxrss) at the end. bench/run_trainer_bench.sh runs
 * both sides interleaved.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"
#include "ctrainer/ctrainer.h"

#define MEAN 0.2860
#define STD  0.3530

/* u8 (B, 1, 28, 28) batch -> f32 (B, 784) in [0, 1] */
static CtStatus collate_mlp(const DataSample *s, int64_t n, DataBatch *out, void *user)
{
    (void)user;
    CtStatus st = data_collate_default(s, n, out, NULL);
    if (st != CT_OK) return st;
    Tensor *x = tensor_mul_scalar(tensor_flatten(tensor_cast(out->t[0], CT_F32), 1, -1),
                                  1.0 / 255.0);
    if (!x) return ct_last_status();
    out->t[0] = x;
    return CT_OK;
}

/* u8 (B, 1, 28, 28) batch -> f32 (B, 1, 28, 28), normalised */
static CtStatus collate_basicnet(const DataSample *s, int64_t n, DataBatch *out,
                                 void *user)
{
    (void)user;
    CtStatus st = data_collate_default(s, n, out, NULL);
    if (st != CT_OK) return st;
    Tensor *x = tensor_add_scalar(
        tensor_mul_scalar(tensor_cast(out->t[0], CT_F32), 1.0 / (255.0 * STD)),
        -MEAN / STD);
    if (!x) return ct_last_status();
    out->t[0] = x;
    return CT_OK;
}

/* ------------------------------------------------------ epoch timer */

typedef struct EpochTimer {
    Callback base;
    double t0, c0;         /* wall and process CPU seconds at the epoch start */
    uint64_t ops0, syncs0; /* ct_op_count, ct_host_sync_count at the epoch start */
    double last_loss;
    int64_t batch_images; /* > 0: print images/s */
} EpochTimer;

static CtStatus et_start(Callback *cb, Trainer *t)
{
    (void)t;
    ((EpochTimer *)cb)->t0 = bench_now();
    ((EpochTimer *)cb)->c0 = bench_cpu_now();
    ((EpochTimer *)cb)->ops0 = ct_op_count();
    ((EpochTimer *)cb)->syncs0 = ct_host_sync_count();
    ct_op_profile_reset(); /* CTRAINER_PROFILE_OPS=1: per epoch */
    return CT_OK;
}

static CtStatus et_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                            const TrainerBatchOutput *out, int64_t step)
{
    (void)t;
    (void)b;
    /* only the epoch's last loss is printed; reading every loss would add a
     * host sync per step on a GPU, and the PyTorch side reads only the last */
    if (step + 1 == trainer_train_dataloader_len(t))
        ((EpochTimer *)cb)->last_loss = tensor_item(out->loss);
    return CT_OK;
}

static CtStatus et_end(Callback *cb, Trainer *t)
{
    EpochTimer *e = (EpochTimer *)cb;
    double dt = bench_now() - e->t0, dc = bench_cpu_now() - e->c0;
    double steps = (double)trainer_train_dataloader_len(t);
    printf("epoch_s %.4f step_ms %.4f cpu_s %.4f cpu_step_ms %.4f last_loss %.4f\n", dt,
           1e3 * dt / steps, dc, 1e3 * dc / steps, e->last_loss);
    if (e->batch_images > 0)
        printf("images_per_s %.1f\n", (double)e->batch_images * steps / dt);
    /* the training thread's ops (on a GPU, about its kernel launches) and
     * host synchronisations per step */
    printf("ops_per_step %.2f host_syncs_per_step %.3f\n",
           (double)(ct_op_count() - e->ops0) / steps,
           (double)(ct_host_sync_count() - e->syncs0) / steps);
    ct_op_profile_print(stdout); /* nothing unless CTRAINER_PROFILE_OPS=1 */
    fflush(stdout);
    return CT_OK;
}

static const CallbackVtable epoch_timer_vt = {
    .type = "EpochTimer",
    .on_train_epoch_start = et_start,
    .on_train_step_end = et_step_end,
    .on_train_epoch_end = et_end,
};

static Callback *epoch_timer_create(int64_t batch_images)
{
    EpochTimer *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->base.vt = &epoch_timer_vt;
    e->batch_images = batch_images;
    return &e->base;
}

/* ---------------------------------------------------------------- main */

/* the resnets' data: n random (3, hw, hw) images in [0, 1), labels 0..9 */
static Dataset *random_images(int64_t n, int64_t hw, CtGenerator *g)
{
    Tensor *x = tensor_rand(g, 4, (int64_t[]){n, 3, hw, hw}, CT_F32, ct_cpu());
    Tensor *u = tensor_rand(g, 1, (int64_t[]){n}, CT_F32, ct_cpu());
    Tensor *y = tensor_cast(tensor_mul_scalar(u, 10.0), CT_I64);
    Dataset *d = x && y ? data_tensor_dataset_create(2, (Tensor *[]){x, y}) : NULL;
    tensor_free(x);
    tensor_free(u);
    tensor_free(y);
    return d;
}

static Module *make_model(char w, bool channels_last, CtGenerator *g)
{
    if (w == 'm') return nn_model_mlp(784, 2, (int64_t[]){128, 64}, 10, g);
    if (w == 'b') return nn_model_basicnet(g);
    NnResNetArgs a = {.num_classes = 10, .channels_last = channels_last};
    return w == 'R' ? nn_model_resnet50(&a, g) : nn_model_resnet18(&a, g);
}

static Optimizer *make_optimizer(char w, Module *model)
{
    if (!model) return NULL;
    if (w == 'b')
        return optim_adamw_create(model, &(AdamArgs){.lr = 1e-3,
                                                     .beta1 = 0.9,
                                                     .beta2 = 0.999,
                                                     .eps = 1e-8,
                                                     .weight_decay = 0.01});
    return optim_sgd_create(model,
                            &(SgdArgs){.lr = w == 'm' ? 0.001 : 0.01, .momentum = 0.9});
}

int main(int argc, char **argv)
{
    const char *workload = "mlp", *dir = DATA_FASHION_MNIST_DIR;
    int64_t epochs = 1, batch = 0, batches = 0;
    uint64_t seed = 0;
    int kept = 1; /* --cuda and --channels-last take no value: out of argv first */
    bool channels_last = false;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--cuda"))
            setenv("CTRAINER_USE_CPU", "false", 1);
        else if (!strcmp(argv[i], "--channels-last"))
            channels_last = true;
        else
            argv[kept++] = argv[i];
    argc = kept;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mixed-precision"))
            setenv("CTRAINER_MIXED_PRECISION", argv[i + 1], 1);
        else if (!strcmp(argv[i], "--workload"))
            workload = argv[i + 1];
        else if (!strcmp(argv[i], "--epochs"))
            epochs = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batches"))
            batches = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--data"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else
            break;
    }
    const char *use_cpu = getenv("CTRAINER_USE_CPU");
    if (!strncmp(workload, "resnet", 6) && use_cpu && !strcmp(use_cpu, "false"))
        setenv("CTRAINER_CUDNN_BENCHMARK", "1", 0);
    char w = !strcmp(workload, "mlp")        ? 'm'
             : !strcmp(workload, "basicnet") ? 'b'
             : !strcmp(workload, "resnet18") ? 'r'
             : !strcmp(workload, "resnet50") ? 'R'
                                             : 0;
    if ((argc - 1) % 2 || !w || batch < 0 || batches < 0) {
        fprintf(stderr,
                "usage: %s [--workload mlp|basicnet|resnet18|resnet50] [--epochs N] "
                "[--batch N] [--batches N] [--data DIR] [--seed N] "
                "[--mixed-precision no|bf16|fp16] [--cuda] [--channels-last]\n",
                argv[0]);
        return 2;
    }
    bool resnet = w == 'r' || w == 'R';
    if (!batch) batch = w == 'b' ? 64 : w == 'R' ? 128 : 32;
    if (resnet && !batches) batches = 10;

    CtGenerator g = ct_generator(seed, 0);
    Dataset *train =
        resnet ? random_images(batches * batch, w == 'R' ? 224 : 64, &g)
               : data_fashion_mnist_create(&(DataFashionMnistArgs){.root = dir});
    Module *model = make_model(w, channels_last, &g);
    Optimizer *opt = make_optimizer(w, model);
    NnLoss *loss = w == 'b' ? nn_loss_nll(NULL) : nn_loss_cross_entropy(NULL);
    Trainer *t = NULL;
    Callback *cbs[CALLBACKS_DEFAULT_MAX + 1];
    int n = callbacks_default(cbs, CALLBACKS_DEFAULT_MAX, false);
    /* TerminateOnNaN looks every 100 steps, not every step: no per-step
     * host sync on a GPU, as in the PyTorch loop */
    for (int i = 0; i < n; i++)
        if (!strcmp(callback_type(cbs[i]), "TerminateOnNaN")) {
            callback_free(cbs[i]);
            cbs[i] = callback_terminate_on_nan_create_every(100);
        }
    if (n >= 0) cbs[n++] = epoch_timer_create(resnet ? batch : 0);
    if (train && opt && loss && n > 0)
        t = trainer_create(&(TrainerConfig){.model = model,
                                            .loss = loss,
                                            .optimizer = opt,
                                            .callbacks = cbs,
                                            .n_callbacks = n});
    else
        for (int i = 0; i < n; i++) callback_free(cbs[i]);
    if (t && batches) trainer_limit_batches(t, batches, 0);
    DataCollateFn collate = w == 'm' ? collate_mlp : w == 'b' ? collate_basicnet : NULL;
    CtStatus st = t ? trainer_train(t, &(TrainArgs){.train_dataset = train,
                                                    .num_epochs = epochs,
                                                    .per_device_batch_size = batch,
                                                    .collate_fn = collate})
                    : ct_last_status();
    if (st != CT_OK) fprintf(stderr, "bench_trainer: %s\n", ct_last_error());
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak_rss_mib %.1f\n", (double)ru.ru_maxrss / 1024.0);

    trainer_free(t);
    nn_loss_free(loss);
    optim_free(opt);
    nn_module_free(model);
    data_dataset_free(train);
    return st == CT_OK ? 0 : 1;
}
