/* Colour functions (adjust_*, rgb_to_grayscale) bit for bit against
 * torchvision, nearest Resize, RandomCrop's padding modes and
 * pad_if_needed, ColorJitter, RandomGrayscale and RandomVerticalFlip.
 * Reference values: tests/fixtures/image_color.py. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "tests/fixtures/image_color.h"

#include "ctrainer/data.h"

static Tensor *from_u8(const uint8_t *v, int ndim, const int64_t *shape)
{
    return tensor_from_data(v, ndim, shape, CT_U8, ct_cpu());
}

static Tensor *color_u8(void)
{
    return from_u8(color_u8_in, 3, (const int64_t[]){5, 6, 3});
}

/* The u8 image / 255 as f32 (3, 5, 6). */
static Tensor *color_f32(void)
{
    float v[90];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 30; i++)
            v[c * 30 + i] = (float)color_u8_in[i * 3 + c] / 255.0f;
    return tensor_from_data(v, 3, (const int64_t[]){3, 5, 6}, CT_F32, ct_cpu());
}

static Tensor *adjust(int fn, Tensor *x, double f)
{
    Tensor *(*const fns[4])(Tensor *, double) = {
        data_image_adjust_brightness, data_image_adjust_contrast,
        data_image_adjust_saturation, data_image_adjust_hue};
    Tensor *y = fns[fn](x, f);
    ck_assert_msg(y != NULL, "adjust %d: %s", fn, ct_last_error());
    return y;
}

static Tensor *apply1(DataTransformer *t, Tensor *x, const DataCtx *ctx)
{
    Tensor *y = data_transform_apply(t, x, ctx);
    ck_assert_msg(y != NULL, "%s: %s", data_transform_name(t), ct_last_error());
    return y;
}

static bool same_bytes(const Tensor *a, const void *ref, int64_t n)
{
    return tensor_numel(a) == n &&
           memcmp(tensor_data(a), ref, (size_t)n * ct_dtype_size(tensor_dtype(a))) == 0;
}

