/* The cuDNN call arguments (tensor/cuda/dnn_desc.h) against hand-computed
 * expectations: NCHW dims and strides (contiguous and strided), the
 * convolution's padding/stride/dilation/groups, filter and bias shapes,
 * output-size check, channels-last (NHWC) strides and filter format,
 * compute and math types per dtype and TF32 setting, the
 * autocast dtype, the input-channel padding of large bf16/f16
 * convolutions and the operands it applies to, the algorithm filter (determinism, tensor
 * cores, workspace cap), batch-norm mapping, the errors, and the per-instance cache of
 * chosen algorithms (tensor/cuda/algo_cache.h). Runs in every build (no CUDA needed). */
#include <limits.h>

#include "conv_case.h"
#include "tensor/cuda/algo_cache.h"
#include "tensor/cuda/dnn_desc.h"
#include "testutil.h"

static void assert_dims(const int *got, int a, int b, int c, int d)
{
    ck_assert_int_eq(got[0], a);
    ck_assert_int_eq(got[1], b);
    ck_assert_int_eq(got[2], c);
    ck_assert_int_eq(got[3], d);
}

START_TEST(test_tensor_strides)
{
    CtDnnTensor t;
    ck_assert_int_eq(ct_dnn_tensor_nchw("op", 2, 3, 4, 5, &t), CT_OK);
    assert_dims(t.dims, 2, 3, 4, 5);
    assert_dims(t.strides, 60, 20, 5, 1);
    /* a channel slice of a (2, 8, 4, 5) tensor keeps its parent's strides */
    const int64_t shape[4] = {2, 3, 4, 5}, stride[4] = {160, 20, 5, 1};
    ck_assert_int_eq(ct_dnn_tensor("op", shape, stride, &t), CT_OK);
    assert_dims(t.strides, 160, 20, 5, 1);
    const int64_t big[4] = {1, 1, 1, (int64_t)INT_MAX + 1}, unit[4] = {1, 1, 1, 1};
    ck_assert_int_eq(ct_dnn_tensor("conv2d", big, unit, &t), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "conv2d: tensor (1, 1, 1, 2147483648) exceeds cuDNN's 32-bit sizes");
    /* every size and stride fits, the whole does not: 2^31 elements */
    ck_assert_int_eq(ct_dnn_tensor_nchw("conv2d", 512, 64, 256, 256, &t),
                     CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "conv2d: tensor (512, 64, 256, 256) exceeds cuDNN's 32-bit sizes");
    ck_assert_int_eq(ct_dnn_tensor_4d("batch_norm", 512, 64, 256, 256, true, &t),
                     CT_ERR_UNSUPPORTED);
    /* one element short of it fits; an empty dim spans nothing */
    ck_assert_int_eq(ct_dnn_tensor_nchw("conv2d", 1, 1, 1, INT_MAX, &t), CT_OK);
    const int64_t none[4] = {0, 3, 1, 1}, apart[4] = {INT_MAX, INT_MAX, 1, 1};
    ck_assert_int_eq(ct_dnn_tensor("conv2d", none, apart, &t), CT_OK);
}
END_TEST

START_TEST(test_conv_geometry)
{
    ck_assert_int_eq(ct_dnn_conv_out(9, 3, 1, 2, 1), 5);
    ck_assert_int_eq(ct_dnn_conv_out(7, 3, 0, 1, 2), 3);
    CtConv2dParams p = conv_case;
    CtDnnConv d;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, false, &d), CT_OK);
    assert_dims(d.x.dims, 2, 4, 9, 7);
    assert_dims(d.x.strides, 252, 63, 7, 1);
    assert_dims(d.y.dims, 2, 6, 5, 3);
    assert_dims(d.y.strides, 90, 15, 3, 1);
    assert_dims(d.w, 6, 2, 3, 3); /* c / groups input channels per filter */
    assert_dims(d.bias, 1, 6, 1, 1);
    ck_assert_int_eq(d.pad[0], 1);
    ck_assert_int_eq(d.pad[1], 0);
    ck_assert_int_eq(d.stride[0], 2);
    ck_assert_int_eq(d.stride[1], 1);
    ck_assert_int_eq(d.dilation[0], 1);
    ck_assert_int_eq(d.dilation[1], 2);
    ck_assert_int_eq(d.groups, 2);
}
END_TEST

