/* How failures are reported: every op's allocations failed one at a time
 * with no scope open (a clear error, the fresh output released, no leak),
 * ct_error_wrap, and the sticky-NULL rule. */
#include <stdlib.h>

#include "tensor/mem.h"
#include "testutil.h"

/* Inputs shared by the ops below (the float ones require grad). Each op
 * makes exactly one library call: an intermediate would be caller-owned
 * here and is not what is tested. */
typedef struct Inputs {
    Tensor *x, *w, *wt, *b, *idx, *idx2, *idx2t, *cond, *img, *kern;
    Tensor *img_cl; /* a leaf like img, channels last: elementwise ops run on
                     * (N, H, W, C) aliases of their operands */
} Inputs;

static Inputs inputs_create(void)
{
    Inputs in = {
        .x = tu_rand64(2, (const int64_t[]){2, 3}, -1, 1, 1, true),
        .w = tu_rand64(2, (const int64_t[]){4, 3}, -1, 1, 2, true),
        .wt = tu_rand64(2, (const int64_t[]){3, 4}, -1, 1, 6, true),
        .b = tu_rand64(1, (const int64_t[]){4}, -1, 1, 3, true),
        .idx = tu_tensor(CT_I64, 1, (const int64_t[]){2}, (const double[]){1, 0}),
        .idx2 = tu_tensor(CT_I64, 2, (const int64_t[]){2, 3},
                          (const double[]){1, 0, 1, 0, 0, 1}),
        .cond = tu_tensor(CT_BOOL, 2, (const int64_t[]){2, 3},
                          (const double[]){1, 0, 1, 0, 1, 0}),
        .img = tu_rand64(4, (const int64_t[]){1, 2, 5, 5}, -1, 1, 4, true),
        .kern = tu_rand64(4, (const int64_t[]){3, 2, 3, 3}, -1, 1, 5, true),
    };
    /* a strided index: the kernels get a contiguous copy, so the ops
     * allocate after their output */
    CtScope *s = ct_scope_open();
    in.idx2t = tensor_retain(tensor_transpose(in.idx2, 0, 1));
    in.img_cl = tensor_retain(tensor_detach(tensor_channels_last(in.img)));
    ct_scope_close(s);
    ck_assert_int_eq(tensor_set_requires_grad(in.img_cl, true), CT_OK);
    ck_assert_ptr_nonnull(in.idx2t);
    ck_assert_ptr_nonnull(in.img_cl);
    return in;
}

static void inputs_free(Inputs *in)
{
    Tensor *all[] = {in->x,     in->w,    in->wt,  in->b,    in->idx,   in->idx2,
                     in->idx2t, in->cond, in->img, in->kern, in->img_cl};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tensor_free(all[i]);
}

typedef Tensor *(*OpFn)(const Inputs *in);