START_TEST(test_adjust_vs_torchvision)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *u = color_u8(), *f = color_f32();
    int n = (int)(sizeof color_cases / sizeof color_cases[0]);
    for (int i = 0; i < n; i++) {
        const ColorCase *c = &color_cases[i];
        Tensor *yu = adjust(c->fn, u, c->factor);
        const uint8_t *du = tensor_data(yu);
        for (int k = 0; k < 90; k++)
            ck_assert_msg(du[k] == c->u8[k], "case %d (fn %d, %g) u8[%d]: %d, torch %d",
                          i, c->fn, c->factor, k, du[k], c->u8[k]);
        Tensor *yf = adjust(c->fn, f, c->factor);
        ck_assert_int_eq(tensor_shape(yf)[0], 3);
        const float *df = tensor_data(yf);
        /* contrast's f32 mean may be an ulp off PyTorch's (see data.h) */
        float tol = c->fn == 1 ? 1.2e-7f : 0.0f;
        for (int k = 0; k < 90; k++)
            ck_assert_msg(fabsf(df[k] - c->f32[k]) <= tol,
                          "case %d (fn %d, %g) f32[%d]: %.9g, torch %.9g", i, c->fn,
                          c->factor, k, df[k], c->f32[k]);
    }
    Tensor *g = data_image_rgb_to_grayscale(u, 1);
    ck_assert(g && tensor_shape(g)[2] == 1 && same_bytes(g, grey_u8_out, 30));
    Tensor *gf = data_image_rgb_to_grayscale(f, 1);
    ck_assert(gf && tensor_shape(gf)[0] == 1 && same_bytes(gf, grey_f32_out, 30));
    Tensor *g3 = data_image_rgb_to_grayscale(u, 3);
    ck_assert(g3 && tensor_shape(g3)[2] == 3);
    for (int k = 0; k < 90; k++)
        ck_assert_int_eq(((uint8_t *)tensor_data(g3))[k], grey_u8_out[k / 3]);
    /* one channel: hue and saturation return it, as torchvision */
    ck_assert_ptr_eq(data_image_adjust_hue(g, 0.3), g);
    ck_assert_ptr_eq(data_image_adjust_saturation(g, 0.3), g);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_adjust_errors)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *u = color_u8();
    ck_assert_ptr_null(data_image_adjust_brightness(u, -0.1));
    tu_assert_error(CT_ERR_INVALID, "adjust_brightness: factor -0.1 is out of range");
    ck_assert_ptr_null(data_image_adjust_hue(u, 0.6));
    tu_assert_error(CT_ERR_INVALID, "adjust_hue: factor 0.6 is out of range [-0.5, 0.5]");
    ck_assert_ptr_null(data_image_adjust_contrast(u, NAN));
    tu_assert_error(CT_ERR_INVALID, "adjust_contrast: factor nan");
    Tensor *four = tensor_zeros(3, (const int64_t[]){2, 2, 4}, CT_U8, ct_cpu());
    ck_assert_ptr_null(data_image_adjust_saturation(four, 1.0));
    tu_assert_error(CT_ERR_SHAPE, "adjust_saturation: expects 1 or 3 channels, got 4");
    ck_assert_ptr_null(data_image_rgb_to_grayscale(u, 2));
    tu_assert_error(CT_ERR_INVALID,
                    "rgb_to_grayscale: out_channels must be 1 or 3, got 2");
    ck_assert_ptr_null(data_transform_color_jitter(0.4, -1, 0, 0));
    tu_assert_error(CT_ERR_INVALID, "ColorJitter: contrast must be in [0, inf], got -1");
    ck_assert_ptr_null(data_transform_color_jitter(0, 0, 0, 0.7));
    tu_assert_error(CT_ERR_INVALID, "ColorJitter: hue must be in [0, 0.5], got 0.7");
    ck_assert_ptr_null(data_transform_random_grayscale(2));
    tu_assert_error(CT_ERR_INVALID, "RandomGrayscale: p must be in [0, 1], got 2");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_resize_nearest)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *u = color_u8();
    const struct {
        int64_t h, w;
        const uint8_t *ref;
    } cases[] = {{3, 4, nearest_3x4}, {8, 11, nearest_8x11}, {10, 12, nearest_10x12}};
    for (int i = 0; i < 3; i++) {
        DataTransformer *t =
            data_transform_resize_ex(cases[i].h, cases[i].w, DATA_INTERP_NEAREST);
        Tensor *y = apply1(t, u, NULL);
        ck_assert_int_eq(tensor_shape(y)[0], cases[i].h);
        ck_assert_msg(same_bytes(y, cases[i].ref, cases[i].h * cases[i].w * 3),
                      "nearest %lldx%lld differs from torchvision", (long long)cases[i].h,
                      (long long)cases[i].w);
        data_transform_free(t);
    }
    /* f32 (C, H, W) picks the same source pixels */
    DataTransformer *t = data_transform_resize_shorter_ex(8, DATA_INTERP_NEAREST);
    Tensor *yf = apply1(t, color_f32(), NULL);
    ck_assert_int_eq(tensor_shape(yf)[1], 8);
    ck_assert_int_eq(tensor_shape(yf)[2], 9); /* int(8 * 6 / 5) */
    data_transform_free(t);
    ck_assert_ptr_null(data_transform_resize_ex(4, 4, (DataInterpolation)7));
    tu_assert_error(CT_ERR_INVALID, "Resize: unknown interpolation mode 7");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* The offset (i * (pw - cw + 1) + j) of y's window in the (ph, pw) padded
 * reference, or -1. */
static int find_window(const Tensor *y, const uint8_t *ref, int64_t ph, int64_t pw)
{
    int64_t ch = tensor_shape(y)[0], cw = tensor_shape(y)[1];
    const uint8_t *d = tensor_data(y);
    for (int64_t i = 0; i + ch <= ph; i++)
        for (int64_t j = 0; j + cw <= pw; j++) {
            bool ok = true;
            for (int64_t r = 0; r < ch && ok; r++)
                ok = memcmp(d + r * cw, ref + (i + r) * pw + j, (size_t)cw) == 0;
            if (ok) return (int)(i * (pw - cw + 1) + j);
        }
    return -1;
}

