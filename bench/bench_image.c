/* bench_image — image pipeline throughput: JPEG decode + RandomResizedCrop
 * (224) + RandomHorizontalFlip + ToTensor + Normalize, through ImageFolder
 * and the DataLoader at 0, 1 and 2 workers. It first writes ~200 JPEGs of
 * about 300x400 (two classes) into --dir, the folder that
 * bench/bench_image_torch.py reads for the PyTorch comparison:
 *
 *   bench_image [--dir DIR] [--n N] [--batch N] [--reps N] [--max-workers N]
 *
 * Prints images/s (median of --reps epochs) and a per-stage breakdown on
 * one thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

#include "bench.h"
#include "ctrainer/data.h"

/* A photo-like picture: smooth gradients plus per-pixel noise (so JPEG
 * has detail to code), written as a quality-90 JPEG. */
static int write_jpeg(const char *path, int w, int h, unsigned seed)
{
    uint8_t *px = malloc((size_t)w * h * 3);
    if (!px) return -1;
    unsigned s = seed * 2654435761u + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < 3; k++) {
                s = s * 1664525u + 1013904223u;
                int v = (x * (60 + 40 * k)) / w + (y * (150 - 30 * k)) / h +
                        (int)((seed * 37 + k * 50) % 60) + (int)(s >> 28);
                px[((size_t)y * w + x) * 3 + k] = (uint8_t)(v > 255 ? 255 : v);
            }
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(px);
        return -1;
    }
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 90, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = px + (size_t)ci.next_scanline * (size_t)w * 3;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(f);
    free(px);
    return 0;
}

static int make_images(const char *dir, int n)
{
    char path[512];
    mkdir(dir, 0755);
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/class%d", dir, c);
        mkdir(path, 0755);
    }
    for (int i = 0; i < n; i++) {
        /* about 300x400, varying a little as real photos do */
        int h = 280 + (i * 7) % 41, w = 380 + (i * 13) % 41;
        snprintf(path, sizeof path, "%s/class%d/img_%04d.jpg", dir, i % 2, i);
        if (write_jpeg(path, w, h, (unsigned)i) != 0) return -1;
    }
    return 0;
}

/* One pass over the dataset with get() on this thread; seconds. */
static double direct_pass(const Dataset *ds, int64_t epoch)
{
    double t0 = bench_now();
    for (int64_t i = 0; i < data_dataset_len(ds); i++) {
        CtScope *s = ct_scope_open();
        DataSample smp;
        if (data_dataset_get(ds, i, &(DataCtx){0, epoch, i}, &smp) != CT_OK) {
            fprintf(stderr, "bench_image: %s\n", ct_last_error());
            exit(1);
        }
        ct_scope_close(s);
    }
    return bench_now() - t0;
}

static double median_direct(const Dataset *ds, int reps)
{
    double t[64];
    for (int r = 0; r < reps; r++) t[r] = direct_pass(ds, r);
    return bench_median(t, reps);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp/ct_bench_images";
    int n = 200, reps = 5, max_workers = 2;
    int64_t batch = 32;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--n"))
            n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-workers"))
            max_workers = atoi(argv[i + 1]);
        else {
            fprintf(stderr,
                    "usage: %s [--dir DIR] [--n N] [--batch N] [--reps N] "
                    "[--max-workers N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64) reps = 5;
    if (make_images(dir, n) != 0) {
        fprintf(stderr, "bench_image: cannot write JPEGs into %s\n", dir);
        return 1;
    }
    DataTransformer *ts[] = {
        data_transform_random_resized_crop(224, 224, NULL),
        data_transform_random_horizontal_flip(0.5), data_transform_to_tensor(),
        data_transform_normalize(3, (const double[]){0.485, 0.456, 0.406},
                                 (const double[]){0.229, 0.224, 0.225})};
    DataTransformer *pipe = data_transform_compose(4, ts);
    DataTransformer *crop_only[] = {data_transform_random_resized_crop(224, 224, NULL)};
    DataTransformer *crop = data_transform_compose(1, crop_only);
    Dataset *raw = data_image_folder_create(dir, NULL);
    Dataset *cropped = data_image_folder_create(
        dir, &(DataImageFolderArgs){.transform = data_transform_as_fn(crop)});
    Dataset *ds = data_image_folder_create(
        dir, &(DataImageFolderArgs){.transform = data_transform_as_fn(pipe)});
    if (!pipe || !crop || !raw || !cropped || !ds) {
        fprintf(stderr, "bench_image: %s\n", ct_last_error());
        return 1;
    }
    printf(
        "bench_image: %d JPEGs of ~300x400 (quality 90) in %s; RandomResizedCrop(224) + "
        "flip + ToTensor + Normalize; batch %lld; median of %d epochs\n",
        n, dir, (long long)batch, reps);
    double t_dec = median_direct(raw, reps), t_crop = median_direct(cropped, reps);
    double t_all = median_direct(ds, reps);
    printf("one thread, get() in a loop:\n");
    printf("  decode only              %8.0f images/s  (%.2f ms/image)\n", n / t_dec,
           1e3 * t_dec / n);
    printf("  decode + RandomResizedCrop %6.0f images/s  (+%.2f ms)\n", n / t_crop,
           1e3 * (t_crop - t_dec) / n);
    printf(
        "  full pipeline            %8.0f images/s  (+%.2f ms flip/ToTensor/Normalize)\n",
        n / t_all, 1e3 * (t_all - t_crop) / n);
    printf("DataLoader (shuffle, batch %lld, collated to (B, 3, 224, 224) f32):\n",
           (long long)batch);
    printf("  %-8s %12s %10s\n", "workers", "images/s", "epoch s");
    for (int nw = 0; nw <= max_workers; nw++) {
        DataLoader *dl = data_loader_create(
            ds,
            &(DataLoaderArgs){.batch_size = batch, .shuffle = true, .num_workers = nw});
        if (!dl) {
            fprintf(stderr, "bench_image: %s\n", ct_last_error());
            return 1;
        }
        double t[64];
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            DataBatch b;
            while (data_loader_next(dl, &b)) {
            }
            if (data_loader_status(dl) != CT_OK) {
                fprintf(stderr, "bench_image: %s\n", ct_last_error());
                return 1;
            }
            t[r] = bench_now() - t0;
        }
        double m = bench_median(t, reps);
        printf("  %-8d %12.0f %10.3f\n", nw, n / m, m);
        data_loader_free(dl);
    }
    data_dataset_free(ds);
    data_dataset_free(cropped);
    data_dataset_free(raw);
    data_transform_free(pipe);
    data_transform_free(crop);
    return 0;
}
