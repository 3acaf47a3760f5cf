/* Image decoding (PNG, JPEG) and the ImageFolder dataset. Test images are
 * encoded here with libpng/libjpeg and decoded back. */
#include <math.h>
#include <zlib.h>

#include "image_testutil.h"
#include "tests/fixtures/image_cmyk.h"

/* Decodes buf and checks shape (h, w, c) and, for exact formats, values. */
static Tensor *decode_ok(const uint8_t *buf, size_t n, int channels, int64_t h, int64_t w,
                         int64_t c)
{
    Tensor *t = data_image_decode(buf, n, channels, "test");
    ck_assert_msg(t != NULL, "decode of %lldx%lldx%lld failed: %s", (long long)h,
                  (long long)w, (long long)c, ct_last_error());
    ck_assert_int_eq(tensor_dtype(t), CT_U8);
    tu_assert_shape(t, 3, h, w, c);
    return t;
}

static void assert_bytes(const Tensor *t, const uint8_t *expect, int64_t n)
{
    ck_assert_int_eq(tensor_numel(t), n);
    const uint8_t *p = tensor_data(t);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(p[i] == expect[i], "byte %lld: %u, expected %u", (long long)i, p[i],
                      expect[i]);
}

static uint8_t *pattern(int n, unsigned seed)
{
    uint8_t *p = malloc((size_t)n);
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 73 + seed * 29 + (i * i) % 17) & 255);
    return p;
}

