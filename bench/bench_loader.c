/* bench_loader — DataLoader throughput on Fashion-MNIST (60000 train images)
 * with a per-sample ToTensor + Normalize equivalent (u8 -> f32, (v/255 - m)/s)
 * at 0, 1 and 2 worker threads. Prints samples/s (median of --reps epochs).
 * --raw 1: no per-sample transform, the u8 samples stacked by the default
 * collate (the examples' loaders, which convert whole batches).
 *
 *   bench_loader [--data DIR] [--batch N] [--reps N] [--max-workers N] [--raw 1]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ctrainer/data.h"

/* ToTensor then Normalize(0.2860, 0.3530), per sample. */
static Tensor *to_tensor_normalize(Tensor *img, const DataCtx *ctx, void *user)
{
    return tensor_add_scalar(
        tensor_mul_scalar(tensor_cast(img, CT_F32), 1.0 / (255 * 0.3530)),
        -0.2860 / 0.3530);
}

int main(int argc, char **argv)
{
    const char *dir = DATA_FASHION_MNIST_DIR;
    int64_t batch = 64;
    int reps = 3, max_workers = 2, raw = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--batch"))
            batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-workers"))
            max_workers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--raw"))
            raw = atoi(argv[i + 1]);
        else {
            fprintf(stderr,
                    "usage: %s [--data DIR] [--batch N] [--reps N] [--max-workers N] "
                    "[--raw 1]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64) reps = 3;
    double t0 = bench_now();
    Dataset *ds = data_fashion_mnist_create(&(DataFashionMnistArgs){
        .root = dir, .transform = {raw ? NULL : to_tensor_normalize, NULL}});
    if (!ds) {
        fprintf(stderr, "bench_loader: %s\n", ct_last_error());
        return 1;
    }
    int64_t n = data_dataset_len(ds);
    printf("bench_loader: Fashion-MNIST train, %lld samples, read in %.2f s; batch %lld, "
           "shuffle, %s\n",
           (long long)n, bench_now() - t0, (long long)batch,
           raw ? "no per-sample transform" : "per-sample cast+normalize");
    printf("%-8s %12s %10s\n", "workers", "samples/s", "epoch s");
    for (int nw = 0; nw <= max_workers; nw++) {
        DataLoader *dl = data_loader_create(
            ds,
            &(DataLoaderArgs){.batch_size = batch, .shuffle = true, .num_workers = nw});
        if (!dl) {
            fprintf(stderr, "bench_loader: %s\n", ct_last_error());
            return 1;
        }
        double times[64];
        for (int r = 0; r < reps; r++) {
            double t = bench_now();
            int64_t seen = 0;
            DataBatch b;
            data_loader_set_epoch(dl, r);
            while (data_loader_next(dl, &b)) seen += b.size;
            times[r] = bench_now() - t;
            if (seen != n || data_loader_status(dl) != CT_OK) {
                fprintf(stderr, "bench_loader: %s\n", ct_last_error());
                return 1;
            }
        }
        double med = bench_median(times, reps);
        printf("%-8d %12.0f %10.3f\n", nw, (double)n / med, med);
        data_loader_free(dl);
    }
    data_dataset_free(ds);
    return 0;
}
