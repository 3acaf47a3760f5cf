/* Private helpers of the data layer: in-memory parsers (also the fuzz
 * targets' entry points), file reading and small shared utilities. */
#ifndef CTRAINER_DATA_INTERNAL_H
#define CTRAINER_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ctrainer/data.h"

/* Reads a whole file, gzip'd or plain, into a malloc'd buffer (*buf, *len;
 * the caller frees *buf). Errors: CT_ERR_IO naming the path. */
CtStatus data_read_file(const char *path, uint8_t **buf, size_t *len);

/* Parses an unsigned-byte IDX buffer with `ndim` dims. On success dims[0..ndim)
 * hold the sizes and the payload (exactly the product of dims bytes) starts at
 * buf + *payload_off. Errors (CT_ERR_FORMAT) name `path` and the offset. */
CtStatus data_idx_parse(const uint8_t *buf, size_t len, const char *path, int ndim,
                        int64_t *dims, size_t *payload_off);

/* A parsed CSV: rows x features f32 and one label per row (i64, or f32 when
 * args->regression). Free with data_csv_table_free. */
typedef struct DataCsvTable {
    int64_t rows, features;
    float *x;       /* (rows, features) */
    int64_t *y_i64; /* (rows), classification */
    float *y_f32;   /* (rows), regression */
} DataCsvTable;

/* Parses buf[0..len) (no terminating NUL needed) as described for
 * data_csv_dataset_create; args->path is used only in messages. On failure
 * nothing is left allocated in *out. */
CtStatus data_csv_parse(const char *buf, size_t len, const DataCsvArgs *args,
                        DataCsvTable *out);
void data_csv_table_free(DataCsvTable *t);

/* Applies tr to *t when tr.fn is set; false (error recorded) on failure,
 * also when the transform returned NULL without recording why. A NULL *t
 * keeps the error that made it (sticky). */
static inline bool data_apply(DataTransform tr, Tensor **t, const DataCtx *ctx)
{
    if (!tr.fn) return true;
    if (!*t) return false;
    ct_clear_error(); /* so a status seen below is the transform's */
    *t = tr.fn(*t, ctx, tr.user);
    if (!*t && ct_last_status() == CT_OK)
        ct_error(CT_ERR_INVALID, "transform returned NULL without recording an error");
    return *t != NULL;
}

/* A sample's class label: a 0-dim i64 CPU tensor in the open scope, the
 * value written in place (a fill through the op dispatch was most of a
 * sample's cost); NULL with the error recorded on failure. */
static inline Tensor *data_label(int64_t value)
{
    Tensor *t = tensor_empty(0, NULL, CT_I64, ct_cpu());
    if (t) *(int64_t *)tensor_data(t) = value;
    return t;
}

/* data_collate_default, with the batch tensors in pinned memory when
 * `pinned` (the loader's choice for a CUDA target; ordinary CPU memory
 * without a CUDA device). */
CtStatus data_collate_into(const DataSample *samples, int64_t n, DataBatch *out,
                           bool pinned);

/* data_sampler_distributed_create that frees base with the result only when
 * `own` (the loader wraps a borrowed DataLoaderArgs.sampler). */
Sampler *data_sampler_distributed_wrap(Sampler *base, bool own, int rank, int world_size,
                                       bool drop_last);

#endif
