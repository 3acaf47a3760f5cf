/* RunHistory semantics and JSON export; the runtime's single-process
 * contracts (identity, environment, collectives, seeding). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <math.h>

#include "ctrainer/ctrainer.h"
#include "testutil.h"

START_TEST(history_semantics)
{
    RunHistory *h = run_history_create();
    ck_assert_int_eq(run_history_current_epoch(h), 1);
    ck_assert_int_eq(run_history_update(h, "loss", 0.5), CT_OK);
    ck_assert_int_eq(run_history_update(h, "loss", 0.25), CT_OK);
    ck_assert_int_eq(run_history_update(h, "acc", 0.75), CT_OK);
    ck_assert_int_eq(run_history_num_metrics(h), 2);
    ck_assert_str_eq(run_history_metric_name(h, 0), "loss");
    ck_assert_str_eq(run_history_metric_name(h, 1), "acc");
    int64_t n;
    const double *v = run_history_values(h, "loss", &n);
    ck_assert_int_eq(n, 2);
    ck_assert_double_eq(v[0], 0.5);
    ck_assert_double_eq(v[1], 0.25);
    ck_assert_double_eq(run_history_latest(h, "loss"), 0.25);
    /* unknown names: no values, not an error; latest is */
    ck_assert_ptr_null(run_history_values(h, "nope", &n));
    ck_assert_int_eq(n, 0);
    ck_assert(isnan(run_history_latest(h, "nope")));
    tu_assert_error(CT_ERR_INVALID, "no values recorded for metric 'nope'");
    /* the prefix applies to update only */
    ck_assert_int_eq(run_history_set_prefix(h, "ema_model_"), CT_OK);
    ck_assert_int_eq(run_history_update(h, "loss", 9), CT_OK);
    ck_assert_double_eq(run_history_latest(h, "loss"), 0.25);
    ck_assert_double_eq(run_history_latest(h, "ema_model_loss"), 9);
    ck_assert_str_eq(run_history_prefix(h), "ema_model_");
    ck_assert_int_eq(run_history_delete(h, "ema_model_loss"), CT_OK);
    ck_assert(!run_history_has_metric(h, "ema_model_loss"));
    ck_assert_int_eq(run_history_delete(h, "ema_model_loss"), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "no metric 'ema_model_loss'");
    /* epochs */
    run_history_increment_epoch(h);
    ck_assert_int_eq(run_history_current_epoch(h), 2);
    ck_assert_int_eq(run_history_set_epoch(h, 5), CT_OK);
    ck_assert_int_eq(run_history_set_epoch(h, 0), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "epoch 0 is not >= 1");
    ck_assert_int_eq(run_history_current_epoch(h), 5);
    /* reset clears metrics and epoch, keeps the prefix */
    run_history_reset(h);
    ck_assert_int_eq(run_history_num_metrics(h), 0);
    ck_assert_int_eq(run_history_current_epoch(h), 1);
    ck_assert_str_eq(run_history_prefix(h), "ema_model_");
    /* bad names */
    ck_assert_int_eq(run_history_update(h, "", 1), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "empty metric name");
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ck_assert_int_eq(run_history_update(h, longname, 1), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "longer than 127 bytes");
    run_history_free(h);
}
END_TEST

START_TEST(history_json)
{
    RunHistory *h = run_history_create();
    run_history_update(h, "train_loss_epoch", 0.5);
    run_history_update(h, "train_loss_epoch", 0.125);
    run_history_update(h, "eval_loss_epoch", NAN);
    run_history_increment_epoch(h);
    char *s = run_history_to_json(h);
    ck_assert_str_eq(
        s, "{\"current_epoch\": 2, \"metric_name_prefix\": \"\", \"metrics\": "
           "{\"train_loss_epoch\": [0.5, 0.125], \"eval_loss_epoch\": [null]}}");
    free(s);
    char path[] = "/tmp/ctrainer_history_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(run_history_save_json(h, path), CT_OK);
    FILE *f = fopen(path, "rb");
    char buf[512] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    remove(path);
    ck_assert_uint_gt(n, 10);
    ck_assert_ptr_nonnull(strstr(buf, "\"train_loss_epoch\": [0.5, 0.125]"));
    ck_assert_int_eq(run_history_save_json(h, "/nonexistent-dir/x.json"), CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "/nonexistent-dir/x.json: cannot create "
                               "/nonexistent-dir/x.json.tmp.");
    run_history_free(h);
}
END_TEST

