/* ctrainer — datasets, the data loader, samplers and transforms.
 *
 * A Dataset is a const vtable (length, get item) on a struct that embeds
 * Dataset as its first member, so users write their own in a few lines.
 * Items are DataSamples: a few tensors, by convention t[0] the input and
 * t[1] the target. Randomness (shuffling, augmentation) is a function of
 * (seed, epoch, sample index) through the Philox generator, so batches are
 * the same for any number of loader workers.
 *
 * Ownership: tensors a dataset's get() returns belong to the scope open on
 * the calling thread (the loader opens one per batch); datasets own what
 * they read (files are read once, into memory, at creation).
 */
#ifndef CTRAINER_DATA_H
#define CTRAINER_DATA_H

#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- samples */

#define DATA_MAX_FIELDS 4

typedef struct DataSample {
    int n;                      /* fields used */
    Tensor *t[DATA_MAX_FIELDS]; /* t[0] input, t[1] target, ... */
} DataSample;

/* What randomness in get() and transforms is keyed by. */
typedef struct DataCtx {
    uint64_t seed;
    int64_t epoch;
    int64_t index; /* the sample's index in the dataset */
} DataCtx;
/* A generator for this (seed, epoch, index): the same numbers wherever and
 * whenever the sample is loaded. `purpose` separates independent draws. */
CtGenerator data_ctx_generator(const DataCtx *ctx, uint64_t purpose);

/* --------------------------------------------------------------- datasets */

typedef struct Dataset Dataset;

typedef struct DatasetVtable {
    const char *type;
    int64_t (*len)(const Dataset *d);
    /* Sample i, 0 <= i < len. Must be safe to call from several threads at
     * once (the loader's workers) as long as the dataset is not modified. */
    CtStatus (*get)(const Dataset *d, int64_t i, const DataCtx *ctx, DataSample *out);
    /* Releases what the subtype owns, then the struct. */
    void (*free)(Dataset *d);
} DatasetVtable;

struct Dataset {
    const DatasetVtable *vt;
};

int64_t data_dataset_len(const Dataset *d);
CtStatus data_dataset_get(const Dataset *d, int64_t i, const DataCtx *ctx,
                          DataSample *out);
void data_dataset_free(Dataset *d);

/* ========== datasets, samplers, loader: owned by the data-core work ========== */

/* ========== images and transforms: owned by the image work ========== */

/* ----------------------------------------------------------------- images
 *
 * Decoded images are u8 tensors (H, W, C), C = 1 (grey) or 3 (RGB), rows
 * top to bottom, as PIL hands them to torchvision. PNG and JPEG are
 * recognised by their signature, not their file name. Conversions to 8-bit
 * grey or RGB (`channels` 0: as stored):
 *   PNG: palette -> RGB; grey of 1/2/4 bits -> 8-bit grey; 16-bit samples ->
 *        8 bits rounded (v * 255 / 65535); alpha (RGBA, grey+alpha, tRNS) is
 *        dropped, not composited, as PIL's convert("RGB") does.
 *   JPEG: grey -> 1 channel; YCbCr/RGB -> 3; CMYK/YCCK -> RGB as PIL does
 *        (R = 255 - min(255, C + K), Adobe-inverted samples undone first).
 * `channels` 3 forces RGB (grey replicated), 1 forces grey (PIL's "L":
 * (19595 R + 38470 G + 7471 B + 32768) >> 16). Images over
 * DATA_IMAGE_MAX_PIXELS pixels are refused before anything is allocated.
 * A JPEG that ends early is an error (like PIL's default), other recoverable
 * JPEG corruption is decoded as libjpeg repairs it. */

#define DATA_IMAGE_MAX_PIXELS ((int64_t)1 << 27)

/* Decodes `len` bytes at `buf`. `name` labels errors (NULL: "<memory>").
 * Returns a u8 (H, W, C) tensor owned like any op result (the open scope).
 * Errors: CT_ERR_FORMAT "<name>: not a PNG or JPEG image", "<name>: corrupted
 * PNG: ...", "<name>: truncated JPEG", ...; CT_ERR_INVALID for a bad
 * `channels`; CT_ERR_UNSUPPORTED for images too large. Never exits. */
Tensor *data_image_decode(const void *buf, size_t len, int channels, const char *name);
/* Reads and decodes the file at `path`; errors name the path (CT_ERR_IO when
 * it cannot be read). */
Tensor *data_image_read(const char *path, int channels);

/* ------------------------------------------------------------- transforms
 *
 * A DataTransform maps one image tensor to another. Layout follows the
 * dtype, as PIL images vs tensors do in torchvision: u8 images are (H, W, C)
 * (or (H, W)), float images (f32) are (C, H, W) (or (H, W)). Geometric
 * transforms keep layout and dtype; ToTensor goes from u8 (H, W, C) to
 * f32 (C, H, W). Random transforms draw from data_ctx_generator(ctx, ...),
 * so a sample's augmentation depends only on (seed, epoch, index); each
 * position in a Compose draws from its own stream. CPU tensors only.
 *
 * Results are owned like op results (the open scope) and may share storage
 * with the input (a flip that did not happen returns the input). Errors:
 * NULL with a message naming the transform ("RandomCrop: crop 32x32 is
 * larger than the padded image 28x28"); a NULL img returns NULL and keeps
 * the first error. Transforms are immutable once built: one may be applied
 * from several threads at once. */

typedef struct DataTransform DataTransform;

