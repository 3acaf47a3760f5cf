/* The loss scaler: PyTorch's defaults, unscale + inf/NaN check, skip and
 * backoff, growth after the interval, state save/load, bad input. */
#include <math.h>

#include "ctrainer/runtime.h"
#include "testutil.h"

static Tensor *grads(const double *v, int64_t n)
{
    return tu_tensor(CT_F32, 1, &n, v);
}

/* One update step on gradients v (n of them); returns whether it was
 * skipped. */
static bool step(GradScaler *s, const double *v, int64_t n)
{
    Tensor *g = grads(v, n);
    ck_assert_int_eq(scaler_unscale(s, g), CT_OK);
    bool skip = scaler_found_inf(s);
    scaler_update(s);
    tensor_free(g);
    return skip;
}

static const double CLEAN[3] = {1, -2, 3};

START_TEST(test_scaler_defaults_and_unscale)
{
    TU_MEM_BEGIN;
    GradScaler *s = scaler_create(NULL);
    ck_assert_double_eq(scaler_get_scale(s), 65536.0);
    Tensor *g = grads((double[]){65536, -131072, 0.5}, 3);
    ck_assert_int_eq(scaler_unscale(s, g), CT_OK);
    ck_assert(!scaler_found_inf(s));
    tu_assert_values(g, ((double[]){1, -2, 0.5 / 65536}), 3, 0, 0);
    /* the scaled loss */
    CtScope *sc = ct_scope_open();
    Tensor *loss = scaler_scale(s, tensor_scalar(0.25, CT_F32, ct_cpu()));
    ck_assert_double_eq(tensor_item(loss), 16384.0);
    ct_scope_close(sc);
    tensor_free(g);
    scaler_free(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_scaler_skip_and_backoff)
{
    TU_MEM_BEGIN;
    GradScaler *s = scaler_create(NULL);
    ck_assert(step(s, (double[]){1, INFINITY, 2}, 3));
    ck_assert_double_eq(scaler_get_scale(s), 32768.0);
    ck_assert(step(s, (double[]){NAN, 1}, 2));
    ck_assert(step(s, (double[]){-INFINITY}, 1));
    ck_assert_double_eq(scaler_get_scale(s), 8192.0);
    ck_assert_int_eq(scaler_skipped_steps(s), 3);
    ck_assert(!step(s, CLEAN, 3));
    ck_assert_int_eq(scaler_skipped_steps(s), 3);
    ck_assert_double_eq(scaler_get_scale(s), 8192.0);
    /* a large finite gradient is not a skip */
    ck_assert(!step(s, (double[]){3e38}, 1));
    scaler_free(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_scaler_growth_interval)
{
    TU_MEM_BEGIN;
    GradScaler *s = scaler_create(&(ScalerArgs){.init_scale = 8, .growth_interval = 3});
    ck_assert(!step(s, CLEAN, 3));
    ck_assert(!step(s, CLEAN, 3));
    ck_assert_double_eq(scaler_get_scale(s), 8.0);
    ck_assert(!step(s, CLEAN, 3));
    ck_assert_double_eq(scaler_get_scale(s), 16.0); /* third clean step in a row */
    ck_assert(!step(s, CLEAN, 3));
    ck_assert(!step(s, CLEAN, 3));
    ck_assert(step(s, (double[]){NAN}, 1)); /* backoff restarts the count */
    ck_assert_double_eq(scaler_get_scale(s), 8.0);
    ck_assert(!step(s, CLEAN, 3));
    ck_assert(!step(s, CLEAN, 3));
    ck_assert_double_eq(scaler_get_scale(s), 8.0);
    ck_assert(!step(s, CLEAN, 3));
    ck_assert_double_eq(scaler_get_scale(s), 16.0);
    scaler_free(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_scaler_state_roundtrip)
{
    TU_MEM_BEGIN;
    GradScaler *a =
        scaler_create(&(ScalerArgs){.init_scale = 1024, .growth_interval = 5});
    ck_assert(step(a, (double[]){INFINITY}, 1));
    ck_assert(!step(a, CLEAN, 3));
    ck_assert(!step(a, CLEAN, 3));
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(scaler_state_save(a, d, "scaler."), CT_OK);
    ck_assert_int_eq(ct_state_dict_size(d), 6);
    ck_assert_ptr_nonnull(ct_state_dict_get(d, "scaler.growth_tracker"));
    GradScaler *b = scaler_create(NULL);
    ck_assert_int_eq(scaler_state_load(b, d, "scaler."), CT_OK);
    ck_assert_double_eq(scaler_get_scale(b), 512.0);
    ck_assert_int_eq(scaler_skipped_steps(b), 1);
    /* same tracker: both grow on the same (fifth) clean step */
    for (int i = 0; i < 3; i++) {
        ck_assert(!step(a, CLEAN, 3));
        ck_assert(!step(b, CLEAN, 3));
    }
    ck_assert_double_eq(scaler_get_scale(a), 1024.0);
    ck_assert_double_eq(scaler_get_scale(b), 1024.0);
    /* a missing entry: an error naming it, b unchanged */
    tu_assert_error(scaler_state_load(b, d, "other."),
                    "scaler_state_load: 'other.scale' is missing");
    ck_assert_double_eq(scaler_get_scale(b), 1024.0);
    ct_state_dict_free(d);
    scaler_free(a);
    scaler_free(b);
    TU_MEM_END;
}
END_TEST

START_TEST(test_scaler_bad_input)
{
    TU_MEM_BEGIN;
    ck_assert_ptr_null(scaler_create(&(ScalerArgs){.growth_factor = 0.5}));
    tu_assert_error(CT_ERR_INVALID, "scaler_create: growth_factor 0.5 must be > 1");
    ck_assert_ptr_null(scaler_create(&(ScalerArgs){.backoff_factor = 1.5}));
    tu_assert_error(CT_ERR_INVALID, "backoff_factor 1.5 must be in (0, 1)");
    ck_assert_ptr_null(scaler_create(&(ScalerArgs){.init_scale = -1}));
    tu_assert_error(CT_ERR_INVALID, "scale -1 must be finite and > 0");
    GradScaler *s = scaler_create(NULL);
    tu_assert_error(scaler_unscale(s, NULL), "scaler_unscale: NULL gradients");
    int64_t n = 2;
    Tensor *g64 = tu_tensor(CT_F64, 1, &n, (double[]){1, 2});
    tu_assert_error(scaler_unscale(s, g64), "must be a contiguous f32 tensor");
    tensor_free(g64);
    scaler_free(s);
    TU_MEM_END;
}
END_TEST

/* A state's counts (growth_tracker, skipped_steps, growth_interval) are
 * integers in [0, 2^53]: others are refused before any conversion, and the
 * scaler keeps its state. */
START_TEST(test_scaler_state_bad_counts)
{
    TU_MEM_BEGIN;
    GradScaler *s = scaler_create(&(ScalerArgs){.init_scale = 1024});
    static const struct {
        const char *field;
        double value;
        const char *msg;
    } bad[] = {
        {"growth_interval", 1e300, "'growth_interval' is 1e+300, not a count"},
        {"skipped_steps", 1e300, "'skipped_steps' is 1e+300, not a count"},
        {"skipped_steps", 0x1p53 + 2, "'skipped_steps' is 9.0072e+15, not a count"},
        {"skipped_steps", 2.5, "'skipped_steps' is 2.5, not a count"},
        {"growth_tracker", 0.5, "'growth_tracker' is 0.5, not a count"},
        {"growth_interval", NAN, "'growth_interval' is nan, not a count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CtStateDict *d = ct_state_dict_create();
        ck_assert_int_eq(scaler_state_save(s, d, NULL), CT_OK);
        Tensor *x = tensor_full(1, (const int64_t[]){1}, bad[i].value, CT_F64, ct_cpu());
        ck_assert_int_eq(tensor_copy_(ct_state_dict_get(d, bad[i].field), x), CT_OK);
        ck_assert_int_eq(scaler_state_load(s, d, NULL), CT_ERR_FORMAT);
        tu_assert_error(CT_ERR_FORMAT, bad[i].msg);
        ck_assert_double_eq(scaler_get_scale(s), 1024.0);
        ck_assert_int_eq(scaler_skipped_steps(s), 0);
        tensor_free(x);
        ct_state_dict_free(d);
    }
    /* the largest count still loads */
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(scaler_state_save(s, d, NULL), CT_OK);
    Tensor *x = tensor_full(1, (const int64_t[]){1}, 0x1p53, CT_F64, ct_cpu());
    ck_assert_int_eq(tensor_copy_(ct_state_dict_get(d, "skipped_steps"), x), CT_OK);
    ck_assert_int_eq(scaler_state_load(s, d, NULL), CT_OK);
    ck_assert_int_eq(scaler_skipped_steps(s), (int64_t)1 << 53);
    tensor_free(x);
    ct_state_dict_free(d);
    scaler_free(s);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("scaler");
    TCase *tc = tcase_create("scaler");
    tcase_add_test(tc, test_scaler_defaults_and_unscale);
    tcase_add_test(tc, test_scaler_skip_and_backoff);
    tcase_add_test(tc, test_scaler_growth_interval);
    tcase_add_test(tc, test_scaler_state_roundtrip);
    tcase_add_test(tc, test_scaler_bad_input);
    tcase_add_test(tc, test_scaler_state_bad_counts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
