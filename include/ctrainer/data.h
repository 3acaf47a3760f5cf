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

/* ========== datasets, samplers, loader ========== */

/* Purposes for data_ctx_generator, so independent draws never share numbers.
 * Transforms pick their own values (any other 64-bit constant). */
#define DATA_PURPOSE_SHUFFLE 0x53485546464c45ull /* the random sampler's order */
#define DATA_PURPOSE_SPLIT   0x53504c4954ull     /* data_random_split */

/* A per-sample transform: returns the transformed tensor (owned by the open
 * scope, like everything get() makes), or NULL with an error recorded. It
 * must not modify `input` (it may be a view into the dataset's memory) and
 * must be safe to call from several threads. Randomness comes from
 * data_ctx_generator(ctx, purpose), so augmentations do not depend on the
 * number of loader workers. `user` is passed through unchanged. */
typedef Tensor *(*DataTransformFn)(Tensor *input, const DataCtx *ctx, void *user);

/* A transform and its user pointer; a zero struct means "none". */
typedef struct DataTransform {
    DataTransformFn fn;
    void *user;
} DataTransform;

/* ---------------------------------------------------- generic datasets
 *
 * Wrappers (subset, concat, random_split, transformed) BORROW their base
 * datasets: the bases must outlive them, and freeing a wrapper never frees
 * a base. All constructors return NULL (nothing allocated) on failure. */

/* Samples are rows of n (1..DATA_MAX_FIELDS) tensors sharing the size of dim
 * 0: get(i) gives t[k] = tensor_select(tensors[k], 0, i), views that share
 * memory with the tensors (do not modify them while a loader runs). The
 * dataset holds a reference to each tensor; the caller keeps its own.
 * Errors: n out of range, NULL or 0-d tensors, differing first dims. */
Dataset *data_tensor_dataset_create(int n, Tensor *const *tensors);

/* Sample i of the subset is sample indices[i] of base (indices are copied;
 * repeats allowed). Errors: an index outside [0, len(base)), naming its
 * position. */
Dataset *data_subset_create(const Dataset *base, int64_t n, const int64_t *indices);

/* parts[0] followed by parts[1], ... (n >= 1). Sample i is found by binary
 * search over the cumulative lengths. */
Dataset *data_concat_create(int n, Dataset *const *parts);

/* Splits base into n subsets of the given sizes (summing to len(base)) over
 * one random permutation of its indices, ct_randperm keyed by
 * data_ctx_generator({seed, 0, 0}, DATA_PURPOSE_SPLIT) (same sizes as
 * PyTorch's random_split; the permutation differs, being our generator).
 * Writes n new subsets to out[] (each freed with data_dataset_free); on
 * failure out[] is all NULL. */
CtStatus data_random_split(const Dataset *base, int n, const int64_t *sizes,
                           uint64_t seed, Dataset **out);
/* As data_random_split with sizes from fractions that sum to 1 (within
 * 1e-6), with PyTorch's rounding: floor(len * f) each, then the remainder is
 * handed out one by one, round-robin from the first subset. */
CtStatus data_random_split_fractions(const Dataset *base, int n, const double *fractions,
                                     uint64_t seed, Dataset **out);

/* Applies t to field `field` of every sample of base (the other fields pass
 * through). This is how any dataset, including a user's, takes a transform. */
Dataset *data_transformed_create(const Dataset *base, int field, DataTransform t);

/* ---------------------------------------------------------- IDX (MNIST)
 *
 * IDX files (MNIST, Fashion-MNIST, KMNIST), plain or gzip'd, are read once
 * into memory at creation. A gzip'd file of one member is mapped and
 * inflated whole by libdeflate (about twice zlib's speed; while it runs the
 * compressed file is resident beside the data), and when it inflates to
 * 4 MiB or more a short-lived helper thread maps the output's pages ahead
 * of it; others go through zlib, which never holds the file twice. Only
 * unsigned-byte (type 0x08) files are accepted: images as idx3 (N, H, W),
 * labels as idx1 (N).
 * Sample i: t[0] the image, u8 (1, H, W) — channel first, ready for a
 * ToTensor-style cast — as a view into the dataset's memory; t[1] its label,
 * i64 0-d (with labels; otherwise the sample has one field).
 * Errors name the path and the byte offset: a missing file, a wrong magic
 * number, a truncated header or payload, trailing bytes, images and labels
 * of different counts, a label >= num_classes, an empty file. */
typedef struct DataIdxArgs {
    const char *images;             /* path of the idx3 image file (required) */
    const char *labels;             /* path of the idx1 label file; NULL: no labels */
    int64_t num_classes;            /* > 0: labels must be < num_classes; 0: no check */
    DataTransform transform;        /* applied to t[0] in get(); zero: none */
    DataTransform target_transform; /* applied to t[1] in get(); zero: none */
} DataIdxArgs;

Dataset *data_idx_dataset_create(const DataIdxArgs *args);

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define DATA_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct DataFashionMnistArgs {
    const char *root; /* directory of the four files; NULL: DATA_FASHION_MNIST_DIR */
    bool test;        /* false (default): the 60000 train-* samples; true: t10k-* */
    DataTransform transform, target_transform; /* as in DataIdxArgs */
} DataFashionMnistArgs;

