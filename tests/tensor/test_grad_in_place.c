/* Backward writes a leaf's gradient in place when the gradient is known to
 * hold zeros (tensor.h, "Autograd"): the same bits as adding to the zeros,
 * one op fewer per leaf (ct_op_count), for linear, conv, batch norm, layer
 * norm and casts; and the addition whenever the zeros are not known: a
 * write after the zeroing (a fill, tensor_data), a second backward without
 * zeroing, a leaf used by two ops or twice by one, part of a flat gradient
 * block zeroed (before a backward and after one), two leaves given one
 * gradient. Every gradient of a packed MLP is written in place. Convolution
 * and the norms on CUDA too where a GPU is. */
#include "testutil.h"

typedef Tensor *(*Net)(Tensor **p, Tensor *x);

static CtDevice dev; /* where param and input put their tensors */

/* An f32 tensor on dev of shape (d0, d1, ...) in [-1, 1). */
static Tensor *input(int nd, const int64_t *shape, unsigned seed)
{
    Tensor *t = tu_rand64(nd, shape, -1, 1, seed, false);
    Tensor *f = tensor_cast(t, CT_F32), *x = tensor_to_device(f, dev);
    tensor_free(t);
    tensor_free(f);
    ck_assert_ptr_nonnull(x);
    return x;
}

/* The same, a leaf requiring grad, with a zero gradient of its own. */
static Tensor *param(int nd, const int64_t *shape, unsigned seed)
{
    Tensor *g = input(nd, shape, seed), *z = tensor_zeros(nd, shape, CT_F32, dev);
    ck_assert_int_eq(tensor_set_requires_grad(g, true), CT_OK);
    ck_assert_int_eq(tensor_set_grad(g, z), CT_OK);
    tensor_free(z);
    return g;
}

/* Backward of sum(f(p, x)) `times` times; returns the ops the backwards
 * ran. Nothing is zeroed here. */
static uint64_t backward(Net f, Tensor **p, Tensor *x, int times)
{
    uint64_t ops = 0;
    for (int k = 0; k < times; k++) {
        CtScope *s = ct_scope_open();
        Tensor *loss = tensor_sum_all(f(p, x));
        ck_assert_ptr_nonnull(loss);
        uint64_t before = ct_op_count();
        ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
        ops += ct_op_count() - before;
        ct_scope_close(s);
    }
    return ops;
}

/* Zeroes every gradient; `dirty` then writes through tensor_data, so the
 * zeros are no longer known. */
static void zero(Tensor **p, int np, bool dirty)
{
    for (int i = 0; i < np; i++) {
        ck_assert_int_eq(tensor_zero_(tensor_grad(p[i])), CT_OK);
        if (dirty) ck_assert_ptr_nonnull(tensor_data(tensor_grad(p[i])));
    }
}

/* The gradients after zeroing and `times` backwards, with the zeros known
 * and not: the same bits, and `fewer` ops fewer with them known. */
static void check(Net f, Tensor **p, int np, Tensor *x, int times, uint64_t fewer)
{
    Tensor *ref[8];
    zero(p, np, true);
    uint64_t ops_add = backward(f, p, x, times);
    for (int i = 0; i < np; i++) ref[i] = tensor_clone(tensor_grad(p[i]));
    zero(p, np, false);
    uint64_t ops = backward(f, p, x, times);
    CtScope *s = ct_scope_open();
    for (int i = 0; i < np; i++)
        tu_assert_same_bits("gradient", tensor_to_device(tensor_grad(p[i]), ct_cpu()),
                            tensor_to_device(ref[i], ct_cpu()));
    ct_scope_close(s);
    for (int i = 0; i < np; i++) tensor_free(ref[i]);
    ck_assert_uint_eq(ops_add - ops, fewer);
}

static void free_all(Tensor **p, int np, Tensor *x)
{
    for (int i = 0; i < np; i++) tensor_free(p[i]);
    tensor_free(x);
}

static Tensor *linear_net(Tensor **p, Tensor *x)
{
    return tensor_tanh(tensor_linear(x, p[0], p[1]));
}

