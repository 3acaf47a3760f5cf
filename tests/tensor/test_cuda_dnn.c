/* CUDA library paths against the CPU backend on cuda:0: cuDNN conv2d
 * (forward, backward data, backward weight and bias; f32, f64 and bf16
 * autocast), cuDNN batch norm in training and the eval-mode kernels,
 * pooling, the cuBLASLt bias + ReLU epilogue, linear's fused bias and
 * bias gradient, the ReLU-fused conv and linear with their gradients, the
 * deterministic switch (two backward-weight runs give the same bits),
 * autocast keeping a residual block's activations in bf16 on CUDA, and a
 * channels-last block keeping its layout through cuDNN's NHWC calls.
 * Without a device every test is skipped, loudly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "conv_case.h"
#include "tensor/norm.h"
#include "testutil.h"

static CtDevice gpu(void)
{
    return ct_cuda(0);
}

static Tensor *rand_t(CtDType dt, int64_t n, double lo, double hi, unsigned seed)
{
    Tensor *x = tu_rand64(1, &n, lo, hi, seed, false);
    Tensor *y = tensor_cast(x, dt);
    tensor_free(x);
    return y; /* scope-owned */
}

static Tensor *on_gpu(Tensor *t)
{
    return t ? tensor_to_device(t, gpu()) : NULL;
}

/* Asserts the CUDA tensor g holds the values of the CPU tensor c. */
#define assert_same(c, g, tol) assert_same_at(__LINE__, (c), (g), (tol))
static void assert_same_at(int line, const Tensor *c, const Tensor *g, double tol)
{
    int64_t n = tensor_numel(c);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ck_assert_int_eq(tensor_copy_to_host(c, v, CT_F64), CT_OK);
    tu_assert_values_at(__FILE__, line, g, v, n, tol, tol);
    free(v);
}

/* IN[i] <- a CUDA copy of in[i] (in[2] may be NULL), both requiring grad;
 * IN's are released by assert_grads_same. */
static void gpu_leaves(Tensor *in[3], Tensor *IN[3])
{
    for (int i = 0; i < 3; i++) {
        IN[i] = tensor_retain(tensor_detach(on_gpu(in[i])));
        tensor_set_requires_grad(in[i], true);
        tensor_set_requires_grad(IN[i], true);
    }
}

/* The gradients of the CUDA leaves IN match the CPU leaves in; frees IN. */
static void assert_grads_same(Tensor *in[3], Tensor *IN[3], double tol)
{
    for (int i = 0; i < 3; i++) {
        assert_same(tensor_grad(in[i]), tensor_grad(IN[i]), tol);
        tensor_free(IN[i]);
    }
}

static void run(CtOpCall *call)
{
    ck_assert_msg(ct_dispatch(call) == CT_OK, "%s: %s", ct_op_name(call->op),
                  ct_last_error());
}

/* The three convolution ops on both backends, f32 and f64. */
static void conv_matches_cpu(void)
{
    CtScope *s = ct_scope_open();
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        double tol = dt == CT_F64 ? 1e-12 : 1e-5;
        Tensor *x = rand_t(dt, 2 * 4 * 9 * 7, -1, 1, 1),
               *w = rand_t(dt, 6 * 2 * 9, -1, 1, 2);
        Tensor *b = rand_t(dt, 6, -1, 1, 3), *gy = rand_t(dt, 2 * 6 * 5 * 3, -1, 1, 4);
        Tensor *y = tensor_zeros(1, (int64_t[]){180}, dt, ct_cpu());
        Tensor *gx = tensor_zeros(1, (int64_t[]){504}, dt, ct_cpu());
        Tensor *gw = tensor_zeros(1, (int64_t[]){108}, dt, ct_cpu());
        Tensor *gb = tensor_zeros(1, (int64_t[]){6}, dt, ct_cpu());
        Tensor *Y = on_gpu(y), *GX = on_gpu(gx), *GW = on_gpu(gw), *GB = on_gpu(gb);
        Tensor *X = on_gpu(x), *W = on_gpu(w), *B = on_gpu(b), *GY = on_gpu(gy);
        CtOpCall calls[] = {
            {CT_OP_CONV2D, {y}, {x, w, b}, .params = &conv_case},
            {CT_OP_CONV2D, {Y}, {X, W, B}, .params = &conv_case},
            {CT_OP_CONV2D_BWD_DATA, {gx}, {gy, w}, .params = &conv_case},
            {CT_OP_CONV2D_BWD_DATA, {GX}, {GY, W}, .params = &conv_case},
            {CT_OP_CONV2D_BWD_WEIGHT, {gw, gb}, {gy, x}, .params = &conv_case},
            {CT_OP_CONV2D_BWD_WEIGHT, {GW, GB}, {GY, X}, .params = &conv_case},
        };
        for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) run(&calls[i]);
        assert_same(y, Y, tol);
        assert_same(gx, GX, tol);
        assert_same(gw, GW, tol);
        assert_same(gb, GB, tol);
    }
    ct_scope_close(s);
}

START_TEST(test_conv2d_matches_cpu)
{
    conv_matches_cpu();
}
END_TEST