/* The IDX dataset of {root}/{train,t10k}-{images-idx3,labels-idx1}-ubyte,
 * each taken as NAME.gz when it exists, else NAME; labels are checked to be
 * < 10. args NULL means all defaults. */
Dataset *data_fashion_mnist_create(const DataFashionMnistArgs *args);

/* ------------------------------------------------------------------ CSV
 *
 * A CSV file of numbers: every column but the label column is a feature.
 * Read once at creation. Sample i: t[0] its features, f32 (n_features), a
 * view into the dataset's memory; t[1] its label, i64 0-d (classification:
 * the value must be an integer) or f32 0-d (.regression). Fields are
 * separated by the delimiter, surrounding spaces are ignored, blank lines
 * are skipped, "\r\n" line ends are accepted, a UTF-8 byte order mark at
 * the start of the file is skipped; quoting is not supported.
 * A gzip'd file (e.g. "train.csv.gz") is decompressed while reading. The
 * first line read (after skip_rows) fixes the column count.
 * Errors name path:line:column (column = 1-based character position of
 * the field): a first data row whose field count differs from the line
 * before it (e.g. a metadata line "N,M,name_a,name_b" taken as the header:
 * "line 1 has 4 fields, line 2 has 14"), ragged rows, fields that are not
 * numbers, non-integer or out-of-range labels, an unknown label name, a
 * file with no data rows. */
typedef enum DataCsvHeader {
    DATA_CSV_HEADER_AUTO = 0, /* the first line is a header if any of its
                                 fields is not a number */
    DATA_CSV_HEADER_YES,
    DATA_CSV_HEADER_NO,
} DataCsvHeader;

typedef struct DataCsvArgs {
    const char *path;       /* required */
    const char *label_name; /* label column by header name; NULL: use label_column */
    int label_column;       /* label column by index; negative counts from the end
                               (-1: last); default 0, the first column */
    DataCsvHeader header;   /* default AUTO */
    int64_t skip_rows;      /* leading lines (blank or not) ignored before the
                               header or first row; default 0 */
    char delimiter;         /* 0: ',' */
    bool regression;        /* labels as f32 instead of i64 */
    int64_t num_classes;    /* > 0 (classification): labels must be in [0, num_classes) */
    DataTransform transform, target_transform; /* applied in get(); zero: none */
} DataCsvArgs;

Dataset *data_csv_dataset_create(const DataCsvArgs *args);
/* Number of feature columns of a CSV dataset, or -1 (with an error) for
 * another dataset type. */
int64_t data_csv_num_features(const Dataset *d);

/* ------------------------------------------------------------- scalers
 *
 * Per-column scaling of tabular features, the tabular counterpart of
 * Normalize: fit the statistics on a dataset (the train split), then apply
 * them as a transform to every split and at inference.
 *
 *     DataScaler *sc = data_scaler_fit(train, 0, DATA_SCALE_STANDARDIZE);
 *     Dataset *train_s = data_transformed_create(train, 0, data_scaler_transform(sc));
 *     Dataset *eval_s = data_transformed_create(eval, 0, data_scaler_transform(sc));
 *     ... train ...
 *     // saved with the model: its statistics as two more tensors in the
 *     // model's safetensors file
 *     CtStateDict *sd = nn_module_state_dict(model);
 *     data_scaler_state_dict_add(sc, sd, "scaler.");
 *     nn_safetensors_save("model.safetensors", sd, 0, NULL, NULL);
 *     // inference: take the scaler's entries out, load the rest strictly
 *     CtStateDict *ld = nn_safetensors_load("model.safetensors", ct_cpu());
 *     DataScaler *isc = data_scaler_from_state_dict(ld, "scaler.");
 *     nn_module_load_state_dict(model, ld, true, NULL);
 *     Tensor *x = data_scaler_apply(isc, raw_features);   // (N, F) or (F)
 */
typedef enum DataScaleKind {
    DATA_SCALE_STANDARDIZE = 0, /* (x - mean) / std, std the population std
                                   (ddof 0, as scikit-learn's StandardScaler) */
    DATA_SCALE_MIN_MAX,         /* (x - min) / (max - min), into [0, 1] on the fit set */
} DataScaleKind;

typedef struct DataScaler DataScaler;

/* Fits per-column statistics over field `field` of every sample of d, which
 * must be an f32 CPU vector (F) of the same length in every sample (CSV
 * features are). Accumulates in f64 (Welford for the mean and std). A
 * constant column (std 0, or max == min) is only shifted, not scaled.
 * Errors: NULL or empty d, field/kind out of range, a sample's field that
 * is not such a vector (CT_ERR_SHAPE naming the sample). */
DataScaler *data_scaler_fit(const Dataset *d, int field, DataScaleKind kind);
void data_scaler_free(DataScaler *s); /* NULL is a no-op */
/* F, or -1 for NULL. */
int64_t data_scaler_num_features(const DataScaler *s);
/* The fitted statistics: a = mean, b = std (STANDARDIZE) or a = min, b = max
 * (MIN_MAX), each F values. */