START_TEST(test_linear_in_place)
{
    TU_MEM_BEGIN;
    Tensor *p[2] = {param(2, (const int64_t[]){5, 7}, 1),
                    param(1, (const int64_t[]){5}, 2)};
    Tensor *x = input(2, (const int64_t[]){4, 7}, 3);
    check(linear_net, p, 2, x, 1, 2);
    check(linear_net, p, 2, x, 3, 2); /* accumulation: only the first is in place */
    free_all(p, 2, x);
    TU_MEM_END;
}
END_TEST

static Tensor *conv_net(Tensor **p, Tensor *x)
{
    CtConv2dArgs a = {.padding = {1, 1}};
    return tensor_tanh(tensor_conv2d(x, p[0], p[1], &a));
}

static Tensor *norm_net(Tensor **p, Tensor *x)
{
    Tensor *y = tensor_batch_norm(x, NULL, NULL, p[0], p[1], true, 0.1, 1e-5);
    return tensor_tanh(tensor_mul(y, y));
}

static Tensor *layer_norm_net(Tensor **p, Tensor *x)
{
    Tensor *y = tensor_layer_norm(x, 1, p[0], p[1], 1e-5);
    return tensor_tanh(tensor_mul(y, y));
}

static void conv_and_norms(void)
{
    Tensor *p[2] = {param(4, (const int64_t[]){4, 3, 3, 3}, 4),
                    param(1, (const int64_t[]){4}, 5)};
    Tensor *x = input(4, (const int64_t[]){2, 3, 6, 5}, 6);
    check(conv_net, p, 2, x, 1, 2);
    free_all(p, 2, x);
    Tensor *q[2] = {param(1, (const int64_t[]){3}, 7), param(1, (const int64_t[]){3}, 8)};
    x = input(4, (const int64_t[]){2, 3, 4, 4}, 9);
    check(norm_net, q, 2, x, 1, 2);
    free_all(q, 2, x);
    Tensor *r[2] = {param(1, (const int64_t[]){6}, 10),
                    param(1, (const int64_t[]){6}, 11)};
    x = input(2, (const int64_t[]){5, 6}, 12);
    check(layer_norm_net, r, 2, x, 1, 2);
    free_all(r, 2, x);
}

START_TEST(test_conv_and_norms_in_place)
{
    TU_MEM_BEGIN;
    conv_and_norms();
    TU_MEM_END;
}
END_TEST

/* cuDNN's convolution and batch norm overwrite their weight and bias
 * gradients too (GPU only). The check compares two backward passes bit for
 * bit: deterministic algorithms (cuDNN's may accumulate with atomics). */
START_TEST(test_conv_and_norms_in_place_cuda)
{
    if (ct_cuda_device_count() == 0) {
        fprintf(stderr, "grad_in_place: skipped 1 CUDA test: no device\n");
        return;
    }
    dev = ct_cuda(0);
    bool det = ct_set_deterministic(true);
    conv_and_norms();
    ct_set_deterministic(det);
    dev = ct_cpu();
}
END_TEST

/* After each test, even one that failed: back on the CPU, deterministic
 * algorithms off (the CUDA test's settings never reach the next tests). */
static void back_on_cpu(void)
{
    dev = ct_cpu();
    ct_set_deterministic(false);
}

/* A cast between the leaf and its op (as autocast casts weights): the
 * cast's backward writes the leaf gradient. */
static Tensor *cast_net(Tensor **p, Tensor *x)
{
    return tensor_tanh(tensor_matmul(tensor_cast(x, CT_F64), tensor_cast(p[0], CT_F64)));
}

/* The same leaf through two ops: the first writes, the second adds. */
static Tensor *tied_net(Tensor **p, Tensor *x)
{
    return tensor_linear(tensor_tanh(tensor_linear(x, p[0], p[1])), p[0], NULL);
}

/* The same leaf twice in one op: its two gradients are both added. */
static Tensor *self_net(Tensor **p, Tensor *x)
{
    (void)x;
    return tensor_tanh(tensor_linear(p[0], p[0], NULL));
}

