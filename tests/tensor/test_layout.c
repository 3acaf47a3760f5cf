/* Channels-last layout (tensor/layout.c) on the CPU: tensor_channels_last
 * gives the values in NHWC storage and passes gradients back; elementwise
 * ops (unary, binary with broadcasting, their backward, where, casts) keep
 * the layout and give the bits of the contiguous computation; a mix of
 * layouts gives a contiguous result; convolution and batch norm, which the
 * CPU runs on contiguous copies, give the bits of the contiguous network,
 * forward and backward, for a residual block. */
#include "tensor/internal.h"
#include "tensor/mem.h"
#include "testutil.h"

static const int64_t shape4[4] = {2, 5, 3, 4};

/* f32 leaf of seeded values in [-1, 1), requiring grad when grad; the
 * caller's when no scope is open. */
static Tensor *leaf(int nd, const int64_t *shape, unsigned seed, bool grad)
{
    Tensor *r = tu_rand64(nd, shape, -1, 1, seed, false);
    Tensor *t = tensor_cast(r, CT_F32); /* no scope open: the caller's */
    tensor_free(r);
    if (grad) ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

START_TEST(test_channels_last_copy)
{
    TU_MEM_BEGIN;
    Tensor *x = leaf(4, shape4, 1, true), *w = leaf(4, shape4, 2, false);
    CtScope *s = ct_scope_open();
    ck_assert(!tensor_is_channels_last(x));
    Tensor *c = tensor_channels_last(x);
    ck_assert_ptr_nonnull(c);
    tu_assert_shape(c, 4, 2, 5, 3, 4);
    const int64_t *st = tensor_strides(c);
    ck_assert_int_eq(st[0], 60);
    ck_assert_int_eq(st[1], 1);
    ck_assert_int_eq(st[2], 20);
    ck_assert_int_eq(st[3], 5);
    ck_assert(tensor_is_channels_last(c));
    tu_assert_same_bits("values", c, x);
    ck_assert_ptr_eq(tensor_channels_last(c), c); /* already: itself */
    /* the gradient reaches x in x's layout */
    ck_assert_int_eq(tensor_backward(tensor_sum(tensor_mul(c, w), 0, NULL, false), NULL),
                     CT_OK);
    tu_assert_same_bits("grad", tensor_grad(x), w);
    ck_assert(tensor_channels_last(tensor_zeros(2, shape4, CT_F32, ct_cpu())) == NULL);
    tu_assert_error(CT_ERR_SHAPE, "tensor_channels_last: ");
    ct_scope_close(s);
    tensor_free(w);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

/* The layout rule of elementwise outputs, and their bits. */
START_TEST(test_elementwise_keeps_layout)
{
    TU_MEM_BEGIN;
    Tensor *a = leaf(4, shape4, 3, false), *b = leaf(4, shape4, 4, false);
    Tensor *bias = leaf(4, (const int64_t[]){1, 5, 1, 1}, 5, false);
    CtScope *s = ct_scope_open();
    Tensor *ac = tensor_channels_last(a), *bc = tensor_channels_last(b);
    Tensor *sum = tensor_add(ac, bc);
    ck_assert(ct_channels_last_only(sum));
    tu_assert_same_bits("add", sum, tensor_add(a, b));
    Tensor *biased = tensor_add(ac, bias); /* broadcast operands have no say */
    ck_assert(ct_channels_last_only(biased));
    tu_assert_same_bits("add bias", biased, tensor_add(a, bias));
    Tensor *mixed = tensor_mul(ac, b); /* one contiguous operand: contiguous */
    ck_assert(tensor_is_contiguous(mixed));
    tu_assert_same_bits("mixed", mixed, tensor_mul(a, b));
    Tensor *r = tensor_relu(ac);
    ck_assert(ct_channels_last_only(r));
    tu_assert_same_bits("relu", r, tensor_relu(a));
    Tensor *h = tensor_cast(ac, CT_BF16);
    ck_assert(ct_channels_last_only(h));
    tu_assert_same_bits("cast", h, tensor_cast(a, CT_BF16));
    Tensor *cond = tensor_gt(ac, bc);
    ck_assert(ct_channels_last_only(cond));
    Tensor *pick = tensor_where(cond, ac, bc);
    ck_assert(ct_channels_last_only(pick));
    tu_assert_same_bits("where", pick, tensor_where(tensor_gt(a, b), a, b));
    /* a tensor both contiguous and channels last (one channel) stays
     * contiguous */
    Tensor *one = tensor_zeros(4, (const int64_t[]){2, 1, 3, 4}, CT_F32, ct_cpu());
    ck_assert(ct_is_channels_last(one) && !ct_channels_last_only(one));
    ck_assert(tensor_is_contiguous(tensor_exp(one)));
    ct_scope_close(s);
    tensor_free(a);
    tensor_free(b);
    tensor_free(bias);
    TU_MEM_END;
}
END_TEST

/* A residual block: conv, batch norm + ReLU, conv, batch norm, added to the
 * input and ReLU'd, then a weighted sum as the loss. */
typedef struct Block {
    Tensor *w1, *w2, *g1, *b1, *g2, *b2, *rm[2], *rv[2], *lw;
} Block;

static Tensor *block_loss(const Block *k, Tensor *x)
{
    const CtConv2dArgs same = {.padding = {1, 1}};
    Tensor *h = tensor_conv2d(x, k->w1, NULL, &same);
    h = tensor_batch_norm_relu(h, k->rm[0], k->rv[0], k->g1, k->b1, true, 0.1, 1e-5);
    h = tensor_conv2d(h, k->w2, NULL, &same);
    h = tensor_batch_norm(h, k->rm[1], k->rv[1], k->g2, k->b2, true, 0.1, 1e-5);
    Tensor *y = tensor_add_relu(h, x);
    return tensor_sum(tensor_mul(y, k->lw), 0, NULL, false);
}

START_TEST(test_residual_block_same_bits)
{
    TU_MEM_BEGIN;
    const int64_t ws[4] = {5, 5, 3, 3}, cs[1] = {5};
    Block k = {
        leaf(4, ws, 10, true),
        leaf(4, ws, 11, true),
        leaf(1, cs, 12, true),
        leaf(1, cs, 13, true),
        leaf(1, cs, 14, true),
        leaf(1, cs, 15, true),
        {tensor_zeros(1, cs, CT_F32, ct_cpu()), tensor_zeros(1, cs, CT_F32, ct_cpu())},
        {tensor_ones(1, cs, CT_F32, ct_cpu()), tensor_ones(1, cs, CT_F32, ct_cpu())},
        leaf(4, shape4, 16, false)};
    Tensor *x = leaf(4, shape4, 17, true);
    Tensor *params[6] = {k.w1, k.w2, k.g1, k.b1, k.g2, k.b2};
    Tensor *loss[2], *grads[2][7];
    CtScope *s = ct_scope_open();
    for (int cl = 0; cl < 2; cl++) {
        Tensor *in = cl ? tensor_channels_last(x) : x;
        loss[cl] = block_loss(&k, in);
        ck_assert_msg(loss[cl], "%s", ct_last_error());
        ck_assert_int_eq(tensor_backward(loss[cl], NULL), CT_OK);
        for (int i = 0; i < 6; i++) {
            grads[cl][i] = tensor_clone(tensor_grad(params[i]));
            ck_assert_int_eq(tensor_zero_(tensor_grad(params[i])), CT_OK);
        }
        grads[cl][6] = tensor_clone(tensor_grad(x));
        ck_assert_int_eq(tensor_zero_(tensor_grad(x)), CT_OK);
    }
    tu_assert_same_bits("loss", loss[0], loss[1]);
    for (int i = 0; i < 7; i++) tu_assert_same_bits("grad", grads[0][i], grads[1][i]);
    ct_scope_close(s);
    for (int i = 0; i < 6; i++) tensor_free(params[i]);
    for (int i = 0; i < 2; i++) {
        tensor_free(k.rm[i]);
        tensor_free(k.rv[i]);
    }
    tensor_free(k.lw);
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

/* An elementwise op on channels-last operands runs on (N, H, W, C)
 * aliases of them; when making one fails, the aliases made are released
 * and nothing else: every operand keeps its references. */
START_TEST(test_alias_failure_keeps_references)
{
    TU_MEM_BEGIN;
    Tensor *a = leaf(4, shape4, 7, false), *b = leaf(4, shape4, 8, false);
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_channels_last(a), *y = tensor_channels_last(b);
    Tensor *out =
        ct_tensor_new_for(4, shape4, CT_F32, ct_cpu(), 2, (const Tensor *[]){x, y});
    ck_assert(tensor_is_channels_last(out));
    CtBinaryParams p = {CT_BIN_ADD};
    CtOpCall c = {.op = CT_OP_BINARY, .out = {out}, .in = {x, y}, .params = &p};
    int rx = x->refcount, ry = y->refcount, ro = out->refcount;
    for (int64_t n = 1; n <= 3; n++) { /* x's alias, y's, out's */
        ct_alloc_fail_at(n);
        CtStatus st = ct_elementwise_dispatch(&c);
        ct_alloc_fail_at(0);
        ck_assert_int_eq(st, CT_ERR_OOM);
        ck_assert_int_eq(x->refcount, rx);
        ck_assert_int_eq(y->refcount, ry);
        ck_assert_int_eq(out->refcount, ro);
    }
    ct_clear_error();
    ck_assert_int_eq(ct_elementwise_dispatch(&c), CT_OK);
    tu_assert_same_bits("sum", out, tensor_add(a, b));
    ct_scope_close(s);
    tensor_free(a);
    tensor_free(b);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_layout");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_channels_last_copy);
    tcase_add_test(tc, test_elementwise_keeps_layout);
    tcase_add_test(tc, test_residual_block_same_bits);
    tcase_add_test(tc, test_alias_failure_keeps_references);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
