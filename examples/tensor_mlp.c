/* tensor_mlp — the 784-128-64-10 MLP trained on Fashion-MNIST with the raw
 * tensor API and autograd: no Trainer, no modules, no optimizer objects.
 *
 *   tensor_mlp [--data DIR] [--epochs N] [--limit N] [--batch N] [--lr X] [--seed N]
 *              [--workers N]
 *
 * DIR holds the four IDX files (gzip'd or not); the default is Debian's
 * dataset-fashion-mnist location. --limit trains (and tests) on the first N
 * samples (for quick runs). Data comes through the Fashion-MNIST dataset and
 * DataLoader, with N loader worker threads (default 1; 0 loads inline).
 * Prints the loss per epoch and the final test accuracy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrainer/data.h"
#include "ctrainer/tensor.h"
#include "example_cuda.h"

/* A loader batch as the model's input: ToTensor then Normalize(0.2860, 0.3530),
 * (v/255 - mean) / std, on the (B, 1, 28, 28) u8 images flattened to (B, 784). */
static Tensor *normalize(Tensor *images)
{
    Tensor *flat = tensor_flatten(images, 1, -1);
    return tensor_add_scalar(
        tensor_mul_scalar(tensor_cast(flat, CT_F32), 1.0 / (255 * 0.3530)),
        -0.2860 / 0.3530);
}

typedef struct Mlp {
    Tensor *w[3], *b[3];   /* w: (out, in), b: (out) */
    Tensor *vw[3], *vb[3]; /* momentum buffers */
} Mlp;

static Tensor *forward(const Mlp *m, Tensor *x)
{
    /* relu(x wᵀ + b) as one op: no pre-activation tensor */
    Tensor *h = tensor_linear_relu(x, m->w[0], m->b[0]);
    h = tensor_linear_relu(h, m->w[1], m->b[1]);
    return tensor_linear(h, m->w[2], m->b[2]);
}

/* PyTorch's Linear init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias. */
static Tensor *param(CtGenerator *g, int ndim, const int64_t *shape, int64_t fan_in,
                     CtDevice dev)
{
    double bound = 1.0 / sqrt((double)fan_in);
    Tensor *p = tensor_uniform(g, ndim, shape, -bound, bound, CT_F32, dev);
    tensor_set_requires_grad(p, true);
    return p;
}

/* SGD with momentum (PyTorch's form): v = mu v + g; p -= lr v. */
static void sgd_step(Tensor *p, Tensor *v, double lr, double mu)
{
    Tensor *g = tensor_grad(p);
    tensor_copy_(v, tensor_add(tensor_mul_scalar(v, mu), g));
    tensor_copy_(p, tensor_sub(p, tensor_mul_scalar(v, lr)));
    tensor_zero_(g);
}