START_TEST(test_cast_and_shared_leaves)
{
    TU_MEM_BEGIN;
    Tensor *p[2] = {param(2, (const int64_t[]){6, 6}, 13),
                    param(1, (const int64_t[]){6}, 14)};
    Tensor *x = input(2, (const int64_t[]){3, 6}, 15);
    check(cast_net, p, 1, x, 1, 1);
    check(tied_net, p, 2, x, 1, 2);
    check(self_net, p, 1, x, 1, 0);
    free_all(p, 2, x);
    TU_MEM_END;
}
END_TEST

START_TEST(test_write_after_zeroing_adds)
{
    TU_MEM_BEGIN;
    Tensor *p[2] = {param(2, (const int64_t[]){5, 7}, 16),
                    param(1, (const int64_t[]){5}, 17)};
    Tensor *x = input(2, (const int64_t[]){4, 7}, 18);
    zero(p, 2, false);
    uint64_t ops = backward(linear_net, p, x, 1);
    Tensor *g = tensor_clone(tensor_grad(p[0]));
    Tensor *one = tensor_full(2, (const int64_t[]){5, 7}, 1.0, CT_F32, ct_cpu());
    Tensor *want = tensor_add(one, g);
    zero(p, 2, false);
    ck_assert_int_eq(tensor_fill_(tensor_grad(p[0]), 1.0), CT_OK);
    ck_assert_uint_eq(backward(linear_net, p, x, 1), ops + 1);
    CtScope *s = ct_scope_open();
    tu_assert_same_bits("1 + gradient", tensor_grad(p[0]), want);
    ct_scope_close(s);
    free_all(p, 2, x);
    tensor_free(g);
    tensor_free(one);
    tensor_free(want);
    TU_MEM_END;
}
END_TEST

/* w (5, 7) and b (5) with gradients in one flat block of 40, as nn packs
 * them; `zero_block` zeroes it as stated, then a backward runs. Returns
 * its ops. */
typedef enum Zeroing { WHOLE, FIRST, HALVES, HALVES_WRITE_BETWEEN } Zeroing;

static uint64_t block_backward(Tensor **p, Tensor *block, Tensor *x, Zeroing z)
{
    Tensor *w_part = tensor_slice(block, 0, 0, 35, 1),
           *b_part = tensor_slice(block, 0, 35, 40, 1);
    switch (z) {
    case WHOLE: ck_assert_int_eq(tensor_zero_(block), CT_OK); break;
    case FIRST:
        ck_assert_int_eq(tensor_fill_(block, 2.0), CT_OK);
        ck_assert_int_eq(tensor_zero_(w_part), CT_OK);
        break;
    case HALVES:
        ck_assert_int_eq(tensor_zero_(b_part), CT_OK);
        ck_assert_int_eq(tensor_zero_(w_part), CT_OK);
        break;
    case HALVES_WRITE_BETWEEN:
        ck_assert_int_eq(tensor_zero_(b_part), CT_OK);
        ck_assert_int_eq(tensor_fill_(w_part, 3.0), CT_OK);
        ck_assert_int_eq(tensor_zero_(w_part), CT_OK);
        break;
    }
    return backward(linear_net, p, x, 1);
}

START_TEST(test_flat_block)
{
    TU_MEM_BEGIN;
    Tensor *p[2] = {param(2, (const int64_t[]){5, 7}, 19),
                    param(1, (const int64_t[]){5}, 20)};
    Tensor *x = input(2, (const int64_t[]){4, 7}, 21);
    CtScope *s = ct_scope_open();
    Tensor *block = tensor_zeros(1, (const int64_t[]){40}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_set_grad(p[0], tensor_view(tensor_slice(block, 0, 0, 35, 1),
                                                       2, (const int64_t[]){5, 7})),
                     CT_OK);
    ck_assert_int_eq(tensor_set_grad(p[1], tensor_slice(block, 0, 35, 40, 1)), CT_OK);
    uint64_t whole = block_backward(p, block, x, WHOLE);
    Tensor *ref = tensor_clone(block);
    ck_assert_uint_eq(block_backward(p, block, x, HALVES), whole);
    tu_assert_same_bits("halves", block, ref);
    ck_assert_uint_eq(block_backward(p, block, x, HALVES_WRITE_BETWEEN), whole + 1);
    tu_assert_same_bits("a write between", block, ref);
    ck_assert_uint_eq(block_backward(p, block, x, FIRST), whole + 1); /* b: 2 + g */
    tu_assert_same_bits(
        "w", tensor_grad(p[0]),
        tensor_view(tensor_slice(ref, 0, 0, 35, 1), 2, (const int64_t[]){5, 7}));
    ct_scope_close(s);
    free_all(p, 2, x);
    TU_MEM_END;
}
END_TEST