START_TEST(test_png_rgb_grey_exact)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    int w = 7, h = 5;
    uint8_t *rgb = pattern(w * h * 3, 1), *grey = pattern(w * h, 2);
    for (int interlace = 0; interlace < 2; interlace++) {
        size_t n;
        uint8_t *png =
            ti_png(w, h, PNG_COLOR_TYPE_RGB, 8, interlace, rgb, NULL, 0, NULL, 0, &n);
        assert_bytes(decode_ok(png, n, 0, h, w, 3), rgb, w * h * 3);
        free(png);
        png = ti_png(w, h, PNG_COLOR_TYPE_GRAY, 8, interlace, grey, NULL, 0, NULL, 0, &n);
        assert_bytes(decode_ok(png, n, 0, h, w, 1), grey, w * h);
        /* forced RGB replicates the grey value */
        Tensor *t3 = decode_ok(png, n, 3, h, w, 3);
        const uint8_t *p3 = tensor_data(t3);
        for (int i = 0; i < w * h; i++)
            ck_assert(p3[3 * i] == grey[i] && p3[3 * i + 1] == grey[i] &&
                      p3[3 * i + 2] == grey[i]);
        free(png);
    }
    free(rgb);
    free(grey);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_png_alpha_palette_16bit_lowbit)
{
    CtScope *s = ct_scope_open();
    int w = 4, h = 3;
    size_t n;
    /* RGBA: alpha dropped, not composited */
    uint8_t *rgba = pattern(w * h * 4, 3), rgb[48];
    for (int i = 0; i < w * h; i++) memcpy(rgb + 3 * i, rgba + 4 * i, 3);
    uint8_t *png = ti_png(w, h, PNG_COLOR_TYPE_RGBA, 8, 0, rgba, NULL, 0, NULL, 0, &n);
    assert_bytes(decode_ok(png, n, 0, h, w, 3), rgb, w * h * 3);
    free(png);
    /* grey + alpha -> grey */
    uint8_t ga[24], g[12];
    for (int i = 0; i < w * h; i++)
        ga[2 * i] = g[i] = (uint8_t)(i * 20), ga[2 * i + 1] = 7;
    png = ti_png(w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, ga, NULL, 0, NULL, 0, &n);
    assert_bytes(decode_ok(png, n, 0, h, w, 1), g, w * h);
    free(png);
    /* palette (with tRNS, dropped) -> RGB */
    png_color pal[3] = {{255, 0, 0}, {0, 128, 255}, {9, 8, 7}};
    uint8_t idx[12] = {0, 1, 2, 1, 2, 0, 0, 0, 1, 2, 2, 1}, expect[36];
    uint8_t trns[3] = {0, 128, 255};
    for (int i = 0; i < 12; i++) memcpy(expect + 3 * i, &pal[idx[i]], 3);
    png = ti_png(w, h, PNG_COLOR_TYPE_PALETTE, 8, 0, idx, pal, 3, trns, 3, &n);
    assert_bytes(decode_ok(png, n, 0, h, w, 3), expect, 36);
    free(png);
    /* 2-bit palette, packed 4 pixels per byte */
    uint8_t packed[3];
    for (int y = 0; y < 3; y++)
        packed[y] = (uint8_t)(idx[4 * y] << 6 | idx[4 * y + 1] << 4 |
                              idx[4 * y + 2] << 2 | idx[4 * y + 3]);
    png = ti_png(w, h, PNG_COLOR_TYPE_PALETTE, 2, 0, packed, pal, 3, NULL, 0, &n);
    assert_bytes(decode_ok(png, n, 0, h, w, 3), expect, 36);
    free(png);
    /* 16-bit RGB: multiples of 257 map exactly to 8 bits */
    uint8_t be[72];
    for (int i = 0; i < 36; i++) be[2 * i] = be[2 * i + 1] = rgba[i]; /* v * 257 */
    png = ti_png(w, h, PNG_COLOR_TYPE_RGB, 16, 0, be, NULL, 0, NULL, 0, &n);
    assert_bytes(decode_ok(png, n, 0, h, w, 3), rgba, 36);
    free(png);
    /* other 16-bit values: the high byte, as PIL (0x12FF -> 0x12, not 0x13) */
    for (int i = 0; i < 36; i++) be[2 * i + 1] = (uint8_t)(0x80 + i * 3);
    png = ti_png(w, h, PNG_COLOR_TYPE_RGB, 16, 0, be, NULL, 0, NULL, 0, &n);
    assert_bytes(decode_ok(png, n, 0, h, w, 3), rgba, 36);
    free(png);
    /* 1-bit grey -> 0 / 255 */
    uint8_t bits[3] = {0xA0, 0x50, 0xF0}, bw[12];
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++) bw[4 * y + x] = (bits[y] >> (7 - x)) & 1 ? 255 : 0;
    png = ti_png(w, h, PNG_COLOR_TYPE_GRAY, 1, 0, bits, NULL, 0, NULL, 0, &n);
    assert_bytes(decode_ok(png, n, 0, h, w, 1), bw, 12);
    free(png);
    free(rgba);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_rgb_to_grey)
{
    CtScope *s = ct_scope_open();
    uint8_t rgb[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30}, grey[4];
    /* PIL's "L": (19595 R + 38470 G + 7471 B + 32768) >> 16 */
    for (int i = 0; i < 4; i++)
        grey[i] = (uint8_t)((19595 * rgb[3 * i] + 38470 * rgb[3 * i + 1] +
                             7471 * rgb[3 * i + 2] + 32768) >>
                            16);
    ck_assert_int_eq(grey[0], 76);
    ck_assert_int_eq(grey[1], 150);
    ck_assert_int_eq(grey[2], 29);
    size_t n;
    uint8_t *png = ti_png(2, 2, PNG_COLOR_TYPE_RGB, 8, 0, rgb, NULL, 0, NULL, 0, &n);
    assert_bytes(decode_ok(png, n, 1, 2, 2, 1), grey, 4);
    free(png);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_jpeg_round_trip)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    int w = 40, h = 24;
    for (int c = 1; c <= 3; c += 2) {
        uint8_t *px = ti_gradient(w, h, c);
        size_t n;
        uint8_t *jpg = ti_jpeg(px, w, h, c, 95, &n);
        Tensor *t = decode_ok(jpg, n, 0, h, w, c);
        const uint8_t *p = tensor_data(t);
        double sum = 0;
        int worst = 0;
        for (int i = 0; i < w * h * c; i++) {
            int d = abs((int)p[i] - (int)px[i]);
            sum += d;
            worst = d > worst ? d : worst;
        }
        ck_assert_msg(worst <= 8 && sum / (w * h * c) < 1.5,
                      "JPEG c=%d: max error %d, mean %g", c, worst, sum / (w * h * c));
        free(jpg);
        free(px);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_decode_errors)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    size_t n;
    uint8_t *rgb = pattern(30 * 20 * 3, 4);
    uint8_t *png = ti_png(30, 20, PNG_COLOR_TYPE_RGB, 8, 0, rgb, NULL, 0, NULL, 0, &n);
    ck_assert_ptr_null(data_image_decode("GIF89a....", 10, 0, "x.gif"));
    tu_assert_error(CT_ERR_FORMAT, "x.gif: not a PNG or JPEG image");
    ck_assert_ptr_null(data_image_decode(png, 0, 0, NULL));
    tu_assert_error(CT_ERR_FORMAT, "<memory>: not a PNG or JPEG image");
    ck_assert_ptr_null(data_image_decode(png, n / 2, 0, "half.png"));
    tu_assert_error(CT_ERR_FORMAT, "half.png: truncated PNG");
    ck_assert_ptr_null(data_image_decode(png, 20, 0, "hdr.png"));
    tu_assert_error(CT_ERR_FORMAT, "hdr.png: truncated PNG");
    /* a flipped byte in the IHDR: CRC mismatch */
    png[20] ^= 0x40;
    ck_assert_ptr_null(data_image_decode(png, n, 0, "crc.png"));
    tu_assert_error(CT_ERR_FORMAT, "crc.png: corrupted PNG: ");
    png[20] ^= 0x40;
    ck_assert_ptr_null(data_image_decode(png, n, 2, "ok.png"));
    tu_assert_error(CT_ERR_INVALID, "channels must be 0, 1 or 3");
    uint8_t *px = ti_gradient(64, 48, 3);
    uint8_t *jpg = ti_jpeg(px, 64, 48, 3, 90, &n);
    ck_assert_ptr_null(data_image_decode(jpg, n * 2 / 3, 0, "cut.jpg"));
    tu_assert_error(CT_ERR_FORMAT, "cut.jpg: truncated JPEG");
    /* SOI then garbage where a marker should be */
    uint8_t bad[64] = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x05, 8, 0, 4, 0, 4, 1, 1, 0x11, 0};
    ck_assert_ptr_null(data_image_decode(bad, sizeof bad, 0, "bad.jpg"));
    tu_assert_error(CT_ERR_FORMAT, "bad.jpg: corrupted JPEG: ");
    ck_assert_ptr_null(data_image_read("/nonexistent/dir/img.png", 0));
    tu_assert_error(CT_ERR_IO, "/nonexistent/dir/img.png: cannot open");
    free(jpg);
    free(px);
    free(png);
    free(rgb);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_too_large_refused)
{
    /* 20000 x 20000 RGB header, no pixel data: refused without allocating */
    size_t n;
    uint8_t *rgb = pattern(3, 5);
    uint8_t *png = ti_png(1, 1, PNG_COLOR_TYPE_RGB, 8, 0, rgb, NULL, 0, NULL, 0, &n);
    /* patch IHDR width/height (big-endian at 16 and 20) and its CRC */
    uint32_t dim = 20000;
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 4; b++) png[16 + 4 * k + b] = (uint8_t)(dim >> (24 - 8 * b));
    uint32_t crc = (uint32_t)crc32(0, png + 12, 17);
    for (int b = 0; b < 4; b++) png[29 + b] = (uint8_t)(crc >> (24 - 8 * b));
    ck_assert_ptr_null(data_image_decode(png, n, 0, "huge.png"));
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "huge.png: PNG of 20000x20000 pixels is over the limit");
    free(png);
    free(rgb);
}
END_TEST