/* The same under bf16 autocast. */
static void conv_autocast_matches_cpu(void)
{
    CtScope *s = ct_scope_open();
    CtConv2dParams p = conv_case;
    p.autocast = CT_BF16; /* both backends round the operands to bf16 */
    Tensor *x = rand_t(CT_F32, 504, -1, 1, 21), *w = rand_t(CT_F32, 108, -1, 1, 22);
    Tensor *gy = rand_t(CT_F32, 180, -1, 1, 23);
    Tensor *y = tensor_zeros(1, (int64_t[]){180}, CT_F32, ct_cpu()), *Y = on_gpu(y);
    Tensor *gx = tensor_zeros(1, (int64_t[]){504}, CT_F32, ct_cpu()), *GX = on_gpu(gx);
    Tensor *gw = tensor_zeros(1, (int64_t[]){108}, CT_F32, ct_cpu()), *GW = on_gpu(gw);
    Tensor *X = on_gpu(x), *W = on_gpu(w), *GY = on_gpu(gy);
    CtOpCall calls[] = {
        {CT_OP_CONV2D, {y}, {x, w, NULL}, .params = &p},
        {CT_OP_CONV2D, {Y}, {X, W, NULL}, .params = &p},
        {CT_OP_CONV2D_BWD_DATA, {gx}, {gy, w}, .params = &p},
        {CT_OP_CONV2D_BWD_DATA, {GX}, {GY, W}, .params = &p},
        {CT_OP_CONV2D_BWD_WEIGHT, {gw, NULL}, {gy, x}, .params = &p},
        {CT_OP_CONV2D_BWD_WEIGHT, {GW, NULL}, {GY, X}, .params = &p},
    };
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) run(&calls[i]);
    /* CUDA rounds the results to bf16 once more: 2^-8 relative */
    assert_same(y, Y, 1e-2);
    assert_same(gx, GX, 1e-2);
    assert_same(gw, GW, 1e-2);
    ct_scope_close(s);
}

START_TEST(test_conv2d_autocast_matches_cpu)
{
    conv_autocast_matches_cpu();
}
END_TEST

/* Benchmark mode runs cuDNN's algorithm search on the call's operands (it
 * writes the output first): the results are still the CPU's, and a second
 * round, from the instance's cached choices, gives them again. */
START_TEST(test_conv2d_benchmark_mode_matches_cpu)
{
    bool prev = ct_set_cudnn_benchmark(true);
    for (int round = 0; round < 2; round++) {
        conv_matches_cpu();
        conv_autocast_matches_cpu();
    }
    ct_set_cudnn_benchmark(prev);
}
END_TEST

START_TEST(test_conv2d_deterministic_switch)
{
    CtScope *s = ct_scope_open();
    bool prev = ct_set_deterministic(true);
    Tensor *X = on_gpu(rand_t(CT_F32, 504, -1, 1, 5));
    Tensor *GY = on_gpu(rand_t(CT_F32, 180, -1, 1, 6));
    Tensor *gw[2];
    for (int r = 0; r < 2; r++) {
        gw[r] = tensor_zeros(1, (int64_t[]){108}, CT_F32, gpu());
        CtOpCall c = {
            CT_OP_CONV2D_BWD_WEIGHT, {gw[r], NULL}, {GY, X}, .params = &conv_case};
        run(&c);
    }
    Tensor *h = tensor_to_device(gw[0], ct_cpu());
    assert_same(h, gw[1], 0); /* the same bits */
    ct_set_deterministic(prev);
    ct_scope_close(s);
}
END_TEST

static void check_batch_norm(bool training, bool affine)
{
    CtBatchNormParams p = {
        .n = 4, .c = 3, .inner = 10, .training = training, .momentum = 0.1, .eps = 1e-5};
    Tensor *x = rand_t(CT_F32, 120, -2, 2, 7), *g = rand_t(CT_F32, 120, -1, 1, 8);
    Tensor *w = affine ? rand_t(CT_F32, 3, 0.5, 1.5, 9) : NULL;
    Tensor *b = affine ? rand_t(CT_F32, 3, -1, 1, 10) : NULL;
    Tensor *rm = rand_t(CT_F32, 3, -0.2, 0.2, 11), *rv = rand_t(CT_F32, 3, 0.5, 2, 12);
    Tensor *RM = on_gpu(rm), *RV = on_gpu(rv), *X = on_gpu(x), *G = on_gpu(g);
    Tensor *W = on_gpu(w), *B = on_gpu(b);
    Tensor *y = tensor_zeros(1, (int64_t[]){120}, CT_F32, ct_cpu()), *Y = on_gpu(y);
    Tensor *st = tensor_zeros(1, (int64_t[]){6}, CT_F32, ct_cpu()), *ST = on_gpu(st);
    CtOpCall f[] = {{CT_OP_BATCH_NORM, {y, st, rm, rv}, {x, w, b}, .params = &p},
                    {CT_OP_BATCH_NORM, {Y, ST, RM, RV}, {X, W, B}, .params = &p}};
    run(&f[0]);
    run(&f[1]);
    assert_same(y, Y, 1e-5);
    assert_same(st, ST, 1e-5);
    assert_same(rm, RM, 1e-6);
    assert_same(rv, RV, 1e-6);
    Tensor *dx = tensor_zeros(1, (int64_t[]){120}, CT_F32, ct_cpu()), *DX = on_gpu(dx);
    Tensor *dw = tensor_zeros(1, (int64_t[]){3}, CT_F32, ct_cpu()), *DW = on_gpu(dw);
    Tensor *db = tensor_zeros(1, (int64_t[]){3}, CT_F32, ct_cpu()), *DB = on_gpu(db);
    CtOpCall bw[] = {{CT_OP_BATCH_NORM_BWD, {dx, dw, db}, {g, x, w, st}, .params = &p},
                     {CT_OP_BATCH_NORM_BWD, {DX, DW, DB}, {G, X, W, ST}, .params = &p}};
    run(&bw[0]);
    run(&bw[1]);
    assert_same(dx, DX, 1e-4);
    assert_same(dw, DW, 1e-4);
    assert_same(db, DB, 1e-4);
    /* only the parameters need gradients (x is an input): no dx asked for */
    Tensor *DW2 = tensor_zeros(1, (int64_t[]){3}, CT_F32, gpu());
    Tensor *DB2 = tensor_zeros(1, (int64_t[]){3}, CT_F32, gpu());
    CtOpCall params_only = {
        CT_OP_BATCH_NORM_BWD, {NULL, DW2, DB2}, {G, X, W, ST}, .params = &p};
    run(&params_only);
    assert_same(dw, DW2, 1e-4);
    assert_same(db, DB2, 1e-4);
}