/* The stem of ResNet at 224², batch 128: 3 input channels, 64 outputs
 * 112², 7×7, groups 1. */
static CtConv2dParams stem(void)
{
    return (CtConv2dParams){.n = 128,
                            .c = 3,
                            .h = 224,
                            .w = 224,
                            .o = 64,
                            .kh = 7,
                            .kw = 7,
                            .oh = 112,
                            .ow = 112,
                            .sh = 2,
                            .sw = 2,
                            .ph = 3,
                            .pw = 3,
                            .dh = 1,
                            .dw = 1,
                            .groups = 1,
                            .autocast = CT_F32};
}

/* Channels last: x and y with NHWC strides, the filter in cuDNN's NHWC
 * format, sizes as for NCHW; the algorithm cache tells the layouts apart. */
START_TEST(test_conv_channels_last)
{
    CtConv2dParams p = conv_case;
    p.nhwc = true;
    CtDnnConv d, nchw;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_BF16, false, &d), CT_OK);
    assert_dims(d.x.dims, 2, 4, 9, 7);
    assert_dims(d.x.strides, 252, 1, 28, 4); /* (h·w·c, 1, w·c, c) */
    assert_dims(d.y.dims, 2, 6, 5, 3);
    assert_dims(d.y.strides, 90, 1, 18, 6);
    assert_dims(d.w, 6, 2, 3, 3); /* dims stay (o, c / groups, kh, kw) */
    ck_assert(d.filter_nhwc);
    p.nhwc = false;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_BF16, false, &nchw), CT_OK);
    ck_assert(!nchw.filter_nhwc);
    CtDnnAlgoKey a, b;
    ct_dnn_algo_key(&a, CT_DNN_CALL_FORWARD, &d, false, false, false);
    ct_dnn_algo_key(&b, CT_DNN_CALL_FORWARD, &nchw, false, false, false);
    ck_assert(memcmp(&a, &b, sizeof a) != 0);
    /* every byte of the descriptor is set (no padding, no field left out):
     * the cache compares keys bytewise, whatever memory d was in before */
    CtDnnConv g1, g2;
    memset(&g1, 0xAA, sizeof g1);
    memset(&g2, 0x55, sizeof g2);
    p.nhwc = true;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_BF16, false, &g1), CT_OK);
    ck_assert_int_eq(ct_dnn_conv(&p, CT_BF16, false, &g2), CT_OK);
    ck_assert(memcmp(&g1, &g2, sizeof g1) == 0);
    /* a channels-last x gives no channel padding (its copies are NCHW) */
    CtConv2dParams s = stem();
    s.nhwc = true;
    ck_assert_int_eq(ct_dnn_padded_channels(&s, CT_BF16), 3);
}
END_TEST

