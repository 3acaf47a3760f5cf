/* cuda_host_pad_channels: the channel padding body of bf16/f16
 * convolutions (tensor/cuda/pad_channels_body.h) against the CPU backend's
 * tensor_cat of the operand and zeros along dim 1 (padding), and its
 * slice of the first channels (cutting back), bit for bit, for 2-, 4- and
 * 8-byte elements: one to many rows, one to eight channels, planes from one
 * element to past a block, and an empty batch. */
#include "harness.h"
#include "tensor/cuda/pad_channels_body.h"

typedef struct Case {
    int64_t rows, c, c_pad, plane;
} Case;

static const Case cases[] = {
    {2, 3, 8, 49}, {1, 1, 8, 1}, {3, 5, 8, 300}, {0, 3, 8, 4}, {4, 12, 16, 7}};

/* A persistent (rows, c, 1, plane) tensor of dt with distinct values. */
static Tensor *operand(int64_t rows, int64_t c, int64_t plane, CtDType dt)
{
    const int64_t n = rows * c * plane, shape[4] = {rows, c, 1, plane};
    Tensor *d = ch_buffer(n > 0 ? n : 1, CT_F64);
    double *v = (double *)ct_ptr(d);
    for (int64_t i = 0; i < n; i++) v[i] = (double)(i % 251) - 125.5;
    Tensor *t = ct_tensor_new_persistent(4, shape, dt, ct_cpu());
    if (n > 0) {
        CtScope *s = ct_scope_open();
        ck_assert_int_eq(
            tensor_copy_(t, tensor_reshape(tensor_slice(d, 0, 0, n, 1), 4, shape)),
            CT_OK);
        ct_scope_close(s);
    }
    tensor_free(d);
    return t;
}

/* Runs the body from src (rows, c_in, plane) to a buffer of rows × c_out ×
 * plane and compares it with want. */
template <typename S>
static void run_body(const Tensor *src, int64_t c_in, int64_t c_out, int64_t plane,
                     const Tensor *want, const char *what)
{
    const int64_t n = tensor_numel(want);
    ChShape shapes[2];
    int ns = ch_shapes(n, shapes);
    for (int k = 0; k < ns; k++) {
        Tensor *got = ch_buffer(n > 0 ? n : 1, tensor_dtype(want));
        ch_launch(shapes[k].grid, shapes[k].block, [&](CtThread t) {
            ct_pad_channels_thread<S>(t, (S *)ct_ptr(got), (const S *)ct_ptr(src), c_in,
                                      c_out, plane, n);
        });
        if (n > 0) ch_assert_same_bytes(want, got, what);
        tensor_free(got);
    }
}

template <typename S> static void check_case(const Case &c, CtDType dt)
{
    Tensor *x = operand(c.rows, c.c, c.plane, dt);
    CtScope *s = ct_scope_open();
    const int64_t zs[4] = {c.rows, c.c_pad - c.c, 1, c.plane};
    Tensor *parts[2] = {x, tensor_zeros(4, zs, dt, ct_cpu())};
    Tensor *padded = tensor_contiguous(tensor_cat(2, parts, 1));
    ck_assert_ptr_nonnull(padded);
    run_body<S>(x, c.c, c.c_pad, c.plane, padded, "padded");
    /* back: the first c channels of the padded operand are x again */
    Tensor *cut = tensor_contiguous(tensor_slice(padded, 1, 0, c.c, 1));
    ck_assert_ptr_nonnull(cut);
    run_body<S>(padded, c.c_pad, c.c, c.plane, cut, "cut back");
    if (tensor_numel(x) > 0) ch_assert_same_bytes(x, cut, "round trip");
    ct_scope_close(s);
    tensor_free(x);
}

START_TEST(test_pad_channels_matches_cpu)
{
    for (const Case &c : cases) {
        check_case<uint16_t>(c, CT_BF16);
        check_case<uint16_t>(c, CT_F16);
        check_case<uint32_t>(c, CT_F32);
        check_case<uint64_t>(c, CT_F64);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_pad_channels");
    TCase *tc = tcase_create("pad_channels");
    tcase_add_test(tc, test_pad_channels_matches_cpu);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