START_TEST(test_batch_norm_matches_cpu)
{
    CtScope *s = ct_scope_open();
    for (int training = 0; training < 2; training++)
        for (int affine = 0; affine < 2; affine++) check_batch_norm(training, affine);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_matmul_bias_relu_epilogue)
{
    CtScope *s = ct_scope_open();
    /* C(5, 7) = relu(A(5, 3) · B(7, 3)ᵀ + bias(7)) */
    CtMatmulParams p = {.batch = 1, .m = 5, .n = 7, .k = 3, .trans_b = true, .alpha = 1};
    Tensor *a = rand_t(CT_F32, 15, -1, 1, 13), *b = rand_t(CT_F32, 21, -1, 1, 14);
    Tensor *bias = rand_t(CT_F32, 7, -1, 1, 15);
    Tensor *c = tensor_zeros(1, (int64_t[]){35}, CT_F32, ct_cpu()), *C = on_gpu(c);
    CtOpCall plain = {CT_OP_MATMUL, {c}, {a, b}, .params = &p};
    run(&plain);
    float *v = ct_ptr(c);
    const float *bv = ct_ptr(bias);
    for (int i = 0; i < 35; i++) {
        float t = v[i] + bv[i % 7];
        v[i] = t > 0 ? t : 0;
    }
    CtMatmulParams q = p;
    q.bias = true;
    q.act = CT_MATMUL_ACT_RELU;
    CtOpCall fused = {
        CT_OP_MATMUL, {C}, {on_gpu(a), on_gpu(b), on_gpu(bias)}, .params = &q};
    run(&fused);
    assert_same(c, C, 1e-5);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_linear_bias_fused)
{
    CtScope *s = ct_scope_open();
    /* linear on CUDA takes the bias epilogue; the CPU prefills the bias */
    for (int dt = CT_F32; dt <= CT_F64; dt++) {
        Tensor *x = tensor_reshape(rand_t(dt, 6 * 5, -1, 1, 16), 2, (int64_t[]){6, 5});
        Tensor *w = tensor_reshape(rand_t(dt, 4 * 5, -1, 1, 17), 2, (int64_t[]){4, 5});
        Tensor *b = rand_t(dt, 4, -1, 1, 18);
        Tensor *y = tensor_linear(x, w, b);
        Tensor *Y = tensor_linear(on_gpu(x), on_gpu(w), on_gpu(b));
        ck_assert_msg(Y, "%s", ct_last_error());
        assert_same(y, Y, dt == CT_F64 ? 1e-12 : 1e-5);
    }
    ct_scope_close(s);
}
END_TEST

/* linear's gradients on CUDA against the CPU's: in f32 the weight and bias
 * gradients come from one product with cuBLASLt's bias gradient epilogue
 * (BGRADB, which takes gᵀ stored transposed: g row-major); on TF32, under
 * bf16 autocast and for g column-major (through a transpose after the
 * layer) from the plain product and a separate sum. Also a batch of one
 * row and a layer of one output. */
START_TEST(test_linear_bias_grad_matches_cpu)
{
    CtScope *s = ct_scope_open();
    /* (rows, out): gᵀ of one row or one output is packed both ways */
    static const int64_t shapes[][2] = {{14, 16}, {1, 16}, {14, 1}};
    for (int sh = 0; sh < 3; sh++)
        for (int mode = 0; mode < 3; mode++)
            for (int col = 0; col < 2; col++) {
                int64_t rows = shapes[sh][0], out = shapes[sh][1];
                Tensor *x = tensor_reshape(rand_t(CT_F32, rows * 24, -1, 1, 70), 2,
                                           (int64_t[]){rows, 24});
                Tensor *w = tensor_reshape(rand_t(CT_F32, out * 24, -1, 1, 71), 2,
                                           (int64_t[]){out, 24});
                Tensor *b = rand_t(CT_F32, out, -1, 1, 72);
                Tensor *in[3] = {x, w, b}, *IN[3];
                gpu_leaves(in, IN);
                bool tf32 = ct_set_allow_tf32(mode == 1);
                CtDType prev;
                tensor_autocast_begin(mode == 2 ? CT_BF16 : CT_F32, &prev);
                Tensor *y = tensor_linear(x, w, b),
                       *Y = tensor_linear(IN[0], IN[1], IN[2]);
                CtStatus st = Y ? CT_OK : ct_last_status();
                Tensor *r = col ? tensor_transpose(y, 0, 1) : y;
                Tensor *R = col ? tensor_transpose(Y, 0, 1) : Y;
                Tensor *gy = tensor_reshape(rand_t(CT_F32, rows * out, -1, 1, 73), 2,
                                            tensor_shape(r));
                if (st == CT_OK) st = tensor_backward(r, gy);
                if (st == CT_OK) st = tensor_backward(R, on_gpu(gy));
                /* the switches back before any assertion, for the next tests */
                tensor_autocast_end(prev);
                ct_set_allow_tf32(tf32);
                ck_assert_msg(st == CT_OK, "%s", ct_last_error());
                assert_grads_same(in, IN, mode ? 5e-2 : 1e-5);
            }
    ct_scope_close(s);
}
END_TEST

