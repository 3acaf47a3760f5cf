/* Mixed precision in the trainer: a loss scaler skips steps with inf/NaN
 * gradients without stepping the scheduler, counts them in the run history,
 * and changes nothing on clean steps; bf16 runs the forward under autocast;
 * fp16 on the CPU is refused. */
#include "trainer_testutil.h"

typedef struct AmpTrainer {
    Trainer base;
    int64_t n_backward, inject_at; /* backward call that gets an inf (-1: none) */
    int n_opt;
    CtDType forward_autocast;
} AmpTrainer;

static CtStatus amp_backward(Trainer *t, Tensor *loss)
{
    AmpTrainer *a = (AmpTrainer *)t;
    CtStatus st = trainer_default_backward_step(t, loss);
    if (st == CT_OK && a->n_backward++ == a->inject_at)
        st = tensor_fill_(nn_module_grad_block(t->model), INFINITY);
    return st;
}

static CtStatus amp_opt_step(Trainer *t)
{
    ((AmpTrainer *)t)->n_opt++;
    return trainer_default_optimizer_step(t);
}

static CtStatus amp_calc_train(Trainer *t, const DataBatch *b, TrainerBatchOutput *o)
{
    ((AmpTrainer *)t)->forward_autocast = tensor_autocast_dtype();
    return trainer_default_calculate_train_batch_loss(t, b, o);
}

static Scheduler *step_lr(Trainer *t, Optimizer *o, void *user)
{
    (void)t;
    (void)user;
    return scheduler_step_lr(o, 1, 0.5);
}

typedef struct Run {
    AmpTrainer at;
    Module *model;
    Optimizer *opt;
    NnLoss *loss;
    Runtime *rt;
} Run;

/* Linear(2, 1), SGD(0.1), MSE, 4 batches of 2 with a StepLR scheduler. */
static void run(Run *r, GradScaler *scaler, int64_t inject_at, const char *mp)
{
    memset(r, 0, sizeof *r);
    CtGenerator g = ct_generator(7, 0);
    r->model = nn_linear(2, 1, true, &g);
    r->opt = optim_sgd_create(r->model, &(SgdArgs){.lr = 0.1});
    r->loss = nn_loss_mse(CT_REDUCTION_MEAN);
    r->rt = runtime_create(&(RuntimeArgs){.mixed_precision = mp});
    ck_assert_ptr_nonnull(r->rt);
    r->at.inject_at = inject_at;
    ck_assert_int_eq(
        trainer_init(
            &r->at.base,
            &(TrainerConfig){.model = r->model,
                             .loss = r->loss,
                             .optimizer = r->opt,
                             .runtime = r->rt,
                             .scaler = scaler,
                             .no_callbacks = true,
                             .hooks = {.backward_step = amp_backward,
                                       .optimizer_step = amp_opt_step,
                                       .calculate_train_batch_loss = amp_calc_train}}),
        CT_OK);
    Dataset *ds = regression_dataset(8);
    ck_assert_int_eq(
        trainer_train(&r->at.base, &(TrainArgs){.train_dataset = ds,
                                                .num_epochs = 1,
                                                .per_device_batch_size = 2,
                                                .create_scheduler_fn = step_lr}),
        CT_OK);
    data_dataset_free(ds);
}

static void run_free(Run *r)
{
    trainer_deinit(&r->at.base);
    runtime_free(r->rt);
    optim_free(r->opt);
    nn_loss_free(r->loss);
    nn_module_free(r->model);
}

static void weights(Module *m, float *out)
{
    ck_assert_int_eq(tensor_copy_to_host(nn_module_param_block(m), out, CT_F32), CT_OK);
}

START_TEST(test_scaler_skips_step_not_scheduler)
{
    TU_MEM_BEGIN;
    GradScaler *sc = scaler_create(NULL);
    Run r;
    run(&r, sc, 1, NULL);
    ck_assert_int_eq(r.at.n_opt, 3); /* 4 updates, the second skipped */
    ck_assert_int_eq(scheduler_step_count(r.at.base.scheduler), 3);
    ck_assert_int_eq(scaler_skipped_steps(sc), 1);
    ck_assert_double_eq(scaler_get_scale(sc), 32768.0);
    ck_assert_double_eq(
        run_history_latest(trainer_run_history(&r.at.base), "skipped_steps"), 1.0);
    /* the weights are finite: the inf never reached the optimizer */
    float w[3];
    weights(r.model, w);
    for (int i = 0; i < 3; i++) ck_assert(isfinite(w[i]));
    run_free(&r);
    scaler_free(sc);
    TU_MEM_END;
}
END_TEST

/* Clean steps with a scaler give the run without one, bit for bit: the
 * scale is a power of two. */
START_TEST(test_scaler_clean_steps_unchanged)
{
    TU_MEM_BEGIN;
    GradScaler *sc = scaler_create(NULL);
    Run a, b;
    run(&a, sc, -1, NULL);
    run(&b, NULL, -1, NULL);
    float wa[3], wb[3];
    weights(a.model, wa);
    weights(b.model, wb);
    for (int i = 0; i < 3; i++) ck_assert_float_eq(wa[i], wb[i]);
    ck_assert_int_eq(scaler_skipped_steps(sc), 0);
    ck_assert(
        isnan(run_history_latest(trainer_run_history(&a.at.base), "skipped_steps")));
    run_free(&a);
    run_free(&b);
    scaler_free(sc);
    TU_MEM_END;
}
END_TEST

START_TEST(test_bf16_forward_under_autocast)
{
    TU_MEM_BEGIN;
    Run r;
    run(&r, NULL, -1, "bf16");
    ck_assert_int_eq(r.at.forward_autocast, CT_BF16);
    ck_assert_int_eq(tensor_autocast_dtype(), CT_F32); /* backward and after: off */
    run_free(&r);
    run(&r, NULL, -1, "no");
    ck_assert_int_eq(r.at.forward_autocast, CT_F32);
    run_free(&r);
    TU_MEM_END;
}
END_TEST

START_TEST(test_fp16_on_cpu_refused)
{
    TU_MEM_BEGIN;
    ck_assert_ptr_null(runtime_create(&(RuntimeArgs){.mixed_precision = "fp16"}));
    tu_assert_error(CT_ERR_UNSUPPORTED, "needs CUDA; use bf16 on the CPU");
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trainer_amp");
    TCase *tc = tcase_create("trainer_amp");
    tcase_add_test(tc, test_scaler_skips_step_not_scheduler);
    tcase_add_test(tc, test_scaler_clean_steps_unchanged);
    tcase_add_test(tc, test_bf16_forward_under_autocast);
    tcase_add_test(tc, test_fp16_on_cpu_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
