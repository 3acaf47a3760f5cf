/* fashion_mnist.h — the plumbing shared by the Fashion-MNIST examples
 * (train_mnist, train_mnist_metrics_*, the three BasicNet programs,
 * custom_trainer): command-line options, the Fashion-MNIST datasets and
 * their split, the quickstart MLP and BasicNet with their optimizers,
 * the collate functions that turn u8 images into model inputs, a small
 * test-accuracy callback, the options that act on a built trainer, and the
 * final evaluation. Each example keeps what it demonstrates in its own
 * file.
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
#include "example_cuda.h"

/* ------------------------------------------------------------ options */

typedef struct ExampleOptions {
    const char *data;      /* --data DIR: the four IDX files */
    int64_t epochs;        /* --epochs N */
    int64_t limit_batches; /* --limit-batches N: trainer_limit_batches (0: none) */
    uint64_t seed;         /* --seed N: weights and the validation split */
    bool progress_bar;     /* --no-progress-bar turns it off */
    bool cuda;             /* --cuda: on the GPU (example_cuda.h) */
} ExampleOptions;

/* Parses the common options over the defaults in *o. Returns false (after
 * printing the usage) on an unknown option or a missing value, or (after
 * saying so) on --cuda without a GPU. */
static inline bool example_parse(int argc, char **argv, ExampleOptions *o)
{
    /* the Trainer reads CTRAINER_LIMIT_BATCHES itself; the hand-written
     * loops read it here (a value it refuses stays the Trainer's to report) */
    const char *env = getenv("CTRAINER_LIMIT_BATCHES");
    char *end = NULL;
    long long n = env && *env ? strtoll(env, &end, 10) : 0;
    if (n > 0 && !*end) o->limit_batches = n;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-progress-bar")) {
            o->progress_bar = false;
            continue;
        }
        if (!strcmp(a, "--cuda")) {
            CtDevice dev;
            if (!example_use_cuda(argv[0], &dev)) return false;
            o->cuda = true;
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
            "[--no-progress-bar] [--cuda]\n"
            "  CTRAINER_LIMIT_BATCHES=N in the environment also limits the batches\n",
            argv[0]);
    return false;
}

/* Removes "FLAG VALUE" from argv (the last one given wins) and returns
 * VALUE, or dflt when FLAG is absent, so the rest can go to example_parse. */
static inline const char *example_take_option(int *argc, char **argv, const char *flag,
                                              const char *dflt)
{
    const char *value = dflt;
    int kept = 1;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(argv[i], flag) && i + 1 < *argc)
            value = argv[++i];
        else
            argv[kept++] = argv[i];
    }
    *argc = kept;
    return value;
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
 * of the last evaluation run (trainer_evaluate), gathered from every
 * process without the sharded loader's duplicates (trainer_gather_for_metrics),
 * so each process holds the accuracy over the whole test set. Read it with
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
    (void)step;
    return metric_update(((TestAccuracy *)cb)->acc,
                         trainer_gather_for_metrics(t, out->model_outputs),
                         trainer_gather_for_metrics(t, b->t[1]));
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

/* ----------------------------------------------------------- set-up
 *
 * What every Trainer example holds and frees the same way. A main reads:
 *
 *     Example ex = {.name = "train_mnist", .o = {.epochs = 8}};
 *     int rc = example_begin(&ex, argc, argv, true);
 *     if (rc) return rc;
 *     ... build a Trainer over ex.model, ex.loss, ex.opt (example_mlp);
 *         example_trainer_ready; trainer_train; example_test ...
 *     example_end(&ex);
 */

typedef struct Example {
    const char *name;     /* the program, prefixed to set-up errors */
    ExampleOptions o;     /* defaults in, parsed options out (data NULL:
                             DATA_FASHION_MNIST_DIR; progress_bar on) */
    Dataset *full, *test; /* the 60 000 training and 10 000 test images */
    Dataset *train, *val; /* the seeded 55 000 / 5 000 split of full, or full
                             itself and NULL without a split */
    Dataset *split[2];    /* owned halves of the split */
    Module *model;
    Optimizer *opt;
    NnLoss *loss;
} Example;

/* Prints "<name>: <last error>" and returns the exit status 1. */
static inline int example_fail(const Example *ex)
{
    fprintf(stderr, "%s: %s\n", ex->name, ct_last_error());
    return 1;
}

/* Frees what the example holds (after its trainer: it borrows them). */
static inline void example_end(Example *ex)
{
    nn_loss_free(ex->loss);
    optim_free(ex->opt);
    nn_module_free(ex->model);
    data_dataset_free(ex->split[0]);
    data_dataset_free(ex->split[1]);
    data_dataset_free(ex->test);
    data_dataset_free(ex->full);
    memset(ex, 0, sizeof *ex);
}

/* Parses the options and loads the data, with the train / validation split
 * when `split`. Returns 0, or the exit status (2 after the usage, 1 after
 * the error; nothing left to free). */
