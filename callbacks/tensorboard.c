/* TensorBoard: scalars in a TensorBoard event file (tb_event.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cb_internal.h"
#include "ctrainer/table.h"
#include "tb_event.h"

typedef struct TensorBoard {
    Callback base;
    char *log_dir, *path;
    int64_t every;
    FILE *f;
    /* metric name -> number of values it had when last written (int64_t) */
    CtTable written;
    int64_t steps;   /* train steps seen by this callback, all runs */
    int64_t samples; /* samples since the last step log */
    double t_last;   /* when the last step log (or the run) started */
    int64_t epoch_samples;
    double t_epoch, epoch_rate; /* train epoch start; its samples/s */
} TensorBoard;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void tb_free(Callback *cb)
{
    TensorBoard *b = (TensorBoard *)cb;
    if (b->f) fclose(b->f);
    ct_table_free(&b->written);
    free(b->log_dir);
    free(b->path);
    free(b);
}

/* Opens log_dir/events.out.tfevents.<seconds>.<host>.<pid> and writes its
 * first event, once per callback (later runs append). */
static CtStatus open_file(TensorBoard *b)
{
    if (b->f) return CT_OK;
    CtStatus st = cb_make_dirs("TensorBoard", b->log_dir);
    if (st != CT_OK) return st;
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    size_t n = strlen(b->log_dir) + strlen(host) + 96;
    char *path = malloc(n);
    if (!path) return ct_error(CT_ERR_OOM, "TensorBoard: out of memory");
    double now = wall_s();
    snprintf(path, n, "%s/events.out.tfevents.%lld.%s.%ld", b->log_dir, (long long)now,
             host, (long)getpid());
    b->f = fopen(path, "wb");
    if (!b->f) {
        st = ct_error(CT_ERR_IO, "TensorBoard: cannot create %s: %s", path,
                      strerror(errno));
        free(path);
        return st;
    }
    free(b->path); /* an earlier run's file */
    b->path = path;
    return tb_write_file_version(b->f, now);
}

static CtStatus scalar(TensorBoard *b, int64_t step, const char *prefix, const char *name,
                       double v)
{
    char tag[512];
    snprintf(tag, sizeof tag, "%s/%s", prefix, name);
    return tb_write_scalar(b->f, wall_s(), step, tag, (float)v);
}

static double lr_of(const Trainer *t)
{
    return t->optimizer ? optim_get_lr(t->optimizer, 0) : NAN;
}

/* Every metric with a value added since it was last written, under
 * prefix/<name> at step `epoch`. */
static CtStatus write_metrics(TensorBoard *b, Trainer *t, const char *prefix)
{
    RunHistory *h = trainer_run_history(t);
    int64_t epoch = run_history_current_epoch(h);
    CtStatus st = CT_OK;
    for (int i = 0; i < run_history_num_metrics(h) && st == CT_OK; i++) {
        const char *name = run_history_metric_name(h, i);
        int64_t n = 0;
        const double *v = run_history_values(h, name, &n);
        int64_t *seen = ct_table_find(&b->written, name);
        if (!seen && !(seen = ct_table_add(&b->written, name)))
            return ct_error(CT_ERR_OOM, "TensorBoard: out of memory");
        if (n > 0 && n != *seen) st = scalar(b, epoch, prefix, name, v[n - 1]);
        *seen = n;
    }
    return st;
}

/* The run history starts again: value counts restart from zero. */
static void forget_written(TensorBoard *b)
{
    for (int64_t i = 0; i < b->written.n; i++)
        *(int64_t *)ct_table_at(&b->written, i) = 0;
}

static CtStatus tb_run_start(Callback *cb, Trainer *t)
{
    TensorBoard *b = (TensorBoard *)cb;
    if (!cb_is_main(t)) return CT_OK;
    RunHistory *h = trainer_run_history(t);
    if (run_history_num_metrics(h) == 0) forget_written(b);
    b->samples = 0;
    b->t_last = mono_s();
    return open_file(b);
}