static Tensor *op_add(const Inputs *in)
{
    return tensor_add(in->x, in->x);
}
static Tensor *op_maximum(const Inputs *in)
{
    return tensor_maximum(in->x, in->x);
}
static Tensor *op_pow(const Inputs *in)
{
    return tensor_pow(in->x, in->x);
}
static Tensor *op_exp(const Inputs *in)
{
    return tensor_exp(in->x);
}
static Tensor *op_add_channels_last(const Inputs *in)
{
    return tensor_add(in->img_cl, in->img_cl);
}
static Tensor *op_relu_channels_last(const Inputs *in)
{
    return tensor_relu(in->img_cl);
}
static Tensor *op_index_select(const Inputs *in)
{
    return tensor_index_select(in->w, 0, in->idx);
}
static Tensor *op_embedding(const Inputs *in)
{
    return tensor_embedding(in->w, in->idx);
}
static Tensor *op_gather(const Inputs *in)
{
    return tensor_gather(in->x, 0, in->idx2t);
}
static Tensor *op_gather_contiguous(const Inputs *in)
{
    return tensor_gather(in->x, 0, in->idx2);
}
static Tensor *op_one_hot(const Inputs *in)
{
    return tensor_one_hot(in->idx2t, 3, CT_F32);
}
static Tensor *op_cross_entropy(const Inputs *in)
{
    return tensor_cross_entropy(in->x, in->idx, NULL);
}
static Tensor *op_normal(const Inputs *in)
{
    (void)in;
    CtGenerator g = ct_generator(1, 0);
    return tensor_normal(&g, 1, (const int64_t[]){5}, 0.0, 1.0, CT_F32, ct_cpu());
}
static Tensor *op_cast(const Inputs *in)
{
    return tensor_cast(in->x, CT_F32);
}
static Tensor *op_pin_memory(const Inputs *in)
{
    return tensor_pin_memory(in->x);
}
static Tensor *op_to_device_async(const Inputs *in)
{
    return tensor_to_device_async(in->x, ct_cpu());
}
static Tensor *op_matmul(const Inputs *in)
{
    return tensor_matmul(in->x, in->wt);
}
static Tensor *op_linear(const Inputs *in)
{
    return tensor_linear(in->x, in->w, in->b);
}
static Tensor *op_log_softmax(const Inputs *in)
{
    return tensor_log_softmax(in->x, 1);
}
static Tensor *op_cat(const Inputs *in)
{
    return tensor_cat(2, (Tensor *const[]){in->x, in->w}, 0);
}
static Tensor *op_max(const Inputs *in)
{
    return tensor_max(in->x, 1, (const int[]){1}, false);
}
static Tensor *op_where(const Inputs *in)
{
    return tensor_where(in->cond, in->x, in->x);
}
static Tensor *op_layer_norm(const Inputs *in)
{
    return tensor_layer_norm(in->x, 1, NULL, NULL, 1e-5);
}
static Tensor *op_conv2d(const Inputs *in)
{
    return tensor_conv2d(in->img, in->kern, NULL, &(CtConv2dArgs){.stride = {1, 1}});
}
static Tensor *op_max_pool(const Inputs *in)
{
    return tensor_max_pool2d(in->img, &(CtPool2dArgs){.kernel = {2, 2}});
}
static Tensor *op_expand(const Inputs *in)
{
    return tensor_expand(in->b, 2, (const int64_t[]){2, 4});
}

