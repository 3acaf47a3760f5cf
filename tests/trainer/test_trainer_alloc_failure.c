/* A whole trainer_train run (loaders, forward, loss, backward, update,
 * callbacks) with each of its tensor-layer allocations failed in turn: the
 * run reports a clear error or ends with exactly the parameters of an
 * undisturbed run. Never a crash or a leak (the sanitizer build runs it). */
#include "tensor/mem.h"
#include "trainer_testutil.h"

static CtStatus run(Fixture *f, Dataset *ds)
{
    return trainer_train(&f->rt.base, &(TrainArgs){.train_dataset = ds,
                                                   .eval_dataset = ds,
                                                   .num_epochs = 1,
                                                   .per_device_batch_size = 2});
}

/* What a run leaves: the model's parameters (Linear(2, 1): 3 values) and
 * the epoch losses it recorded. */
static void outcome(Fixture *f, double *out)
{
    RunHistory *h = trainer_run_history(&f->rt.base);
    out[3] = run_history_latest(h, "train_loss_epoch");
    out[4] = run_history_latest(h, "eval_loss_epoch");
    CtStateDict *d = nn_module_parameters(f->model);
    int64_t k = 0;
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        Tensor *p = ct_state_dict_tensor(d, i);
        ck_assert_int_eq(tensor_copy_to_host(p, out + k, CT_F64), CT_OK);
        k += tensor_numel(p);
    }
    ck_assert_int_eq(k, 3);
    ct_state_dict_free(d);
}

START_TEST(sweep_trainer_train)
{
    TU_MEM_BEGIN;
    Dataset *ds = regression_dataset(4);
    Fixture f;
    fixture_init(&f, 0.1, false);
    ct_alloc_fail_at(INT64_MAX);
    ck_assert_int_eq(run(&f, ds), CT_OK);
    int64_t total = ct_alloc_counted();
    ct_alloc_fail_at(0);
    double ref[5];
    outcome(&f, ref);
    ck_assert(isfinite(ref[3]) && isfinite(ref[4]));
    fixture_free(&f);
    ck_assert_int_gt(total, 50);
    int64_t failed = 0;
    for (int64_t n = 1; n <= total + 1; n++) {
        fixture_init(&f, 0.1, false);
        ct_clear_error();
        ct_alloc_fail_at(n);
        CtStatus st = run(&f, ds);
        ct_alloc_fail_at(0);
        if (st != CT_OK) {
            failed++;
            ck_assert_msg(ct_last_status() == st && ct_last_error()[0],
                          "fail at %lld: status %s, recorded %s (%s)", (long long)n,
                          ct_status_str(st), ct_status_str(ct_last_status()),
                          ct_last_error());
        } else {
            double p[5];
            outcome(&f, p);
            ck_assert_msg(memcmp(p, ref, sizeof p) == 0,
                          "fail at %lld: the run succeeded with other results",
                          (long long)n);
        }
        fixture_free(&f);
    }
    ck_assert_int_gt(failed, total / 2);
    data_dataset_free(ds);
    ct_clear_error();
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trainer_alloc_failure");
    TCase *tc = tcase_create("alloc_failure");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, sweep_trainer_train);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
