/* DataScaler: statistics against hand-computed values, applied as a
 * transform, saved with a model in a safetensors file and loaded back for
 * inference; bad inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrainer/data.h"
#include "ctrainer/nn.h"
#include "testutil.h"

/* 4 samples of 3 features: a ramp, a constant column, a spread column;
 * labels 0..3. */
static Dataset *table(Tensor **x, Tensor **y)
{
    *x = tu_tensor(CT_F32, 2, (int64_t[]){4, 3},
                   (double[]){1, 5, -2, 2, 5, 0, 3, 5, 0, 4, 5, 10});
    *y = tu_tensor(CT_I64, 1, (int64_t[]){4}, (double[]){0, 1, 2, 3});
    return data_tensor_dataset_create(2, (Tensor *[]){*x, *y});
}

/* A scope-owned f32 tensor. */
static Tensor *tmp(int ndim, const int64_t *shape, const float *v)
{
    return tensor_from_data(v, ndim, shape, CT_F32, ct_cpu());
}

static void free_table(Dataset *d, Tensor *x, Tensor *y)
{
    data_dataset_free(d);
    tensor_free(x);
    tensor_free(y);
}

START_TEST(test_standardize)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = table(&x, &y);
    DataScaler *s = data_scaler_fit(d, 0, DATA_SCALE_STANDARDIZE);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(data_scaler_num_features(s), 3);
    double mean[3], std[3];
    ck_assert_int_eq(data_scaler_stats(s, mean, std), CT_OK);
    /* column 3: -2, 0, 0, 10 -> mean 2, population variance (16+4+4+64)/4 = 22 */
    double want_mean[3] = {2.5, 5, 2}, want_std[3] = {sqrt(1.25), 0, sqrt(22)};
    for (int j = 0; j < 3; j++) {
        ck_assert_double_eq_tol(mean[j], want_mean[j], 1e-12);
        ck_assert_double_eq_tol(std[j], want_std[j], 1e-12);
    }
    /* as a dataset transform: sample 3 is (4, 5, 10) */
    Dataset *ds = data_transformed_create(d, 0, data_scaler_transform(s));
    CtScope *sc = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(ds, 3, NULL, &smp), CT_OK);
    tu_assert_values(smp.t[0], ((double[]){1.5 / sqrt(1.25), 0, 8 / sqrt(22)}), 3, 1e-6,
                     1e-6);
    tu_assert_values(smp.t[1], ((double[]){3}), 1, 0, 0);
    /* a batch (N, F) scales row by row */
    Tensor *out = data_scaler_apply(s, x);
    tu_assert_shape(out, 2, 4, 3);
    tu_assert_values(out,
                     ((double[]){-1.5 / sqrt(1.25), 0, -4 / sqrt(22), -0.5 / sqrt(1.25),
                                 0, -2 / sqrt(22), 0.5 / sqrt(1.25), 0, -2 / sqrt(22),
                                 1.5 / sqrt(1.25), 0, 8 / sqrt(22)}),
                     12, 1e-6, 1e-6);
    ct_scope_close(sc);
    data_dataset_free(ds);
    data_scaler_free(s);
    free_table(d, x, y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_min_max)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = table(&x, &y);
    DataScaler *s = data_scaler_fit(d, 0, DATA_SCALE_MIN_MAX);
    double lo[3], hi[3];
    ck_assert_int_eq(data_scaler_stats(s, lo, hi), CT_OK);
    ck_assert_double_eq(lo[2], -2);
    ck_assert_double_eq(hi[2], 10);
    CtScope *sc = ct_scope_open();
    Tensor *out = data_scaler_apply(s, tmp(1, (int64_t[]){3}, (float[]){2.5, 7, 4}));
    tu_assert_values(out, ((double[]){0.5, 2, 0.5}), 3, 1e-7, 1e-7);
    ct_scope_close(sc);
    data_scaler_free(s);
    free_table(d, x, y);
    TU_MEM_END;
}
END_TEST

/* Saved in the model's safetensors file; at inference the scaler's entries
 * come out and the rest loads strictly; the scaled values are identical. */
