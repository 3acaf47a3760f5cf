/* GaussianBlur and RandomErasing against torchvision: F.gaussian_blur on
 * u8 and f32 images, F.erase with given windows, RandomErasing's box
 * statistics. Reference values: tests/fixtures/transforms_more.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tests/fixtures/transforms_more.h"

#include "ctrainer/data.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

START_TEST(test_blur_u8_vs_torchvision)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (int n = 0; n < LEN(blur_u8_cases); n++) {
        const BlurU8Case *c = &blur_u8_cases[n];
        Tensor *x = tensor_from_data(c->in, 3, (const int64_t[]){c->h, c->w, c->c}, CT_U8,
                                     ct_cpu());
        Tensor *y = data_image_gaussian_blur(x, c->kw, c->kh, c->sx, c->sy);
        ck_assert_msg(y != NULL, "case %d: %s", n, ct_last_error());
        ck_assert_int_eq(tensor_dtype(y), CT_U8);
        ck_assert_int_eq(tensor_shape(y)[2], c->c);
        /* bit for bit except where the blurred value lies within ~1e-5 of a
         * .5 boundary (see data.h): at most one level, at most 1 in 2000 */
        const uint8_t *d = tensor_data(y);
        int64_t n_px = c->h * c->w * c->c, off = 0;
        for (int64_t i = 0; i < n_px; i++) {
            ck_assert_msg(abs(d[i] - c->out[i]) <= 1,
                          "case %d [%lld]: %d, torchvision %d", n, (long long)i, d[i],
                          c->out[i]);
            off += d[i] != c->out[i];
        }
        ck_assert_msg(off * 2000 <= n_px, "case %d: %lld of %lld pixels off by one", n,
                      (long long)off, (long long)n_px);
    }
    /* (H, W) counts as one channel */
    const BlurU8Case *c = &blur_u8_cases[1];
    Tensor *x =
        tensor_from_data(c->in, 2, (const int64_t[]){c->h, c->w}, CT_U8, ct_cpu());
    Tensor *y = data_image_gaussian_blur(x, c->kw, c->kh, c->sx, c->sy);
    ck_assert(y && tensor_ndim(y) == 2 &&
              memcmp(tensor_data(y), c->out, (size_t)(c->h * c->w)) == 0);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_blur_f32_vs_torchvision)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (int n = 0; n < LEN(blur_f32_cases); n++) {
        const BlurF32Case *c = &blur_f32_cases[n];
        Tensor *x = tensor_from_data(c->in, 3, (const int64_t[]){c->c, c->h, c->w},
                                     CT_F32, ct_cpu());
        Tensor *y = data_image_gaussian_blur(x, c->kw, c->kh, c->sx, c->sy);
        ck_assert_msg(y != NULL, "case %d: %s", n, ct_last_error());
        const float *d = tensor_data(y);
        /* PyTorch's SIMD exp, sums and oneDNN convolution: a few ulps
         * (see data.h) */
        for (int64_t i = 0; i < c->c * c->h * c->w; i++)
            ck_assert_msg(fabsf(d[i] - c->out[i]) <= 1e-6f,
                          "case %d [%lld]: %.9g, torchvision %.9g", n, (long long)i, d[i],
                          c->out[i]);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_blur_kernel_and_identity)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    /* a unit impulse at the centre of a 15x15 f32 image: the blurred image
     * is the 2-D kernel, the outer product of torchvision's 1-D kernels
     * (ours may differ by a few ulps: PyTorch's exp is SLEEF's) */
    float img[225] = {0};
    img[7 * 15 + 7] = 1.0f;
    Tensor *x = tensor_from_data(img, 3, (const int64_t[]){1, 15, 15}, CT_F32, ct_cpu());
    Tensor *y = data_image_gaussian_blur(x, 7, 7, 1.3, 1.3);
    ck_assert_ptr_nonnull(y);
    const float *d = tensor_data(y);
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 7; j++) {
            float want = blur_kernel7[i] * blur_kernel7[j];
            ck_assert_msg(fabsf(d[(4 + i) * 15 + 4 + j] - want) <= 6e-7f * want,
                          "tap (%d, %d): %.9g, want %.9g", i, j, d[(4 + i) * 15 + 4 + j],
                          want);
        }
    /* kernel 1x1 is the identity, u8 included */
    uint8_t u[12];
    for (int i = 0; i < 12; i++) u[i] = (uint8_t)(i * 21);
    Tensor *xu = tensor_from_data(u, 3, (const int64_t[]){2, 2, 3}, CT_U8, ct_cpu());
    Tensor *yu = data_image_gaussian_blur(xu, 1, 1, 0.5, 0.5);
    ck_assert(yu && memcmp(tensor_data(yu), u, 12) == 0);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_blur_transform)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const BlurU8Case *c = &blur_u8_cases[0];
    Tensor *x =
        tensor_from_data(c->in, 3, (const int64_t[]){c->h, c->w, c->c}, CT_U8, ct_cpu());
    /* a fixed sigma (s, s) is F.gaussian_blur with it */
    DataTransformer *fixed = data_transform_gaussian_blur(5, 3, 1.25, 1.25);
    DataCtx ctx = {7, 0, 3};
    Tensor *a = data_transform_apply(fixed, x, &ctx);
    Tensor *b = data_image_gaussian_blur(x, 5, 3, (float)1.25, (float)1.25);
    ck_assert(a && b &&
              memcmp(tensor_data(a), tensor_data(b), (size_t)tensor_numel(a)) == 0);
    /* random sigma: a function of (seed, epoch, index), and it varies */
    DataTransformer *t = data_transform_gaussian_blur(5, 5, 0, 0); /* (0.1, 2.0) */
    ck_assert_str_eq(data_transform_name(t), "GaussianBlur");
    Tensor *r1 = data_transform_apply(t, x, &ctx), *r2 = data_transform_apply(t, x, &ctx);
    ck_assert(r1 && r2 &&
              memcmp(tensor_data(r1), tensor_data(r2), (size_t)tensor_numel(r1)) == 0);
    int differ = 0;
    for (int64_t i = 0; i < 8; i++) {
        DataCtx ci = {7, 0, i};
        Tensor *ri = data_transform_apply(t, x, &ci);
        ck_assert_ptr_nonnull(ri);
        differ += memcmp(tensor_data(ri), tensor_data(r1), (size_t)tensor_numel(r1)) != 0;
    }
    ck_assert_int_ge(differ, 6);
    data_transform_free(fixed);
    data_transform_free(t);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_blur_errors)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    ck_assert_ptr_null(data_transform_gaussian_blur(4, 3, 0, 0));
    tu_assert_error(CT_ERR_INVALID, "GaussianBlur: kernel size 4x3 (w x h) must be odd");
    ck_assert_ptr_null(data_transform_gaussian_blur(3, -1, 0, 0));
    tu_assert_error(CT_ERR_INVALID, "GaussianBlur: kernel size 3x-1");
    ck_assert_ptr_null(data_transform_gaussian_blur(3, 3, 2.0, 1.0));
    tu_assert_error(CT_ERR_INVALID,
                    "GaussianBlur: sigma (2, 1) must satisfy 0 < min <= max");
    Tensor *x = tensor_zeros(3, (const int64_t[]){4, 6, 3}, CT_U8, ct_cpu());
    ck_assert_ptr_null(data_image_gaussian_blur(x, 3, 3, 0.0, 1.0));
    tu_assert_error(CT_ERR_INVALID, "gaussian_blur: sigma (0, 1) must be positive");
    /* torch: "Padding size should be less than the corresponding input dimension" */
    ck_assert_ptr_null(data_image_gaussian_blur(x, 3, 9, 1.0, 1.0));
    tu_assert_error(CT_ERR_SHAPE,
                    "gaussian_blur: kernel 3x9 (w x h) needs reflect padding "
                    "(1, 4) smaller than the 4x6 image");
    ck_assert_ptr_nonnull(
        data_image_gaussian_blur(x, 11, 7, 1.0, 1.0)); /* 5 < 6, 3 < 4 */
    Tensor *i64 = tensor_zeros(2, (const int64_t[]){4, 4}, CT_I64, ct_cpu());
    ck_assert_ptr_null(data_image_gaussian_blur(i64, 3, 3, 1.0, 1.0));
    tu_assert_error(CT_ERR_SHAPE, "gaussian_blur: expects a u8 (H, W, C) or f32");
    ck_assert_ptr_null(data_image_gaussian_blur(NULL, 3, 3, 1.0, 1.0));
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

