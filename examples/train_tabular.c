/* train_tabular — a CSV a user brings, end to end: read it (a metadata
 * line skipped, gzip'd or not), split 80/20 with a seed, standardise the
 * features with statistics fitted on the train split, train an MLP with the
 * Trainer (metrics to a JSON lines file and TensorBoard), save the model
 * and the scaler in one safetensors file, then load both into a fresh
 * model and classify the held-out rows from their raw features.
 *
 *   train_tabular [--csv FILE] [--out DIR] [--epochs N]
 *
 * Without --csv it writes a synthetic two-class table to DIR/table.csv
 * whose two features differ in scale by 10^5 (the case standardisation is
 * for). Prints the held-out accuracy of the trainer and of the reloaded
 * model; exits non-zero when they differ or training fails.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctrainer/ctrainer.h"
#include "example_cuda.h"

typedef struct Opts {
    const char *csv, *out;
    int64_t epochs;
} Opts;

static int parse(int argc, char **argv, Opts *o)
{
    *o = (Opts){NULL, "tabular_run", 20};
    CtDevice dev; /* the Trainer's runtime places the model */
    if (!example_cuda_flag(&argc, argv, &dev)) return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            o->csv = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            o->out = argv[++i];
        else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            o->epochs = atoll(argv[++i]);
        else
            return fprintf(stderr, "usage: train_tabular [--csv FILE] [--out DIR] "
                                   "[--epochs N] [--cuda]\n"),
                   2;
    }
    if (o->epochs > 0) return 0;
    fprintf(stderr, "train_tabular: --epochs must be at least 1\n");
    return 2;
}

/* 500 rows "x0,x1,label": x0 in [0, 1000), x1 in [-0.01, 0.01); label 1
 * when x0 / 1000 - 0.5 + 50 x1 > 0; a metadata line first. */
static int write_table(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return perror(path), 1;
    fprintf(f, "500,2,negative,positive\nx0,x1,label\n");
    for (uint32_t i = 0; i < 500; i++) {
        uint32_t r[4];
        ct_philox4x32_10((const uint32_t[4]){i, 0, 0, 0}, (const uint32_t[2]){11, 0}, r);
        double x0 = r[0] / 4294967296.0 * 1000, x1 = (r[1] / 4294967296.0 - 0.5) * 0.02;
        fprintf(f, "%.4f,%.6f,%d\n", x0, x1, x0 / 1000 - 0.5 + 50 * x1 > 0);
    }
    return fclose(f) != 0;
}

/* Accuracy of model (on the CPU) on the raw rows of d, scaled by sc:
 * inference as a deployed program would do it. NAN on failure, with the
 * error recorded. */
static double accuracy(Module *model, const DataScaler *sc, const Dataset *d)
{
    int64_t n = data_dataset_len(d), correct = 0;
    nn_module_eval(model);
    ct_set_grad_enabled(false);
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++) {
        CtScope *s = ct_scope_open();
        DataSample smp;
        Tensor *pred = NULL;
        if (data_dataset_get(d, i, NULL, &smp) == CT_OK)
            pred = tensor_argmax(nn_forward(model, data_scaler_apply(sc, smp.t[0])), 0,
                                 false);
        ok = pred != NULL;
        correct += ok && tensor_item(pred) == tensor_item(smp.t[1]);
        ct_scope_close(s);
    }
    ct_set_grad_enabled(true);
    return ok ? (double)correct / (double)n : NAN;
}

static int fail(const char *what)
{
    fprintf(stderr, "train_tabular: %s: %s\n", what, ct_last_error());
    return 1;
}

/* Saves the model and the scaler (under "scaler.") in one file. */
static CtStatus save(const Module *model, const DataScaler *sc, const char *path)
{
    CtStateDict *sd = nn_module_state_dict(model);
    CtStatus st = sd ? data_scaler_state_dict_add(sc, sd, "scaler.") : ct_last_status();
    if (st == CT_OK) st = nn_safetensors_save(path, sd, 0, NULL, NULL);
    ct_state_dict_free(sd);
    return st;
}

/* A fresh model and the scaler from the file: the scaler's entries come
 * out of the state dict, the rest must match the model exactly. */