CtStatus data_scaler_stats(const DataScaler *s, double *a, double *b);
/* x: f32 CPU (..., F) -> new f32 tensor of the same shape (open scope),
 * scaled per column. A NULL x returns NULL keeping the first error; other
 * errors: a wrong dtype, device or last dim (CT_ERR_SHAPE). */
Tensor *data_scaler_apply(const DataScaler *s, Tensor *x);
/* The transform datasets take: data_scaler_apply on the field. Borrows s,
 * which must outlive the dataset. Thread-safe (s is read-only). */
DataTransform data_scaler_transform(const DataScaler *s);
/* Adds the statistics to d as two f64 (F) tensors named <prefix>mean and
 * <prefix>std, or <prefix>min and <prefix>max (prefix may be NULL: none),
 * e.g. into a model's state dict before nn_safetensors_save. Errors: NULL
 * arguments, a name already in d. */
CtStatus data_scaler_state_dict_add(const DataScaler *s, CtStateDict *d,
                                    const char *prefix);
/* The scaler whose statistics d holds under prefix (either pair, any float
 * dtype), rebuilt exactly as fitted; its two entries are then REMOVED from
 * d, so the rest loads strictly into the model. Errors: neither pair
 * present (CT_ERR_INVALID naming the keys), statistics that are not
 * vectors of one length (CT_ERR_SHAPE); d is unchanged on failure. */
DataScaler *data_scaler_from_state_dict(CtStateDict *d, const char *prefix);

/* ------------------------------------------------------------- samplers
 *
 * A sampler gives the order in which a loader visits dataset indices, one
 * epoch at a time. The order must be a function of the epoch alone (not of
 * earlier calls), so any epoch can be produced again on resume and every
 * worker and rank sees the same order. Users (and the distributed
 * sampler) implement the vtable on a struct that embeds Sampler first. */
typedef struct Sampler Sampler;

typedef struct SamplerVtable {
    const char *type;
    /* Indices per epoch. */
    int64_t (*len)(const Sampler *s);
    /* Writes the epoch's len indices to out[]. */
    CtStatus (*fill)(const Sampler *s, int64_t epoch, int64_t *out);
    /* Releases what the subtype owns, then the struct. */
    void (*free)(Sampler *s);
    /* Optional: how many leading positions of the order are real samples;
     * the rest repeat earlier ones (a distributed sampler's wrap-around
     * padding). NULL: all len positions are real. */
    int64_t (*num_real)(const Sampler *s);
} SamplerVtable;

struct Sampler {
    const SamplerVtable *vt;
};

/* 0, 1, ..., n-1 every epoch. */
Sampler *data_sampler_sequential_create(int64_t n);
/* A permutation of 0..n-1 per epoch: ct_randperm with the generator
 * data_ctx_generator({seed, epoch, 0}, DATA_PURPOSE_SHUFFLE). Depends on
 * (seed, epoch) only. */
Sampler *data_sampler_random_create(int64_t n, uint64_t seed);
int64_t data_sampler_len(const Sampler *s);
CtStatus data_sampler_fill(const Sampler *s, int64_t epoch, int64_t *out);
void data_sampler_free(Sampler *s);
/* Positions [0, num_real) of s's order are real samples; positions from
 * num_real to len are wrap-around duplicates. len for samplers without
 * padding (a NULL num_real slot). -1 with an error for a NULL sampler. */
int64_t data_sampler_num_real(const Sampler *s);

/* Shards base's order for process `rank` of `world_size` by PyTorch's
 * DistributedSampler rule. Each epoch, base's order o[0..n) (n = len(base);
 * it must be the same on every process, e.g. sequential, or shuffled by
 * (seed, epoch)) is
 *  - without drop_last: padded by wrapping around to total = ceil(n / W) * W
 *    positions, position p holding o[p % n] (the order repeats from its
 *    start, several times when n < W);
 *  - with drop_last: cut to total = floor(n / W) * W positions;
 * and the shard is positions rank, rank + W, rank + 2W, ... of it: total / W
 * indices, the same number on every process. The shard's order is real
 * samples first: data_sampler_num_real is the count of its positions below
 * n, so the wrap-around duplicates (at most one per process) are its last
 * entries. len(base) is read at every fill, so it must not change.
 * Takes ownership of base, also on failure (base NULL fails, keeping the
 * first error). Errors: world_size < 1, rank outside [0, world_size). */
Sampler *data_sampler_distributed_create(Sampler *base, int rank, int world_size,
                                         bool drop_last);

/* ---------------------------------------------------------- data loader */

/* A batch: field k is the samples' field k joined along a new dim 0
 * (default collate), e.g. t[0] (B, 1, 28, 28) u8 and t[1] (B) i64. */
typedef struct DataBatch {
    int n;                      /* fields used */
    Tensor *t[DATA_MAX_FIELDS]; /* owned by the loader: see data_loader_next */
    int64_t size;               /* samples in the batch */
    int64_t index;              /* the batch's position in the epoch */
} DataBatch;