/* Products of operands at odd element offsets (2-byte aligned bf16, 4-byte
 * aligned f32: cuBLASLt told so picks algorithms that work with them, or
 * none and cuBLAS runs the product) against the CPU's; a linear layer whose
 * bias is aligned to less than 16 bytes takes the unfused path, and so
 * does one whose epilogue finds no algorithm for its input's alignment; a
 * bf16 convolution with its weight and bias at odd offsets. */
START_TEST(test_misaligned_operands_match_cpu)
{
    CtScope *s = ct_scope_open();
    static const CtDType dts[] = {CT_F32, CT_BF16};
    for (int i = 0; i < 2; i++) {
        CtDType dt = dts[i];
        Tensor *buf = on_gpu(rand_t(dt, 1 + 48 + 1 + 40, -1, 1, 75));
        Tensor *A = tensor_reshape(tensor_slice(buf, 0, 1, 49, 1), 2, (int64_t[]){6, 8});
        Tensor *B = tensor_reshape(tensor_slice(buf, 0, 50, 90, 1), 2, (int64_t[]){8, 5});
        ck_assert_uint_ne((uintptr_t)tensor_data(A) % 16, 0);
        Tensor *C = tensor_matmul(A, B);
        ck_assert_msg(C, "%s", ct_last_error());
        Tensor *a = tensor_to_device(A, ct_cpu()), *b = tensor_to_device(B, ct_cpu());
        assert_same(tensor_cast(tensor_matmul(a, b), CT_F32), tensor_cast(C, CT_F32),
                    dt == CT_F32 ? 1e-5 : 2e-2);
    }
    Tensor *w =
        on_gpu(tensor_reshape(rand_t(CT_F32, 40, -1, 1, 76), 2, (int64_t[]){5, 8}));
    Tensor *bb = on_gpu(rand_t(CT_F32, 6, -1, 1, 77));
    Tensor *b = tensor_slice(bb, 0, 1, 6, 1); /* 4 bytes in */
    Tensor *x =
        on_gpu(tensor_reshape(rand_t(CT_F32, 24, -1, 1, 78), 2, (int64_t[]){3, 8}));
    Tensor *Y = tensor_linear_relu(x, w, b);
    ck_assert_msg(Y, "%s", ct_last_error());
    Tensor *y =
        tensor_linear_relu(tensor_to_device(x, ct_cpu()), tensor_to_device(w, ct_cpu()),
                           tensor_to_device(b, ct_cpu()));
    assert_same(y, Y, 1e-5);
    /* bf16 input 2 bytes in: where cuBLASLt has no bias + ReLU epilogue for
     * that alignment, linear runs the plain forms */
    Tensor *xb =
        tensor_reshape(tensor_slice(on_gpu(rand_t(CT_BF16, 25, -1, 1, 79)), 0, 1, 25, 1),
                       2, (int64_t[]){3, 8});
    Tensor *wb = tensor_cast(w, CT_BF16), *bb16 = on_gpu(rand_t(CT_BF16, 5, -1, 1, 80));
    Tensor *Yb = tensor_linear_relu(xb, wb, bb16);
    ck_assert_msg(Yb, "%s", ct_last_error());
    Tensor *yb =
        tensor_linear_relu(tensor_to_device(xb, ct_cpu()), tensor_to_device(wb, ct_cpu()),
                           tensor_to_device(bb16, ct_cpu()));
    assert_same(tensor_cast(yb, CT_F32), tensor_cast(Yb, CT_F32), 2e-2);
    /* a bf16 convolution whose weight and bias lie 2 bytes in (parameters at
     * odd offsets of a packed bf16 block): cuDNN runs on aligned copies */
    Tensor *pc = on_gpu(rand_t(CT_BF16, 1 + 54 + 3, -1, 1, 81));
    Tensor *wc =
        tensor_reshape(tensor_slice(pc, 0, 1, 55, 1), 4, (int64_t[]){3, 2, 3, 3});
    Tensor *bc = tensor_slice(pc, 0, 55, 58, 1);
    ck_assert_uint_ne((uintptr_t)tensor_data(wc) % 16, 0);
    Tensor *xc = on_gpu(tensor_reshape(rand_t(CT_BF16, 2 * 2 * 6 * 5, -1, 1, 82), 4,
                                       (int64_t[]){2, 2, 6, 5}));
    const CtConv2dArgs ca = {.padding = {1, 0}};
    Tensor *Yc = tensor_conv2d(xc, wc, bc, &ca);
    ck_assert_msg(Yc, "%s", ct_last_error());
    Tensor *f[3] = {xc, wc, bc};
    for (int i = 0; i < 3; i++)
        f[i] = tensor_cast(tensor_to_device(f[i], ct_cpu()), CT_F32);
    assert_same(tensor_conv2d(f[0], f[1], f[2], &ca), tensor_cast(Yc, CT_F32), 3e-2);
    ct_scope_close(s);
}
END_TEST

/* The ReLU-fused forms on CUDA (conv: cuDNN then the bias + ReLU kernel;
 * linear: cuBLASLt's bias + ReLU epilogue) against the CPU's, with the
 * gradients through the fused node; f32, and bf16 autocast for the conv
 * (its CUDA output is bf16). */
