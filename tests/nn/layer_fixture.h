/* Inputs, weights and upstream gradients of the nn layer tests, the
 * formulas of tests/fixtures/nn_common.py (fx, fw, gy), so the C tests
 * reproduce the tensors the fixture scripts fed to PyTorch. */
#ifndef CTRAINER_TESTS_NN_LAYER_FIXTURE_H
#define CTRAINER_TESTS_NN_LAYER_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/nn.h"
#include "testutil.h"

/* Inputs sin(0.37 i + 0.1) * 2, as the fixture script. */
static inline Tensor *fx(CtDType dt, int ndim, const int64_t *shape, bool grad)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = sin(0.37 * (double)i + 0.1) * 2;
    Tensor *t = tu_tensor(dt, ndim, shape, v);
    free(v);
    if (grad) tensor_set_requires_grad(t, true);
    return t;
}

/* p <- cos(0.23 i) * 0.5 + add, as the fixture's fw. */
static inline void set_fw(Tensor *p, double add)
{
    int64_t n = tensor_numel(p);
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = cos(0.23 * (double)i) * 0.5 + add;
    Tensor *src = tu_tensor(CT_F64, tensor_ndim(p), tensor_shape(p), v);
    ck_assert_int_eq(tensor_copy_(p, src), CT_OK);
    tensor_free(src);
    free(v);
}

/* Backward of sum(y * gy) with gy[i] = cos(0.11 i). */
static inline void backward_gy(Tensor *y)
{
    int64_t n = tensor_numel(y);
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = cos(0.11 * (double)i);
    Tensor *g = tu_tensor(tensor_dtype(y), tensor_ndim(y), tensor_shape(y), v);
    free(v);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_mul(y, g)), NULL), CT_OK);
    tensor_free(g);
}

#define N_OF(a)            ((int64_t)(sizeof(a) / sizeof((a)[0])))
#define ASSERT_REF(t, ref) tu_assert_values((t), (ref), N_OF(ref), 2e-5, 2e-5)

/* Asserts that nn_module_print(m) starts with `repr` followed by a newline
 * (the whole text for a multi-line repr, else its first line). */
static inline void assert_printed(const Module *m, const char *repr)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    nn_module_print(m, f);
    fclose(f);
    ck_assert_msg(strncmp(buf, repr, strlen(repr)) == 0 && buf[strlen(repr)] == '\n',
                  "repr:\n%s\nexpected:\n%s", buf, repr);
    free(buf);
}

/* assert_printed, and the state dict's keys joined by ", "; frees m. */
static inline void assert_repr_keys(Module *m, const char *repr, const char *keys)
{
    ck_assert_ptr_nonnull(m);
    assert_printed(m, repr);
    char names[256] = "";
    CtStateDict *sd = nn_module_state_dict(m);
    for (int64_t i = 0; i < ct_state_dict_size(sd); i++) {
        if (i) strcat(names, ", ");
        strcat(names, ct_state_dict_name(sd, i));
    }
    ct_state_dict_free(sd);
    ck_assert_str_eq(names, keys);
    nn_module_free(m);
}

#endif
