/* Host synchronisations in the training loop: the running loss stays on
 * its device, so a step reads nothing back; the epoch end and the progress
 * bar's refreshes are the documented reads. The CPU runs the same loop
 * code as a GPU, and ct_host_sync_count counts reads on every device. */
#include "trainer_testutil.h"

enum { N_SAMPLES = 64, BATCH = 4, STEPS = N_SAMPLES / BATCH };

/* Records ct_host_sync_count at the start of the first step and at every
 * step end and epoch end. Registered last, so it sees the other callbacks'
 * reads of the same event. */
typedef struct SyncProbe {
    Callback base;
    uint64_t first_start, step_end[STEPS], epoch_end;
    uint64_t eval_start, eval_end; /* first eval step's start, last's end */
    double running_loss;           /* trainer_running_loss at the train epoch end */
} SyncProbe;

/* The count at the first step's start, of the train or the eval epoch. */
static CtStatus probe_step_start(Callback *cb, Trainer *t)
{
    SyncProbe *p = (SyncProbe *)cb;
    if (trainer_epoch_step(t) == 0)
        *(trainer_in_eval(t) ? &p->eval_start : &p->first_start) = ct_host_sync_count();
    return CT_OK;
}

/* The count at every train step's end, and at the eval epoch's last. */
static CtStatus probe_step_end(Callback *cb, Trainer *t, const DataBatch *b,
                               const TrainerBatchOutput *o, int64_t step)
{
    SyncProbe *p = (SyncProbe *)cb;
    *(trainer_in_eval(t) ? &p->eval_end : &p->step_end[step]) = ct_host_sync_count();
    return CT_OK;
}

static CtStatus probe_epoch_end(Callback *cb, Trainer *t)
{
    SyncProbe *p = (SyncProbe *)cb;
    p->epoch_end = ct_host_sync_count();
    return trainer_running_loss(t, &p->running_loss);
}

static const CallbackVtable probe_vt = {.type = "SyncProbe",
                                        .on_train_step_start = probe_step_start,
                                        .on_train_step_end = probe_step_end,
                                        .on_train_epoch_end = probe_epoch_end,
                                        .on_eval_step_start = probe_step_start,
                                        .on_eval_step_end = probe_step_end};

/* Trains one epoch of STEPS steps with the given callbacks and the probe. */
static void train_probed(SyncProbe *out, int n_cbs, Callback **cbs, int64_t accum)
{
    SyncProbe *probe = calloc(1, sizeof *probe); /* the trainer frees it */
    probe->base.vt = &probe_vt;
    CtGenerator g = ct_generator(7, 0);
    Module *model = nn_linear(2, 1, true, &g);
    Optimizer *opt = optim_sgd_create(model, &(SgdArgs){.lr = 0.1});
    NnLoss *loss = nn_loss_mse(CT_REDUCTION_MEAN);
    Callback *all[8];
    for (int i = 0; i < n_cbs; i++) all[i] = cbs[i];
    all[n_cbs] = &probe->base;
    Trainer t;
    ck_assert_int_eq(trainer_init(&t, &(TrainerConfig){.model = model,
                                                       .loss = loss,
                                                       .optimizer = opt,
                                                       .callbacks = all,
                                                       .n_callbacks = n_cbs + 1}),
                     CT_OK);
    Dataset *ds = regression_dataset(N_SAMPLES);
    ck_assert_int_eq(
        trainer_train(&t, &(TrainArgs){.train_dataset = ds,
                                       .eval_dataset = ds,
                                       .num_epochs = 1,
                                       .per_device_batch_size = BATCH,
                                       .gradient_accumulation_steps = accum}),
        CT_OK);
    /* the running loss read at the epoch end is the recorded epoch loss */
    double rec = run_history_latest(trainer_run_history(&t), "train_loss_epoch");
    ck_assert_double_eq(probe->running_loss, rec);
    *out = *probe;
    trainer_deinit(&t);
    data_dataset_free(ds);
    optim_free(opt);
    nn_loss_free(loss);
    nn_module_free(model);
}

START_TEST(no_host_read_per_step)
{
    FILE *sink = tmpfile();
    SyncProbe p;
    for (int64_t accum = 1; accum <= 2; accum++) {
        train_probed(
            &p, 4,
            (Callback *[]){callback_move_modules_to_device_create(),
                           callback_terminate_on_nan_create_every(1000),
                           callback_print_progress_create(sink),
                           callback_log_metrics_create(&(LogMetricsArgs){.out = sink})},
            accum);
        for (int s = 0; s < STEPS; s++) ck_assert_uint_eq(p.step_end[s], p.first_start);
        /* the epoch end: the loss tracker once, TerminateOnNaN once, and the
         * probe's own trainer_running_loss comes after its reading */
        ck_assert_uint_eq(p.epoch_end - p.step_end[STEPS - 1], 2);
        ck_assert_uint_gt(p.eval_start, p.epoch_end); /* the eval epoch ran */
        ck_assert_uint_eq(p.eval_end, p.eval_start);
    }
    fclose(sink);
}
END_TEST

START_TEST(progress_bar_reads_at_refresh_only)
{
    FILE *sink = tmpfile();
    SyncProbe p;
    /* LINES every 25%: lines after steps 4, 8, 12 and 16 */
    train_probed(&p, 1,
                 (Callback *[]){callback_progress_bar_create(&(ProgressBarArgs){
                     .out = sink, .mode = PROGRESS_BAR_LINES, .line_percent = 25})},
                 1);
    for (int s = 0; s < STEPS; s++) {
        uint64_t before = s ? p.step_end[s - 1] : p.first_start;
        ck_assert_uint_eq(p.step_end[s] - before, (s + 1) % 4 == 0 ? 1 : 0);
    }
    fclose(sink);
}
END_TEST

START_TEST(terminate_on_nan_every_bad_arg)
{
    ck_assert_ptr_null(callback_terminate_on_nan_create_every(0));
    tu_assert_error(ct_last_status(), "every 0 must be >= 1");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trainer_sync");
    TCase *tc = tcase_create("sync");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, no_host_read_per_step);
    tcase_add_test(tc, progress_bar_reads_at_refresh_only);
    tcase_add_test(tc, terminate_on_nan_every_bad_arg);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
