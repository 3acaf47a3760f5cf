#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Tensors made inside a scope of their own and retained: caller-owned
 * whether or not the caller has a scope open. */
Tensor *tu_tensor(CtDType dt, int ndim, const int64_t *shape, const double *v)
{
    CtScope *s = ct_scope_open();
    Tensor *t = tensor_cast(tensor_from_data(v, ndim, shape, CT_F64, ct_cpu()), dt);
    ck_assert_msg(t != NULL, "tu_tensor: %s", ct_last_error());
    tensor_retain(t);
    ct_scope_close(s);
    return t;
}

static double lcg01(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

Tensor *tu_rand64(int ndim, const int64_t *shape, double lo, double hi, unsigned seed,
                  bool grad)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    unsigned long long s = seed * 2654435761ULL + 1;
    for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * lcg01(&s);
    Tensor *t = tu_tensor(CT_F64, ndim, shape, v);
    free(v);
    if (grad) ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

static double *host_values(const Tensor *t)
{
    int64_t n = tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(t, v, CT_F64), CT_OK);
    return v;
}

void tu_assert_values_at(const char *file, int line, const Tensor *t,
                         const double *expect, int64_t n, double atol, double rtol)
{
    ck_assert_msg(t != NULL, "%s:%d: tensor is NULL (%s)", file, line, ct_last_error());
    ck_assert_msg(tensor_numel(t) == n, "%s:%d: %lld elements, expected %lld", file, line,
                  (long long)tensor_numel(t), (long long)n);
    double *v = host_values(t);
    for (int64_t i = 0; i < n; i++) {
        double tol = atol + rtol * fabs(expect[i]);
        bool ok = fabs(v[i] - expect[i]) <= tol || (isnan(v[i]) && isnan(expect[i])) ||
                  (isinf(v[i]) && v[i] == expect[i]);
        if (!ok) {
            double got = v[i];
            free(v);
            ck_abort_msg("%s:%d: element %lld is %.10g, expected %.10g", file, line,
                         (long long)i, got, expect[i]);
        }
    }
    free(v);
}

void tu_assert_same_bits_at(const char *file, int line, const char *what, Tensor *a,
                            Tensor *b)
{
    ck_assert_msg(a && b, "%s:%d: %s: missing tensor (%s)", file, line, what,
                  ct_last_error());
    ck_assert_msg(tensor_dtype(a) == tensor_dtype(b) &&
                      tensor_ndim(a) == tensor_ndim(b) &&
                      !memcmp(tensor_shape(a), tensor_shape(b),
                              (size_t)tensor_ndim(a) * sizeof(int64_t)),
                  "%s:%d: %s: dtypes or shapes differ", file, line, what);
    Tensor *ac = tensor_contiguous(a), *bc = tensor_contiguous(b);
    size_t bytes = (size_t)tensor_numel(ac) * ct_dtype_size(tensor_dtype(ac));
    ck_assert_msg(memcmp(tensor_data(ac), tensor_data(bc), bytes) == 0,
                  "%s:%d: %s: the bytes differ", file, line, what);
}

void tu_assert_shape_at(const char *file, int line, const Tensor *t, int ndim,
                        const int64_t *shape)
{
    ck_assert_msg(t != NULL, "%s:%d: tensor is NULL (%s)", file, line, ct_last_error());
    ck_assert_msg(tensor_ndim(t) == ndim, "%s:%d: ndim %d, expected %d", file, line,
                  tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_msg(tensor_shape(t)[i] == shape[i],
                      "%s:%d: dim %d is %lld, expected %lld", file, line, i,
                      (long long)tensor_shape(t)[i], (long long)shape[i]);
}

void tu_assert_error_at(const char *file, int line, CtStatus st, const char *needle)
{
    ck_assert_msg(ct_last_status() == st,
                  "%s:%d: status '%s', expected '%s' (message: %s)", file, line,
                  ct_status_str(ct_last_status()), ct_status_str(st), ct_last_error());
    ck_assert_msg(strstr(ct_last_error(), needle) != NULL,
                  "%s:%d: error message \"%s\" does not contain \"%s\"", file, line,
                  ct_last_error(), needle);
    ct_clear_error();
}

/* <fn(inputs), g> evaluated without grad, in a scope of its own. */
static double objective(TuGradFn fn, void *ctx, Tensor **inputs, const double *g,
                        int64_t n)
{
    CtScope *s = ct_scope_open();
    bool prev = ct_set_grad_enabled(false);
    Tensor *out = fn(inputs, ctx);
    ck_assert_msg(out != NULL, "gradcheck: forward failed: %s", ct_last_error());
    double *v = host_values(out);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += v[i] * g[i];
    free(v);
    ct_set_grad_enabled(prev);
    ct_scope_close(s);
    return acc;
}

void tu_gradcheck_at(const char *file, int line, const char *name, TuGradFn fn, void *ctx,
                     int n, Tensor **inputs, double eps, double atol, double rtol)
{
    /* analytic gradients */
    CtScope *s = ct_scope_open();
    for (int i = 0; i < n; i++)
        if (tensor_requires_grad(inputs[i])) tensor_set_grad(inputs[i], NULL);
    Tensor *out = fn(inputs, ctx);
    ck_assert_msg(out != NULL, "%s:%d: %s: forward failed: %s", file, line, name,
                  ct_last_error());
    int64_t nout = tensor_numel(out);
    double *g = malloc((size_t)(nout ? nout : 1) * sizeof *g);
    unsigned long long seed = 12345;
    for (int64_t i = 0; i < nout; i++) g[i] = 2 * lcg01(&seed) - 1;
    Tensor *gt =
        tensor_from_data(g, tensor_ndim(out), tensor_shape(out), CT_F64, ct_cpu());
    Tensor *gcast = tensor_cast(gt, tensor_dtype(out));
    ck_assert_msg(tensor_backward(out, gcast) == CT_OK, "%s:%d: %s: backward failed: %s",
                  file, line, name, ct_last_error());
    ct_scope_close(s);

    for (int i = 0; i < n; i++) {
        if (!tensor_requires_grad(inputs[i])) continue;
        Tensor *grad = tensor_grad(inputs[i]);
        ck_assert_msg(grad != NULL, "%s:%d: %s: input %d got no gradient", file, line,
                      name, i);
        double *ga = host_values(grad);
        double *x = tensor_data(inputs[i]);
        ck_assert_msg(tensor_dtype(inputs[i]) == CT_F64 &&
                          tensor_is_contiguous(inputs[i]),
                      "%s:%d: gradcheck inputs must be contiguous f64", file, line);
        for (int64_t j = 0; j < tensor_numel(inputs[i]); j++) {
            double x0 = x[j];
            x[j] = x0 + eps;
            double lp = objective(fn, ctx, inputs, g, nout);
            x[j] = x0 - eps;
            double lm = objective(fn, ctx, inputs, g, nout);
            x[j] = x0;
            double num = (lp - lm) / (2 * eps);
            if (fabs(ga[j] - num) > atol + rtol * fabs(num)) {
                double got = ga[j];
                free(ga);
                free(g);
                ck_abort_msg(
                    "%s:%d: %s: d/d input %d [%lld]: analytic %.10g, numeric %.10g", file,
                    line, name, i, (long long)j, got, num);
            }
        }
        free(ga);
    }
    free(g);
}

void tu_make_temp_dir(char *buf, size_t n, const char *prefix)
{
    snprintf(buf, n, "/tmp/%s_XXXXXX", prefix);
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

void tu_remove_dir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