static Tensor *op_mse(const Inputs *in)
{
    return tensor_mse_loss(in->x, in->x, CT_REDUCTION_MEAN);
}
static Tensor *op_l1(const Inputs *in)
{
    return tensor_l1_loss(in->x, in->x, CT_REDUCTION_SUM);
}
static Tensor *op_bce(const Inputs *in)
{
    return tensor_bce_with_logits(in->x, in->x, NULL, CT_REDUCTION_MEAN);
}
static Tensor *op_batch_norm(const Inputs *in)
{
    return tensor_batch_norm(in->img, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
}
static Tensor *op_avg_pool(const Inputs *in)
{
    return tensor_avg_pool2d(in->img, &(CtPool2dArgs){.kernel = {2, 2}});
}
static Tensor *op_stack(const Inputs *in)
{
    return tensor_stack(2, (Tensor *const[]){in->x, in->x}, 1);
}
static Tensor *op_var(const Inputs *in)
{
    return tensor_var(in->w, 1, (const int[]){0}, 1, true);
}
static Tensor *op_argmax(const Inputs *in)
{
    return tensor_argmax(in->w, 1, false);
}
static Tensor *op_masked_fill(const Inputs *in)
{
    return tensor_masked_fill(in->x, in->cond, 0.5);
}
static Tensor *op_dropout(const Inputs *in)
{
    CtGenerator g = ct_generator(3, 0);
    return tensor_dropout(in->x, 0.5, true, &g);
}
static Tensor *op_reshape_copy(const Inputs *in)
{
    return tensor_reshape(in->idx2t, 1, (const int64_t[]){6});
}
static Tensor *op_sum_to(const Inputs *in)
{
    return tensor_sum_to(in->w, 1, (const int64_t[]){3});
}

static Tensor *op_flatten_copy(const Inputs *in)
{
    return tensor_flatten(in->idx2t, 0, 1);
}
static Tensor *op_adaptive_pool(const Inputs *in)
{
    return tensor_adaptive_avg_pool2d(in->img, 2, 3);
}
static Tensor *op_select(const Inputs *in)
{
    return tensor_select(in->w, 1, 2);
}
static Tensor *op_permute(const Inputs *in)
{
    return tensor_permute(in->img, (const int[]){0, 2, 3, 1});
}
static Tensor *op_nll(const Inputs *in)
{
    return tensor_nll_loss(in->x, in->idx, NULL);
}
static Tensor *op_clamp(const Inputs *in)
{
    return tensor_clamp(in->x, -0.5, 0.5);
}
static Tensor *op_full(const Inputs *in)
{
    (void)in;
    return tensor_full(2, (const int64_t[]){2, 3}, 1.5, CT_F32, ct_cpu());
}
static Tensor *op_channels_last(const Inputs *in)
{
    return tensor_channels_last(in->img);
}
static Tensor *op_arange(const Inputs *in)
{
    (void)in;
    return tensor_arange(0, 5, 1, CT_I64, ct_cpu());
}
static Tensor *op_from_data(const Inputs *in)
{
    (void)in;
    return tensor_from_data((const float[]){1, 2}, 1, (const int64_t[]){2}, CT_F32,
                            ct_cpu());
}

static const struct {
    const char *name;
    OpFn fn;
} ops[] = {
    {"add", op_add},
    {"maximum", op_maximum},
    {"pow", op_pow},
    {"exp", op_exp},
    {"add_channels_last", op_add_channels_last},
    {"relu_channels_last", op_relu_channels_last},
    {"index_select", op_index_select},
    {"embedding", op_embedding},
    {"gather", op_gather},
    {"gather_contiguous", op_gather_contiguous},
    {"one_hot", op_one_hot},
    {"cross_entropy", op_cross_entropy},
    {"normal", op_normal},
    {"cast", op_cast},
    {"pin_memory", op_pin_memory},
    {"to_device_async", op_to_device_async},
    {"matmul", op_matmul},
    {"linear", op_linear},
    {"log_softmax", op_log_softmax},
    {"cat", op_cat},
    {"max", op_max},
    {"where", op_where},
    {"layer_norm", op_layer_norm},
    {"conv2d", op_conv2d},
    {"max_pool2d", op_max_pool},
    {"expand", op_expand},
    {"mse_loss", op_mse},
    {"l1_loss", op_l1},
    {"bce_with_logits", op_bce},
    {"batch_norm", op_batch_norm},
    {"avg_pool2d", op_avg_pool},
    {"stack", op_stack},
    {"var", op_var},
    {"argmax", op_argmax},
    {"masked_fill", op_masked_fill},
    {"dropout", op_dropout},
    {"reshape_copy", op_reshape_copy},
    {"sum_to", op_sum_to},
    {"flatten_copy", op_flatten_copy},
    {"adaptive_avg_pool2d", op_adaptive_pool},
    {"select", op_select},
    {"permute", op_permute},
    {"nll_loss", op_nll},
    {"clamp", op_clamp},
    {"full", op_full},
    {"channels_last", op_channels_last},
    {"arange", op_arange},
    {"from_data", op_from_data},
};

/* With no scope open (the case where a lost output leaks), fails the op's
 * allocations one at a time: each run returns NULL with an out-of-memory
 * error and leaves nothing allocated, until a run sees no failure. */
START_TEST(test_every_allocation_failure_of_every_op)
{
    Inputs in = inputs_create();
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        int64_t failures = 0;
        for (int64_t n = 1;; n++) {
            size_t mem0 = ct_alloc_stats(ct_cpu()).in_use;
            ct_clear_error();
            ct_alloc_fail_at(n);
            Tensor *y = ops[k].fn(&in);
            int64_t counted = ct_alloc_counted();
            ct_alloc_fail_at(0);
            if (n > counted) { /* nothing failed: the op must have worked */
                ck_assert_msg(y != NULL, "%s: %s", ops[k].name, ct_last_error());
                tensor_free(y); /* and kept nothing else */
                ck_assert_msg(ct_alloc_stats(ct_cpu()).in_use == mem0,
                              "%s: %zu bytes kept after its output was freed",
                              ops[k].name, ct_alloc_stats(ct_cpu()).in_use - mem0);
                break;
            }
            ck_assert_msg(y == NULL, "%s: allocation %lld failed, yet it succeeded",
                          ops[k].name, (long long)n);
            ck_assert_msg(ct_last_status() == CT_ERR_OOM, "%s, allocation %lld: %s (%s)",
                          ops[k].name, (long long)n, ct_status_str(ct_last_status()),
                          ct_last_error());
            ck_assert_msg(ct_alloc_stats(ct_cpu()).in_use == mem0,
                          "%s, allocation %lld: %zu bytes leaked", ops[k].name,
                          (long long)n, ct_alloc_stats(ct_cpu()).in_use - mem0);
            failures++;
        }
        ck_assert_msg(failures >= 1, "%s made no counted allocation", ops[k].name);
    }
    inputs_free(&in);
    ct_clear_error();
}
END_TEST