START_TEST(test_random_crop_padding_modes)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    uint8_t gv[12];
    for (int i = 0; i < 12; i++) gv[i] = (uint8_t)(20 * i + 5);
    Tensor *g = from_u8(gv, 2, (const int64_t[]){3, 4});
    const uint8_t *pad2[4] = {pad2_constant, pad2_edge, pad2_reflect, pad2_symmetric};
    const uint8_t *needed[4] = {pad_needed_constant, pad_needed_edge, pad_needed_reflect,
                                pad_needed_symmetric};
    for (int m = 0; m < 4; m++) {
        DataRandomCropArgs a = {.padding = 2, .fill = 9, .padding_mode = (DataPadMode)m};
        DataTransformer *t = data_transform_random_crop_ex(7, 8, &a);
        DataCtx ctx = {3, 0, m};
        ck_assert_msg(find_window(apply1(t, g, &ctx), pad2[m], 7, 8) == 0, "mode %d", m);
        data_transform_free(t);
        a = (DataRandomCropArgs){.padding = 1,
                                 .pad_if_needed = true,
                                 .fill = 9,
                                 .padding_mode = (DataPadMode)m};
        t = data_transform_random_crop_ex(9, 8, &a);
        int seen[15] = {0}, distinct = 0;
        for (int64_t idx = 0; idx < 200; idx++) {
            DataCtx c = {5, 1, idx};
            int off = find_window(apply1(t, g, &c), needed[m], 13, 10);
            ck_assert_msg(off >= 0, "mode %d sample %lld: not a window of torchvision's",
                          m, (long long)idx);
            distinct += !seen[off]++;
        }
        ck_assert_int_eq(distinct, 15); /* every window of the 13x10 padded image */
        data_transform_free(t);
    }
    DataCtx c0 = {0, 0, 0};
    /* reflect needs padding < side: 3 rows padded by 3 fails, as torch.pad */
    DataTransformer *bad = data_transform_random_crop_ex(
        3, 3, &(DataRandomCropArgs){.padding = 3, .padding_mode = DATA_PAD_REFLECT});
    ck_assert_ptr_null(data_transform_apply(bad, g, &c0));
    tu_assert_error(CT_ERR_SHAPE, "too wide for reflect padding of a height of 3");
    data_transform_free(bad);
    bad = data_transform_random_crop_ex(3, 3,
                                        &(DataRandomCropArgs){.padding = 1, .fill = 256});
    ck_assert_ptr_null(data_transform_apply(bad, g, &c0));
    tu_assert_error(CT_ERR_INVALID, "RandomCrop: fill 256 does not fit a u8 image");
    data_transform_free(bad);
    ck_assert_ptr_null(data_transform_random_crop_ex(
        3, 3, &(DataRandomCropArgs){.padding_mode = (DataPadMode)9}));
    tu_assert_error(CT_ERR_INVALID, "RandomCrop: unknown padding mode 9");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_color_jitter)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    /* brightness only, on a constant 200 image: v = trunc(200 f), f uniform
     * in [0.5, 1.5] (f32), clamped at 255 when f > 1.275 */
    uint8_t flat[12];
    memset(flat, 200, sizeof flat);
    Tensor *x = from_u8(flat, 3, (const int64_t[]){2, 2, 3});
    DataTransformer *b = data_transform_color_jitter(0.5, 0, 0, 0);
    int lo = 255, hi = 0, clamped = 0, n = 2000;
    double sum = 0;
    for (int64_t idx = 0; idx < n; idx++) {
        DataCtx c = {11, 0, idx};
        Tensor *y = apply1(b, x, &c);
        int v = ((uint8_t *)tensor_data(y))[0];
        ck_assert(same_bytes(y, tensor_data(apply1(b, x, &c)), 12)); /* reproducible */
        lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        clamped += v == 255;
        sum += v < 255 ? v : 0;
    }
    ck_assert_msg(lo >= 100 && lo <= 102, "min %d", lo);
    ck_assert_msg(fabs((double)clamped / n - 0.225) < 0.04, "clamped %d of %d", clamped,
                  n);
    /* unclamped values are uniform on [100, 255): mean about 177 */
    ck_assert_msg(fabs(sum / (n - clamped) - 177.0) < 4, "mean %g", sum / (n - clamped));
    data_transform_free(b);
    /* all four on: each result is a valid image, reproducible, and the
     * all-off jitter is the identity */
    DataTransformer *all = data_transform_color_jitter(0.4, 0.4, 0.4, 0.1);
    Tensor *u = color_u8();
    int differ = 0;
    for (int64_t idx = 0; idx < 50; idx++) {
        DataCtx c = {2, 0, idx};
        Tensor *y = apply1(all, u, &c);
        ck_assert(tensor_shape(y)[2] == 3 && tensor_dtype(y) == CT_U8);
        ck_assert(same_bytes(y, tensor_data(apply1(all, u, &c)), 90));
        differ += !same_bytes(y, color_u8_in, 90);
    }
    ck_assert_int_ge(differ, 49);
    data_transform_free(all);
    /* the order is drawn per call: brightness x2 then contrast 0.001 gives
     * about 126 on pixel 0 (the mean of the clamped image), contrast first
     * about 198 (twice the mean); torchvision's randperm: half and half */
    uint8_t two[6] = {0, 0, 0, 200, 200, 200};
    Tensor *t2 = from_u8(two, 3, (const int64_t[]){1, 2, 3});
    DataTransformer *bc = data_transform_color_jitter_ex(
        &(DataColorJitterArgs){.brightness = {2, 2}, .contrast = {0.001, 0.001}});
    int bfirst = 0, cfirst = 0;
    for (int64_t idx = 0; idx < 1000; idx++) {
        int v = ((uint8_t *)tensor_data(apply1(bc, t2, &(DataCtx){9, 0, idx})))[0];
        bfirst += v == 126, cfirst += v == 198;
    }
    ck_assert_int_eq(bfirst + cfirst, 1000);
    ck_assert_msg(abs(bfirst - 500) < 60, "brightness first %d of 1000", bfirst);
    data_transform_free(bc);
    ck_assert_ptr_null(
        data_transform_color_jitter_ex(&(DataColorJitterArgs){.hue = {0.2, 0.6}}));
    tu_assert_error(CT_ERR_INVALID, "ColorJitter: hue range (0.2, 0.6) must satisfy");
    ck_assert_ptr_null(
        data_transform_color_jitter_ex(&(DataColorJitterArgs){.saturation = {1.5, 0.5}}));
    tu_assert_error(CT_ERR_INVALID, "ColorJitter: saturation range (1.5, 0.5)");
    DataTransformer *none = data_transform_color_jitter(0, 0, 0, 0);
    ck_assert(same_bytes(apply1(none, u, &(DataCtx){0}), color_u8_in, 90));
    ck_assert_ptr_null(data_transform_apply(none, u, NULL));
    tu_assert_error(CT_ERR_NULL, "ColorJitter: NULL ctx");
    data_transform_free(none);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_grayscale_vflip)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *u = color_u8();
    DataCtx c = {1, 0, 0};
    DataTransformer *g1 = data_transform_random_grayscale(1),
                    *g0 = data_transform_random_grayscale(0);
    Tensor *y = apply1(g1, u, &c);
    for (int k = 0; k < 90; k++)
        ck_assert_int_eq(((uint8_t *)tensor_data(y))[k], grey_u8_out[k / 3]);
    ck_assert_ptr_eq(apply1(g0, u, &c), u);
    DataTransformer *v1 = data_transform_random_vertical_flip(1);
    Tensor *f = color_f32(), *fy = apply1(v1, f, &c);
    const float *a = tensor_data(f), *b = tensor_data(fy);
    for (int ch = 0; ch < 3; ch++)
        for (int r = 0; r < 5; r++)
            for (int x = 0; x < 6; x++)
                ck_assert(b[ch * 30 + r * 6 + x] == a[ch * 30 + (4 - r) * 6 + x]);
    DataTransformer *vh = data_transform_random_vertical_flip(0.5);
    int flips = 0;
    for (int64_t idx = 0; idx < 400; idx++)
        flips += apply1(vh, u, &(DataCtx){4, 0, idx}) != u;
    ck_assert_msg(flips > 150 && flips < 250, "%d flips of 400", flips);
    data_transform_free(g1);
    data_transform_free(g0);
    data_transform_free(v1);
    data_transform_free(vh);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* The example of docs/tutorials/01-finetune.md (checked as an excerpt). */