START_TEST(test_cmyk_ycck_jpeg_match_pillow)
{
    /* CMYK with and without an Adobe marker, and YCCK: Pillow's RGB exactly */
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    for (size_t k = 0; k < sizeof cmyk_fixtures / sizeof *cmyk_fixtures; k++) {
        const CmykFixture *f = &cmyk_fixtures[k];
        Tensor *t = data_image_decode(f->jpg, f->len, 0, f->name);
        ck_assert_msg(t != NULL, "%s: %s", f->name, ct_last_error());
        tu_assert_shape(t, 3, (int64_t)f->h, (int64_t)f->w, (int64_t)3);
        const uint8_t *p = tensor_data(t);
        for (int64_t i = 0; i < (int64_t)f->h * f->w * 3; i++)
            ck_assert_msg(p[i] == f->rgb[i], "%s: byte %lld: %u, Pillow %u", f->name,
                          (long long)i, p[i], f->rgb[i]);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_png_wider_than_a_million_pixels)
{
    /* libpng's default limit is 1,000,000 pixels a side; ours is the count */
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    int w = 1000001;
    uint8_t *grey = malloc((size_t)w);
    for (int i = 0; i < w; i++) grey[i] = (uint8_t)(i * 7 + i / 1000);
    size_t n;
    uint8_t *png = ti_png(w, 1, PNG_COLOR_TYPE_GRAY, 8, 0, grey, NULL, 0, NULL, 0, &n);
    Tensor *t = decode_ok(png, n, 0, 1, w, 1);
    ck_assert(memcmp(tensor_data(t), grey, (size_t)w) == 0);
    free(png);
    free(grey);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ image folder */

static char g_root[64];

static void put_png(const char *rel, int w, int h, int c)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    uint8_t *px = pattern(w * h * c, (unsigned)strlen(rel));
    size_t n;
    uint8_t *png = ti_png(w, h, c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, 8, 0,
                          px, NULL, 0, NULL, 0, &n);
    ti_write_file(path, png, n);
    free(png);
    free(px);
}

static void put_jpeg(const char *rel, int w, int h)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    uint8_t *px = ti_gradient(w, h, 3);
    size_t n;
    uint8_t *jpg = ti_jpeg(px, w, h, 3, 90, &n);
    ti_write_file(path, jpg, n);
    free(jpg);
    free(px);
}

