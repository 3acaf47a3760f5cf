/* ProgressBar: a redrawn bar on a terminal, plain lines in log files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cb_internal.h"

#define BAR_WIDTH 20

/* An intermediate evaluation interrupts the train bar: its state is saved
 * and the train bar resumes (on a new line) afterwards. */
typedef struct SavedBar {
    bool active;
    char label[48];
    int64_t count, total, samples;
    double t_start;
    int64_t last_bucket;
} SavedBar;

typedef struct ProgressBar {
    Callback base;
    FILE *out;
    ProgressBarMode mode;
    int line_percent;
    double min_interval;
    Trainer *trainer; /* of the current bar, asked for the running loss */
    /* the current bar */
    bool active, tty;
    char label[48];
    int64_t count, total, samples; /* batches and samples so far */
    double t_start, t_last_draw;
    int64_t last_bucket; /* LINES: last printed line_percent bucket */
    SavedBar saved;      /* the train bar during an intermediate eval */
} ProgressBar;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_time(char *buf, size_t n, double s)
{
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "?");
        return;
    }
    long long t = (long long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%lld:%02lld", t / 60, t % 60);
}

/* The trainer's running loss as " | loss x" in buf ("" before the first
 * batch). Read only when a line is drawn: a host read on a GPU. */
static CtStatus loss_text(const ProgressBar *p, char *buf, size_t n)
{
    buf[0] = '\0';
    if (p->count == 0) return CT_OK;
    double mean;
    CtStatus st = trainer_running_loss(p->trainer, &mean);
    if (st == CT_OK) snprintf(buf, n, " | loss %.4f", mean);
    return st;
}

static CtStatus draw(ProgressBar *p, bool final)
{
    FILE *f = cb_out(p->out);
    double el = now_s() - p->t_start;
    double rate = el > 0 ? (double)p->count / el : 0;
    double srate = el > 0 ? (double)p->samples / el : 0;
    char eta[32];
    fmt_time(eta, sizeof eta, rate > 0 ? (double)(p->total - p->count) / rate : NAN);
    int pct = p->total > 0 ? (int)(100 * p->count / p->total) : 0;
    char loss[48];
    CtStatus st = loss_text(p, loss, sizeof loss);
    if (st != CT_OK) return st;
    if (p->tty) {
        char bar[BAR_WIDTH + 1];
        int fill = p->total > 0 ? (int)(BAR_WIDTH * p->count / p->total) : 0;
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
        bar[BAR_WIDTH] = '\0';
        fprintf(f, "\r%s [%s] %lld/%lld %3d%% | %.1f it/s %.0f samples/s eta %s%s\x1b[K",
                p->label, bar, (long long)p->count, (long long)p->total, pct, rate, srate,
                eta, loss);
        if (final) fputc('\n', f);
    } else {
        fprintf(f, "%s: %lld/%lld (%d%%) | %.1f it/s %.0f samples/s eta %s%s\n", p->label,
                (long long)p->count, (long long)p->total, pct, rate, srate, eta, loss);
    }
    fflush(f);
    p->t_last_draw = now_s();
    return CT_OK;
}

/* Whether f is a terminal. Under `ctrainer launch` / runtime_launch, stdout
 * is mpirun's pseudo-terminal, and CTRAINER_STDOUT_TTY says what the
 * launching process's stdout was. */
static bool is_terminal(FILE *f)
{
    const char *v = getenv("CTRAINER_STDOUT_TTY");
    if (f == stdout && v && (!strcmp(v, "0") || !strcmp(v, "1"))) return v[0] == '1';
    return isatty(fileno(f));
}

static CtStatus start_bar(ProgressBar *p, Trainer *t, const char *label, int64_t total)
{
    p->active = cb_is_main(t) && total > 0;
    if (!p->active) return CT_OK;
    p->trainer = t;
    FILE *f = cb_out(p->out);
    p->tty =
        p->mode == PROGRESS_BAR_TTY || (p->mode == PROGRESS_BAR_AUTO && is_terminal(f));
    snprintf(p->label, sizeof p->label, "%s", label);
    p->count = p->samples = 0;
    p->total = total;
    p->t_start = now_s();
    p->t_last_draw = 0;
    p->last_bucket = 0;
    return p->tty ? draw(p, false) : CT_OK;
}