/* Makes a batch of n samples (n >= 1). Called on worker threads; it must be
 * thread-safe and leave its tensors in the open scope (the loader keeps
 * them). Fill out->n and out->t; the loader sets size and index. */
typedef CtStatus (*DataCollateFn)(const DataSample *samples, int64_t n, DataBatch *out,
                                  void *user);
/* Stacks each field along a new dim 0: the result of tensor_stack, which it
 * calls for strided, non-CPU or grad-requiring samples; contiguous CPU
 * samples are copied row by row into the batch (one allocation per field).
 * Errors: samples with different field counts, dtypes or shapes (naming the
 * sample's position in the batch). */
CtStatus data_collate_default(const DataSample *samples, int64_t n, DataBatch *out,
                              void *user);

typedef struct DataLoaderArgs {
    int64_t batch_size;    /* required, > 0 (no default: 0 is an error) */
    bool shuffle;          /* a random sampler keyed by (seed, epoch) */
    bool drop_last;        /* drop a last partial batch */
    uint64_t seed;         /* shuffle order and DataCtx.seed (augmentations) */
    Sampler *sampler;      /* borrowed; overrides the default order. Giving it
                              together with shuffle is an error (PyTorch's rule). */
    DataCollateFn collate; /* NULL: data_collate_default */
    void *collate_user;
    int num_workers; /* threads building batches ahead; 0: built inline in
                        data_loader_next on the caller's thread */
    int prefetch;    /* batches queued per worker; 0: 2. num_workers * prefetch
                        is at most 65536 */
    /* Where batches go (zero: CPU). For a GPU, the default collate builds
     * each batch in pinned host memory (a user's collate output is pinned
     * with one extra copy) and the batch is sent with
     * tensor_to_device_async from the thread that built it (a worker, or
     * the caller when num_workers is 0). The copy is queued on the GPU's
     * stream, so the batch data_loader_next returns is ready for any op on
     * that GPU (they all run on that stream, after the copy); reading it
     * from the host (tensor_copy_to_host, tensor_item) waits for it. With
     * workers, batch i+1 is loaded, collated and queued while the caller
     * computes on batch i; the DMA itself runs in stream order (the GPU
     * has one stream per device), between kernels, not concurrently with
     * them. Without a CUDA device the batch stays in ordinary memory. */
    CtDevice device;
    /* Sharding across processes (the trainer sets these from its runtime):
     * with shard_world_size > 1 the loader's order (sequential, shuffled or
     * `sampler`) is wrapped in data_sampler_distributed_create(order,
     * shard_rank, shard_world_size, false) (a `sampler` stays borrowed),
     * so every process loads its own rank::world share of each epoch,
     * padded by wrapping around to the same number of samples (and
     * batches) on every process. shard_world_size 0 or 1: no sharding
     * (shard_rank must then be 0). For PyTorch's drop_last=True sharding,
     * pass your own distributed sampler as `sampler` instead. Errors:
     * shard_world_size < 0, shard_rank outside [0, shard_world_size). */
    int shard_rank;
    int shard_world_size;
} DataLoaderArgs;

typedef struct DataLoader DataLoader;

/* A loader over ds (borrowed: it must outlive the loader and stay unmodified
 * while the loader runs). Workers start at creation and wait for work.
 * Errors: NULL dataset, batch_size <= 0, num_workers outside [0, 256],
 * num_workers * prefetch over 65536, an empty dataset, sampler together with
 * shuffle, a sampler of negative length, thread creation failure. */
DataLoader *data_loader_create(const Dataset *ds, const DataLoaderArgs *args);
/* Stops the workers (waiting for the batches they are building) and frees
 * everything, including the last batch handed out. NULL is a no-op. */
void data_loader_free(DataLoader *dl);

/* The next batch of the current epoch, in order, identical for any
 * num_workers:
 *
 *     DataBatch b;
 *     while (data_loader_next(dl, &b)) { ... b.t[0], b.t[1] ... }
 *
 * The batch's tensors are owned by the loader and stay valid until the next
 * call to data_loader_next, set_epoch, skip or free (tensor_retain one to
 * keep it longer). Returns false at the end of the epoch (status CT_OK,
 * and the following call starts epoch + 1) or on an error: then
 * data_loader_status() is the error, ct_last_error() on the calling thread
 * names the sample index (also for errors raised in a worker), and the loader
 * keeps returning false until set_epoch or skip. */
bool data_loader_next(DataLoader *dl, DataBatch *out);
/* CT_OK, or the error that ended the last data_loader_next. */
CtStatus data_loader_status(const DataLoader *dl);
/* Batches per epoch: ceil(n / batch_size), or floor with drop_last, n
 * being the samples of this process's shard when sharded. */
int64_t data_loader_len(const DataLoader *dl);
/* The arguments the loader was created with, as resolved: a copy of
 * data_loader_create's args with prefetch 0 replaced by its default 2
 * (collate stays NULL for the default collate). The loader keeps the
 * struct, valid until data_loader_free. NULL loader: NULL with an error. */