static Tensor *erase_img(void)
{
    return tensor_from_data(erase_in, 3, (const int64_t[]){3, 7, 9}, CT_F32, ct_cpu());
}

START_TEST(test_erase_vs_torchvision)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = erase_img();
    const float vc[3] = {0.5f, -1.0f, 2.0f}, v1 = 0.25f;
    Tensor *a = data_image_erase(x, 2, 3, 3, 4, vc, 3, false);
    ck_assert(a && a != x &&
              memcmp(tensor_data(a), erase_out_c, sizeof erase_out_c) == 0);
    ck_assert(memcmp(tensor_data(x), erase_in, sizeof erase_in) == 0); /* not touched */
    Tensor *b = data_image_erase(x, 0, 5, 7, 4, &v1, 1, false);
    ck_assert(b && memcmp(tensor_data(b), erase_out_1, sizeof erase_out_1) == 0);
    Tensor *c = data_image_erase(x, 4, 0, 3, 4, erase_patch, 36, true);
    ck_assert_ptr_eq(c, x); /* in place */
    ck_assert(memcmp(tensor_data(x), erase_out_p, sizeof erase_out_p) == 0);
    /* errors: outside the image, bad counts, u8 */
    ck_assert_ptr_null(data_image_erase(x, 5, 0, 3, 4, vc, 3, false));
    tu_assert_error(CT_ERR_INVALID,
                    "erase: window (top 5, left 0, 3x4) is not inside the 7x9 image");
    ck_assert_ptr_null(data_image_erase(x, 0, 0, 3, 4, vc, 2, false));
    tu_assert_error(CT_ERR_INVALID,
                    "erase: needs 1, C = 3 or C * h * w = 36 values, got 2");
    Tensor *u = tensor_zeros(3, (const int64_t[]){4, 4, 3}, CT_U8, ct_cpu());
    ck_assert_ptr_null(data_image_erase(u, 0, 0, 1, 1, vc, 1, false));
    tu_assert_error(CT_ERR_DTYPE,
                    "erase: expects an f32 (C, H, W) image (after ToTensor)");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* The erased box of y (values 0) in an all-ones image: false if none. */
