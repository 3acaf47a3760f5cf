/* JPEG decoding with libjpeg(-turbo), from memory, to 8-bit grey or RGB.
 *
 * libjpeg's default error_exit calls exit(); ours records the message and
 * longjmps back to jpeg_run. As for PNG, all state lives in a JpegJob
 * reached through a pointer, so it survives the jump and is freed once. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>
#include <jerror.h>

#include "image_internal.h"

typedef struct JpegJob {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr err;
    jmp_buf jump;
    bool too_large, truncated, oom;
    uint8_t *px;
    int64_t h, w, c;
    char msg[JMSG_LENGTH_MAX];
} JpegJob;

static void jpeg_on_error(j_common_ptr cinfo)
{
    JpegJob *j = (JpegJob *)cinfo->client_data;
    j->oom = cinfo->err->msg_code == JERR_OUT_OF_MEMORY;
    cinfo->err->format_message(cinfo, j->msg);
    longjmp(j->jump, 1);
}

/* Warnings (level -1) are corrupt data libjpeg works around; we accept them
 * except running out of data, which PIL refuses too. Trace messages are
 * dropped instead of printed. */
static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    JpegJob *j = (JpegJob *)cinfo->client_data;
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        j->truncated = true;
        longjmp(j->jump, 1);
    }
}

/* Pillow's x * y / 255, rounded: MULDIV255 in its libImaging. */
static int muldiv255(int x, int y)
{
    int t = x * y + 128;
    return ((t >> 8) + t) >> 8;
}

/* Pillow's CMYK -> RGB: with nk = 255 - K, R = nk - muldiv255(C, nk), G and
 * B alike from M and Y. Pillow takes the samples of every 4-channel JPEG as
 * inverted (Adobe's convention), with or without an Adobe marker, so C is
 * 255 minus the stored sample and nk is the stored K. In place: 4 channels
 * in, 3 out. */
static void cmyk_to_rgb(uint8_t *px, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int nk = px[4 * i + 3]; /* 255 - K */
        for (int ch = 0; ch < 3; ch++)
            px[3 * i + ch] = (uint8_t)(nk - muldiv255(255 - px[4 * i + ch], nk));
    }
}

static int jpeg_run(JpegJob *j, const uint8_t *buf, size_t len)
{
    struct jpeg_decompress_struct *ci = &j->cinfo;
    /* jpeg_create_decompress keeps err and client_data, and its errors
     * (out of memory) already go through them */
    ci->err = jpeg_std_error(&j->err);
    j->err.error_exit = jpeg_on_error;
    j->err.emit_message = jpeg_on_message;
    ci->client_data = j;
    if (setjmp(j->jump)) return -1;
    jpeg_create_decompress(ci);
    jpeg_mem_src(ci, buf, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    if ((int64_t)ci->image_width * (int64_t)ci->image_height > DATA_IMAGE_MAX_PIXELS) {
        j->too_large = true;
        j->w = ci->image_width;
        j->h = ci->image_height;
        return -1;
    }
    bool cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = ci->jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE
                          : cmyk                                ? JCS_CMYK
                                                                : JCS_RGB;
    jpeg_start_decompress(ci);
    int64_t w = ci->output_width, h = ci->output_height, c = ci->output_components;
    j->px = malloc((size_t)(w * h * c));
    if (!j->px) ERREXIT(ci, JERR_OUT_OF_MEMORY);
    while (ci->output_scanline < ci->output_height) {
        JSAMPROW rows[4];
        int64_t y0 = ci->output_scanline;
        for (int r = 0; r < 4; r++)
            rows[r] = j->px + (y0 + r < h ? y0 + r : h - 1) * w * c;
        jpeg_read_scanlines(ci, rows, 4);
    }
    if (cmyk) cmyk_to_rgb(j->px, w * h);
    j->w = w;
    j->h = h;
    j->c = cmyk ? 3 : c;
    return 0;
}

CtStatus data_jpeg_decode(const uint8_t *buf, size_t len, const char *name,
                          DataPixels *out)
{
    JpegJob *j = calloc(1, sizeof *j);
    if (!j)
        return ct_error(CT_ERR_OOM, "%s: out of memory starting the JPEG decoder", name);
    int rc = jpeg_run(j, buf, len);
    /* frees what even a failed jpeg_create_decompress allocated; a no-op
     * on the zeroed struct when nothing was */
    jpeg_destroy_decompress(&j->cinfo);
    CtStatus st = CT_OK;
    if (rc != 0) {
        free(j->px);
        if (j->too_large)
            st = ct_error(CT_ERR_UNSUPPORTED,
                          "%s: JPEG of %lldx%lld pixels is over the limit of %lld", name,
                          (long long)j->w, (long long)j->h,
                          (long long)DATA_IMAGE_MAX_PIXELS);
        else if (j->oom)
            st = ct_error(CT_ERR_OOM, "%s: out of memory decoding the JPEG (%s)", name,
                          j->msg);
        else if (j->truncated)
            st = ct_error(CT_ERR_FORMAT, "%s: truncated JPEG (data ends early)", name);
        else
            st = ct_error(CT_ERR_FORMAT, "%s: corrupted JPEG: %s", name, j->msg);
    } else {
        *out = (DataPixels){j->px, j->h, j->w, j->c};
    }
    free(j);
    return st;
}