const DataLoaderArgs *data_loader_args(const DataLoader *dl);
/* Restarts iteration at the start of `epoch` (>= 0): the shuffle order and
 * the DataCtx of every sample follow it. Discards prefetched batches. */
CtStatus data_loader_set_epoch(DataLoader *dl, int64_t epoch);
int64_t data_loader_epoch(const DataLoader *dl);
/* Restarts the current epoch at batch n (0 <= n <= len) without loading
 * batches 0..n-1: how a resumed run continues mid-epoch. */
CtStatus data_loader_skip(DataLoader *dl, int64_t n);
/* Rows at the END of the batch most recently returned by data_loader_next
 * that are wrap-around duplicates of a sharded (or padded) order, to be
 * dropped before counting metrics (see runtime_gather_for_metrics). 0
 * without padding, and 0 while no batch is held (before the first batch,
 * at the end of an epoch, after set_epoch or skip: the count follows the
 * batch's position in the epoch, so a resumed epoch counts right). -1 with
 * an error for a NULL loader. */
int64_t data_loader_batch_padding(const DataLoader *dl);

/* ========== images and transforms ========== */

/* ----------------------------------------------------------------- images
 *
 * Decoded images are u8 tensors (H, W, C), C = 1 (grey) or 3 (RGB), rows
 * top to bottom, as PIL hands them to torchvision. PNG and JPEG are
 * recognised by their signature, not their file name. Conversions to 8-bit
 * grey or RGB (`channels` 0: as stored):
 *   PNG: palette -> RGB; grey of 1/2/4 bits -> 8-bit grey; 16-bit samples ->
 *        their high byte (v >> 8), as PIL decodes 16-bit RGB, RGBA and
 *        grey+alpha (16-bit grey too, where PIL's convert("RGB") would clip
 *        to 255); alpha (RGBA, grey+alpha, tRNS) is dropped, not
 *        composited, as PIL's convert("RGB") does.
 *   JPEG: grey -> 1 channel; YCbCr/RGB -> 3; CMYK/YCCK -> RGB as Pillow
 *        does, bit for bit: the samples are taken as Adobe-inverted (with or
 *        without an Adobe marker), then with nk = 255 - K,
 *        R = nk - ((t + (t >> 8)) >> 8) with t = C * nk + 128 (that is,
 *        C * nk / 255 rounded), and G, B alike from M, Y.
 * `channels` 3 forces RGB (grey replicated), 1 forces grey (PIL's "L":
 * (19595 R + 38470 G + 7471 B + 32768) >> 16). Images over
 * DATA_IMAGE_MAX_PIXELS pixels are refused before anything is allocated.
 * A JPEG that ends early is an error (like PIL's default), other recoverable
 * JPEG corruption is decoded as libjpeg repairs it. */

#ifndef DATA_IMAGE_MAX_PIXELS /* the fuzz build lowers it: see CMakeLists.txt */
#define DATA_IMAGE_MAX_PIXELS ((int64_t)1 << 27)
#endif

/* Decodes `len` bytes at `buf`. `name` labels errors (NULL: "<memory>").
 * Returns a u8 (H, W, C) tensor owned like any op result (the open scope).
 * Errors: CT_ERR_FORMAT "<name>: not a PNG or JPEG image", "<name>: corrupted
 * PNG: ...", "<name>: truncated JPEG", ...; CT_ERR_INVALID for a bad
 * `channels`; CT_ERR_UNSUPPORTED for images too large; CT_ERR_OOM. Never
 * exits. */
Tensor *data_image_decode(const void *buf, size_t len, int channels, const char *name);
/* Reads and decodes the file at `path`; errors name the path (CT_ERR_IO when
 * it cannot be read). */
Tensor *data_image_read(const char *path, int channels);

/* ------------------------------------------------------------- transforms
 *
 * A DataTransformer is a transform object (torchvision's transform classes;
 * data-core's DataTransform is the plain {fn, user} pair datasets take, see
 * data_transform_as_fn). It maps one image tensor to another. Layout follows the
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

typedef struct DataTransformer DataTransformer;

Tensor *data_transform_apply(const DataTransformer *t, Tensor *img, const DataCtx *ctx);
/* NULL is a no-op. */
void data_transform_free(DataTransformer *t);
/* The name of the transform ("Compose", "Resize", ...). */
const char *data_transform_name(const DataTransformer *t);

/* The adapter datasets take (DataTransform, data-core's {fn, user} pair):
 * data_transform_fn(img, ctx, t) == data_transform_apply(t, img, ctx), and
 * data_transform_as_fn(t) == (DataTransform){data_transform_fn, t}. The
 * transformer is borrowed: it must outlive the dataset. */
Tensor *data_transform_fn(Tensor *img, const DataCtx *ctx, void *transformer);
DataTransform data_transform_as_fn(const DataTransformer *t);

/* Applies ts[0..n) in order. Takes ownership of every ts[i], also when it
 * fails (NULL entries make it fail: pass constructors' results directly). */
