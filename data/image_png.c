/* PNG decoding with libpng, from memory, to 8-bit grey or RGB.
 *
 * libpng reports errors by longjmp. Everything the decoder allocates lives
 * in a PngJob reached through a pointer, so after the jump it is all still
 * known and freed; the setjmp sits in png_run, which only touches the job. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

typedef struct PngJob {
    png_structp png;
    png_infop info;
    const uint8_t *buf;
    size_t len, pos;
    uint8_t *px;
    png_bytep *rows;
    int64_t h, w, c;
    bool too_large, truncated;
    char msg[160];
} PngJob;

static void png_on_error(png_structp png, png_const_charp msg)
{
    PngJob *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png; /* benign (e.g. an unknown ancillary chunk): decode on */
    (void)msg;
}

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    PngJob *j = png_get_io_ptr(png);
    if (n > j->len - j->pos) {
        j->truncated = true;
        png_error(png, "data ends early");
    }
    memcpy(out, j->buf + j->pos, n);
    j->pos += n;
}

/* Asks libpng for 8-bit grey or RGB whatever the stored format. */
static void png_set_transforms(PngJob *j, int color_type, int bit_depth)
{
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(j->png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8)
        png_set_expand_gray_1_2_4_to_8(j->png);
    /* the high byte, as PIL reads 16-bit RGB(A) and grey+alpha */
    if (bit_depth == 16) png_set_strip_16(j->png);
    /* png_set_palette_to_rgb turns tRNS into alpha: drop it like real alpha */
    if ((color_type & PNG_COLOR_MASK_ALPHA) ||
        png_get_valid(j->png, j->info, PNG_INFO_tRNS))
        png_set_strip_alpha(j->png);
    png_set_interlace_handling(j->png);
}

static int png_run(PngJob *j)
{
    if (setjmp(png_jmpbuf(j->png))) return -1;
    png_set_read_fn(j->png, j, png_read_mem);
    /* libpng refuses sides over 1,000,000 by default; the pixel count
     * checked below is our limit */
    png_set_user_limits(j->png, 0x7fffffff, 0x7fffffff);
    png_read_info(j->png, j->info);
    png_uint_32 w, h;
    int bit_depth, color_type;
    png_get_IHDR(j->png, j->info, &w, &h, &bit_depth, &color_type, NULL, NULL, NULL);
    if ((int64_t)w * (int64_t)h > DATA_IMAGE_MAX_PIXELS) {
        j->too_large = true;
        j->w = w;
        j->h = h;
        return -1;
    }
    png_set_transforms(j, color_type, bit_depth);
    png_read_update_info(j->png, j->info);
    j->w = w;
    j->h = h;
    j->c = png_get_channels(j->png, j->info);
    if ((j->c != 1 && j->c != 3) ||
        png_get_rowbytes(j->png, j->info) != (size_t)(w * j->c))
        png_error(j->png, "unexpected pixel layout after conversion");
    j->px = malloc((size_t)(j->h * j->w * j->c));
    j->rows = malloc((size_t)j->h * sizeof *j->rows);
    if (!j->px || !j->rows) png_error(j->png, "out of memory");
    for (int64_t y = 0; y < j->h; y++) j->rows[y] = j->px + y * j->w * j->c;
    png_read_image(j->png, j->rows);
    return 0;
}

CtStatus data_png_decode(const uint8_t *buf, size_t len, const char *name,
                         DataPixels *out)
{
    PngJob j = {.buf = buf, .len = len};
    j.png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &j, png_on_error, png_on_warning);
    if (j.png) j.info = png_create_info_struct(j.png);
    if (!j.png || !j.info) {
        png_destroy_read_struct(&j.png, NULL, NULL);
        return ct_error(CT_ERR_OOM, "%s: out of memory starting the PNG decoder", name);
    }
    int rc = png_run(&j);
    png_destroy_read_struct(&j.png, &j.info, NULL);
    free(j.rows);
    if (rc != 0) {
        free(j.px);
        if (j.too_large)
            return ct_error(CT_ERR_UNSUPPORTED,
                            "%s: PNG of %lldx%lld pixels is over the limit of %lld", name,
                            (long long)j.w, (long long)j.h,
                            (long long)DATA_IMAGE_MAX_PIXELS);
        if (j.truncated)
            return ct_error(CT_ERR_FORMAT, "%s: truncated PNG (data ends early)", name);
        return ct_error(CT_ERR_FORMAT, "%s: corrupted PNG: %s", name, j.msg);
    }
    *out = (DataPixels){j.px, j.h, j.w, j.c};
    return CT_OK;
}