START_TEST(test_relu_fused_matches_cpu)
{
    CtScope *s = ct_scope_open();
    CtConv2dArgs a = {
        .stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}, .groups = 2};
    a.relu = true;
    for (int ac = 0; ac < 2; ac++) {
        Tensor *x =
            tensor_reshape(rand_t(CT_F32, 504, -1, 1, 41), 4, (int64_t[]){2, 4, 9, 7});
        Tensor *w =
            tensor_reshape(rand_t(CT_F32, 108, -1, 1, 42), 4, (int64_t[]){6, 2, 3, 3});
        Tensor *b = rand_t(CT_F32, 6, -1, 1, 43);
        Tensor *in[3] = {x, w, b}, *IN[3];
        gpu_leaves(in, IN);
        CtDType prev;
        tensor_autocast_begin(ac ? CT_BF16 : CT_F32, &prev);
        Tensor *y = tensor_conv2d(x, w, b, &a),
               *Y = tensor_conv2d(IN[0], IN[1], IN[2], &a);
        tensor_autocast_end(prev);
        ck_assert_msg(Y, "%s", ct_last_error());
        double tol = ac ? 1e-2 : 1e-5;
        assert_same(y, tensor_cast(Y, CT_F32), tol);
        Tensor *gy = tensor_reshape(rand_t(CT_F32, 180, -1, 1, 44), 4, tensor_shape(y));
        ck_assert_int_eq(tensor_backward(y, gy), CT_OK);
        ck_assert_int_eq(tensor_backward(Y, tensor_cast(on_gpu(gy), tensor_dtype(Y))),
                         CT_OK);
        assert_grads_same(in, IN, ac ? 5e-2 : 1e-4);
    }
    Tensor *x = tensor_reshape(rand_t(CT_F32, 6 * 5, -1, 1, 45), 2, (int64_t[]){6, 5});
    Tensor *w = tensor_reshape(rand_t(CT_F32, 4 * 5, -1, 1, 46), 2, (int64_t[]){4, 5});
    Tensor *b = rand_t(CT_F32, 4, -1, 1, 47);
    Tensor *Y = tensor_linear_relu(on_gpu(x), on_gpu(w), on_gpu(b));
    ck_assert_msg(Y, "%s", ct_last_error());
    assert_same(tensor_linear_relu(x, w, b), Y, 1e-5);
    /* a NaN pre-activation stays NaN, as on the CPU and in PyTorch (were
     * the epilogue's ReLU max(x, 0), it could come out 0) */
    Tensor *xn = tensor_clone(x);
    ((float *)tensor_data(xn))[0] = NAN;
    float yn[2][4];
    Tensor *Yn = tensor_linear_relu(on_gpu(xn), on_gpu(w), on_gpu(b));
    ck_assert_int_eq(tensor_copy_to_host(tensor_slice(Yn, 0, 0, 1, 1), yn[0], CT_F32),
                     CT_OK);
    ck_assert_int_eq(
        tensor_copy_to_host(tensor_slice(tensor_linear_relu(xn, w, b), 0, 0, 1, 1), yn[1],
                            CT_F32),
        CT_OK);
    for (int j = 0; j < 4; j++) {
        ck_assert_msg(isnan(yn[1][j]), "cpu, output %d: %g", j, yn[1][j]);
        ck_assert_msg(isnan(yn[0][j]), "cuda, output %d: %g", j, yn[0][j]);
    }
    /* batch norm in training, then in eval mode with running statistics */
    Tensor *bx =
        tensor_reshape(rand_t(CT_F32, 2 * 3 * 20, -1, 1, 48), 4, (int64_t[]){2, 3, 4, 5});
    Tensor *rm = rand_t(CT_F32, 3, -0.2, 0.2, 49), *rv = rand_t(CT_F32, 3, 0.5, 2, 50);
    for (int training = 0; training < 2; training++) {
        Tensor *yg = tensor_batch_norm_relu(on_gpu(bx), on_gpu(rm), on_gpu(rv), NULL,
                                            NULL, training, 0.1, 1e-5);
        ck_assert_msg(yg, "%s", ct_last_error());
        Tensor *yc = tensor_batch_norm_relu(bx, rm, rv, NULL, NULL, training, 0.1, 1e-5);
        assert_same(yc, yg, 1e-5);
    }
    ct_scope_close(s);
}
END_TEST

/* linear_gelu on CUDA against the CPU's, values, the kept pre-activation
 * and the gradients: tanh-GELU with 16 output features runs in cuBLASLt's
 * GELU_AUX_BIAS epilogue, 12 features (ld not a multiple of 8) and erf-GELU
 * take the bias epilogue and the GELU kernel after it. */