DataTransformer *data_transform_compose(int n, DataTransformer *const *ts);
/* Wraps a user function (called as fn(img, ctx, user)); free_user (may be
 * NULL) is called on user when the transformer is freed. */
DataTransformer *data_transform_lambda(const char *name, DataTransformFn fn, void *user,
                                       void (*free_user)(void *));

/* u8 (H, W, C) or (H, W) -> f32 (C, H, W) in [0, 1] (value / 255). */
DataTransformer *data_transform_to_tensor(void);
/* Float (C, H, W): (x - mean[c]) / std[c]. n == C, or n == 1 for all
 * channels. Errors: std 0. */
DataTransformer *data_transform_normalize(int n, const double *mean, const double *std);
/* Bilinear resize to (h, w), as torch.nn.functional.interpolate(mode=
 * "bilinear", align_corners=False, antialias=False); u8 results are rounded
 * half to even and clamped. Bit for bit torchvision's tensor Resize on a
 * contiguous (C, H, W) image, with PyTorch's CPU kernel (u8 ties included).
 * (torchvision's PIL path antialiases when downscaling; we do not.) */
DataTransformer *data_transform_resize(int64_t h, int64_t w);
/* Resizes so the shorter side is `size`, the longer int(size * long / short)
 * (torchvision's Resize(int)). */
DataTransformer *data_transform_resize_shorter(int64_t size);

/* How Resize samples (torchvision's InterpolationMode). */
typedef enum DataInterpolation {
    DATA_INTERP_BILINEAR = 0, /* as data_transform_resize */
    /* InterpolationMode.NEAREST on tensors (interpolate(mode="nearest")):
     * destination index d reads source floor(d * scale), scale = (float)in /
     * out computed in float, clamped to in - 1 (PyTorch's legacy "nearest",
     * not "nearest-exact"); u8 and f32 alike, bit for bit. */
    DATA_INTERP_NEAREST = 1,
} DataInterpolation;
/* data_transform_resize / _resize_shorter with an interpolation mode.
 * Errors: an unknown mode. */
DataTransformer *data_transform_resize_ex(int64_t h, int64_t w, DataInterpolation mode);
DataTransformer *data_transform_resize_shorter_ex(int64_t size, DataInterpolation mode);
/* Central (h, w) crop; a crop larger than the image pads it with zeros
 * first, as torchvision's CenterCrop. */
DataTransformer *data_transform_center_crop(int64_t h, int64_t w);
/* Random (h, w) crop after `padding` zero pixels on every side
 * (torchvision's RandomCrop(size, padding)). Errors: crop larger than the
 * padded image. */
DataTransformer *data_transform_random_crop(int64_t h, int64_t w, int64_t padding);

/* How pixels outside an image are made up (torchvision's padding_mode). */
typedef enum DataPadMode {
    DATA_PAD_CONSTANT = 0, /* `fill`                               */
    DATA_PAD_EDGE,         /* the edge pixel repeated: aa|abc|cc   */
    DATA_PAD_REFLECT,      /* mirrored, edge not repeated: cb|abc|ba
                              (needs padding < the side) */
    DATA_PAD_SYMMETRIC,    /* mirrored, edge repeated: ba|abc|cb
                              (needs padding <= the side) */
} DataPadMode;

typedef struct DataRandomCropArgs {
    int64_t padding;          /* pixels added on every side first; 0: none */
    bool pad_if_needed;       /* pad a side smaller than the crop, as below */
    double fill;              /* DATA_PAD_CONSTANT's value (u8: 0..255) */
    DataPadMode padding_mode; /* zero: DATA_PAD_CONSTANT */
} DataRandomCropArgs;
/* torchvision's RandomCrop(size, padding, pad_if_needed, fill,
 * padding_mode) on tensors: pad by `padding` on every side; then, with
 * pad_if_needed, a width w < crop width cw is padded by cw - w on BOTH the
 * left and the right, then a short height likewise on top and bottom (each
 * step pads the result of the previous one, so reflections compose as
 * torchvision's do); then a uniform random (h, w) window. args NULL means
 * {0}: data_transform_random_crop(h, w, 0). Errors: negative padding, an
 * unknown mode (at creation); crop larger than the padded image, a u8 fill
 * outside 0..255, reflect/symmetric padding wider than the side it mirrors
 * (when applied, as torchvision). */
DataTransformer *data_transform_random_crop_ex(int64_t h, int64_t w,
                                               const DataRandomCropArgs *args);

typedef struct DataRandomResizedCropArgs {
    double scale[2]; /* area fraction range; {0, 0} -> {0.08, 1.0} */
    double ratio[2]; /* aspect (w/h) range;  {0, 0} -> {3/4, 4/3} */
} DataRandomResizedCropArgs;
/* torchvision's RandomResizedCrop: up to 10 tries of a random area and log-
 * uniform aspect ratio, else a central crop clamped to the ratio range (at
 * least 1 pixel a side, where torchvision's would round to 0 and fail); the
 * crop is resized bilinearly to (h, w). args NULL means defaults. */