START_TEST(runtime_single_process)
{
    TU_MEM_BEGIN;
    Runtime *rt = runtime_create(NULL);
    ck_assert_ptr_nonnull(rt);
    ck_assert_int_eq(runtime_rank(rt), 0);
    ck_assert_int_eq(runtime_world_size(rt), 1);
    ck_assert_int_eq(runtime_local_rank(rt), 0);
    ck_assert(runtime_is_main_process(rt));
    ck_assert(runtime_is_local_main_process(rt));
    ck_assert(!runtime_is_distributed(rt));
    ck_assert_int_eq(runtime_device(rt).type, CT_DEVICE_CPU);
    ck_assert_str_eq(runtime_mixed_precision(rt), "no");
    ck_assert_uint_eq(runtime_base_seed(rt), 42);
    ck_assert_uint_eq(runtime_seed(rt, 100), 100); /* base + rank 0 */
    CtGenerator g = runtime_generator(rt, 7, 3);
    ck_assert_uint_eq(g.seed, 7);
    ck_assert_uint_eq(g.stream, 3);
    ck_assert_int_eq(runtime_barrier(rt), CT_OK);

    Tensor *x = tu_tensor(CT_F32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    tensor_set_requires_grad(x, true);
    CtScope *s = ct_scope_open();
    Tensor *gx = runtime_gather(rt, x);
    tu_assert_values(gx, ((double[]){1, 2, 3, 4}), 4, 0, 0);
    ck_assert(!tensor_requires_grad(gx));
    ck_assert(!tensor_shares_storage(gx, x));
    tu_assert_values(runtime_gather_padded(rt, x, 0), ((double[]){1, 2, 3, 4}), 4, 0, 0);
    tu_assert_values(runtime_reduce(rt, x, RUNTIME_REDUCE_MEAN), ((double[]){1, 2, 3, 4}),
                     4, 0, 0);
    ck_assert_ptr_null(runtime_gather(rt, tensor_scalar(1, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE, "0-d tensor");
    Tensor *xi = tensor_scalar(3, CT_I64, ct_cpu());
    ck_assert_ptr_null(runtime_reduce(rt, xi, RUNTIME_REDUCE_MEAN));
    tu_assert_error(CT_ERR_DTYPE, "MEAN needs a float tensor");
    ck_assert_ptr_null(runtime_gather(rt, NULL)); /* sticky */
    ck_assert_int_eq(ct_last_status(), CT_OK);
    ct_scope_close(s);
    tensor_free(x);
    double v[2] = {1.5, 2};
    ck_assert_int_eq(runtime_reduce_f64(rt, v, 2, RUNTIME_REDUCE_SUM), CT_OK);
    ck_assert_double_eq(v[0], 1.5);
    ck_assert_int_eq(runtime_reduce_f64(rt, NULL, 2, RUNTIME_REDUCE_SUM), CT_ERR_INVALID);
    ct_clear_error();
    runtime_free(rt);
    TU_MEM_END;
}
END_TEST

START_TEST(runtime_environment)
{
    setenv("WORLD_SIZE", "2", 1);
    ck_assert_ptr_null(runtime_create(NULL));
    /* the reason depends on the build (tests/runtime checks both) */
    tu_assert_error(CT_ERR_UNSUPPORTED, "WORLD_SIZE=2 but ");
    setenv("WORLD_SIZE", "x", 1);
    ck_assert_ptr_null(runtime_create(NULL));
    tu_assert_error(CT_ERR_INVALID, "WORLD_SIZE='x' is not an integer");
    setenv("WORLD_SIZE", "1", 1);
    setenv("RANK", "1", 1);
    ck_assert_ptr_null(runtime_create(NULL));
    tu_assert_error(CT_ERR_INVALID, "RANK=1 is not below WORLD_SIZE=1");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    Runtime *rt = runtime_create(&(RuntimeArgs){.seed = 5});
    ck_assert_uint_eq(runtime_base_seed(rt), 5);
    ck_assert(!runtime_deterministic(rt));
    runtime_free(rt);
    rt = runtime_create(&(RuntimeArgs){.deterministic = true});
    ck_assert(runtime_deterministic(rt));
    runtime_free(rt);
    if (ct_cuda_device_count() == 0) {
        ck_assert_ptr_null(runtime_create(&(RuntimeArgs){.use_cuda = true}));
        tu_assert_error(CT_ERR_DEVICE, "0 CUDA device(s) are usable");
    } else {
        rt = runtime_create(&(RuntimeArgs){.use_cuda = true});
        ck_assert_int_eq(runtime_device(rt).type, CT_DEVICE_CUDA);
        runtime_free(rt);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("run_history_runtime");
    TCase *tc = tcase_create("run_history");
    tcase_add_test(tc, history_semantics);
    tcase_add_test(tc, history_json);
    suite_add_tcase(s, tc);
    TCase *rt = tcase_create("runtime");
    tcase_add_test(rt, runtime_single_process);
    tcase_add_test(rt, runtime_environment);
    suite_add_tcase(s, rt);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