START_TEST(test_saved_with_model)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = table(&x, &y);
    char path[] = "/tmp/ct_scaler_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    CtGenerator g = ct_generator(3, 0);
    Module *model = nn_linear(3, 2, true, &g);
    for (int kind = 0; kind < 2; kind++) {
        DataScaler *s = data_scaler_fit(d, 0, (DataScaleKind)kind);
        CtStateDict *sd = nn_module_state_dict(model);
        ck_assert_int_eq(data_scaler_state_dict_add(s, sd, "scaler."), CT_OK);
        ck_assert_int_eq(ct_state_dict_size(sd), 4);
        ck_assert_ptr_nonnull(ct_state_dict_get(sd, kind ? "scaler.max" : "scaler.std"));
        ck_assert_int_eq(data_scaler_state_dict_add(s, sd, "scaler."), CT_ERR_INVALID);
        tu_assert_error(CT_ERR_INVALID, kind ? "duplicate name \"scaler.min\""
                                             : "duplicate name \"scaler.mean\"");
        ck_assert_int_eq(nn_safetensors_save(path, sd, 0, NULL, NULL), CT_OK);
        ct_state_dict_free(sd);

        CtStateDict *ld = nn_safetensors_load(path, ct_cpu());
        ck_assert_ptr_nonnull(ld);
        DataScaler *back = data_scaler_from_state_dict(ld, "scaler.");
        ck_assert_ptr_nonnull(back);
        ck_assert_int_eq(ct_state_dict_size(ld), 2);
        Module *fresh = nn_linear(3, 2, true, &g);
        ck_assert_int_eq(nn_module_load_state_dict(fresh, ld, true, NULL), CT_OK);
        CtScope *sc = ct_scope_open();
        Tensor *a = data_scaler_apply(s, x), *b = data_scaler_apply(back, x);
        float va[12], vb[12];
        ck_assert_int_eq(tensor_copy_to_host(a, va, CT_F32), CT_OK);
        ck_assert_int_eq(tensor_copy_to_host(b, vb, CT_F32), CT_OK);
        for (int i = 0; i < 12; i++) ck_assert_float_eq(va[i], vb[i]);
        ct_scope_close(sc);
        nn_module_free(fresh);
        ct_state_dict_free(ld);
        data_scaler_free(back);
        data_scaler_free(s);
    }
    unlink(path);
    nn_module_free(model);
    free_table(d, x, y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_errors)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = table(&x, &y);
    ck_assert_ptr_null(data_scaler_fit(NULL, 0, DATA_SCALE_STANDARDIZE));
    tu_assert_error(CT_ERR_INVALID, "DataScaler: nothing to fit on (NULL dataset)");
    ck_assert_ptr_null(data_scaler_fit(d, 5, DATA_SCALE_STANDARDIZE));
    tu_assert_error(CT_ERR_INVALID, "DataScaler: field 5 or kind 0 is out of range");
    ck_assert_ptr_null(data_scaler_fit(d, 1, DATA_SCALE_STANDARDIZE)); /* i64 labels */
    tu_assert_error(CT_ERR_SHAPE, "DataScaler: sample 0 field 1 is ");
    DataScaler *s = data_scaler_fit(d, 0, DATA_SCALE_STANDARDIZE);
    CtScope *sc = ct_scope_open();
    ck_assert_ptr_null(
        data_scaler_apply(s, tmp(2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4})));
    tu_assert_error(CT_ERR_SHAPE, "DataScaler: expects f32 CPU (..., 3), got ");
    ct_scope_close(sc);
    CtStateDict *sd = ct_state_dict_create();
    ck_assert_ptr_null(data_scaler_from_state_dict(sd, "s."));
    tu_assert_error(
        CT_ERR_INVALID,
        "no \"s.mean\"/\"s.std\" or \"s.min\"/\"s.max\" entries in the state dict");
    sc = ct_scope_open();
    ck_assert_int_eq(
        ct_state_dict_add(sd, "mean", tmp(1, (int64_t[]){2}, (float[]){0, 0})), CT_OK);
    ck_assert_int_eq(
        ct_state_dict_add(sd, "std", tmp(1, (int64_t[]){3}, (float[]){1, 1, 1})), CT_OK);
    ct_scope_close(sc);
    ck_assert_ptr_null(data_scaler_from_state_dict(sd, NULL));
    tu_assert_error(CT_ERR_SHAPE, "DataScaler: \"std\" is ");
    ck_assert_int_eq(ct_state_dict_size(sd), 2); /* unchanged on failure */
    ck_assert(ct_state_dict_remove(sd, "mean"));
    ck_assert(!ct_state_dict_remove(sd, "mean"));
    ck_assert_str_eq(ct_state_dict_name(sd, 0), "std");
    ct_state_dict_free(sd);
    data_scaler_free(s);
    free_table(d, x, y);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("data_scaler");
    TCase *tc = tcase_create("scaler");
    tcase_add_test(tc, test_standardize);
    tcase_add_test(tc, test_min_max);
    tcase_add_test(tc, test_saved_with_model);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
