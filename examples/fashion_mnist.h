/* fashion_mnist.h — the plumbing shared by the Trainer examples (train_mnist,
 * train_mnist_metrics_*, train_basicnet, custom_trainer): command-line
 * options, the Fashion-MNIST datasets, the collate functions that turn u8
 * images into model inputs, and a small test-accuracy callback. Each example
 * keeps what it demonstrates in its own file.
 *
 * Header-only (static functions): every example is one program.
 */
#ifndef EXAMPLES_FASHION_MNIST_H
#define EXAMPLES_FASHION_MNIST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrainer/ctrainer.h"

/* ------------------------------------------------------------ options */

typedef struct ExampleOptions {
    const char *data;      /* --data DIR: the four IDX files */
    int64_t epochs;        /* --epochs N */
    int64_t limit_batches; /* --limit-batches N: LimitBatches(N) (0: none) */
    uint64_t seed;         /* --seed N: weights and the validation split */
    bool progress_bar;     /* --no-progress-bar turns it off */
} ExampleOptions;

/* Parses the common options over the defaults in *o. Returns false (after
 * printing the usage) on an unknown option or a missing value. */
static inline bool example_parse(int argc, char **argv, ExampleOptions *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-progress-bar")) {
            o->progress_bar = false;
            continue;
        }
        if (!v) goto usage;
        if (!strcmp(a, "--data"))
            o->data = v;
        else if (!strcmp(a, "--epochs"))
            o->epochs = atoll(v);
        else if (!strcmp(a, "--limit-batches"))
            o->limit_batches = atoll(v);
        else if (!strcmp(a, "--seed"))
            o->seed = strtoull(v, NULL, 10);
        else
            goto usage;
        i++;
    }
    return true;
usage:
    fprintf(stderr,
            "usage: %s [--data DIR] [--epochs N] [--limit-batches N] [--seed N] "
            "[--no-progress-bar]\n"
            "  CTRAINER_LIMIT_BATCHES=N in the environment also limits the batches\n",
            argv[0]);
    return false;
}

static inline double example_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ----------------------------------------------------------- datasets */

/* The 60 000 training and 10 000 test images (u8 (1, 28, 28), i64 label).
 * Both NULL on failure (error recorded). */
static inline bool example_load(const char *dir, Dataset **train, Dataset **test)
{
    *train = data_fashion_mnist_create(&(DataFashionMnistArgs){.root = dir});
    *test = *train ? data_fashion_mnist_create(
                         &(DataFashionMnistArgs){.root = dir, .test = true})
                   : NULL;
    if (*test) return true;
    data_dataset_free(*train);
    *train = NULL;
    return false;
}

/* ------------------------------------------------------------ collate
 *
 * The datasets keep the images as u8 (47 MB for the training set instead
 * of 188 MB as f32); each batch is converted once, after the default
 * collate, instead of per sample. Pass one of these as TrainArgs.collate_fn
 * and EvalArgs.collate_fn. */

/* torchvision's ToTensor on a batch, flattened for an MLP: (B, 784) f32 in
 * [0, 1]. */
static inline CtStatus collate_flat_scaled(const DataSample *s, int64_t n, DataBatch *out,
                                           void *user)
{
    (void)user;
    CtStatus st = data_collate_default(s, n, out, NULL);
    if (st != CT_OK) return st;
    Tensor *x = tensor_mul_scalar(tensor_flatten(tensor_cast(out->t[0], CT_F32), 1, -1),
                                  1.0 / 255.0);
    if (!x) return ct_last_status();
    out->t[0] = x; /* the u8 batch stays in the loader's scope */
    return CT_OK;
}

/* Fashion-MNIST's mean and standard deviation of v/255 over the training set */
#define FASHION_MNIST_MEAN 0.2860
#define FASHION_MNIST_STD  0.3530