/* A leaf of shape `shape` on the CPU whose gradient is the view of block's
 * elements from `at` on. */
static Tensor *block_param(Tensor *block, int64_t at, int nd, const int64_t *shape,
                           unsigned seed)
{
    Tensor *p = input(nd, shape, seed);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    CtScope *s = ct_scope_open();
    Tensor *g = tensor_view(tensor_slice(block, 0, at, at + n, 1), nd, shape);
    ck_assert_int_eq(tensor_set_requires_grad(p, true), CT_OK);
    ck_assert_int_eq(tensor_set_grad(p, g), CT_OK);
    ct_scope_close(s);
    return p;
}

static Tensor *two_linear_net(Tensor **p, Tensor *x)
{
    return tensor_add(tensor_linear(x, p[0], NULL), tensor_linear(x, p[1], NULL));
}

/* w1 and w2 with gradients in one flat block: a backward writes both, then
 * only w1's is zeroed. w2's was written since the block's zeroing, so the
 * next backward adds to it (2 g2), and overwrites w1's (g1). */
START_TEST(test_block_zeroed_in_part_after_backward)
{
    TU_MEM_BEGIN;
    Tensor *block = tensor_zeros(1, (const int64_t[]){70}, CT_F32, ct_cpu());
    Tensor *p[2] = {block_param(block, 0, 2, (const int64_t[]){5, 7}, 22),
                    block_param(block, 35, 2, (const int64_t[]){5, 7}, 23)};
    Tensor *x = input(2, (const int64_t[]){4, 7}, 24);
    ck_assert_int_eq(tensor_zero_(block), CT_OK);
    backward(two_linear_net, p, x, 1);
    Tensor *g1 = tensor_clone(tensor_grad(p[0])), *g2 = tensor_clone(tensor_grad(p[1]));
    ck_assert_int_eq(tensor_zero_(tensor_grad(p[0])), CT_OK);
    backward(two_linear_net, p, x, 1);
    CtScope *s = ct_scope_open();
    tu_assert_same_bits("w1: g1", tensor_grad(p[0]), g1);
    tu_assert_same_bits("w2: g2 + g2", tensor_grad(p[1]), tensor_add(g2, g2));
    ct_scope_close(s);
    free_all(p, 2, x);
    tensor_free(block);
    tensor_free(g1);
    tensor_free(g2);
    TU_MEM_END;
}
END_TEST

/* Leaf k's gradient of sum(f(p, x)) alone: p's gradients are reset, and
 * the returned copy is caller-owned. */
static Tensor *grad_alone(Net f, Tensor **p, int np, Tensor *x, int k)
{
    for (int i = 0; i < np; i++) ck_assert_int_eq(tensor_set_grad(p[i], NULL), CT_OK);
    backward(f, p, x, 1);
    return tensor_clone(tensor_grad(p[k]));
}

/* Two leaves given one zeroed gradient buffer (tensor_set_grad): the sum of
 * their gradients, through two ops (two linears) and through one (layer
 * norm's weight and bias, which one kernel writes). */