START_TEST(test_linear_gelu_matches_cpu)
{
    CtScope *s = ct_scope_open();
    for (int approx = CT_GELU_ERF; approx <= CT_GELU_TANH; approx++)
        for (int out_f = 12; out_f <= 16; out_f += 4) {
            Tensor *x =
                tensor_reshape(rand_t(CT_F32, 6 * 5, -2, 2, 61), 2, (int64_t[]){6, 5});
            Tensor *w = tensor_reshape(rand_t(CT_F32, out_f * 5, -1, 1, 62), 2,
                                       (int64_t[]){out_f, 5});
            Tensor *b = rand_t(CT_F32, out_f, -1, 1, 63);
            Tensor *in[3] = {x, w, b}, *IN[3];
            gpu_leaves(in, IN);
            Tensor *y = tensor_linear_gelu(x, w, b, (CtGeluApprox)approx);
            Tensor *Y = tensor_linear_gelu(IN[0], IN[1], IN[2], (CtGeluApprox)approx);
            ck_assert_msg(Y, "%s", ct_last_error());
            assert_same(y, Y, 1e-4);
            assert_same(y->grad_fn->act_x, Y->grad_fn->act_x, 1e-5);
            Tensor *gy =
                tensor_reshape(rand_t(CT_F32, 6 * out_f, -1, 1, 64), 2, tensor_shape(y));
            ck_assert_int_eq(tensor_backward(y, gy), CT_OK);
            ck_assert_int_eq(tensor_backward(Y, on_gpu(gy)), CT_OK);
            assert_grads_same(in, IN, 1e-4);
        }
    ct_scope_close(s);
}
END_TEST

/* A 3-channel stem large enough that bf16 autocast pads its input
 * channels to 8 on CUDA (ct_dnn_padded_channels; pad_channels.cu), with
 * every gradient (x requires grad too, so the padded backward data runs)
 * against the CPU under the same autocast. */
START_TEST(test_conv_padded_channels_matches_cpu)
{
    CtScope *s = ct_scope_open();
    const CtConv2dArgs a = {.stride = {2, 2}, .padding = {3, 3}};
    Tensor *x = tensor_reshape(rand_t(CT_F32, 8 * 3 * 128 * 128, -1, 1, 71), 4,
                               (int64_t[]){8, 3, 128, 128});
    Tensor *w = tensor_reshape(rand_t(CT_F32, 64 * 3 * 49, -0.2, 0.2, 72), 4,
                               (int64_t[]){64, 3, 7, 7});
    Tensor *b = rand_t(CT_F32, 64, -1, 1, 73);
    Tensor *in[3] = {x, w, b}, *IN[3];
    gpu_leaves(in, IN);
    CtDType prev;
    tensor_autocast_begin(CT_BF16, &prev);
    Tensor *y = tensor_conv2d(x, w, b, &a), *Y = tensor_conv2d(IN[0], IN[1], IN[2], &a);
    tensor_autocast_end(prev);
    ck_assert_msg(Y, "%s", ct_last_error());
    ck_assert_int_eq(tensor_size(Y, 2), 64);
    assert_same(y, tensor_cast(Y, CT_F32), 1e-2);
    /* one seed for both: the bf16 values the GPU's bf16 output takes (the
     * bias gradient sums 32768 of them per channel, where f32 and bf16 seeds
     * would differ by their rounding) */
    Tensor *gy = tensor_cast(
        tensor_cast(tensor_reshape(rand_t(CT_F32, 8 * 64 * 64 * 64, -1, 1, 74), 4,
                                   tensor_shape(y)),
                    CT_BF16),
        CT_F32);
    ck_assert_int_eq(tensor_backward(y, gy), CT_OK);
    ck_assert_int_eq(tensor_backward(Y, tensor_cast(on_gpu(gy), tensor_dtype(Y))), CT_OK);
    assert_grads_same(in, IN, 2e-2);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_pool2d_matches_cpu)
{
    CtScope *s = ct_scope_open();
    CtPool2dParams p = {.kind = CT_POOL_MAX,
                        .n = 2,
                        .c = 3,
                        .h = 7,
                        .w = 9,
                        .oh = 4,
                        .ow = 5,
                        .kh = 3,
                        .kw = 3,
                        .sh = 2,
                        .sw = 2,
                        .ph = 1,
                        .pw = 1};
    for (int kind = CT_POOL_MAX; kind <= CT_POOL_AVG; kind++) {
        p.kind = (CtPoolKind)kind;
        Tensor *x = rand_t(CT_F32, 378, -1, 1, 19), *gy = rand_t(CT_F32, 120, -1, 1, 20);
        bool max = kind == CT_POOL_MAX;
        Tensor *y = tensor_zeros(1, (int64_t[]){120}, CT_F32, ct_cpu()), *Y = on_gpu(y);
        Tensor *ix = max ? tensor_zeros(1, (int64_t[]){120}, CT_I64, ct_cpu()) : NULL;
        Tensor *IX = on_gpu(ix);
        Tensor *gx = tensor_zeros(1, (int64_t[]){378}, CT_F32, ct_cpu()),
               *GX = on_gpu(gx);
        CtOpCall calls[] = {{CT_OP_POOL2D, {y, ix}, {x}, .params = &p},
                            {CT_OP_POOL2D, {Y, IX}, {on_gpu(x)}, .params = &p},
                            {CT_OP_POOL2D_BWD, {gx}, {gy, ix}, .params = &p},
                            {CT_OP_POOL2D_BWD, {GX}, {on_gpu(gy), IX}, .params = &p}};
        for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) run(&calls[i]);
        assert_same(y, Y, 0); /* the CPU's bits */
        if (max) assert_same(ix, IX, 0);
        assert_same(gx, GX, 0);
    }
    ct_scope_close(s);
}
END_TEST

/* ||c - g|| / max(||c||, 1e-3) over two tensors of one shape (any devices,
 * dtypes): relative, with an absolute floor for gradients that vanish (a
 * bias before batch norm). */
static double rel_err(Tensor *c, Tensor *g)
{
    int64_t n = tensor_numel(c);
    double *a = malloc((size_t)(n ? n : 1) * sizeof *a),
           *b = malloc((size_t)(n ? n : 1) * sizeof *b);
    ck_assert_int_eq(tensor_copy_to_host(c, a, CT_F64), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(g, b, CT_F64), CT_OK);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += a[i] * a[i];
    }
    free(a);
    free(b);
    return sqrt(num) / fmax(sqrt(den), 1e-3);
}

