/* make_image_folder — an image folder to fine-tune on, made from the
 * Fashion-MNIST test images: each written as an RGB PNG (the grey value in
 * all three channels) named <class>_<index>.png, the layout of the Oxford
 * pets data, whose labels come from the file names
 * (DataImageFolderArgs.label_regex "^(.*)_[0-9]+\.png$").
 *
 *   make_image_folder OUT_DIR [--data DIR] [--limit N]
 *
 * OUT_DIR is created when missing. --limit N writes the first N images (default all
 * 10 000). Then reads the folder back with data_image_folder_create,
 * checks that its first image decodes to the test image it came from, and
 * prints "OUT_DIR: N images, K classes".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctrainer/ctrainer.h"
#include "example_cuda.h"

/* Fashion-MNIST's classes, as file-name prefixes */
static const char *const class_names[10] = {"tshirt", "trouser",   "pullover", "dress",
                                            "coat",   "sandal",    "shirt",    "sneaker",
                                            "bag",    "ankle_boot"};

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return crc;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

/* One PNG chunk: length, type, data, CRC of type and data. */
static bool write_chunk(FILE *f, const char type[4], const uint8_t *data, uint32_t n)
{
    uint8_t be[4];
    put_be32(be, n);
    uint32_t crc = crc32_update(0xFFFFFFFFu, (const uint8_t *)type, 4);
    crc = ~crc32_update(crc, data, n);
    bool ok = fwrite(be, 1, 4, f) == 4 && fwrite(type, 1, 4, f) == 4 &&
              (n == 0 || fwrite(data, 1, n, f) == n);
    put_be32(be, crc);
    return ok && fwrite(be, 1, 4, f) == 4;
}

/* An 8-bit RGB PNG of a (h, w) grey image. The zlib stream holds one stored
 * (uncompressed) deflate block: small images need nothing more. */
static bool write_png(const char *path, const uint8_t *grey, uint32_t h, uint32_t w)
{
    uint32_t raw_n = h * (1 + 3 * w); /* each row: filter byte 0, then RGB */
    if (raw_n > 65535) return false;  /* one stored block's limit */
    uint32_t n = 2 + 5 + raw_n + 4;   /* zlib header, block header, data, Adler-32 */
    uint8_t *z = malloc(n);
    FILE *f = z ? fopen(path, "wb") : NULL;
    if (!f) {
        free(z);
        return false;
    }
    uint8_t *raw = z + 7;
    for (uint32_t y = 0; y < h; y++) {
        uint8_t *row = raw + y * (1 + 3 * w);
        row[0] = 0;
        for (uint32_t x = 0; x < w; x++) memset(row + 1 + 3 * x, grey[y * w + x], 3);
    }
    z[0] = 0x78, z[1] = 0x01; /* deflate, 32 KiB window, no dictionary */
    z[2] = 1;                 /* the final block, stored */
    z[3] = (uint8_t)raw_n, z[4] = (uint8_t)(raw_n >> 8); /* LEN, little-endian */
    z[5] = (uint8_t)~z[3], z[6] = (uint8_t)~z[4];        /* NLEN */
    uint32_t a = 1, b = 0;
    for (uint32_t i = 0; i < raw_n; i++) a = (a + raw[i]) % 65521u, b = (b + a) % 65521u;
    put_be32(z + 7 + raw_n, b << 16 | a);
    uint8_t ihdr[13] = {0};
    put_be32(ihdr, w);
    put_be32(ihdr + 4, h);
    ihdr[8] = 8; /* bits per sample */
    ihdr[9] = 2; /* RGB */
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    bool ok = fwrite(signature, 1, 8, f) == 8 && write_chunk(f, "IHDR", ihdr, 13) &&
              write_chunk(f, "IDAT", z, n) && write_chunk(f, "IEND", NULL, 0);
    free(z);
    return fclose(f) == 0 && ok;
}