static double evaluate(const Mlp *m, DataLoader *test, int64_t n)
{
    int64_t correct = 0;
    bool prev = ct_set_grad_enabled(false);
    DataBatch b;
    data_loader_set_epoch(test, 0);
    while (data_loader_next(test, &b)) {
        CtScope *s = ct_scope_open();
        Tensor *hit =
            tensor_eq(tensor_argmax(forward(m, normalize(b.t[0])), 1, false), b.t[1]);
        correct += (int64_t)tensor_item(tensor_sum_all(tensor_cast(hit, CT_F32)));
        ct_scope_close(s);
    }
    ct_set_grad_enabled(prev);
    return 100.0 * (double)correct / (double)n;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Prints the usage; the exit status: 0 when asked for, else 2. */
static int usage(const char *prog, bool asked)
{
    fprintf(asked ? stdout : stderr,
            "usage: %s [--data DIR] [--epochs N] [--limit N] [--batch N] "
            "[--lr X] [--seed N] [--workers N] [--cuda]\n",
            prog);
    return asked ? 0 : 2;
}

int main(int argc, char **argv)
{
    const char *dir = DATA_FASHION_MNIST_DIR;
    int epochs = 5, workers = 1;
    int64_t limit = 0, batch = 32;
    double lr = 0.01, momentum = 0.9;
    uint64_t seed = 0;
    CtDevice dev;
    if (!example_cuda_flag(&argc, argv, &dev)) return 1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc) /* --help, or a flag without its value */
            return usage(argv[0], !strcmp(argv[i], "--help") && argc == 2);
        if (!strcmp(argv[i], "--data"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--epochs"))
            epochs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--limit"))
            limit = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--lr"))
            lr = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--workers"))
            workers = atoi(argv[i + 1]);
        else
            return usage(argv[0], false);
    }
    Dataset *full[2] = {data_fashion_mnist_create(&(DataFashionMnistArgs){.root = dir}),
                        NULL};
    if (full[0])
        full[1] =
            data_fashion_mnist_create(&(DataFashionMnistArgs){.root = dir, .test = true});
    /* --limit: the first N samples of each split */
    Dataset *split[2] = {NULL, NULL};
    for (int k = 0; k < 2 && full[0] && full[1]; k++) {
        int64_t n = data_dataset_len(full[k]);
        if (limit > 0 && limit < n) n = limit;
        int64_t *first = malloc((size_t)n * sizeof *first);
        for (int64_t i = 0; first && i < n; i++) first[i] = i;
        split[k] = first ? data_subset_create(full[k], n, first) : NULL;
        free(first);
    }
    if (batch > 1000) batch = 1000;
    DataLoader *train = NULL, *test = NULL;
    if (split[0] && split[1]) {
        train = data_loader_create(split[0], &(DataLoaderArgs){.batch_size = batch,
                                                               .shuffle = true,
                                                               .seed = seed,
                                                               .num_workers = workers,
                                                               .device = dev});
        test = data_loader_create(
            split[1],
            &(DataLoaderArgs){.batch_size = 1000, .num_workers = workers, .device = dev});
    }
    if (!train || !test) {
        fprintf(stderr, "tensor_mlp: %s\n", ct_last_error());
        data_loader_free(train);
        data_loader_free(test);
        for (int k = 0; k < 2; k++) {
            data_dataset_free(split[k]);
            data_dataset_free(full[k]);
        }
        return 1;
    }
    int64_t n_train = data_dataset_len(split[0]), n_test = data_dataset_len(split[1]);

    CtGenerator g = ct_generator(seed, 0);
    const int64_t sizes[4] = {784, 128, 64, 10};
    Mlp m;
    for (int l = 0; l < 3; l++) {
        m.w[l] = param(&g, 2, (const int64_t[]){sizes[l + 1], sizes[l]}, sizes[l], dev);
        m.b[l] = param(&g, 1, &sizes[l + 1], sizes[l], dev);
        m.vw[l] = tensor_zeros(2, (const int64_t[]){sizes[l + 1], sizes[l]}, CT_F32, dev);
        m.vb[l] = tensor_zeros(1, &sizes[l + 1], CT_F32, dev);
    }
    printf("tensor_mlp: 784-128-64-10 on %lld Fashion-MNIST images, batch %lld, "
           "SGD lr %g momentum %g, %d epochs\n",
           (long long)n_train, (long long)batch, lr, momentum, epochs);
    int status = 0;
    for (int epoch = 1; epoch <= epochs && !status; epoch++) {
        double t0 = now(), loss_sum = 0;
        data_loader_set_epoch(train, epoch - 1);
        DataBatch b;
        while (data_loader_next(train, &b)) {
            CtScope *s = ct_scope_open();
            Tensor *loss =
                tensor_cross_entropy(forward(&m, normalize(b.t[0])), b.t[1], NULL);
            double lv = tensor_item(loss);
            if (!loss || tensor_backward(loss, NULL) != CT_OK || !isfinite(lv)) {
                fprintf(stderr, "tensor_mlp: step failed: %s\n",
                        loss ? "loss is not finite" : ct_last_error());
                status = 1;
                ct_scope_close(s);
                break;
            }
            loss_sum += lv * (double)b.size;
            bool prev = ct_set_grad_enabled(false);
            for (int l = 0; l < 3; l++) {
                sgd_step(m.w[l], m.vw[l], lr, momentum);
                sgd_step(m.b[l], m.vb[l], lr, momentum);
            }
            ct_set_grad_enabled(prev);
            ct_scope_close(s);
        }
        if (!status && data_loader_status(train) != CT_OK) {
            fprintf(stderr, "tensor_mlp: %s\n", ct_last_error());
            status = 1;
        }
        if (status) break;
        double acc = evaluate(&m, test, n_test);
        printf("epoch %d/%d  train loss %.4f  test accuracy %.2f%%  (%.2f s)\n", epoch,
               epochs, loss_sum / (double)n_train, acc, now() - t0);
        fflush(stdout);
        if (epoch == epochs) printf("final test accuracy: %.2f%%\n", acc);
    }
    for (int l = 0; l < 3; l++) {
        tensor_free(m.w[l]);
        tensor_free(m.b[l]);
        tensor_free(m.vw[l]);
        tensor_free(m.vb[l]);
    }
    data_loader_free(train);
    data_loader_free(test);
    for (int k = 0; k < 2; k++) {
        data_dataset_free(split[k]);
        data_dataset_free(full[k]);
    }
    return status;
}