/* A residual block's parameters on one device. */
typedef struct Block {
    Tensor *w1, *b1, *w2, *gamma, *beta, *rm, *rv, *fc_w, *fc_b;
} Block;

static Tensor *param(Tensor *t)
{
    ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
    return t;
}

static Block block_on(const Block *src, CtDevice dev)
{
    Tensor **from = (Tensor **)src;
    Block b;
    Tensor **to = (Tensor **)&b;
    for (size_t i = 0; i < sizeof b / sizeof(Tensor *); i++) {
        to[i] = tensor_to_device(from[i], dev);
        ck_assert_ptr_nonnull(to[i]);
        if (i != 5 && i != 6) param(to[i]); /* not the running statistics */
    }
    return b;
}

/* conv -> batch norm -> relu -> conv, plus the block's input, -> max pool ->
 * adaptive average pool -> linear -> cross-entropy, under bf16 autocast;
 * returns the loss and, in *act, the second convolution's output. */
static Tensor *block_loss(const Block *b, Tensor *x, Tensor *target, Tensor **act)
{
    CtDType prev;
    ck_assert_int_eq(tensor_autocast_begin(CT_BF16, &prev), CT_OK);
    CtConv2dArgs same = {.padding = {1, 1}};
    Tensor *h = tensor_conv2d(x, b->w1, b->b1, &same);
    h = tensor_relu(
        tensor_batch_norm(h, b->rm, b->rv, b->gamma, b->beta, true, 0.1, 1e-5));
    *act = tensor_conv2d(h, b->w2, NULL, &same);
    h = tensor_add(*act, tensor_conv2d(x, b->w2, NULL, &same)); /* w2 used twice */
    h = tensor_max_pool2d(h, &(CtPool2dArgs){.kernel = {2, 2}});
    h = tensor_flatten(tensor_adaptive_avg_pool2d(h, 1, 1), 1, -1);
    Tensor *loss = tensor_cross_entropy(tensor_linear(h, b->fc_w, b->fc_b), target, NULL);
    tensor_autocast_end(prev);
    ck_assert_msg(loss, "%s", ct_last_error());
    return loss;
}

/* On CUDA, autocast keeps the convolutions' outputs in bf16 through batch
 * norm, relu, the residual add and pooling; linear widens to f32, so the
 * loss and every parameter gradient are f32 and near the CPU's (whose
 * activations stay f32). */
START_TEST(test_autocast_keeps_low_activations)
{
    CtScope *s = ct_scope_open();
    const int C = 4, K = 5;
    Block cpu_src = {
        .w1 = tensor_reshape(rand_t(CT_F32, C * C * 9, -0.5, 0.5, 31), 4,
                             (int64_t[]){C, C, 3, 3}),
        .b1 = rand_t(CT_F32, C, -0.1, 0.1, 32),
        .w2 = tensor_reshape(rand_t(CT_F32, C * C * 9, -0.5, 0.5, 33), 4,
                             (int64_t[]){C, C, 3, 3}),
        .gamma = rand_t(CT_F32, C, 0.5, 1.5, 34),
        .beta = rand_t(CT_F32, C, -0.5, 0.5, 35),
        .rm = tensor_zeros(1, (int64_t[]){C}, CT_F32, ct_cpu()),
        .rv = tensor_ones(1, (int64_t[]){C}, CT_F32, ct_cpu()),
        .fc_w =
            tensor_reshape(rand_t(CT_F32, K * C, -0.5, 0.5, 36), 2, (int64_t[]){K, C}),
        .fc_b = rand_t(CT_F32, K, -0.1, 0.1, 37),
    };
    Block bc = block_on(&cpu_src, ct_cpu()), bg = block_on(&cpu_src, gpu());
    Tensor *x = tensor_reshape(rand_t(CT_F32, 3 * C * 8 * 8, -1, 1, 38), 4,
                               (int64_t[]){3, C, 8, 8});
    Tensor *t = tensor_zeros(1, (int64_t[]){3}, CT_I64, ct_cpu());
    ((int64_t *)ct_ptr(t))[1] = 2;
    ((int64_t *)ct_ptr(t))[2] = 4;
    Tensor *act_c, *act_g;
    Tensor *lc = block_loss(&bc, x, t, &act_c);
    Tensor *lg = block_loss(&bg, on_gpu(x), on_gpu(t), &act_g);
    ck_assert_int_eq(tensor_dtype(act_c), CT_F32);
    ck_assert_int_eq(tensor_dtype(act_g), CT_BF16);
    ck_assert_int_eq(tensor_dtype(lg), CT_F32);
    ck_assert_int_eq(tensor_backward(lc, NULL), CT_OK);
    ck_assert_int_eq(tensor_backward(lg, NULL), CT_OK);
    ck_assert_double_lt(rel_err(lc, lg), 2e-2);
    Tensor **pc = (Tensor **)&bc, **pg = (Tensor **)&bg;
    for (size_t i = 0; i < sizeof bc / sizeof(Tensor *); i++) {
        if (i == 5 || i == 6) { /* running statistics, updated in f32 */
            ck_assert_int_eq(tensor_dtype(pg[i]), CT_F32);
            ck_assert_double_lt(rel_err(pc[i], pg[i]), 2e-2);
            continue;
        }
        Tensor *gc = tensor_grad(pc[i]), *gg = tensor_grad(pg[i]);
        ck_assert_ptr_nonnull(gg);
        ck_assert_int_eq(tensor_dtype(gg), CT_F32);
        if (i == 1) {
            /* b1, the bias before batch norm: its gradient is zero up to
             * rounding, here the sums of bf16 rounding errors (about 1e-4) */
            double e = tensor_item(tensor_sqrt(tensor_sum_all(tensor_mul(gg, gg))));
            ck_assert_msg(e < 2e-3, "b1: gradient norm %g", e);
            continue;
        }
        double e = rel_err(gc, gg);
        ck_assert_msg(e < 5e-2, "parameter %zu: gradient relative error %g", i, e);
    }
    ct_scope_close(s);
}
END_TEST

