/* nn_forward_relu, nn_forward_gelu and Sequential's fusion of a child with
 * the ReLU or GELU after it: the same output and parameter gradients, bit
 * for bit, as running
 * every child on its own, with fewer autograd nodes; modules without a
 * fused form, ReLUs in odd places and errors. */
#include <stdio.h>

#include "ctrainer/nn.h"
#include "tensor/internal.h"
#include "testutil.h"

/* The children of seq one by one, each ReLU on its own (no fusion). */
static Tensor *forward_unfused(Module *seq, Tensor *x)
{
    for (int i = 0; x && i < nn_module_num_children(seq); i++)
        x = nn_forward(nn_module_child_at(seq, i), x);
    return x;
}

/* Every parameter gradient of m, cloned in order; then cleared. */
static int take_grads(Module *m, Tensor **out, int cap)
{
    CtStateDict *p = nn_module_parameters(m);
    int n = (int)ct_state_dict_size(p);
    ck_assert_int_le(n, cap);
    for (int i = 0; i < n; i++) {
        Tensor *t = ct_state_dict_tensor(p, i);
        ck_assert_ptr_nonnull(tensor_grad(t));
        out[i] = tensor_clone(tensor_grad(t));
        tensor_set_grad(t, NULL);
    }
    ct_state_dict_free(p);
    return n;
}

/* Number of nodes on the chain of first inputs from y back to a leaf. */
static int chain_nodes(const Tensor *y)
{
    int n = 0;
    for (const CtNode *nd = y->grad_fn; nd; nd = nd->in[0] ? nd->in[0]->grad_fn : NULL)
        n++;
    return n;
}

/* seq's fused forward against its children one by one: output, input
 * gradient and every parameter gradient, and the nodes along the chain. */
static void check_sequential(Module *seq, const int64_t *xs, int fused_nodes,
                             int plain_nodes)
{
    Tensor *x = tu_rand64(4, xs, -1, 1, 5, false);
    Tensor *x32 = tensor_cast(x, CT_F32);
    tensor_free(x);
    ck_assert_int_eq(tensor_set_requires_grad(x32, true), CT_OK);
    Tensor *g[2][8], *gx[2], *y[2];
    int ng = 0;
    CtScope *s = ct_scope_open();
    for (int fused = 0; fused < 2; fused++) {
        Tensor *out = fused ? nn_forward(seq, x32) : forward_unfused(seq, x32);
        ck_assert_msg(out, "%s", ct_last_error());
        ck_assert_int_eq(chain_nodes(out), fused ? fused_nodes : plain_nodes);
        y[fused] = tensor_detach(out);
        Tensor *g64 = tu_rand64(tensor_ndim(out), tensor_shape(out), -1, 1, 6, false);
        ck_assert_int_eq(tensor_backward(out, tensor_cast(g64, CT_F32)), CT_OK);
        tensor_free(g64);
        gx[fused] = tensor_clone(tensor_grad(x32));
        tensor_set_grad(x32, NULL);
        ng = take_grads(seq, g[fused], 8);
    }
    tu_assert_same_bits("output", y[0], y[1]);
    tu_assert_same_bits("input gradient", gx[0], gx[1]);
    for (int i = 0; i < ng; i++) {
        char what[48];
        snprintf(what, sizeof what, "parameter gradient %d", i);
        tu_assert_same_bits(what, g[0][i], g[1][i]);
    }
    ct_scope_close(s);
    tensor_free(x32);
}

START_TEST(test_sequential_fuses_relu)
{
    TU_MEM_BEGIN;
    CtGenerator gen = ct_generator(3, 0);
    const CtConv2dArgs pad = {.padding = {1, 1}};
    /* conv+relu and linear+relu fuse; the last linear has no ReLU. Plain:
     * conv, relu, flatten (a view: a node), linear, relu, linear, relu,
     * linear = 8 nodes along the chain; fused: 5. */
    Module *seq = nn_sequential(8, (Module *[]){nn_conv2d(3, 4, 3, &pad, true, &gen),
                                                nn_relu(), nn_flatten(1, -1),
                                                nn_linear(4 * 6 * 6, 7, true, &gen),
                                                nn_relu(), nn_linear(7, 5, false, &gen),
                                                nn_relu(), nn_linear(5, 3, true, &gen)});
    ck_assert_ptr_nonnull(seq);
    check_sequential(seq, (const int64_t[]){2, 3, 6, 6}, 5, 8);
    nn_module_free(seq);
    /* ReLU first, two in a row, one after a module without a fused form,
     * and a conv last: only the conv before the first of the pair fuses */
    seq = nn_sequential(6, (Module *[]){nn_relu(), nn_conv2d(3, 4, 3, &pad, true, &gen),
                                        nn_relu(), nn_relu(), nn_tanh(), nn_relu()});
    ck_assert_ptr_nonnull(seq);
    check_sequential(seq, (const int64_t[]){2, 3, 5, 5}, 5, 6);
    nn_module_free(seq);
    TU_MEM_END;
}
END_TEST