START_TEST(test_padded_channels)
{
    CtConv2dParams p = stem();
    ck_assert_int_eq(ct_dnn_padded_channels(&p, CT_BF16), 8);
    ck_assert_int_eq(ct_dnn_padded_channels(&p, CT_F16), 8);
    ck_assert_int_eq(ct_dnn_padded_channels(&p, CT_F32), 3); /* no tensor-core rule */
    ck_assert_int_eq(ct_dnn_padded_channels(&p, CT_F64), 3);
    p.c = 12; /* to the next multiple of 8 */
    ck_assert_int_eq(ct_dnn_padded_channels(&p, CT_BF16), 16);
    p.c = 16; /* already one */
    ck_assert_int_eq(ct_dnn_padded_channels(&p, CT_BF16), 16);
    p.c = 6, p.groups = 2; /* groups: left alone */
    ck_assert_int_eq(ct_dnn_padded_channels(&p, CT_BF16), 6);
    /* BasicNet's first layer at batch 64: 64·32·26²·9 = 12.5e6, below */
    CtConv2dParams b = {.n = 64,
                        .c = 1,
                        .h = 28,
                        .w = 28,
                        .o = 32,
                        .kh = 3,
                        .kw = 3,
                        .oh = 26,
                        .ow = 26,
                        .sh = 1,
                        .sw = 1,
                        .dh = 1,
                        .dw = 1,
                        .groups = 1};
    ck_assert_int_eq(ct_dnn_padded_channels(&b, CT_BF16), 1);
    /* the threshold itself: 2^26 multiply-adds per channel pads, one less
     * output column does not */
    b.n = 1, b.o = 1, b.kh = 1, b.kw = 1, b.oh = 1 << 13, b.ow = 1 << 13;
    ck_assert_int_eq(ct_dnn_padded_channels(&b, CT_BF16), 8);
    b.ow = (1 << 13) - 1;
    ck_assert_int_eq(ct_dnn_padded_channels(&b, CT_BF16), 1);
    /* which operands carry the input channels */
    unsigned in, out;
    ct_dnn_channel_operands(CT_OP_CONV2D, &in, &out);
    ck_assert_uint_eq(in, 0x3u); /* x, w */
    ck_assert_uint_eq(out, 0x0u);
    ct_dnn_channel_operands(CT_OP_CONV2D_BWD_DATA, &in, &out);
    ck_assert_uint_eq(in, 0x2u);  /* w (in0 is gy) */
    ck_assert_uint_eq(out, 0x1u); /* dx */
    ct_dnn_channel_operands(CT_OP_CONV2D_BWD_WEIGHT, &in, &out);
    ck_assert_uint_eq(in, 0x2u);  /* x (in0 is gy) */
    ck_assert_uint_eq(out, 0x1u); /* dw; out1 (the bias gradient) is not */
    /* the padded call's descriptors: x and w with 8 channels */
    p = stem();
    p.c = ct_dnn_padded_channels(&p, CT_BF16);
    CtDnnConv d;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_BF16, false, &d), CT_OK);
    assert_dims(d.x.dims, 128, 8, 224, 224);
    assert_dims(d.w, 64, 8, 7, 7);
    assert_dims(d.y.dims, 128, 64, 112, 112);
}
END_TEST

START_TEST(test_conv_types)
{
    CtConv2dParams p = conv_case;
    CtDnnConv d;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, false, &d), CT_OK);
    ck_assert_int_eq(d.compute, CT_F32);
    ck_assert_int_eq(d.math, CT_DNN_MATH_FMA); /* no TF32 by default */
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, true, &d), CT_OK);
    ck_assert_int_eq(d.math, CT_DNN_MATH_TENSOR_OP);
    ck_assert_int_eq(ct_dnn_conv(&p, CT_BF16, false, &d), CT_OK);
    ck_assert_int_eq(d.data, CT_BF16);
    ck_assert_int_eq(d.compute, CT_F32); /* f32 accumulation */
    ck_assert_int_eq(d.math, CT_DNN_MATH_TENSOR_OP);
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F16, false, &d), CT_OK);
    ck_assert_int_eq(d.math, CT_DNN_MATH_TENSOR_OP);
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F64, true, &d), CT_OK);
    ck_assert_int_eq(d.compute, CT_F64);
    ck_assert_int_eq(d.math, CT_DNN_MATH_DEFAULT);
}
END_TEST

START_TEST(test_conv_autocast_dtype)
{
    CtConv2dParams p = conv_case;
    ck_assert_int_eq(ct_dnn_conv_dtype(&p, CT_F32), CT_F32);
    ck_assert_int_eq(ct_dnn_conv_dtype(&p, CT_F64), CT_F64);
    p.autocast = CT_BF16; /* f32 operands convolve in bf16 */
    ck_assert_int_eq(ct_dnn_conv_dtype(&p, CT_F32), CT_BF16);
    ck_assert_int_eq(ct_dnn_conv_dtype(&p, CT_F64), CT_F64); /* autocast takes f32 only */
    p.autocast = CT_F16;
    ck_assert_int_eq(ct_dnn_conv_dtype(&p, CT_F32), CT_F16);
    CtDnnConv d;
    ck_assert_int_eq(ct_dnn_conv(&p, ct_dnn_conv_dtype(&p, CT_F32), false, &d), CT_OK);
    ck_assert_int_eq(d.data, CT_F16);
    ck_assert_int_eq(d.compute, CT_F32);
    ck_assert_int_eq(d.math, CT_DNN_MATH_TENSOR_OP);
}
END_TEST