START_TEST(test_leaves_sharing_a_gradient)
{
    TU_MEM_BEGIN;
    struct {
        Net f;
        int nd;
        int64_t shape[2];
        Tensor *x;
    } cases[] = {
        {two_linear_net, 2, {5, 7}, input(2, (const int64_t[]){4, 7}, 25)},
        {layer_norm_net, 1, {6}, input(2, (const int64_t[]){5, 6}, 26)},
    };
    for (int c = 0; c < 2; c++) {
        int nd = cases[c].nd;
        Tensor *p[2] = {input(nd, cases[c].shape, 27), input(nd, cases[c].shape, 28)};
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(tensor_set_requires_grad(p[i], true), CT_OK);
        Tensor *g1 = grad_alone(cases[c].f, p, 2, cases[c].x, 0);
        Tensor *g2 = grad_alone(cases[c].f, p, 2, cases[c].x, 1);
        Tensor *shared = tensor_zeros(nd, cases[c].shape, CT_F32, ct_cpu());
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(tensor_set_grad(p[i], shared), CT_OK);
        backward(cases[c].f, p, cases[c].x, 1);
        CtScope *s = ct_scope_open();
        tu_assert_same_bits("g1 + g2", shared, tensor_add(g1, g2));
        ct_scope_close(s);
        free_all(p, 2, cases[c].x);
        tensor_free(g1);
        tensor_free(g2);
        tensor_free(shared);
    }
    TU_MEM_END;
}
END_TEST

static Tensor *mlp_net(Tensor **p, Tensor *x)
{
    return tensor_tanh(
        tensor_linear(tensor_tanh(tensor_linear(x, p[0], p[1])), p[2], p[3]));
}

/* A two-layer MLP's gradients in one flat block, in the order of the
 * layers (as nn packs them) and in the reverse order: after the block is
 * zeroed, every backward of a few training steps writes all four gradients
 * in place, with the bits of adding them to zeros. */
START_TEST(test_packed_mlp_writes_every_gradient)
{
    TU_MEM_BEGIN;
    const int64_t w1[2] = {6, 7}, b1[1] = {6}, w2[2] = {3, 6}, b2[1] = {3};
    const int64_t forward_at[4] = {0, 42, 48, 66}, reverse_at[4] = {27, 21, 3, 0};
    const int64_t *at[2] = {forward_at, reverse_at};
    Tensor *x = input(2, (const int64_t[]){4, 7}, 29);
    for (int order = 0; order < 2; order++) {
        Tensor *block = tensor_zeros(1, (const int64_t[]){69}, CT_F32, ct_cpu());
        Tensor *p[4] = {block_param(block, at[order][0], 2, w1, 30),
                        block_param(block, at[order][1], 1, b1, 31),
                        block_param(block, at[order][2], 2, w2, 32),
                        block_param(block, at[order][3], 1, b2, 33)};
        for (int step = 0; step < 3; step++) {
            ck_assert_int_eq(tensor_zero_(block), CT_OK);
            ck_assert_ptr_nonnull(tensor_data(block)); /* zeros no longer known */
            uint64_t ops_add = backward(mlp_net, p, x, 1);
            Tensor *ref = tensor_clone(block);
            ck_assert_int_eq(tensor_zero_(block), CT_OK);
            ck_assert_uint_eq(ops_add - backward(mlp_net, p, x, 1), 4);
            CtScope *s = ct_scope_open();
            tu_assert_same_bits("gradients", block, ref);
            ct_scope_close(s);
            tensor_free(ref);
        }
        for (int i = 0; i < 4; i++) tensor_free(p[i]);
        tensor_free(block);
    }
    tensor_free(x);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    dev = ct_cpu();
    Suite *s = suite_create("grad_in_place");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, back_on_cpu);
    tcase_add_test(tc, test_linear_in_place);
    tcase_add_test(tc, test_conv_and_norms_in_place);
    tcase_add_test(tc, test_conv_and_norms_in_place_cuda);
    tcase_add_test(tc, test_cast_and_shared_leaves);
    tcase_add_test(tc, test_write_after_zeroing_adds);
    tcase_add_test(tc, test_flat_block);
    tcase_add_test(tc, test_block_zeroed_in_part_after_backward);
    tcase_add_test(tc, test_leaves_sharing_a_gradient);
    tcase_add_test(tc, test_packed_mlp_writes_every_gradient);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