DataTransformer *
data_transform_random_resized_crop(int64_t h, int64_t w,
                                   const DataRandomResizedCropArgs *args);
/* Mirrors left-right with probability p. */
DataTransformer *data_transform_random_horizontal_flip(double p);
/* Mirrors top-bottom with probability p (torchvision's RandomVerticalFlip). */
DataTransformer *data_transform_random_vertical_flip(double p);

/* ------------------------------------------------------ colour transforms
 *
 * torchvision.transforms.functional's tensor colour functions, on u8
 * (H, W, C) and f32 (C, H, W) images (C = 1 or 3; (H, W) counts as C = 1),
 * reproducing its float32 arithmetic step by step:
 *   blend(a, b, f) = clamp(f * a + (1 - f) * b, 0, max), max 255 (u8) or 1;
 *     u8 results are TRUNCATED (torchvision's .to(uint8)), not rounded.
 *   grey = 0.2989 R + 0.587 G + 0.114 B (products rounded to f32, summed
 *     left to right; truncated to u8 for u8 images).
 *   brightness: blend(img, 0, f).  contrast: blend(img, mean(grey), f).
 *   saturation: blend(img, grey, f) (C = 1: unchanged).
 *   hue: RGB -> HSV -> RGB, h = (h + f) mod 1, as torchvision's _rgb2hsv /
 *     _hsv2rgb; u8 images go through v / 255 and back by truncating v * 255
 *     (C = 1: unchanged).
 * Bit for bit torchvision 0.14 on u8 images, with one limit: contrast's
 * mean is the exact pixel sum rounded once to f32 and divided by the pixel
 * count, where PyTorch sums in f32 (cascade order): the two agree while the
 * sum of grey values stays below 2^24 (e.g. any image up to 256x256), and
 * past that PyTorch's mean may be a few f32 ulps off, which can move a u8
 * result by one level when f * v + (1 - f) * mean lies that close to an
 * integer. For f32 images the grey values are not integers, so the means
 * differ by an ulp or so (PyTorch's own f32 sum depends on its SIMD width
 * and thread count): contrast results may be ~6e-8 off (measured max
 * abs diff 6e-8 on 224x224 images); everything else is bit for bit.
 * Results are new tensors owned like op results (the input is returned as
 * is where torchvision returns it: hue/saturation of one channel). Errors:
 * a factor out of range (brightness, contrast, saturation >= 0; hue in
 * [-0.5, 0.5]), C not 1 or 3, a non-CPU or non-image tensor. */
Tensor *data_image_adjust_brightness(Tensor *img, double factor);
Tensor *data_image_adjust_contrast(Tensor *img, double factor);
Tensor *data_image_adjust_saturation(Tensor *img, double factor);
Tensor *data_image_adjust_hue(Tensor *img, double factor);
/* torchvision's rgb_to_grayscale: C = 3 -> grey, out_channels 1 or 3
 * (replicated); C = 1 -> a copy (out_channels 1) or replicated. */
Tensor *data_image_rgb_to_grayscale(Tensor *img, int out_channels);

/* torchvision's ColorJitter(brightness, contrast, saturation, hue) with
 * numbers: factors uniform in [max(0, 1 - b), 1 + b] (likewise contrast,
 * saturation) and [-hue, hue]; 0 turns an adjustment off. Each call applies
 * the enabled adjustments in a fresh uniformly random order (torchvision's
 * randperm(4)), factors drawn as f32 values. Errors: a negative value, hue
 * over 0.5. */
DataTransformer *data_transform_color_jitter(double brightness, double contrast,
                                             double saturation, double hue);

/* ColorJitter with (min, max) ranges, as torchvision's tuple arguments. */
typedef struct DataColorJitterArgs {
    /* factor ranges, 0 <= min <= max; {0, 0} (or torchvision's (1, 1)):
     * off. (torchvision's (0, 0), always black/grey, is not expressible.) */
    double brightness[2], contrast[2], saturation[2];
    double hue[2]; /* -0.5 <= min <= max <= 0.5; {0, 0}: off */
} DataColorJitterArgs;
/* args NULL: all off. Errors: a range out of order or out of bounds. */
DataTransformer *data_transform_color_jitter_ex(const DataColorJitterArgs *args);
/* torchvision's RandomGrayscale(p): with probability p, the grey image
 * replicated to the input's channel count (a 1-channel image is returned
 * as is). */
DataTransformer *data_transform_random_grayscale(double p);

/* ------------------------------------------- erasing and blur transforms
 *
 * torchvision's tensor F.erase / RandomErasing and F.gaussian_blur /
 * GaussianBlur.
 *
 * Erasing works on f32 (C, H, W) (or (H, W)) images, i.e. after ToTensor /
 * Normalize, as torchvision requires. data_image_erase sets the (h, w)
 * window at (top, left) to `v`, which holds nv values: 1 (every pixel), C
 * (one per channel) or C * h * w (a (C, h, w) patch, as RandomErasing's
 * "random" noise). A new tensor unless `inplace` (then img is written and
 * returned; a non-contiguous img is copied first). Bit for bit F.erase.
 * Errors: not an f32 image, the window not inside the image, a bad nv. */