static CtStatus tb_epoch_start(Callback *cb, Trainer *t)
{
    TensorBoard *b = (TensorBoard *)cb;
    b->epoch_samples = 0;
    b->t_epoch = mono_s();
    return CT_OK;
}

static CtStatus tb_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                            const TrainerBatchOutput *out, int64_t step)
{
    TensorBoard *b = (TensorBoard *)cb;
    if (!b->f) return CT_OK;
    int64_t bs = out && out->batch_size > 0 ? out->batch_size : 0;
    b->samples += bs;
    b->epoch_samples += bs;
    if (++b->steps % b->every != 0) return CT_OK;
    double now = mono_s(),
           rate = now > b->t_last ? (double)b->samples / (now - b->t_last) : 0;
    CtStatus st = CT_OK;
    if (out && out->loss && tensor_numel(out->loss) == 1)
        st = scalar(b, b->steps, "train", "loss", tensor_item(out->loss));
    if (st == CT_OK) st = scalar(b, b->steps, "train", "lr", lr_of(t));
    if (st == CT_OK) st = scalar(b, b->steps, "train", "samples_per_sec", rate);
    b->samples = 0;
    b->t_last = now;
    return st;
}

static CtStatus tb_train_epoch_end(Callback *cb, Trainer *t)
{
    TensorBoard *b = (TensorBoard *)cb;
    double el = mono_s() - b->t_epoch;
    b->epoch_rate = el > 0 ? (double)b->epoch_samples / el : 0;
    return CT_OK;
}

static CtStatus tb_run_epoch_end(Callback *cb, Trainer *t)
{
    TensorBoard *b = (TensorBoard *)cb;
    if (!b->f) return CT_OK;
    int64_t epoch = run_history_current_epoch(trainer_run_history(t));
    CtStatus st = write_metrics(b, t, "epoch");
    if (st == CT_OK) st = scalar(b, epoch, "epoch", "lr", lr_of(t));
    if (st == CT_OK) st = scalar(b, epoch, "epoch", "samples_per_sec", b->epoch_rate);
    return st;
}

static CtStatus tb_evaluation_start(Callback *cb, Trainer *t)
{
    TensorBoard *b = (TensorBoard *)cb;
    if (!cb_is_main(t)) return CT_OK;
    forget_written(b); /* trainer_evaluate reset the history */
    return open_file(b);
}

static CtStatus tb_evaluation_end(Callback *cb, Trainer *t)
{
    TensorBoard *b = (TensorBoard *)cb;
    return b->f ? write_metrics(b, t, "evaluation") : CT_OK;
}

static const CallbackVtable tensorboard_vt = {
    .type = "TensorBoard",
    .free = tb_free,
    .on_training_run_start = tb_run_start,
    .on_train_epoch_start = tb_epoch_start,
    .on_train_step_end = tb_step_end,
    .on_train_epoch_end = tb_train_epoch_end,
    .on_training_run_epoch_end = tb_run_epoch_end,
    .on_evaluation_run_start = tb_evaluation_start,
    .on_evaluation_run_end = tb_evaluation_end,
};

Callback *callback_tensorboard_create(const TensorBoardArgs *args)
{
    if (!args || !args->log_dir || !args->log_dir[0]) {
        ct_error(CT_ERR_INVALID, "TensorBoard: log_dir is required");
        return NULL;
    }
    if (args->log_every_n_steps < 0) {
        ct_error(CT_ERR_INVALID, "TensorBoard: log_every_n_steps must be >= 0 (got %lld)",
                 (long long)args->log_every_n_steps);
        return NULL;
    }
    TensorBoard *b = (TensorBoard *)cb_alloc(sizeof *b, &tensorboard_vt);
    if (!b) return NULL;
    b->written = CT_TABLE_INIT(int64_t);
    b->every = args->log_every_n_steps ? args->log_every_n_steps : 50;
    if (!(b->log_dir = cb_strdup(args->log_dir, NULL))) {
        tb_free(&b->base);
        return NULL;
    }
    return &b->base;
}

const char *callback_tensorboard_path(const Callback *cb)
{
    return cb_is(cb, &tensorboard_vt) ? ((const TensorBoard *)cb)->path : NULL;
}