START_TEST(test_conv_errors)
{
    CtConv2dParams p = conv_case;
    CtDnnConv d;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_I32, false, &d), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "conv2d: cuDNN has no convolution for i32 on cuda");
    p.oh = 4; /* a ceil-mode-like size cuDNN does not produce */
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, false, &d), CT_ERR_INVALID);
    tu_assert_error(
        CT_ERR_INVALID,
        "conv2d: output 4x3 does not match input 9x7, kernel 3x3, stride 2x1, "
        "padding 1x0, dilation 1x2");
}
END_TEST

START_TEST(test_algorithm_pick)
{
    const CtDnnAlgo r[] = {
        {.algo = 7, .ok = false, .deterministic = true, .memory = 0}, /* failed */
        {.algo = 6, .ok = true, .deterministic = false, .memory = 0}, /* atomics */
        {.algo = 5, .ok = true, .deterministic = true, .tensor_op = true, .memory = 0},
        {.algo = 4, .ok = true, .deterministic = true, .memory = (size_t)1 << 40},
        {.algo = 3, .ok = true, .deterministic = true, .memory = 1024},
    };
    const size_t cap = CT_DNN_WORKSPACE_MAX;
    ck_assert_int_eq(ct_dnn_pick(r, 5, false, true, cap), 1); /* fastest that ran */
    ck_assert_int_eq(ct_dnn_pick(r, 5, true, true, cap), 2);  /* deterministic */
    ck_assert_int_eq(ct_dnn_pick(r, 5, true, false, cap), 4); /* no tensor cores, cap */
    ck_assert_int_eq(ct_dnn_pick(r, 5, true, false, (size_t)1 << 41), 3);
    ck_assert_int_eq(ct_dnn_pick(r, 1, false, true, cap), -1);
    ck_assert_int_eq(ct_dnn_pick(r, 0, false, true, cap), -1);
    ck_assert(!ct_dnn_tensor_ops_ok(CT_F32, false));
    ck_assert(ct_dnn_tensor_ops_ok(CT_F32, true));
    ck_assert(ct_dnn_tensor_ops_ok(CT_BF16, false));
    ck_assert(!ct_dnn_tensor_ops_ok(CT_F64, true));
}
END_TEST

START_TEST(test_batch_norm)
{
    CtBatchNormParams p = {
        .n = 8, .c = 16, .inner = 49, .training = true, .momentum = 0.1, .eps = 1e-5};
    CtDnnBatchNorm d;
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_F32, &d), CT_OK);
    assert_dims(d.x.dims, 8, 16, 49, 1); /* (n, c, inner) as NCHW with W = 1 */
    assert_dims(d.x.strides, 784, 49, 1, 1);
    assert_dims(d.param.dims, 1, 16, 1, 1);
    ck_assert(d.factor == 0.1);
    ck_assert(d.eps == 1e-5);
    ck_assert_int_eq(d.dtype, CT_F32);
    ck_assert_int_eq(d.param_dtype, CT_F32);
    /* bf16 and f16 data keep f32 parameters and statistics */
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_BF16, &d), CT_OK);
    ck_assert_int_eq(d.dtype, CT_BF16);
    ck_assert_int_eq(d.param_dtype, CT_F32);
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_F16, &d), CT_OK);
    ck_assert_int_eq(d.param_dtype, CT_F32);
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_F64, &d), CT_OK);
    ck_assert_int_eq(d.param_dtype, CT_F64);
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_I32, &d), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "batch_norm: no cuDNN batch norm for i32 on cuda");
    ck_assert(!d.persistent);
    /* channels last: (n, c, inner, 1) with NHWC strides, the persistent
     * mode in training only */
    p.nhwc = true;
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_BF16, &d), CT_OK);
    assert_dims(d.x.dims, 8, 16, 49, 1);
    assert_dims(d.x.strides, 784, 1, 16, 16);
    assert_dims(d.param.strides, 16, 1, 1, 1);
    ck_assert(d.persistent);
    p.training = false;
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_BF16, &d), CT_OK);
    ck_assert(!d.persistent);
    p.training = true, p.nhwc = false;
    p.inner = (int64_t)INT_MAX + 1;
    ck_assert_int_eq(ct_dnn_batch_norm(&p, CT_F64, &d), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED, "batch_norm: tensor (8, 16, 2147483648, 1)");
}
END_TEST

/* Every input of the choice is in the key; a full table stores no more but
 * still finds what it holds. */