static Module *load(const char *path, DataScaler **sc)
{
    CtGenerator g = ct_generator(99, 0); /* any init: every weight is loaded */
    Module *m = nn_model_mlp(2, 1, (int64_t[]){16}, 2, &g);
    CtStateDict *sd = nn_safetensors_load(path, ct_cpu());
    *sc = sd ? data_scaler_from_state_dict(sd, "scaler.") : NULL;
    CtStatus st = *sc ? nn_module_load_state_dict(m, sd, true, NULL) : ct_last_status();
    ct_state_dict_free(sd);
    if (m && st == CT_OK) return m;
    nn_module_free(m);
    data_scaler_free(*sc);
    *sc = NULL;
    return NULL;
}

int main(int argc, char **argv)
{
    Opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    char table[1024], model_path[1024], metrics[1024], logs[1024];
    mkdir(o.out, 0777);
    snprintf(table, sizeof table, "%s/table.csv", o.out);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", o.out);
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", o.out);
    snprintf(logs, sizeof logs, "%s/tensorboard", o.out);
    if (!o.csv && write_table(table)) return 1;

    /* the data: header "x0,x1,label" after one metadata line */
    Dataset *all = data_csv_dataset_create(&(DataCsvArgs){.path = o.csv ? o.csv : table,
                                                          .skip_rows = 1,
                                                          .label_name = "label",
                                                          .num_classes = 2});
    if (!all) return fail("reading the table");
    Dataset *split[2] = {NULL, NULL};
    if (data_random_split_fractions(all, 2, (double[]){0.8, 0.2}, 42, split) != CT_OK)
        return fail("splitting");
    DataScaler *sc = data_scaler_fit(split[0], 0, DATA_SCALE_STANDARDIZE);
    if (!sc) return fail("fitting the scaler");
    Dataset *train = data_transformed_create(split[0], 0, data_scaler_transform(sc));
    Dataset *eval = data_transformed_create(split[1], 0, data_scaler_transform(sc));

    CtGenerator g = ct_generator(0, 0);
    Module *model = nn_model_mlp(2, 1, (int64_t[]){16}, 2, &g);
    Optimizer *opt = optim_adamw_create(
        model,
        &(AdamArgs){
            .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01});
    NnLoss *loss = nn_loss_cross_entropy(NULL);
    Callback *cbs[] = {
        callback_metrics_logger_create(&(MetricsLoggerArgs){.jsonl_path = metrics}),
        callback_tensorboard_create(
            &(TensorBoardArgs){.log_dir = logs, .log_every_n_steps = 10}),
        callback_log_metrics_create(NULL)};
    Trainer *t = trainer_create(&(TrainerConfig){.model = model,
                                                 .loss = loss,
                                                 .optimizer = opt,
                                                 .callbacks = cbs,
                                                 .n_callbacks = 3});
    CtStatus st = t ? trainer_train(t, &(TrainArgs){.train_dataset = train,
                                                    .eval_dataset = eval,
                                                    .num_epochs = o.epochs,
                                                    .per_device_batch_size = 16})
                    : ct_last_status();
    if (st != CT_OK) return fail("training");
    /* with --cuda the Trainer moved the model to the GPU: back to the CPU */
    if (nn_module_to(model, ct_cpu()) != CT_OK)
        return fail("moving the model to the CPU");
    double acc = accuracy(model, sc, split[1]);
    if (isnan(acc)) return fail("evaluating the trained model");
    if (save(model, sc, model_path) != CT_OK) return fail("saving");

    DataScaler *sc2;
    Module *reloaded = load(model_path, &sc2);
    if (!reloaded) return fail("loading");
    double acc2 = accuracy(reloaded, sc2, split[1]);
    if (isnan(acc2)) return fail("evaluating the reloaded model");
    printf("held-out accuracy %.2f%% (trained model), %.2f%% (reloaded from %s)\n",
           100 * acc, 100 * acc2, model_path);
    printf("plot the curves with: ctrainer plot %s -o %s/curves.svg\n", metrics, o.out);
    rc = acc == acc2 ? 0 : 1;

    nn_module_free(reloaded);
    data_scaler_free(sc2);
    trainer_free(t);
    nn_loss_free(loss);
    optim_free(opt);
    nn_module_free(model);
    data_dataset_free(train);
    data_dataset_free(eval);
    data_scaler_free(sc);
    data_dataset_free(split[0]);
    data_dataset_free(split[1]);
    data_dataset_free(all);
    return rc;
}
