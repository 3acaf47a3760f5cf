/* Helpers for the image tests: PNG/JPEG encoders (libpng/libjpeg) writing
 * to memory, and temp folders. */
#ifndef CTRAINER_TEST_IMAGE_TESTUTIL_H
#define CTRAINER_TEST_IMAGE_TESTUTIL_H

#include <ftw.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

#include "ctrainer/data.h"
#include "testutil.h"

typedef struct TiBuf {
    uint8_t *p;
    size_t n, cap;
} TiBuf;

static inline void ti_png_write(png_structp png, png_bytep data, size_t n)
{
    TiBuf *b = png_get_io_ptr(png);
    if (b->n + n > b->cap) {
        b->cap = 2 * (b->n + n);
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static inline void ti_png_flush(png_structp png)
{
    (void)png;
}

/* Encodes h rows of raw PNG samples (as libpng expects them for
 * color_type/bit_depth: 16-bit big-endian, sub-byte packed) to a malloc'd
 * buffer. pal/npal and trns/ntrns are optional. */
static inline uint8_t *ti_png(int w, int h, int color_type, int bit_depth, int interlace,
                              const uint8_t *raw, const png_color *pal, int npal,
                              const uint8_t *trns, int ntrns, size_t *len)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    TiBuf b = {0};
    png_bytep *rows = malloc((size_t)h * sizeof *rows);
    ck_assert(png && info && rows);
    if (setjmp(png_jmpbuf(png))) ck_abort_msg("libpng write failed");
    png_set_write_fn(png, &b, ti_png_write, ti_png_flush);
    /* past libpng's default 1,000,000 pixels a side: wide test images */
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, bit_depth, color_type,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (pal) png_set_PLTE(png, info, pal, npal);
    if (trns) png_set_tRNS(png, info, trns, ntrns, NULL);
    png_write_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    for (int y = 0; y < h; y++) rows[y] = (png_bytep)raw + (size_t)y * rowbytes;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    *len = b.n;
    return b.p;
}

/* Encodes 8-bit (H, W, c) pixels, c = 1 or 3, as a baseline JPEG. */
static inline uint8_t *ti_jpeg(const uint8_t *px, int w, int h, int c, int quality,
                               size_t *len)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&ci, &out, &n);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = c;
    ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)px + (size_t)ci.next_scanline * (size_t)(w * c);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    *len = n;
    return out;
}

/* A smooth (H, W, 3) test picture (JPEG-friendly) in a malloc'd buffer. */
static inline uint8_t *ti_gradient(int w, int h, int c)
{
    uint8_t *px = malloc((size_t)(w * h * c));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++)
                px[(y * w + x) * c + k] =
                    (uint8_t)(30 + (120 * x) / w + (40 * y) / h + 20 * k);
    return px;
}

static inline void ti_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

static inline int ti_rm(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes a temp tree made with mkdtemp. */
static inline void ti_rmtree(const char *dir)
{
    nftw(dir, ti_rm, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