START_TEST(test_docs_example)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    DataTransformer *aug = data_transform_compose(
        5, (DataTransformer *const[]){
               /* RandomCrop(32, padding=4, padding_mode="reflect") */
               data_transform_random_crop_ex(
                   32, 32,
                   &(DataRandomCropArgs){.padding = 4, .padding_mode = DATA_PAD_REFLECT}),
               data_transform_random_horizontal_flip(0.5),
               data_transform_color_jitter(0.4, 0.4, 0.4, 0.1), /* random order */
               data_transform_random_grayscale(0.1), data_transform_to_tensor()});
    ck_assert_msg(aug != NULL, "%s", ct_last_error());
    uint8_t px[32 * 32 * 3];
    for (int i = 0; i < 32 * 32 * 3; i++) px[i] = (uint8_t)(i * 7 + i / 96);
    Tensor *x = from_u8(px, 3, (const int64_t[]){32, 32, 3});
    for (int64_t idx = 0; idx < 8; idx++) {
        Tensor *y = apply1(aug, x, &(DataCtx){1, 0, idx});
        ck_assert(tensor_dtype(y) == CT_F32 && tensor_shape(y)[0] == 3 &&
                  tensor_shape(y)[1] == 32 && tensor_shape(y)[2] == 32);
    }
    data_transform_free(aug);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("transforms_color");
    TCase *tc = tcase_create("transforms_color");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adjust_vs_torchvision);
    tcase_add_test(tc, test_adjust_errors);
    tcase_add_test(tc, test_resize_nearest);
    tcase_add_test(tc, test_random_crop_padding_modes);
    tcase_add_test(tc, test_color_jitter);
    tcase_add_test(tc, test_grayscale_vflip);
    tcase_add_test(tc, test_docs_example);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
