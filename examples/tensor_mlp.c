/* tensor_mlp — the 784-128-64-10 MLP trained on Fashion-MNIST with the raw
 * tensor API and autograd: no Trainer, no modules, no optimizer objects.
 *
 *   tensor_mlp [--data DIR] [--epochs N] [--limit N] [--batch N] [--lr X] [--seed N]
 *
 * DIR holds the four IDX files (gzip'd or not); the default is Debian's
 * dataset-fashion-mnist location. --limit trains on the first N samples
 * (for quick runs). Prints the loss per epoch and the final test accuracy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "ctrainer/tensor.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

typedef struct Split {
    int64_t n;
    uint8_t *images; /* (n, 784) */
    uint8_t *labels; /* (n) */
} Split;

/* Reads an IDX file (gzip'd or plain, zlib reads both); returns its payload
 * and the item count, checking the magic number and item size. */
static uint8_t *read_idx(const char *dir, const char *name, uint32_t magic, int64_t item,
                         int64_t *count)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = gzopen(path, "rb");
    }
    if (!f) {
        fprintf(stderr, "tensor_mlp: cannot open %s/%s(.gz)\n", dir, name);
        return NULL;
    }
    int ndims = (int)(magic & 0xff);
    unsigned char hdr[16];
    uint8_t *data = NULL;
    if (gzread(f, hdr, (unsigned)(4 + 4 * ndims)) != 4 + 4 * ndims) {
        fprintf(stderr, "tensor_mlp: %s: truncated header\n", path);
        goto done;
    }
    uint32_t m = (uint32_t)hdr[0] << 24 | hdr[1] << 16 | hdr[2] << 8 | hdr[3];
    if (m != magic) {
        fprintf(stderr, "tensor_mlp: %s: magic 0x%08x, expected 0x%08x\n", path, m,
                magic);
        goto done;
    }
    int64_t dims[3] = {1, 1, 1};
    for (int d = 0; d < ndims; d++) {
        const unsigned char *p = hdr + 4 + 4 * d;
        dims[d] = (int64_t)((uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]);
    }
    if (dims[1] * dims[2] != item) {
        fprintf(stderr, "tensor_mlp: %s: items of %lld bytes, expected %lld\n", path,
                (long long)(dims[1] * dims[2]), (long long)item);
        goto done;
    }
    size_t bytes = (size_t)(dims[0] * item);
    data = malloc(bytes);
    if (!data || gzread(f, data, (unsigned)bytes) != (int)bytes) {
        fprintf(stderr, "tensor_mlp: %s: truncated data\n", path);
        free(data);
        data = NULL;
        goto done;
    }
    *count = dims[0];
done:
    gzclose(f);
    return data;
}

static int load_split(const char *dir, const char *prefix, Split *s)
{
    char img[64], lab[64];
    snprintf(img, sizeof img, "%s-images-idx3-ubyte", prefix);
    snprintf(lab, sizeof lab, "%s-labels-idx1-ubyte", prefix);
    int64_t ni = 0, nl = 0;
    s->images = read_idx(dir, img, 0x00000803, 784, &ni);
    s->labels = s->images ? read_idx(dir, lab, 0x00000801, 1, &nl) : NULL;
    if (!s->labels) return -1;
    if (ni != nl) {
        fprintf(stderr, "tensor_mlp: %s: %lld images but %lld labels\n", prefix,
                (long long)ni, (long long)nl);
        return -1;
    }
    s->n = ni;
    return 0;
}

/* Batch of rows idx[0..b) as normalised f32 (b, 784) and i64 labels (b). */
static void make_batch(const Split *s, const int64_t *idx, int64_t b, uint8_t *xbuf,
                       int64_t *ybuf, Tensor **x, Tensor **y)
{
    for (int64_t i = 0; i < b; i++) {
        memcpy(xbuf + i * 784, s->images + idx[i] * 784, 784);
        ybuf[i] = s->labels[idx[i]];
    }
    Tensor *raw = tensor_from_data(xbuf, 2, (const int64_t[]){b, 784}, CT_U8, ct_cpu());
    /* ToTensor then Normalize(0.2860, 0.3530): (v/255 - mean) / std */
    *x = tensor_add_scalar(
        tensor_mul_scalar(tensor_cast(raw, CT_F32), 1.0 / (255 * 0.3530)),
        -0.2860 / 0.3530);
    *y = tensor_from_data(ybuf, 1, &b, CT_I64, ct_cpu());
}

typedef struct Mlp {
    Tensor *w[3], *b[3];   /* w: (out, in), b: (out) */
    Tensor *vw[3], *vb[3]; /* momentum buffers */
} Mlp;

static Tensor *forward(const Mlp *m, Tensor *x)
{
    Tensor *h = tensor_relu(tensor_linear(x, m->w[0], m->b[0]));
    h = tensor_relu(tensor_linear(h, m->w[1], m->b[1]));
    return tensor_linear(h, m->w[2], m->b[2]);
}