Tensor *data_image_erase(Tensor *img, int64_t top, int64_t left, int64_t h, int64_t w,
                         const float *v, int64_t nv, bool inplace);

typedef enum DataEraseValue {
    DATA_ERASE_CONSTANT = 0, /* `value` (value = 0, or one per channel) */
    DATA_ERASE_RANDOM,       /* standard normal noise (torchvision's "random") */
} DataEraseValue;

typedef struct DataRandomErasingArgs {
    double scale[2]; /* erased area fraction range; {0, 0} -> {0.02, 0.33} */
    double ratio[2]; /* aspect (h/w) range;          {0, 0} -> {0.3, 3.3} */
    DataEraseValue mode;
    int n_value;         /* DATA_ERASE_CONSTANT: 0 (value 0), 1, or C */
    const double *value; /* n_value values, copied at creation */
    bool inplace;        /* write into the input tensor, as inplace=True */
} DataRandomErasingArgs;
/* torchvision's RandomErasing(p, scale, ratio, value, inplace): with
 * probability p, up to 10 tries of area = H * W * U(scale) (U drawn as an f32
 * value) and aspect exp(U(log ratio)) (f32 logs and exp), sizes
 * h = round(sqrt(area * aspect)), w = round(sqrt(area / aspect)) (Python's
 * round, half to even); a try that fails h < H and w < W is rejected; the
 * first one that fits is erased at a uniform (top, left). After 10 rejected
 * tries the image is returned unchanged. The random numbers are ctrainer's
 * (the sample's DataCtx stream), so the boxes follow torchvision's
 * distribution, not its exact draws. args NULL: defaults (value 0).
 * Errors: p outside [0, 1], a range out of order or not positive (at
 * creation); a non-f32 image, n_value not 1 or C (when applied). */
DataTransformer *data_transform_random_erasing(double p,
                                               const DataRandomErasingArgs *args);

/* F.gaussian_blur(img, kernel_size=[kernel_w, kernel_h],
 * sigma=[sigma_x, sigma_y]) on u8 (H, W, C) and f32 (C, H, W) images (any
 * C; (H, W) too): the 1-D kernels exp(-x^2 / (2 sigma^2)) / sum at
 * x = linspace(-(k - 1) / 2, (k - 1) / 2, k), computed in f32 as
 * torchvision does, their outer product as the 2-D kernel, reflect padding
 * of k / 2 pixels (edge not repeated), and for u8 the f32 result rounded
 * half to even (torch.round) back to u8. Kernel sizes must be odd and
 * positive, each k / 2 less than the image side it pads (torch's reflect
 * padding limit), sigmas > 0. A new tensor; the work buffer is one f64
 * plane per call (separable passes, summed in f64 and rounded once to f32).
 * Agreement with torchvision 0.14 (PyTorch's CPU kernels are not exactly
 * reproducible in portable C: its exp is SLEEF's vectorised expf, its sum
 * and oneDNN's convolution add in SIMD orders, and its 1-D kernel taps may
 * be an ulp or two off ours): f32 results within a few ulps (measured max
 * abs diff 7.2e-7 on random [0, 1] images, kernels 3..23); u8 results are
 * equal except where the blurred value lies within ~1e-5 of a .5 boundary,
 * where the two may round one level apart (measured: 2 of 194k pixels on
 * random images; see tests/fixtures/transforms_more.py). */
Tensor *data_image_gaussian_blur(Tensor *img, int64_t kernel_w, int64_t kernel_h,
                                 double sigma_x, double sigma_y);
/* torchvision's GaussianBlur(kernel_size=(kernel_w, kernel_h),
 * sigma=(sigma_min, sigma_max)): each call draws sigma uniformly in
 * [sigma_min, sigma_max] (as an f32 value, like torch.empty(1).uniform_)
 * and blurs with sigma_x = sigma_y = sigma. sigma_min = sigma_max = 0 means
 * torchvision's default (0.1, 2.0); a fixed sigma s is (s, s). Errors: even
 * or non-positive kernel sizes, not 0 < sigma_min <= sigma_max (at
 * creation); an image too small for the padding (when applied).
 *
 *     DataTransformer *aug = data_transform_compose(3, (DataTransformer *[]){
 *         data_transform_gaussian_blur(23, 23, 0, 0),   // SimCLR's blur
 *         data_transform_to_tensor(),
 *         data_transform_random_erasing(0.25, NULL)});  // after ToTensor
 * (docs/tutorials/01-finetune.md has the tested version.) */
DataTransformer *data_transform_gaussian_blur(int64_t kernel_w, int64_t kernel_h,
                                              double sigma_min, double sigma_max);

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
    const char *label_regex; /* NULL: one subfolder per class */
    int channels;            /* 0 -> 3 (RGB, torchvision's loader); or 1 */
    DataTransform transform; /* applied to t[0] in get(); zero: the decoded
                                image. E.g. data_transform_as_fn(t) */
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
