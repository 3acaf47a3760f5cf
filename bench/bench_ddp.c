/* bench_ddp — data-parallel cost of the Trainer on train_mnist's MLP
 * (784-128-64-10, CrossEntropy, SGD lr 0.001 momentum 0.9, batch 32 per
 * process) or on train_basicnet's BasicNet (--model basicnet: NLL, AdamW,
 * batch 64 per process), one epoch of Fashion-MNIST split across the
 * processes (--limit-batches N: the first N batches of each process):
 *
 *   bench_ddp [--data DIR] [--reps N] [--model mlp|basicnet] [--limit-batches N]
 *   mpirun -np 2 bench_ddp ...                          # two processes
 *
 * Each rank trains on its shard by hand (rows r, r + W, ...: what a
 * distributed sampler deals it), with its own plain loader, so the numbers
 * do not depend on how the default loaders shard. Prints, on the main
 * process: the epoch time and global samples/s, optimizer updates, the time
 * spent in collectives per update (all of them: the gradient all-reduce,
 * stop flags, loss totals; waiting for slower ranks included), and then
 * the gradient all-reduce alone, timed over N calls outside training, with
 * its bytes per update, and the 8-byte reduce the trainer agrees on stop
 * requests with (twice per step), timed the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrainer/ctrainer.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* u8 (B, 1, 28, 28) batch -> f32 (B, 784) in [0, 1] */
static CtStatus collate_mlp(const DataSample *s, int64_t n, DataBatch *out, void *user)
{
    CtStatus st = data_collate_default(s, n, out, NULL);
    if (st != CT_OK) return st;
    Tensor *x = tensor_reshape(out->t[0], 2, (int64_t[]){n, 784});
    out->t[0] = tensor_div_scalar(tensor_cast(x, CT_F32), 255.0);
    return out->t[0] ? CT_OK : ct_last_status();
}

/* u8 (B, 1, 28, 28) batch -> f32 in [0, 1], for BasicNet */
static CtStatus collate_image(const DataSample *s, int64_t n, DataBatch *out, void *user)
{
    CtStatus st = data_collate_default(s, n, out, NULL);
    if (st != CT_OK) return st;
    out->t[0] = tensor_div_scalar(tensor_cast(out->t[0], CT_F32), 255.0);
    return out->t[0] ? CT_OK : ct_last_status();
}

static bool g_basicnet;

static DataLoader *shard_loader(Trainer *t, int64_t bs, const TrainerLoaderArgs *a)
{
    return data_loader_create(
        t->user, &(DataLoaderArgs){.batch_size = bs,
                                   .shuffle = true,
                                   .collate = g_basicnet ? collate_image : collate_mlp});
}

int main(int argc, char **argv)
{
    const char *dir = DATA_FASHION_MNIST_DIR;
    int reps = 200;
    int64_t limit = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--model"))
            g_basicnet = !strcmp(argv[i + 1], "basicnet");
        else if (!strcmp(argv[i], "--limit-batches"))
            limit = atoll(argv[i + 1]);
    }
    Runtime *rt = runtime_create(NULL);
    if (!rt) return runtime_abort(NULL, ct_last_status());
    int R = runtime_rank(rt), W = runtime_world_size(rt);
    Dataset *full = data_fashion_mnist_create(&(DataFashionMnistArgs){.root = dir});
    if (!full) return runtime_abort(rt, ct_last_status());
    int64_t n = data_dataset_len(full), m = (n - R + W - 1) / W;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)m);
    for (int64_t k = 0; k < m; k++) idx[k] = R + k * W;
    Dataset *shard = data_subset_create(full, m, idx);
    free(idx);
    CtGenerator g = ct_generator(0, 0);
    Module *model = g_basicnet ? nn_model_basicnet(&g)
                               : nn_model_mlp(784, 2, (int64_t[]){128, 64}, 10, &g);
    Optimizer *opt =
        g_basicnet ? optim_adamw_create(model, &(AdamArgs){.lr = 1e-3,
                                                           .beta1 = 0.9,
                                                           .beta2 = 0.999,
                                                           .eps = 1e-8,
                                                           .weight_decay = 0.01})
                   : optim_sgd_create(model, &(SgdArgs){.lr = 0.001, .momentum = 0.9});
    NnLoss *loss = g_basicnet ? nn_loss_nll(NULL) : nn_loss_cross_entropy(NULL);
    Trainer *t = trainer_create(
        &(TrainerConfig){.model = model,
                         .loss = loss,
                         .optimizer = opt,
                         .runtime = rt,
                         .user = shard,
                         .hooks = {.create_train_dataloader = shard_loader}});
    if (limit > 0) trainer_limit_batches(t, limit, limit);
    int64_t batch = g_basicnet ? 64 : 32;
    double t0 = now();
    CtStatus st = trainer_train(t, &(TrainArgs){.train_dataset = shard,
                                                .num_epochs = 1,
                                                .per_device_batch_size = batch});
    double epoch = now() - t0;
    if (st != CT_OK) return runtime_abort(rt, st);
    RuntimeCommStats in_training = runtime_comm_stats(rt);
    int64_t updates = trainer_global_step(t);
    /* the gradient all-reduce alone */
    runtime_barrier(rt);
    RuntimeCommStats a = runtime_comm_stats(rt);
    for (int i = 0; i < reps && st == CT_OK; i++)
        st = runtime_reduce_gradients(rt, model);
    RuntimeCommStats b = runtime_comm_stats(rt);
    /* the stop-flag agreement alone */
    for (int i = 0; i < reps && st == CT_OK; i++) {
        double flag = 0;
        st = runtime_reduce_f64(rt, &flag, 1, RUNTIME_REDUCE_MAX);
    }
    RuntimeCommStats c = runtime_comm_stats(rt);
    if (st != CT_OK) return runtime_abort(rt, st);
    int64_t samples = updates * batch * W;
    runtime_print(rt, "processes %d epoch_s %.3f samples_per_s %.0f updates %lld\n", W,
                  epoch, (double)samples / epoch, (long long)updates);
    runtime_print(rt, "collectives_per_update %.2f collective_ms_per_update %.4f\n",
                  (double)in_training.calls / (double)updates,
                  1e3 * in_training.seconds / (double)updates);
    if (W > 1)
        runtime_print(rt, "grad_allreduce_ms %.4f grad_bytes_per_update %lld\n",
                      1e3 * (b.seconds - a.seconds) / reps,
                      (long long)((b.bytes - a.bytes) / reps));
    if (W > 1)
        runtime_print(rt, "stop_flag_reduce_us %.2f\n",
                      1e6 * (c.seconds - b.seconds) / reps);
    trainer_free(t);
    nn_loss_free(loss);
    optim_free(opt);
    nn_module_free(model);
    data_dataset_free(shard);
    data_dataset_free(full);
    runtime_free(rt);
    return 0;
}