/* PyTorch's Linear init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias. */
static Tensor *param(CtGenerator *g, int ndim, const int64_t *shape, int64_t fan_in)
{
    double bound = 1.0 / sqrt((double)fan_in);
    Tensor *p = tensor_uniform(g, ndim, shape, -bound, bound, CT_F32, ct_cpu());
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

static double evaluate(const Mlp *m, const Split *test, uint8_t *xbuf, int64_t *ybuf,
                       int64_t *idx)
{
    int64_t correct = 0;
    bool prev = ct_set_grad_enabled(false);
    for (int64_t start = 0; start < test->n; start += 1000) {
        int64_t b = test->n - start < 1000 ? test->n - start : 1000;
        for (int64_t i = 0; i < b; i++) idx[i] = start + i;
        CtScope *s = ct_scope_open();
        Tensor *x, *y;
        make_batch(test, idx, b, xbuf, ybuf, &x, &y);
        Tensor *hit = tensor_eq(tensor_argmax(forward(m, x), 1, false), y);
        correct += (int64_t)tensor_item(tensor_sum_all(tensor_cast(hit, CT_F32)));
        ct_scope_close(s);
    }
    ct_set_grad_enabled(prev);
    return 100.0 * (double)correct / (double)test->n;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *dir = DEFAULT_DATA;
    int epochs = 5;
    int64_t limit = 0, batch = 32;
    double lr = 0.01, momentum = 0.9;
    uint64_t seed = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
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
        else {
            fprintf(stderr,
                    "usage: %s [--data DIR] [--epochs N] [--limit N] [--batch N] "
                    "[--lr X] [--seed N]\n",
                    argv[0]);
            return 2;
        }
    }
    Split train = {0}, test = {0};
    if (load_split(dir, "train", &train) || load_split(dir, "t10k", &test)) return 1;
    if (limit > 0 && limit < train.n) train.n = limit;
    if (limit > 0 && limit < test.n) test.n = limit;

    CtGenerator g = ct_generator(seed, 0);
    const int64_t sizes[4] = {784, 128, 64, 10};
    Mlp m;
    for (int l = 0; l < 3; l++) {
        m.w[l] = param(&g, 2, (const int64_t[]){sizes[l + 1], sizes[l]}, sizes[l]);
        m.b[l] = param(&g, 1, &sizes[l + 1], sizes[l]);
        m.vw[l] =
            tensor_zeros(2, (const int64_t[]){sizes[l + 1], sizes[l]}, CT_F32, ct_cpu());
        m.vb[l] = tensor_zeros(1, &sizes[l + 1], CT_F32, ct_cpu());
    }
    int64_t *perm = malloc((size_t)train.n * sizeof *perm);
    int64_t *idx = malloc(1000 * sizeof *idx), *ybuf = malloc(1000 * sizeof *ybuf);
    uint8_t *xbuf = malloc(1000 * 784);
    if (batch > 1000) batch = 1000;
    printf("tensor_mlp: 784-128-64-10 on %lld Fashion-MNIST images, batch %lld, "
           "SGD lr %g momentum %g, %d epochs\n",
           (long long)train.n, (long long)batch, lr, momentum, epochs);
    int status = 0;
    for (int epoch = 1; epoch <= epochs && !status; epoch++) {
        double t0 = now(), loss_sum = 0;
        ct_randperm(&g, train.n, perm);
        for (int64_t start = 0; start < train.n; start += batch) {
            int64_t b = train.n - start < batch ? train.n - start : batch;
            CtScope *s = ct_scope_open();
            Tensor *x, *y;
            make_batch(&train, perm + start, b, xbuf, ybuf, &x, &y);
            Tensor *loss = tensor_cross_entropy(forward(&m, x), y, NULL);
            double lv = tensor_item(loss);
            if (!loss || tensor_backward(loss, NULL) != CT_OK || !isfinite(lv)) {
                fprintf(stderr, "tensor_mlp: step failed: %s\n",
                        loss ? "loss is not finite" : ct_last_error());
                status = 1;
                ct_scope_close(s);
                break;
            }
            loss_sum += lv * (double)b;
            bool prev = ct_set_grad_enabled(false);
            for (int l = 0; l < 3; l++) {
                sgd_step(m.w[l], m.vw[l], lr, momentum);
                sgd_step(m.b[l], m.vb[l], lr, momentum);
            }
            ct_set_grad_enabled(prev);
            ct_scope_close(s);
        }
        if (status) break;
        double acc = evaluate(&m, &test, xbuf, ybuf, idx);
        printf("epoch %d/%d  train loss %.4f  test accuracy %.2f%%  (%.2f s)\n", epoch,
               epochs, loss_sum / (double)train.n, acc, now() - t0);
        fflush(stdout);
        if (epoch == epochs) printf("final test accuracy: %.2f%%\n", acc);
    }
    for (int l = 0; l < 3; l++) {
        tensor_free(m.w[l]);
        tensor_free(m.b[l]);
        tensor_free(m.vw[l]);
        tensor_free(m.vb[l]);
    }
    free(perm);
    free(idx);
    free(ybuf);
    free(xbuf);
    free(train.images);
    free(train.labels);
    free(test.images);
    free(test.labels);
    return status;
}