START_TEST(test_sequential_fuses_gelu)
{
    TU_MEM_BEGIN;
    CtGenerator gen = ct_generator(5, 0);
    const CtConv2dArgs pad = {.padding = {1, 1}};
    /* Linear+GELU fuses with either approximation; a GELU after a GELU, or
     * after a conv (no GELU form), runs alone; linear+ReLU+GELU fuses the
     * ReLU. Plain: conv, gelu, flatten, linear, gelu, linear, gelu, gelu,
     * linear, relu, gelu = 11 nodes along the chain; fused: 8. */
    Module *seq = nn_sequential(
        11, (Module *[]){nn_conv2d(3, 2, 3, &pad, true, &gen), nn_gelu(CT_GELU_TANH),
                         nn_flatten(1, -1), nn_linear(2 * 4 * 4, 16, true, &gen),
                         nn_gelu(CT_GELU_TANH), nn_linear(16, 8, false, &gen),
                         nn_gelu(CT_GELU_ERF), nn_gelu(CT_GELU_ERF),
                         nn_linear(8, 5, true, &gen), nn_relu(), nn_gelu(CT_GELU_TANH)});
    ck_assert_ptr_nonnull(seq);
    check_sequential(seq, (const int64_t[]){2, 3, 4, 4}, 8, 11);
    nn_module_free(seq);
    TU_MEM_END;
}
END_TEST

/* nn_forward_relu and nn_forward_gelu on modules with and without a fused
 * form, and their errors. */
START_TEST(test_forward_fused)
{
    TU_MEM_BEGIN;
    CtGenerator gen = ct_generator(4, 0);
    Module *lin = nn_linear(6, 8, true, &gen), *tanh_m = nn_tanh();
    Tensor *x = tu_rand64(2, (const int64_t[]){3, 6}, -2, 2, 9, false);
    Tensor *x32 = tensor_cast(x, CT_F32);
    tensor_free(x);
    CtScope *s = ct_scope_open();
    Tensor *y = nn_forward_relu(lin, x32);
    ck_assert_ptr_nonnull(y->grad_fn->act_x); /* one node, the ReLU on it */
    tu_assert_same_bits("linear", y, tensor_relu(nn_forward(lin, x32)));
    tu_assert_same_bits("tanh", nn_forward_relu(tanh_m, x32),
                        tensor_relu(nn_forward(tanh_m, x32)));
    y = nn_forward_gelu(lin, x32, CT_GELU_ERF);
    ck_assert_str_eq(y->grad_fn->op, "linear_gelu"); /* one node, GELU on it */
    tu_assert_same_bits("linear gelu", y, tensor_gelu(nn_forward(lin, x32), CT_GELU_ERF));
    tu_assert_same_bits("tanh gelu", nn_forward_gelu(tanh_m, x32, CT_GELU_TANH),
                        tensor_gelu(nn_forward(tanh_m, x32), CT_GELU_TANH));
    /* a shape error names the module, as nn_forward's does */
    Tensor *bad = tensor_zeros(2, (const int64_t[]){3, 5}, CT_F32, ct_cpu());
    ck_assert_ptr_null(nn_forward_relu(lin, bad));
    tu_assert_error(CT_ERR_SHAPE, "has 5 features, expected 6");
    ck_assert_ptr_null(nn_forward_gelu(lin, bad, CT_GELU_ERF));
    tu_assert_error(CT_ERR_SHAPE, "has 5 features, expected 6");
    ck_assert_ptr_null(nn_forward_gelu(lin, x32, (CtGeluApprox)3));
    tu_assert_error(CT_ERR_INVALID, "linear_gelu: unknown approximation 3");
    ck_assert_ptr_null(nn_forward_relu(NULL, x32));
    tu_assert_error(CT_ERR_NULL, "nn_forward: NULL module");
    ck_assert_ptr_null(nn_forward_gelu(NULL, x32, CT_GELU_ERF));
    tu_assert_error(CT_ERR_NULL, "nn_forward: NULL module");
    /* sticky: nothing new recorded */
    ck_assert_ptr_null(nn_forward_relu(lin, NULL));
    ck_assert_ptr_null(nn_forward_gelu(lin, NULL, CT_GELU_ERF));
    ck_assert_int_eq(ct_last_status(), CT_OK);
    ct_scope_close(s);
    tensor_free(x32);
    nn_module_free(lin);
    nn_module_free(tanh_m);
    TU_MEM_END;
}
END_TEST

Suite *fused_relu_suite(void)
{
    Suite *s = suite_create("nn_fused_relu");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sequential_fuses_relu);
    tcase_add_test(tc, test_sequential_fuses_gelu);
    tcase_add_test(tc, test_forward_fused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(fused_relu_suite());
}
