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

#ifdef __cplusplus
}
#endif
#endif