static inline int example_begin(Example *ex, int argc, char **argv, bool split)
{
    ex->o.progress_bar = true;
    if (!example_parse(argc, argv, &ex->o)) return 2;
    bool ok = example_load(ex->o.data, &ex->full, &ex->test);
    if (ok && split)
        ok = data_random_split(ex->full, 2, (int64_t[]){55000, 5000}, ex->o.seed,
                               ex->split) == CT_OK;
    if (!ok) {
        int rc = example_fail(ex);
        example_end(ex);
        return rc;
    }
    ex->train = split ? ex->split[0] : ex->full;
    ex->val = ex->split[1];
    return 0;
}

/* pytorch-accelerated's quickstart model: the 784-128-64-10 MLP (weights
 * from --seed), SGD(lr, momentum 0.9), cross entropy. False on failure. */
static inline bool example_mlp(Example *ex, double lr)
{
    CtGenerator g = ct_generator(ex->o.seed, 0);
    ex->model = nn_model_mlp(784, 2, (int64_t[]){128, 64}, 10, &g);
    ex->opt = ex->model
                  ? optim_sgd_create(ex->model, &(SgdArgs){.lr = lr, .momentum = 0.9})
                  : NULL;
    ex->loss = ex->opt ? nn_loss_cross_entropy(NULL) : NULL;
    return ex->loss != NULL;
}

/* AdamW over m with PyTorch's defaults but lr (betas 0.9/0.999, eps 1e-8,
 * weight_decay 0.01); NULL m returns NULL keeping the first error. */
static inline Optimizer *example_adamw(Module *m, double lr)
{
    return m ? optim_adamw_create(m, &(AdamArgs){.lr = lr,
                                                 .beta1 = 0.9,
                                                 .beta2 = 0.999,
                                                 .eps = 1e-8,
                                                 .weight_decay = 0.01})
             : NULL;
}

/* train_basicnet's model and optimizer (its three versions share them):
 * nn_model_basicnet from g (which then drives the dropouts, so it must
 * outlive the model), AdamW with PyTorch's defaults (lr 1e-3, betas
 * 0.9/0.999, eps 1e-8, weight_decay 0.01), NLL loss on the
 * log-probabilities. False on failure. */
static inline bool example_basicnet(Example *ex, CtGenerator *g)
{
    ex->model = nn_model_basicnet(g);
    ex->opt = example_adamw(ex->model, 1e-3);
    ex->loss = ex->opt ? nn_loss_nll(NULL) : NULL;
    return ex->loss != NULL;
}

/* The main of a BasicNet program with its own loop (basicnet_ddp,
 * basicnet_runtime): parses the options (1 epoch by default), loads the
 * data, creates the runtime and example_basicnet, calls run, and ends a
 * failed run on every process (runtime_abort). Returns the exit status. */
static inline int example_basicnet_main(const char *name, int argc, char **argv,
                                        CtStatus (*run)(Runtime *rt, Example *ex))
{
    Example ex = {.name = name, .o = {.epochs = 1}};
    int rc = example_begin(&ex, argc, argv, false);
    if (rc) return rc;
    Runtime *rt = runtime_create(NULL);
    CtGenerator g = ct_generator(ex.o.seed, 0); /* weights, then dropout */
    CtStatus st = rt && example_basicnet(&ex, &g) ? run(rt, &ex) : ct_last_status();
    if (st != CT_OK) rc = runtime_abort(rt, st);
    example_end(&ex);
    runtime_free(rt);
    return rc;
}

/* A callback list for examples that put their own callbacks BEFORE the
 * defaults: the n_first given, then callbacks_default(progress_bar). Writes
 * at most cap entries; returns the count, or -1 (every callback freed). */
static inline int example_callbacks(Callback **out, int cap, bool progress_bar,
                                    int n_first, Callback *const *first)
{
    int n = 0;
    for (; n < n_first; n++) out[n] = first[n];
    int nd = callbacks_default(out + n, cap - n, progress_bar);
    if (nd < 0) {
        for (int i = 0; i < n; i++) callback_free(out[i]);
        return -1;
    }
    return n + nd;
}

/* The options that act on a built trainer: --limit-batches N caps train and
 * eval batches (over CTRAINER_LIMIT_BATCHES), --no-progress-bar drops the
 * default ProgressBar; then TestAccuracy goes last. */
static inline CtStatus example_trainer_ready(const Example *ex, Trainer *t)
{
    if (ex->o.limit_batches > 0)
        trainer_limit_batches(t, ex->o.limit_batches, ex->o.limit_batches);
    if (!ex->o.progress_bar)
        callback_free(callback_list_remove(trainer_callbacks(t), "ProgressBar"));
    return trainer_add_callback(t, test_accuracy_create());
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

/* trainer_evaluate on the test images; the example's exit status. */
static inline int example_test(const Example *ex, Trainer *t, int64_t batch_size,
                               DataCollateFn collate)
{
    CtStatus st = trainer_evaluate(t, &(EvalArgs){.dataset = ex->test,
                                                  .per_device_batch_size = batch_size,
                                                  .collate_fn = collate});
    return example_status(t, st);
}

#endif