/* A channels-last input on CUDA: convolution (without and with a bias, ReLU
 * fused) and batch norm + ReLU in training keep the layout (cuDNN's NHWC
 * descriptors), the residual add and max pooling keep it, and the loss and
 * every gradient match the CPU's contiguous run, f32. */
START_TEST(test_channels_last_matches_cpu)
{
    CtScope *s = ct_scope_open();
    const int64_t C = 8, shape[4] = {2, C, 6, 6}, wshape[4] = {C, C, 3, 3};
    Tensor *src[6] = {tensor_reshape(rand_t(CT_F32, 2 * C * 36, -1, 1, 41), 4, shape),
                      tensor_reshape(rand_t(CT_F32, C * C * 9, -0.3, 0.3, 42), 4, wshape),
                      rand_t(CT_F32, C, 0.5, 1.5, 43),
                      rand_t(CT_F32, C, -0.5, 0.5, 44),
                      rand_t(CT_F32, C, -0.2, 0.2, 46),
                      tensor_reshape(rand_t(CT_F32, 2 * C * 9, -1, 1, 45), 4,
                                     (const int64_t[]){2, C, 3, 3})};
    Tensor *leaves[2][5], *loss[2];
    for (int on = 0; on < 2; on++) {
        CtDevice dev = on ? gpu() : ct_cpu();
        for (int i = 0; i < 5; i++)
            leaves[on][i] =
                param(tensor_retain(tensor_detach(tensor_to_device(src[i], dev))));
        Tensor *x = on ? tensor_channels_last(leaves[on][0]) : leaves[on][0];
        const CtConv2dArgs same = {.padding = {1, 1}};
        Tensor *h = tensor_conv2d(x, leaves[on][1], NULL, &same);
        ck_assert_msg(h, "%s", ct_last_error());
        ck_assert(!on || ct_channels_last_only(h));
        h = tensor_batch_norm_relu(h, NULL, NULL, leaves[on][2], leaves[on][3], true, 0.1,
                                   1e-5);
        ck_assert_msg(h, "%s", ct_last_error());
        ck_assert(!on || ct_channels_last_only(h));
        h = tensor_add(h, x);
        ck_assert(!on || ct_channels_last_only(h));
        /* with a bias, ReLU fused: the bias + ReLU kernel, cuDNN's bias
         * gradient */
        h = tensor_conv2d(h, leaves[on][1], leaves[on][4],
                          &(CtConv2dArgs){.padding = {1, 1}, .relu = true});
        ck_assert_msg(h, "%s", ct_last_error());
        ck_assert(!on || ct_channels_last_only(h));
        h = tensor_max_pool2d(h, &(CtPool2dArgs){.kernel = {2, 2}});
        ck_assert_msg(h, "%s", ct_last_error());
        ck_assert(!on || ct_channels_last_only(h));
        loss[on] =
            tensor_sum(tensor_mul(h, tensor_to_device(src[5], dev)), 0, NULL, false);
        ck_assert_int_eq(tensor_backward(loss[on], NULL), CT_OK);
    }
    ck_assert_double_lt(rel_err(loss[0], loss[1]), 1e-4);
    for (int i = 0; i < 5; i++) {
        double e = rel_err(tensor_grad(leaves[0][i]), tensor_grad(leaves[1][i]));
        ck_assert_msg(e < 1e-4, "leaf %d: gradient relative error %g", i, e);
        tensor_free(leaves[0][i]);
        tensor_free(leaves[1][i]);
    }
    ct_scope_close(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_cuda_dnn");
    TCase *tc = tcase_create("cuda_dnn");
    tcase_set_timeout(tc, 120);
    const TTest *tests[] = {
        test_conv2d_matches_cpu,
        test_conv2d_autocast_matches_cpu,
        test_conv2d_deterministic_switch,
        test_conv2d_benchmark_mode_matches_cpu,
        test_batch_norm_matches_cpu,
        test_matmul_bias_relu_epilogue,
        test_linear_bias_fused,
        test_relu_fused_matches_cpu,
        test_linear_gelu_matches_cpu,
        test_conv_padded_channels_matches_cpu,
        test_pool2d_matches_cpu,
        test_autocast_keeps_low_activations,
        test_channels_last_matches_cpu,
        test_linear_bias_grad_matches_cpu,
        test_misaligned_operands_match_cpu,
    };
    int n = (int)(sizeof tests / sizeof *tests);
    if (ct_cuda_device_count() > 0) {
        setenv("CK_FORK", "no", 1); /* CUDA does not survive fork() */
        for (int i = 0; i < n; i++) tcase_add_test(tc, tests[i]);
    } else {
        fprintf(stderr,
                "\n*** SKIPPED %d CUDA tests (cuDNN, cuBLASLt): no CUDA device ***\n\n",
                n);
    }
    suite_add_tcase(s, tc);
    return tu_run(s);
}
