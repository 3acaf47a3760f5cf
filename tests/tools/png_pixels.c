/* Decodes a PNG with libpng and prints "W H" and, for each X,Y argument,
 * "X,Y #rrggbb": the colour of that pixel (for plot_test.sh).
 * Usage: png_pixels FILE.png [X,Y ...] */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.png [X,Y ...]\n", argv[0]);
        return 2;
    }
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, argv[1])) {
        fprintf(stderr, "%s: %s\n", argv[1], img.message);
        return 1;
    }
    img.format = PNG_FORMAT_RGB;
    unsigned char *px = malloc(PNG_IMAGE_SIZE(img));
    if (!px || !png_image_finish_read(&img, NULL, px, 0, NULL)) {
        fprintf(stderr, "%s: %s\n", argv[1], px ? img.message : "out of memory");
        free(px);
        png_image_free(&img);
        return 1;
    }
    printf("%u %u\n", img.width, img.height);
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        unsigned x, y;
        if (sscanf(argv[i], "%u,%u", &x, &y) != 2 || x >= img.width || y >= img.height) {
            fprintf(stderr, "%s: not a pixel of the image\n", argv[i]);
            rc = 1;
            continue;
        }
        const unsigned char *p = px + 3 * ((size_t)y * img.width + x);
        printf("%u,%u #%02x%02x%02x\n", x, y, p[0], p[1], p[2]);
    }
    free(px);
    return rc;
}