/* ToTensor + Normalize(mean, std) on a batch: (B, 1, 28, 28) f32. */
static inline CtStatus collate_normalized(const DataSample *s, int64_t n, DataBatch *out,
                                          void *user)
{
    (void)user;
    CtStatus st = data_collate_default(s, n, out, NULL);
    if (st != CT_OK) return st;
    /* (v/255 - mean) / std as one multiply-add */
    Tensor *x = tensor_add_scalar(tensor_mul_scalar(tensor_cast(out->t[0], CT_F32),
                                                    1.0 / (255.0 * FASHION_MNIST_STD)),
                                  -FASHION_MNIST_MEAN / FASHION_MNIST_STD);
    if (!x) return ct_last_status();
    out->t[0] = x;
    return CT_OK;
}

/* ------------------------------------------- test-accuracy callback
 *
 * Accuracy (the metrics layer's) over the model outputs of every eval step
 * of the last evaluation run (trainer_evaluate). Read it with
 * test_accuracy_value after the run. */

typedef struct TestAccuracy {
    Callback base;
    Metric *acc;
    double value; /* of the last evaluation run; NAN before */
} TestAccuracy;

static inline CtStatus ta_start(Callback *cb, Trainer *t)
{
    (void)t;
    metric_reset(((TestAccuracy *)cb)->acc);
    return CT_OK;
}

static inline CtStatus ta_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                                   const TrainerBatchOutput *out, int64_t step)
{
    (void)t;
    (void)step;
    return metric_update(((TestAccuracy *)cb)->acc, out->model_outputs, b->t[1]);
}

static inline CtStatus ta_end(Callback *cb, Trainer *t)
{
    (void)t;
    TestAccuracy *ta = (TestAccuracy *)cb;
    return metric_compute(ta->acc, &ta->value);
}

static inline void ta_free(Callback *cb)
{
    metric_free(((TestAccuracy *)cb)->acc);
    free(cb);
}

static const CallbackVtable test_accuracy_vt = {
    .type = "TestAccuracy",
    .free = ta_free,
    .on_evaluation_run_start = ta_start,
    .on_eval_step_end = ta_step_end,
    .on_evaluation_run_end = ta_end,
};

static inline Callback *test_accuracy_create(void)
{
    TestAccuracy *ta = calloc(1, sizeof *ta);
    if (!ta) return NULL;
    ta->base.vt = &test_accuracy_vt;
    ta->value = NAN;
    ta->acc = metric_accuracy_create(&(MetricClassArgs){.num_classes = 10});
    if (!ta->acc) {
        free(ta);
        return NULL;
    }
    return &ta->base;
}

static inline double test_accuracy_value(Trainer *t)
{
    Callback *cb = callback_list_find(trainer_callbacks(t), "TestAccuracy");
    return cb ? ((TestAccuracy *)cb)->value : NAN;
}

/* --------------------------------------------------------- callbacks */

/* The callback list of an example: LimitBatches(limit) when limit > 0, the
 * n_first given (e.g. metric callbacks), pytorch-accelerated's defaults, then
 * TestAccuracy. Writes at most cap entries; returns the count or -1 (every
 * callback created so far freed). */
static inline int example_callbacks(Callback **out, int cap, int64_t limit,
                                    bool progress_bar, int n_first,
                                    Callback *const *first)
{
    int n = 0;
    if (limit > 0) out[n++] = callback_limit_batches_create(limit);
    for (int i = 0; i < n_first; i++) out[n++] = first[i];
    int nd = callbacks_default(out + n, cap - n - 1, progress_bar);
    if (nd < 0) {
        for (int i = 0; i < n; i++) callback_free(out[i]);
        return -1;
    }
    n += nd;
    out[n++] = test_accuracy_create();
    return n;
}

/* Exit status of an example: non-zero when training failed or TerminateOnNaN
 * stopped it. */
static inline int example_status(Trainer *t, CtStatus st)
{
    /* names the failed rank and, when distributed, ends every rank */
    if (st != CT_OK) return runtime_abort(trainer_runtime(t), st);
    Callback *nan = callback_list_find(trainer_callbacks(t), "TerminateOnNaN");
    if (callback_terminate_on_nan_triggered(nan)) {
        fprintf(stderr, "stopped: %s\n", trainer_stop_reason(t));
        return 1;
    }
    return 0;
}

#endif