static bool find_box(const float *y, int64_t hh, int64_t ww, int64_t *top, int64_t *left,
                     int64_t *h, int64_t *w)
{
    int64_t t = -1, l = -1, b = -1, r = -1, zeros = 0;
    for (int64_t i = 0; i < hh; i++)
        for (int64_t j = 0; j < ww; j++)
            if (y[i * ww + j] == 0.0f) {
                if (t < 0) t = i, l = j;
                b = i, r = j;
                zeros++;
            }
    if (t < 0) return false;
    *top = t, *left = l, *h = b - t + 1, *w = r - l + 1;
    ck_assert_int_eq(zeros, *h * *w); /* one rectangle */
    return true;
}

START_TEST(test_random_erasing_statistics)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    enum { H = 32, W = 40, N = 20000 };
    Tensor *ones = tensor_ones(3, (const int64_t[]){3, H, W}, CT_F32, ct_cpu());
    DataTransformer *t = data_transform_random_erasing(1.0, NULL);
    ck_assert_str_eq(data_transform_name(t), "RandomErasing");
    double kept = 0, sh = 0, sw = 0, sa = 0, st = 0, sl = 0;
    for (int64_t n = 0; n < N; n++) {
        CtScope *inner = ct_scope_open();
        DataCtx ctx = {11, 0, n};
        Tensor *y = data_transform_apply(t, ones, &ctx);
        ck_assert_ptr_nonnull(y);
        int64_t top, left, h, w;
        if (!find_box(tensor_data(y), H, W, &top, &left, &h, &w)) {
            kept++;
        } else {
            const float *d = tensor_data(y); /* every channel alike */
            ck_assert(d[H * W + top * W + left] == 0.0f &&
                      d[2 * H * W + top * W + left] == 0.0f);
            sh += (double)h, sw += (double)w, sa += (double)(h * w), st += (double)top,
                sl += (double)left;
        }
        ct_scope_close(inner);
    }
    double m = N - kept;
    /* torchvision's get_params over 40000 draws (the fixture); standard
     * errors here are about 0.05 (h, w, top), 0.08 (left) and 1.2 (area) */
    ck_assert_msg(kept == 0 && erasing_stats[0] == 0.0, "kept %g", kept);
    ck_assert_msg(fabs(sh / m - erasing_stats[1]) < 0.3, "mean h %g vs %g", sh / m,
                  erasing_stats[1]);
    ck_assert_msg(fabs(sw / m - erasing_stats[2]) < 0.3, "mean w %g vs %g", sw / m,
                  erasing_stats[2]);
    ck_assert_msg(fabs(sa / m - erasing_stats[3]) < 6.0, "mean area %g vs %g", sa / m,
                  erasing_stats[3]);
    ck_assert_msg(fabs(st / m - erasing_stats[4]) < 0.3, "mean top %g vs %g", st / m,
                  erasing_stats[4]);
    ck_assert_msg(fabs(sl / m - erasing_stats[5]) < 0.4, "mean left %g vs %g", sl / m,
                  erasing_stats[5]);
    data_transform_free(t);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_random_erasing_modes)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *ones = tensor_ones(3, (const int64_t[]){3, 10, 10}, CT_F32, ct_cpu());
    DataCtx ctx = {5, 1, 2};
    /* p = 0: the input itself */
    DataTransformer *never = data_transform_random_erasing(0.0, NULL);
    ck_assert_ptr_eq(data_transform_apply(never, ones, &ctx), ones);
    /* a box that never fits (h = sqrt(area * ratio) >= 10): unchanged after
     * 10 tries, as get_params's fallback */
    DataRandomErasingArgs tall = {.ratio = {50, 60}};
    DataTransformer *nofit = data_transform_random_erasing(1.0, &tall);
    Tensor *y = data_transform_apply(nofit, ones, &ctx);
    ck_assert(y && memcmp(tensor_data(y), tensor_data(ones), 300 * sizeof(float)) == 0);
    /* per-channel values, in place */
    const double vals[3] = {-1.0, -2.0, -3.0};
    DataRandomErasingArgs pc = {.n_value = 3, .value = vals, .inplace = true};
    DataTransformer *chan = data_transform_random_erasing(1.0, &pc);
    Tensor *x = tensor_clone(ones);
    ck_assert_ptr_eq(data_transform_apply(chan, x, &ctx), x);
    const float *d = tensor_data(x);
    int64_t cnt[3] = {0};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 100; i++) {
            ck_assert(d[k * 100 + i] == 1.0f || d[k * 100 + i] == (float)vals[k]);
            cnt[k] += d[k * 100 + i] != 1.0f;
        }
    ck_assert(cnt[0] > 0 && cnt[0] == cnt[1] && cnt[1] == cnt[2]);
    /* random: standard normal noise, different per channel, deterministic */
    DataRandomErasingArgs rnd = {.scale = {0.3, 0.5}, .mode = DATA_ERASE_RANDOM};
    DataTransformer *noise = data_transform_random_erasing(1.0, &rnd);
    Tensor *r1 = data_transform_apply(noise, ones, &ctx);
    Tensor *r2 = data_transform_apply(noise, ones, &ctx);
    ck_assert(r1 && r2 &&
              memcmp(tensor_data(r1), tensor_data(r2), 300 * sizeof(float)) == 0);
    const float *rd = tensor_data(r1);
    int changed = 0;
    for (int i = 0; i < 300; i++) changed += rd[i] != 1.0f;
    ck_assert_int_ge(changed, 3 * 25); /* area >= 0.3 * 100 (rounded sides) */
    ck_assert(rd[0] != rd[100] || rd[0] == 1.0f);
    /* errors */
    Tensor *two = tensor_ones(3, (const int64_t[]){2, 10, 10}, CT_F32, ct_cpu());
    ck_assert_ptr_null(data_transform_apply(chan, two, &ctx));
    tu_assert_error(CT_ERR_SHAPE, "RandomErasing: 3 values for an image of 2 channels");
    Tensor *u = tensor_zeros(3, (const int64_t[]){4, 4, 3}, CT_U8, ct_cpu());
    ck_assert_ptr_null(data_transform_apply(chan, u, &ctx));
    tu_assert_error(CT_ERR_DTYPE, "RandomErasing: expects an f32 (C, H, W) image");
    ck_assert_ptr_null(data_transform_random_erasing(1.5, NULL));
    tu_assert_error(CT_ERR_INVALID, "RandomErasing: p must be in [0, 1], got 1.5");
    DataRandomErasingArgs bad = {.scale = {0.5, 0.2}};
    ck_assert_ptr_null(data_transform_random_erasing(0.5, &bad));
    tu_assert_error(CT_ERR_INVALID,
                    "RandomErasing: scale range (0.5, 0.2) must satisfy 0 < min <= max");
    data_transform_free(never);
    data_transform_free(nofit);
    data_transform_free(chan);
    data_transform_free(noise);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_docs_example)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    DataTransformer *aug = data_transform_compose(
        4,
        (DataTransformer *const[]){
            /* GaussianBlur(23, sigma=(0.1, 2.0)), on the u8 image */
            data_transform_gaussian_blur(23, 23, 0, 0), data_transform_to_tensor(),
            /* RandomErasing(p=0.25, value="random"), after ToTensor */
            data_transform_random_erasing(
                0.25, &(DataRandomErasingArgs){.mode = DATA_ERASE_RANDOM}),
            data_transform_normalize(1, (const double[]){0.5}, (const double[]){0.25})});
    ck_assert_ptr_nonnull(aug);
    Tensor *img = tensor_full(3, (const int64_t[]){32, 32, 3}, 200.0, CT_U8, ct_cpu());
    DataCtx ctx = {1, 0, 0};
    Tensor *y = data_transform_apply(aug, img, &ctx);
    ck_assert_msg(y != NULL, "%s", ct_last_error());
    ck_assert_int_eq(tensor_dtype(y), CT_F32);
    ck_assert_int_eq(tensor_shape(y)[0], 3);
    data_transform_free(aug);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("transforms_more");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_blur_u8_vs_torchvision);
    tcase_add_test(tc, test_blur_f32_vs_torchvision);
    tcase_add_test(tc, test_blur_kernel_and_identity);
    tcase_add_test(tc, test_blur_transform);
    tcase_add_test(tc, test_blur_errors);
    tcase_add_test(tc, test_erase_vs_torchvision);
    tcase_add_test(tc, test_random_erasing_statistics);
    tcase_add_test(tc, test_random_erasing_modes);
    tcase_add_test(tc, test_docs_example);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