START_TEST(test_algorithm_cache)
{
    static CtAlgoCache cache; /* zeroed: empty */
    CtConv2dParams p = conv_case;
    CtDnnConv d, other;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, false, &d), CT_OK);
    CtDnnAlgoKey k, k2;
    CtDnnChoice got;
    ct_dnn_algo_key(&k, CT_DNN_CALL_FORWARD, &d, false, false, false);
    ck_assert(!ct_algo_cache_get(&cache, &k, &got));
    ck_assert(ct_algo_cache_put(&cache, &k, (CtDnnChoice){3, 1, 4096, NULL}));
    ck_assert(ct_algo_cache_get(&cache, &k, &got));
    ck_assert_int_eq(got.algo, 3);
    ck_assert_int_eq(got.math, 1);
    ck_assert_uint_eq(got.workspace, 4096);
    /* the same call again: found, whatever the struct's padding held */
    memset(&k2, 0xAB, sizeof k2);
    ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &d, false, false, false);
    ck_assert(ct_algo_cache_get(&cache, &k2, &got));
    /* another kind, setting, dtype or shape: not found */
    ct_dnn_algo_key(&k2, CT_DNN_CALL_BACKWARD_DATA, &d, false, false, false);
    ck_assert(!ct_algo_cache_get(&cache, &k2, &got));
    ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &d, true, false, false);
    ck_assert(!ct_algo_cache_get(&cache, &k2, &got));
    ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &d, false, true, false);
    ck_assert(!ct_algo_cache_get(&cache, &k2, &got));
    ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &d, false, false, true);
    ck_assert(!ct_algo_cache_get(&cache, &k2, &got));
    ck_assert_int_eq(ct_dnn_conv(&p, CT_BF16, false, &other), CT_OK);
    ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &other, false, false, false);
    ck_assert(!ct_algo_cache_get(&cache, &k2, &got));
    p.n++;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, false, &other), CT_OK);
    ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &other, false, false, false);
    ck_assert(!ct_algo_cache_get(&cache, &k2, &got));
    /* overwrite in place */
    ck_assert(ct_algo_cache_put(&cache, &k, (CtDnnChoice){5, 0, 0, NULL}));
    ck_assert_int_eq(cache.n, 1);
    ck_assert(ct_algo_cache_get(&cache, &k, &got));
    ck_assert_int_eq(got.algo, 5);
    /* fill to the limit: batch sizes 100.. as distinct keys */
    int stored = 1;
    for (int i = 0; i < CT_ALGO_CACHE_SLOTS; i++) {
        p.n = 100 + i;
        ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, false, &other), CT_OK);
        ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &other, false, false, false);
        stored += ct_algo_cache_put(&cache, &k2, (CtDnnChoice){i, 0, 0, NULL});
    }
    ck_assert_int_eq(stored, CT_ALGO_CACHE_SLOTS / 4 * 3);
    ck_assert_int_eq(cache.n, stored);
    ck_assert(!ct_algo_cache_put(&cache, &k2, (CtDnnChoice){1, 0, 0, NULL})); /* full */
    ck_assert(!ct_algo_cache_get(&cache, &k2, &got));
    ck_assert(ct_algo_cache_get(&cache, &k, &got)); /* the first is still there */
    ck_assert_int_eq(got.algo, 5);
    p.n = 100 + 10;
    ck_assert_int_eq(ct_dnn_conv(&p, CT_F32, false, &other), CT_OK);
    ct_dnn_algo_key(&k2, CT_DNN_CALL_FORWARD, &other, false, false, false);
    ck_assert(ct_algo_cache_get(&cache, &k2, &got));
    ck_assert_int_eq(got.algo, 10);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_dnn_desc");
    TCase *tc = tcase_create("dnn_desc");
    tcase_add_test(tc, test_tensor_strides);
    tcase_add_test(tc, test_conv_geometry);
    tcase_add_test(tc, test_conv_channels_last);
    tcase_add_test(tc, test_padded_channels);
    tcase_add_test(tc, test_conv_types);
    tcase_add_test(tc, test_conv_autocast_dtype);
    tcase_add_test(tc, test_conv_errors);
    tcase_add_test(tc, test_algorithm_pick);
    tcase_add_test(tc, test_batch_norm);
    tcase_add_test(tc, test_algorithm_cache);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