Tensor *data_transform_apply(const DataTransform *t, Tensor *img, const DataCtx *ctx);
/* NULL is a no-op. */
void data_transform_free(DataTransform *t);
/* The name of the transform ("Compose", "Resize", ...). */
const char *data_transform_name(const DataTransform *t);

/* What datasets take: a function and its user pointer. */
typedef Tensor *(*DataTransformFn)(void *user, Tensor *img, const DataCtx *ctx);
/* Adapter: data_transform_fn(t, img, ctx) == data_transform_apply(t, img,
 * ctx), so a dataset can take {data_transform_fn, t}. */
Tensor *data_transform_fn(void *transform, Tensor *img, const DataCtx *ctx);

/* Applies ts[0..n) in order. Takes ownership of every ts[i], also when it
 * fails (NULL entries make it fail: pass constructors' results directly). */
DataTransform *data_transform_compose(int n, DataTransform *const *ts);
/* Wraps a user function; free_user (may be NULL) is called on user when the
 * transform is freed. */
DataTransform *data_transform_lambda(const char *name, DataTransformFn fn, void *user,
                                     void (*free_user)(void *));

/* u8 (H, W, C) or (H, W) -> f32 (C, H, W) in [0, 1] (value / 255). */
DataTransform *data_transform_to_tensor(void);
/* Float (C, H, W): (x - mean[c]) / std[c]. n == C, or n == 1 for all
 * channels. Errors: std 0. */
DataTransform *data_transform_normalize(int n, const double *mean, const double *std);
/* Bilinear resize to (h, w), as torch.nn.functional.interpolate(mode=
 * "bilinear", align_corners=False, antialias=False); u8 results are rounded
 * half to even and clamped. (torchvision's PIL path antialiases when
 * downscaling; we do not.) */
DataTransform *data_transform_resize(int64_t h, int64_t w);
/* Resizes so the shorter side is `size`, the longer int(size * long / short)
 * (torchvision's Resize(int)). */
DataTransform *data_transform_resize_shorter(int64_t size);
/* Central (h, w) crop; a crop larger than the image pads it with zeros
 * first, as torchvision's CenterCrop. */
DataTransform *data_transform_center_crop(int64_t h, int64_t w);
/* Random (h, w) crop after `padding` zero pixels on every side
 * (torchvision's RandomCrop(size, padding)). Errors: crop larger than the
 * padded image. */
DataTransform *data_transform_random_crop(int64_t h, int64_t w, int64_t padding);

typedef struct DataRandomResizedCropArgs {
    double scale[2]; /* area fraction range; {0, 0} -> {0.08, 1.0} */
    double ratio[2]; /* aspect (w/h) range;  {0, 0} -> {3/4, 4/3} */
} DataRandomResizedCropArgs;
/* torchvision's RandomResizedCrop: up to 10 tries of a random area and log-
 * uniform aspect ratio, else a central crop clamped to the ratio range; the
 * crop is resized bilinearly to (h, w). args NULL means defaults. */
DataTransform *data_transform_random_resized_crop(int64_t h, int64_t w,
                                                  const DataRandomResizedCropArgs *args);
/* Mirrors left-right with probability p. */
DataTransform *data_transform_random_horizontal_flip(double p);

/* ----------------------------------------------------------- image folder
 *
 * Image files under a root folder, labelled one of two ways:
 *  - label_regex NULL: one subfolder per class, as torchvision's
 *    ImageFolder. Classes are the sorted subfolder names; each class's files
 *    (searched recursively) are those ending in .png, .jpg or .jpeg (any
 *    case), sorted by (folder, name). A class without files is an error.
 *  - label_regex set: the files directly in root whose name matches the
 *    POSIX extended regex; its first capture group is the class name (e.g.
 *    "^(.*)_[0-9]+\\.jpg$"). Files that do not match are skipped. Classes are
 *    the sorted unique names. Files are sorted by name.
 * Sorting is by bytes (strcmp), which is Python's order for UTF-8 names.
 * Files are listed at creation and decoded in get(), which returns t[0] the
 * image (u8 (H, W, C) through the transform) and t[1] the class id (i64, 0-d).
 * get() errors name the file ("<path>: truncated JPEG"). */

typedef struct DataImageFolderArgs {
    const char *label_regex;   /* NULL: one subfolder per class */
    int channels;              /* 0 -> 3 (RGB, torchvision's loader); or 1 */
    DataTransformFn transform; /* NULL: the decoded image */
    void *transform_user;      /* not owned; must outlive the dataset */
} DataImageFolderArgs;

/* args NULL means defaults. Errors: root unreadable (CT_ERR_IO), no class
 * folders or no image files ("empty"), an invalid regex or one without a
 * capture group (CT_ERR_INVALID), no file matching the regex. */
Dataset *data_image_folder_create(const char *root, const DataImageFolderArgs *args);
/* The label map, sorted. These record an error and return 0/NULL/-1 when d
 * is not an image folder or the id/name is unknown. */
int64_t data_image_folder_num_classes(const Dataset *d);
const char *data_image_folder_class_name(const Dataset *d, int64_t id);
int64_t data_image_folder_class_id(const Dataset *d, const char *name);
/* Path and class id of sample i (no decoding). */
const char *data_image_folder_path(const Dataset *d, int64_t i);
int64_t data_image_folder_label(const Dataset *d, int64_t i);

#ifdef __cplusplus
}
#endif
#endif