static void put_text(const char *rel, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    ti_write_file(path, text, strlen(text));
}

static void mk(const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void make_root(void)
{
    strcpy(g_root, "/tmp/ct_imgfolder_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_root));
}

static void assert_path(const Dataset *d, int64_t i, const char *rel, int64_t label)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    ck_assert_str_eq(data_image_folder_path(d, i), path);
    ck_assert_int_eq(data_image_folder_label(d, i), label);
}

START_TEST(test_folder_by_subfolder)
{
    TU_MEM_BEGIN;
    make_root();
    mk("dog");
    mk("cat");
    mk("bird");
    mk("cat/more");
    put_png("dog/b.png", 6, 4, 3);
    put_jpeg("dog/a.JPG", 8, 5);
    put_png("cat/z.png", 3, 2, 1); /* grey: loaded as RGB */
    put_png("cat/more/a.png", 2, 2, 3);
    put_text("cat/notes.txt", "not an image, skipped by extension");
    put_png("bird/x.jpeg.png", 5, 5, 3);
    put_text("readme.md", "files in root are not classes");
    Dataset *d = data_image_folder_create(g_root, NULL);
    ck_assert_msg(d != NULL, "%s", ct_last_error());
    ck_assert_int_eq(data_image_folder_num_classes(d), 3);
    ck_assert_str_eq(data_image_folder_class_name(d, 0), "bird");
    ck_assert_str_eq(data_image_folder_class_name(d, 1), "cat");
    ck_assert_str_eq(data_image_folder_class_name(d, 2), "dog");
    ck_assert_int_eq(data_image_folder_class_id(d, "dog"), 2);
    ck_assert_int_eq(data_image_folder_class_id(d, "cow"), -1);
    tu_assert_error(CT_ERR_INVALID, "no class named 'cow'");
    ck_assert_ptr_null(data_image_folder_class_name(d, 3));
    tu_assert_error(CT_ERR_INVALID, "class id 3 out of range [0, 3)");
    ck_assert_int_eq(d->vt->len(d), 5);
    /* files of a folder before those of its subfolders, as sorted(os.walk) */
    assert_path(d, 0, "bird/x.jpeg.png", 0);
    assert_path(d, 1, "cat/z.png", 1);
    assert_path(d, 2, "cat/more/a.png", 1);
    assert_path(d, 3, "dog/a.JPG", 2);
    assert_path(d, 4, "dog/b.png", 2);
    CtScope *s = ct_scope_open();
    DataCtx ctx = {1, 0, 1};
    DataSample smp;
    ck_assert_int_eq(d->vt->get(d, 1, &ctx, &smp), CT_OK);
    ck_assert_int_eq(smp.n, 2);
    tu_assert_shape(smp.t[0], 3, 2, 3, 3);
    ck_assert_int_eq(tensor_ndim(smp.t[1]), 0);
    ck_assert_int_eq(tensor_dtype(smp.t[1]), CT_I64);
    ck_assert_int_eq((int)tensor_item(smp.t[1]), 1);
    ck_assert_int_eq(d->vt->get(d, 3, &ctx, &smp), CT_OK);
    tu_assert_shape(smp.t[0], 3, 5, 8, 3);
    ck_assert_int_eq((int)tensor_item(smp.t[1]), 2);
    ck_assert_int_eq(d->vt->get(d, 5, &ctx, &smp), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "index 5 out of range [0, 5)");
    ct_scope_close(s);
    d->vt->free(d);
    /* a class folder with no images */
    mk("empty");
    ck_assert_ptr_null(data_image_folder_create(g_root, NULL));
    tu_assert_error(CT_ERR_INVALID, "class folder 'empty' has no .png/.jpg/.jpeg files");
    ti_rmtree(g_root);
    /* an empty root */
    make_root();
    ck_assert_ptr_null(data_image_folder_create(g_root, NULL));
    tu_assert_error(CT_ERR_INVALID, "no class subfolders (empty folder)");
    ti_rmtree(g_root);
    ck_assert_ptr_null(data_image_folder_create("/nonexistent/ct_root", NULL));
    tu_assert_error(CT_ERR_IO, "cannot open /nonexistent/ct_root");
    TU_MEM_END;
}
END_TEST

START_TEST(test_folder_by_regex)
{
    TU_MEM_BEGIN;
    make_root();
    put_jpeg("beagle_12.jpg", 8, 6);
    put_jpeg("Abyssinian_2.jpg", 9, 7);
    put_jpeg("Abyssinian_10.jpg", 10, 6);
    put_jpeg("great_pyrenees_1.jpg", 6, 6);
    put_text("list.txt", "skipped: does not match");
    mk("annotations");
    DataImageFolderArgs a = {.label_regex = "^(.*)_[0-9]+\\.jpg$"};
    Dataset *d = data_image_folder_create(g_root, &a);
    ck_assert_msg(d != NULL, "%s", ct_last_error());
    /* bytewise order: upper case first, as Python's sorted() */
    ck_assert_int_eq(data_image_folder_num_classes(d), 3);
    ck_assert_str_eq(data_image_folder_class_name(d, 0), "Abyssinian");
    ck_assert_str_eq(data_image_folder_class_name(d, 1), "beagle");
    ck_assert_str_eq(data_image_folder_class_name(d, 2), "great_pyrenees");
    ck_assert_int_eq(d->vt->len(d), 4);
    assert_path(d, 0, "Abyssinian_10.jpg", 0);
    assert_path(d, 1, "Abyssinian_2.jpg", 0);
    assert_path(d, 2, "beagle_12.jpg", 1);
    assert_path(d, 3, "great_pyrenees_1.jpg", 2);
    /* get through a transform, via the function pointer adapter */
    DataTransformer *tt = data_transform_to_tensor();
    d->vt->free(d);
    a.transform = data_transform_as_fn(tt);
    d = data_image_folder_create(g_root, &a);
    CtScope *s = ct_scope_open();
    DataCtx ctx = {0, 0, 2};
    DataSample smp;
    ck_assert_int_eq(d->vt->get(d, 2, &ctx, &smp), CT_OK);
    ck_assert_int_eq(tensor_dtype(smp.t[0]), CT_F32);
    tu_assert_shape(smp.t[0], 3, 3, 6, 8);
    ck_assert_int_eq((int)tensor_item(smp.t[1]), 1);
    /* a corrupted file is reported at get time, naming the file */
    char path[256];
    snprintf(path, sizeof path, "%s/beagle_12.jpg", g_root);
    ti_write_file(path, "\xFF\xD8\xFF\xE0 garbage", 12);
    ck_assert_int_eq(d->vt->get(d, 2, &ctx, &smp), CT_ERR_FORMAT);
    char want[300];
    snprintf(want, sizeof want, "%s: truncated JPEG", path);
    tu_assert_error(CT_ERR_FORMAT, want);
    ti_write_file(path, "hello", 5);
    ck_assert_int_eq(d->vt->get(d, 2, &ctx, &smp), CT_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: not a PNG or JPEG image", path);
    tu_assert_error(CT_ERR_FORMAT, want);
    ct_scope_close(s);
    d->vt->free(d);
    data_transform_free(tt);
    /* regex errors */
    a = (DataImageFolderArgs){.label_regex = "^(cat)_[0-9]+\\.png$"};
    ck_assert_ptr_null(data_image_folder_create(g_root, &a));
    tu_assert_error(CT_ERR_INVALID,
                    "no file name matches '^(cat)_[0-9]+\\.png$' (5 files)");
    a.label_regex = "^(.*_[0-9]+\\.jpg$";
    ck_assert_ptr_null(data_image_folder_create(g_root, &a));
    tu_assert_error(CT_ERR_INVALID, "invalid label regex");
    a.label_regex = "^.*\\.jpg$";
    ck_assert_ptr_null(data_image_folder_create(g_root, &a));
    tu_assert_error(CT_ERR_INVALID, "has no capture group");
    ti_rmtree(g_root);
    make_root();
    a.label_regex = "^(.*)_[0-9]+\\.jpg$";
    ck_assert_ptr_null(data_image_folder_create(g_root, &a));
    tu_assert_error(CT_ERR_INVALID, "no files (empty folder)");
    ti_rmtree(g_root);
    TU_MEM_END;
}
END_TEST

START_TEST(test_folder_not_a_folder)
{
    ck_assert_int_eq(data_image_folder_num_classes(NULL), 0);
    tu_assert_error(CT_ERR_NULL, "not an image folder");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("image");
    TCase *tc = tcase_create("image");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_png_rgb_grey_exact);
    tcase_add_test(tc, test_png_alpha_palette_16bit_lowbit);
    tcase_add_test(tc, test_rgb_to_grey);
    tcase_add_test(tc, test_jpeg_round_trip);
    tcase_add_test(tc, test_decode_errors);
    tcase_add_test(tc, test_too_large_refused);
    tcase_add_test(tc, test_cmyk_ycck_jpeg_match_pillow);
    tcase_add_test(tc, test_png_wider_than_a_million_pixels);
    tcase_add_test(tc, test_folder_by_subfolder);
    tcase_add_test(tc, test_folder_by_regex);
    tcase_add_test(tc, test_folder_not_a_folder);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