/* Writes test image i as out/<class>_<i>.png. */
static CtStatus write_image(const Dataset *test, int64_t i, const char *out)
{
    CtScope *scope = ct_scope_open();
    DataSample s;
    CtStatus st = data_dataset_get(test, i, &(DataCtx){.index = i}, &s);
    if (st == CT_OK) {
        char path[4096];
        int64_t label = (int64_t)tensor_item(s.t[1]);
        snprintf(path, sizeof path, "%s/%s_%lld.png", out, class_names[label],
                 (long long)i);
        /* s.t[0]: u8 (1, 28, 28) */
        if (!write_png(path, tensor_data(s.t[0]), 28, 28))
            st = ct_error(CT_ERR_IO, "cannot write %s", path);
    }
    ct_scope_close(scope);
    return st;
}

/* Decodes the folder's first file with the library's PNG reader and
 * compares it with the test image it was written from. */
static CtStatus check_first(const Dataset *folder, const Dataset *test)
{
    const char *path = data_image_folder_path(folder, 0);
    const char *underscore = strrchr(path, '_');
    int64_t i = underscore ? atoll(underscore + 1) : -1;
    CtScope *scope = ct_scope_open();
    DataSample img, src;
    CtStatus st = data_dataset_get(folder, 0, &(DataCtx){.index = 0}, &img);
    if (st == CT_OK) st = data_dataset_get(test, i, &(DataCtx){.index = i}, &src);
    if (st == CT_OK && tensor_numel(img.t[0]) != 28 * 28 * 3)
        st = ct_error(CT_ERR_FORMAT, "%s is not 28x28 RGB", path);
    /* img.t[0]: u8 (28, 28, 3); src.t[0]: u8 (1, 28, 28) */
    const uint8_t *rgb = st == CT_OK ? tensor_data(img.t[0]) : NULL;
    const uint8_t *grey = st == CT_OK ? tensor_data(src.t[0]) : NULL;
    for (int p = 0; st == CT_OK && p < 28 * 28 * 3; p++)
        if (rgb[p] != grey[p / 3])
            st = ct_error(CT_ERR_FORMAT, "%s differs from test image %lld", path,
                          (long long)i);
    ct_scope_close(scope);
    return st;
}

int main(int argc, char **argv)
{
    /* --cuda is taken for uniformity: the images are written on the CPU */
    CtDevice dev;
    if (!example_cuda_flag(&argc, argv, &dev)) return 1;
    const char *out = argc > 1 ? argv[1] : NULL, *data = NULL;
    int64_t limit = 10000;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data"))
            data = argv[i + 1];
        else if (!strcmp(argv[i], "--limit"))
            limit = atoll(argv[i + 1]);
        else
            out = NULL;
    }
    bool help = out && (!strcmp(out, "--help") || !strcmp(out, "-h"));
    if (!out || *out == '-' || argc % 2 != 0 || limit <= 0) { /* OUT_DIR is no flag */
        fprintf(help ? stdout : stderr,
                "usage: %s OUT_DIR [--data DIR] [--limit N] [--cuda]\n", argv[0]);
        return help && argc == 2 ? 0 : 2;
    }
    mkdir(out, 0777); /* an existing folder is fine; fopen reports the rest */
    Dataset *test =
        data_fashion_mnist_create(&(DataFashionMnistArgs){.root = data, .test = true});
    CtStatus st = test ? CT_OK : ct_last_status();
    int64_t n = test && data_dataset_len(test) < limit ? data_dataset_len(test) : limit;
    for (int64_t i = 0; st == CT_OK && i < n; i++) st = write_image(test, i, out);
    /* read back as the fine-tuning example does */
    Dataset *folder =
        st == CT_OK
            ? data_image_folder_create(
                  out, &(DataImageFolderArgs){.label_regex = "^(.*)_[0-9]+\\.png$"})
            : NULL;
    if (folder && check_first(folder, test) != CT_OK) {
        data_dataset_free(folder);
        folder = NULL;
    }
    if (folder)
        printf("%s: %lld images, %lld classes\n", out,
               (long long)data_dataset_len(folder),
               (long long)data_image_folder_num_classes(folder));
    else
        fprintf(stderr, "make_image_folder: %s\n", ct_last_error());
    data_dataset_free(folder);
    data_dataset_free(test);
    return folder ? 0 : 1;
}
