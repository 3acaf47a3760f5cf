/* Image decoding entry points: format sniffing, channel conversion, files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

static bool is_png(const uint8_t *b, size_t n)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    return n >= 8 && memcmp(b, sig, 8) == 0;
}

static bool is_jpeg(const uint8_t *b, size_t n)
{
    return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

/* Writes px (c channels) into dst with `oc` channels: same count copies,
 * grey -> RGB replicates, RGB -> grey is PIL's "L" conversion. */
static void convert_channels(const DataPixels *p, int64_t oc, uint8_t *dst)
{
    int64_t n = p->h * p->w;
    const uint8_t *s = p->px;
    if (oc == p->c) {
        memcpy(dst, s, (size_t)(n * oc));
    } else if (oc == 3) {
        for (int64_t i = 0; i < n; i++)
            dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = s[i];
    } else {
        for (int64_t i = 0; i < n; i++) {
            uint32_t r = s[3 * i], g = s[3 * i + 1], b = s[3 * i + 2];
            dst[i] = (uint8_t)((19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16);
        }
    }
}

Tensor *data_image_decode(const void *buf, size_t len, int channels, const char *name)
{
    if (!name) name = "<memory>";
    if (!buf && len) {
        ct_error(CT_ERR_NULL, "data_image_decode %s: NULL buffer", name);
        return NULL;
    }
    if (channels != 0 && channels != 1 && channels != 3) {
        ct_error(CT_ERR_INVALID,
                 "data_image_decode %s: channels must be 0, 1 or 3, got %d", name,
                 channels);
        return NULL;
    }
    const uint8_t *b = buf;
    DataPixels p;
    CtStatus st;
    if (is_png(b, len)) {
        st = data_png_decode(b, len, name, &p);
    } else if (is_jpeg(b, len)) {
        st = data_jpeg_decode(b, len, name, &p);
    } else {
        ct_error(CT_ERR_FORMAT,
                 "%s: not a PNG or JPEG image (%zu bytes, unknown signature)", name, len);
        return NULL;
    }
    if (st != CT_OK) return NULL;
    int64_t oc = channels ? channels : p.c;
    Tensor *t = tensor_empty(3, (const int64_t[]){p.h, p.w, oc}, CT_U8, ct_cpu());
    if (t) convert_channels(&p, oc, tensor_data(t));
    free(p.px);
    return t;
}

/* Reads the whole file into a malloc'd buffer. */
static CtStatus read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = NULL;
    for (;;) {
        if (!buf || n == cap) {
            if (buf) cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return ct_error(CT_ERR_OOM, "%s: out of memory reading the file", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    int err = errno;
    fclose(f);
    if (failed) {
        free(buf);
        return ct_error(CT_ERR_IO, "%s: read error: %s", path, strerror(err));
    }
    *out = buf;
    *len = n;
    return CT_OK;
}

Tensor *data_image_read(const char *path, int channels)
{
    if (!path) {
        ct_error(CT_ERR_NULL, "data_image_read: NULL path");
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (read_file(path, &buf, &len) != CT_OK) return NULL;
    Tensor *t = data_image_decode(buf, len, channels, path);
    free(buf);
    return t;
}
