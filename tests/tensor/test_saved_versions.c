/* Backward refuses to run on values its ops read that were changed in place
 * since the forward (tensor.h, tensor_backward), as PyTorch does: for every
 * op whose backward reads an input, a saved tensor, its output or a fused
 * activation's input. Inputs a backward needs only the shape of (add's,
 * mul's factor of a leaf without grad) may change; so may any tensor after
 * the graph's backward; raw access through tensor_data is not an in-place
 * op and is not counted. */
#include <math.h>

#include "testutil.h"

/* A persistent f32 tensor in [-1, 1) (1..2 when `positive`). */
static Tensor *rnd(int nd, const int64_t *shape, unsigned seed, bool grad, bool positive)
{
    Tensor *d = tu_rand64(nd, shape, positive ? 1 : -1, positive ? 2 : 1, seed, false);
    Tensor *t = tensor_cast(d, CT_F32);
    tensor_free(d);
    ck_assert_ptr_nonnull(t);
    if (grad) ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

/* One case: build out from x (requires grad) and y (requires grad when
 * y_grad), then `victim` is what an in-place write breaks (NULL: out). */
typedef struct Case {
    const char *op, *what; /* the op named, and what the error says it read */
    Tensor *(*build)(Tensor *x, Tensor *y, Tensor **victim);
} Case;

static Tensor *b_mul(Tensor *x, Tensor *y, Tensor **v)
{
    *v = y; /* x's gradient reads y */
    return tensor_mul(x, y);
}
static Tensor *b_div(Tensor *x, Tensor *y, Tensor **v)
{
    *v = y;
    return tensor_div(x, y);
}
static Tensor *b_pow(Tensor *x, Tensor *y, Tensor **v)
{
    *v = x;
    return tensor_pow(x, y);
}
static Tensor *b_matmul(Tensor *x, Tensor *y, Tensor **v)
{
    *v = y;
    return tensor_matmul(x, y);
}
static Tensor *b_linear(Tensor *x, Tensor *y, Tensor **v)
{
    *v = y;
    return tensor_linear(x, y, NULL);
}
static Tensor *b_linear_relu(Tensor *x, Tensor *y, Tensor **v)
{
    (void)v; /* the output: ReLU's gradient reads it */
    return tensor_linear_relu(x, y, NULL);
}
static Tensor *b_exp(Tensor *x, Tensor *y, Tensor **v)
{
    (void)y, (void)v; /* exp's gradient reads its output */
    return tensor_exp(x);
}
static Tensor *b_softmax(Tensor *x, Tensor *y, Tensor **v)
{
    (void)y, (void)v;
    return tensor_softmax(x, -1);
}
static Tensor *b_log(Tensor *x, Tensor *y, Tensor **v)
{
    (void)y;
    *v = x;
    return tensor_log(x);
}
static Tensor *b_var(Tensor *x, Tensor *y, Tensor **v)
{
    (void)y;
    *v = x;
    return tensor_var(x, 1, (const int[]){1}, 1, false);
}
static Tensor *b_layer_norm(Tensor *x, Tensor *y, Tensor **v)
{
    (void)y;
    *v = x;
    return tensor_layer_norm(x, 1, NULL, NULL, 1e-5);
}
static Tensor *b_cross_entropy(Tensor *x, Tensor *y, Tensor **v)
{
    (void)y;
    *v = x;
    Tensor *t = tensor_zeros(1, (const int64_t[]){4}, CT_I64, ct_cpu());
    return tensor_cross_entropy(x, t, NULL);
}
static Tensor *b_where(Tensor *x, Tensor *y, Tensor **v)
{
    Tensor *cond = tensor_gt(y, tensor_scalar(1.5, CT_F32, ct_cpu()));
    *v = cond;
    return tensor_where(cond, x, y);
}
static Tensor *b_index_select(Tensor *x, Tensor *y, Tensor **v)
{
    (void)y;
    Tensor *i = tensor_zeros(1, (const int64_t[]){3}, CT_I64, ct_cpu());
    *v = i;
    return tensor_index_select(x, 0, i);
}

static const Case cases[] = {
    {"mul", "input 1", b_mul},
    {"div", "input 1", b_div},
    {"pow", "input 0", b_pow},
    {"matmul", "input 1", b_matmul},
    {"linear", "input 1", b_linear},
    {"linear_relu", "activation input", b_linear_relu},
    {"exp", "saved tensor 0", b_exp},
    {"softmax", "saved tensor 0", b_softmax},
    {"log", "input 0", b_log},
    {"var", "input 0", b_var},
    {"layer_norm", "input 0", b_layer_norm},
    {"cross_entropy", "input 0", b_cross_entropy},
    {"where", "input 0", b_where},
    {"index_select", "input 1", b_index_select},
};

/* Per case: with nothing changed, backward runs; with the victim changed
 * in place (a fill for floats, a copy for the rest), it fails naming the op
 * and what it read, and the graph is released. */
START_TEST(test_in_place_change_refused)
{
    const Case *c = &cases[_i];
    TU_MEM_BEGIN;
    for (int change = 0; change < 2; change++) {
        bool product =
            c->build == b_matmul || c->build == b_linear || c->build == b_linear_relu;
        Tensor *x = rnd(2, (const int64_t[]){4, 5}, 1, true, true);
        Tensor *y = rnd(2, (const int64_t[]){product ? 5 : 4, 5}, 2, false, true);
        CtScope *s = ct_scope_open();
        Tensor *victim = NULL, *out = c->build(x, y, &victim);
        ck_assert_msg(out != NULL, "%s: %s", c->op, ct_last_error());
        Tensor *loss = tensor_sum_all(out);
        ck_assert_ptr_nonnull(loss);
        if (!victim) victim = out;
        if (change) {
            Tensor *same = tensor_clone(victim); /* the values do not matter */
            ck_assert_int_eq(tensor_copy_(victim, same), CT_OK);
        }
        CtStatus st = tensor_backward(loss, NULL);
        if (!change) {
            ck_assert_msg(st == CT_OK, "%s: %s", c->op, ct_last_error());
        } else {
            char needle[96];
            snprintf(needle, sizeof needle, "%s's backward needs the values its %s",
                     c->op, c->what);
            tu_assert_error(CT_ERR_STATE, needle);
            ck_assert_int_eq(tensor_backward(loss, NULL), CT_ERR_STATE); /* released */
            ct_clear_error();
        }
        ct_scope_close(s);
        tensor_free(x);
        tensor_free(y);
    }
    TU_MEM_END;
}
END_TEST

/* What backward does not read may change: add's inputs, mul's factor
 * whose partner needs no gradient; the gradients are then PyTorch's. */
START_TEST(test_unread_inputs_may_change)
{
    TU_MEM_BEGIN;
    Tensor *x = rnd(1, (const int64_t[]){3}, 1, true, false);
    Tensor *y = rnd(1, (const int64_t[]){3}, 2, false, false);
    CtScope *s = ct_scope_open();
    Tensor *loss = tensor_sum_all(tensor_add(tensor_mul(x, y), x));
    ck_assert_int_eq(tensor_fill_(x, 5.0), CT_OK); /* mul reads y only */
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    float yv[3], gv[3];
    ck_assert_int_eq(tensor_copy_to_host(y, yv, CT_F32), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(tensor_grad(x), gv, CT_F32), CT_OK);
    for (int i = 0; i < 3; i++) ck_assert_float_eq(gv[i], yv[i] + 1.0f);
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

/* tensor_data is raw access, not an in-place op: reading an input through
 * it (a metric reading logits before backward) leaves backward free. */
START_TEST(test_tensor_data_is_not_counted)
{
    TU_MEM_BEGIN;
    Tensor *x = rnd(2, (const int64_t[]){2, 3}, 1, true, false);
    Tensor *w = rnd(2, (const int64_t[]){4, 3}, 2, true, false);
    CtScope *s = ct_scope_open();
    Tensor *logits = tensor_linear(x, w, NULL);
    Tensor *loss = tensor_sum_all(tensor_softmax(logits, 1));
    ck_assert_ptr_nonnull(tensor_data(x));
    ck_assert_ptr_nonnull(tensor_data(w));
    ck_assert_ptr_nonnull(tensor_data(logits));
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    ct_scope_close(s);
    tensor_free(x);
    tensor_free(w);
    TU_MEM_END;
}
END_TEST

/* The GAN pitfall: a weight updated (here by a fill, as an optimizer step
 * writes it) between one loss's forward and its backward; a view of the
 * weight counts, since views share the storage. After backward, any
 * change is fine, and a new forward reads the new values. */
START_TEST(test_step_between_forward_and_backward)
{
    TU_MEM_BEGIN;
    Tensor *x = rnd(2, (const int64_t[]){2, 3}, 1, false, false);
    Tensor *w1 = rnd(2, (const int64_t[]){4, 3}, 2, true, false);
    Tensor *w2 = rnd(2, (const int64_t[]){2, 4}, 3, true, false);
    for (int again = 0; again < 2; again++) {
        CtScope *s = ct_scope_open();
        Tensor *h = tensor_tanh(tensor_linear(x, w1, NULL));
        Tensor *loss = tensor_sum_all(tensor_linear(h, w2, NULL));
        ck_assert_int_eq(tensor_fill_(tensor_slice(w2, 0, 1, 2, 1), 0.25), CT_OK);
        if (!again) {
            ck_assert_int_eq(tensor_backward(loss, NULL), CT_ERR_STATE);
            tu_assert_error(CT_ERR_STATE,
                            "linear's backward needs the values its input 1 (f32[2, 4]");
            ck_assert_ptr_null(tensor_grad(w1));
            ck_assert_ptr_null(tensor_grad(w2));
        } else { /* forward again after the change, then backward */
            loss = tensor_sum_all(tensor_linear(h, w2, NULL));
            ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
            ck_assert_int_eq(tensor_fill_(w2, 0.5), CT_OK); /* after backward */
            ck_assert_ptr_nonnull(tensor_grad(w1));
        }
        ct_scope_close(s);
    }
    tensor_free(x);
    tensor_free(w1);
    tensor_free(w2);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("saved_versions");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_in_place_change_refused, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_unread_inputs_may_change);
    tcase_add_test(tc, test_tensor_data_is_not_counted);
    tcase_add_test(tc, test_step_between_forward_and_backward);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