/* Forward and backward (seeded with ones) of op k with no scope open. */
static CtStatus forward_backward(const Inputs *in, size_t k)
{
    Tensor *y = ops[k].fn(in);
    Tensor *g = y ? tensor_ones_like(y) : NULL;
    CtStatus st = g ? tensor_backward(y, g) : ct_last_status();
    tensor_free(g);
    tensor_free(y);
    return st;
}

/* The inputs that require grad, and their gradients. */
enum { N_GRAD_INPUTS = 7 };
static void grad_inputs(const Inputs *in, Tensor **out)
{
    Tensor *ts[N_GRAD_INPUTS] = {in->x,   in->w,    in->wt,    in->b,
                                 in->img, in->kern, in->img_cl};
    memcpy(out, ts, sizeof ts);
}

static void clear_grads(const Inputs *in)
{
    Tensor *ts[N_GRAD_INPUTS];
    grad_inputs(in, ts);
    for (int i = 0; i < N_GRAD_INPUTS; i++) tensor_set_grad(ts[i], NULL);
}

/* Gradients bit-identical to ref[] (copies; NULL where none). */
static bool same_grads(const Inputs *in, Tensor *const *ref)
{
    Tensor *ts[N_GRAD_INPUTS];
    grad_inputs(in, ts);
    for (int i = 0; i < N_GRAD_INPUTS; i++) {
        Tensor *g = tensor_grad(ts[i]);
        if (!g != !ref[i]) return false;
        if (g && memcmp(tensor_data(g), tensor_data(ref[i]),
                        (size_t)tensor_numel(g) * ct_dtype_size(tensor_dtype(g))) != 0)
            return false;
    }
    return true;
}

/* Through backward too: every failure is reported, and a run that reports
 * none has exactly the gradients of an undisturbed run (no node or gradient
 * silently skipped). */
START_TEST(test_every_allocation_failure_through_backward)
{
    Inputs in = inputs_create();
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        Tensor *y0 = ops[k].fn(&in);
        bool differentiable = tensor_requires_grad(y0);
        tensor_free(y0);
        if (!differentiable) continue;
        clear_grads(&in);
        ck_assert_int_eq(forward_backward(&in, k), CT_OK);
        Tensor *ts[N_GRAD_INPUTS], *ref[N_GRAD_INPUTS];
        grad_inputs(&in, ts);
        for (int i = 0; i < N_GRAD_INPUTS; i++)
            ref[i] = tensor_retain(tensor_grad(ts[i]));
        for (int64_t n = 1;; n++) {
            clear_grads(&in);
            size_t mem0 = ct_alloc_stats(ct_cpu()).in_use;
            ct_clear_error();
            ct_alloc_fail_at(n);
            CtStatus st = forward_backward(&in, k);
            int64_t counted = ct_alloc_counted();
            ct_alloc_fail_at(0);
            if (st == CT_OK) {
                ck_assert_msg(same_grads(&in, ref),
                              "%s, allocation %lld: wrong gradients", ops[k].name,
                              (long long)n);
            } else {
                ck_assert_msg(ct_last_status() == st && ct_last_error()[0],
                              "%s, allocation %lld: %s without a message", ops[k].name,
                              (long long)n, ct_status_str(st));
                clear_grads(&in);
                ck_assert_msg(ct_alloc_stats(ct_cpu()).in_use == mem0,
                              "%s, allocation %lld: %zu bytes leaked", ops[k].name,
                              (long long)n, ct_alloc_stats(ct_cpu()).in_use - mem0);
            }
            if (n > counted) {
                ck_assert_int_eq(st, CT_OK);
                break;
            }
        }
        for (int i = 0; i < N_GRAD_INPUTS; i++) tensor_free(ref[i]);
    }
    clear_grads(&in);
    inputs_free(&in);
    ct_clear_error();
}
END_TEST