static CtStatus step_bar(ProgressBar *p, const TrainerBatchOutput *out)
{
    if (!p->active) return CT_OK;
    p->count++;
    if (out && out->batch_size > 0) p->samples += out->batch_size;
    bool last = p->count >= p->total;
    if (p->tty)
        return last || now_s() - p->t_last_draw >= p->min_interval ? draw(p, false)
                                                                   : CT_OK;
    int64_t bucket = p->count * 100 / (p->total * p->line_percent);
    if (bucket <= p->last_bucket && !last) return CT_OK;
    p->last_bucket = bucket;
    return draw(p, false);
}

static CtStatus end_bar(ProgressBar *p)
{
    if (!p->active) return CT_OK;
    p->active = false;
    /* a tty bar always ends drawn and on its own line; a LINES bar that
     * stopped early says where */
    if (p->tty) return draw(p, true);
    return p->count < p->total ? draw(p, false) : CT_OK;
}

static CtStatus pb_train_epoch_start(Callback *cb, Trainer *t)
{
    char label[48];
    snprintf(label, sizeof label, "train %lld",
             (long long)run_history_current_epoch(trainer_run_history(t)));
    return start_bar((ProgressBar *)cb, t, label, trainer_train_dataloader_len(t));
}

static CtStatus pb_train_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                                  const TrainerBatchOutput *out, int64_t step)
{
    return step_bar((ProgressBar *)cb, out);
}

static CtStatus pb_epoch_end(Callback *cb, Trainer *t)
{
    return end_bar((ProgressBar *)cb);
}

static CtStatus pb_eval_epoch_start(Callback *cb, Trainer *t, bool is_intermediate)
{
    ProgressBar *p = (ProgressBar *)cb;
    char label[48];
    if (is_intermediate) {
        if (p->active && p->tty) fputc('\n', cb_out(p->out));
        p->saved = (SavedBar){p->active,  "",         p->count,      p->total,
                              p->samples, p->t_start, p->last_bucket};
        memcpy(p->saved.label, p->label, sizeof p->saved.label);
        snprintf(label, sizeof label, "eval (intermediate)");
    } else if (trainer_train_dataloader(t)) {
        snprintf(label, sizeof label, "eval %lld",
                 (long long)run_history_current_epoch(trainer_run_history(t)));
    } else {
        snprintf(label, sizeof label, "evaluation");
    }
    return start_bar(p, t, label, trainer_eval_dataloader_len(t));
}

static CtStatus pb_eval_step_end(Callback *cb, Trainer *t, const DataBatch *batch,
                                 const TrainerBatchOutput *out, int64_t step)
{
    return step_bar((ProgressBar *)cb, out);
}

static CtStatus pb_eval_epoch_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    ProgressBar *p = (ProgressBar *)cb;
    CtStatus st = end_bar(p);
    if (is_intermediate && p->saved.active) {
        p->active = true;
        memcpy(p->label, p->saved.label, sizeof p->label);
        p->count = p->saved.count;
        p->total = p->saved.total;
        p->samples = p->saved.samples;
        p->t_start = p->saved.t_start;
        p->last_bucket = p->saved.last_bucket;
        p->saved.active = false;
    }
    return st;
}

static CtStatus pb_stop(Callback *cb, Trainer *t)
{
    return end_bar((ProgressBar *)cb);
}

static const CallbackVtable progress_bar_vt = {
    .type = "ProgressBar",
    .on_train_epoch_start = pb_train_epoch_start,
    .on_train_step_end = pb_train_step_end,
    .on_train_epoch_end = pb_epoch_end,
    .on_eval_epoch_start = pb_eval_epoch_start,
    .on_eval_step_end = pb_eval_step_end,
    .on_eval_epoch_end = pb_eval_epoch_end,
    .on_stop_training_error = pb_stop,
    .on_training_run_end = pb_stop,
    .on_evaluation_run_end = pb_stop,
};

Callback *callback_progress_bar_create(const ProgressBarArgs *args)
{
    ProgressBarArgs a = args ? *args : (ProgressBarArgs){0};
    if (a.line_percent < 0 || a.line_percent > 100 || a.min_interval < 0 ||
        a.mode > PROGRESS_BAR_LINES) {
        ct_error(CT_ERR_INVALID,
                 "ProgressBar: line_percent must be in [0, 100] and min_interval >= 0 "
                 "(got %d, %g)",
                 a.line_percent, a.min_interval);
        return NULL;
    }
    ProgressBar *p = (ProgressBar *)cb_alloc(sizeof *p, &progress_bar_vt);
    if (!p) return NULL;
    p->out = a.out;
    p->mode = a.mode;
    p->line_percent = a.line_percent ? a.line_percent : 10;
    p->min_interval = a.min_interval > 0 ? a.min_interval : 0.1;
    return &p->base;
}