/* ------------------------------------------------------------ ct_error_wrap */

START_TEST(test_error_wrap_prefixes_context)
{
    ct_error(CT_ERR_IO, "open %s: %s", "a.bin", "no such file");
    ck_assert_int_eq(ct_error_wrap(CT_ERR_FORMAT, "loading model %d", 3), CT_ERR_FORMAT);
    ck_assert_str_eq(ct_last_error(), "loading model 3: open a.bin: no such file");
    ck_assert_int_eq(ct_last_status(), CT_ERR_FORMAT);
    /* CT_OK keeps the recorded status */
    ck_assert_int_eq(ct_error_wrap(CT_OK, "outer"), CT_ERR_FORMAT);
    ck_assert_str_eq(ct_last_error(), "outer: loading model 3: open a.bin: no such file");
    /* nothing recorded: the context alone, and CT_OK becomes invalid */
    ct_clear_error();
    ck_assert_int_eq(ct_error_wrap(CT_OK, "hook %s returned NULL", "h"), CT_ERR_INVALID);
    ck_assert_str_eq(ct_last_error(), "hook h returned NULL");
    ct_clear_error();
}
END_TEST

/* The message itself as an argument, and results longer than the buffer:
 * truncated, never undefined (ASan/UBSan run this). */
START_TEST(test_error_wrap_with_itself_and_long_messages)
{
    ct_error(CT_ERR_SHAPE, "inner");
    ct_error_wrap(CT_OK, "[%s]", ct_last_error());
    ck_assert_str_eq(ct_last_error(), "[inner]: inner");
    ck_assert_int_eq(ct_last_status(), CT_ERR_SHAPE);
    ct_error(CT_ERR_IO, "again: %s", ct_last_error()); /* ct_error too */
    ck_assert_str_eq(ct_last_error(), "again: [inner]: inner");

    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ct_error(CT_ERR_IO, "%s", big);
    size_t cap = strlen(ct_last_error()); /* the message buffer, less its NUL */
    ck_assert_uint_lt(cap, sizeof big - 1);
    for (int i = 0; i < 4; i++) {
        ct_error_wrap(CT_OK, "ctx%d %s", i, ct_last_error());
        ck_assert_uint_eq(strlen(ct_last_error()), cap);
        ck_assert(strncmp(ct_last_error(), "ctx", 3) == 0);
    }
    ck_assert_int_eq(ct_last_status(), CT_ERR_IO);
    ct_error_wrap(CT_ERR_STATE, "%s", big);
    ck_assert_uint_eq(strlen(ct_last_error()), cap);
    ck_assert_int_eq(ct_last_status(), CT_ERR_STATE);
    ct_clear_error();
}
END_TEST

/* Sticky NULL: an op given NULL keeps the FIRST error, even across a chain. */
START_TEST(test_sticky_null_keeps_the_first_error)
{
    Tensor *a = tu_rand64(1, (const int64_t[]){3}, -1, 1, 1, false);
    Tensor *b = tu_rand64(1, (const int64_t[]){4}, -1, 1, 2, false);
    CtScope *s = ct_scope_open();
    Tensor *y = tensor_relu(tensor_exp(tensor_add(a, b)));
    ck_assert_ptr_null(y);
    ct_scope_close(s);
    tu_assert_error(CT_ERR_SHAPE, "add");
    tensor_free(a);
    tensor_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_op_failure");
    TCase *tc = tcase_create("op_failure");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_every_allocation_failure_of_every_op);
    tcase_add_test(tc, test_every_allocation_failure_through_backward);
    tcase_add_test(tc, test_error_wrap_prefixes_context);
    tcase_add_test(tc, test_error_wrap_with_itself_and_long_messages);
    tcase_add_test(tc, test_sticky_null_keeps_the_first_error);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
