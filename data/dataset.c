/* The Dataset vtable entry points, the per-sample generator, and the two
 * simplest datasets: rows of tensors and a transformed view of another. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The purpose goes into the Philox key, (epoch, index) into the counter's
 * stream word: one-to-one for index < 2^40 and epoch < 2^24, so no two
 * samples of a run share numbers. */
CtGenerator data_ctx_generator(const DataCtx *ctx, uint64_t purpose)
{
    DataCtx c = ctx ? *ctx : (DataCtx){0, 0, 0};
    uint64_t key = c.seed ^ splitmix64(purpose);
    uint64_t stream = ((uint64_t)c.epoch << 40) ^ (uint64_t)c.index;
    return ct_generator(key, stream);
}

int64_t data_dataset_len(const Dataset *d)
{
    if (!d || !d->vt || !d->vt->len) {
        ct_error(CT_ERR_NULL, "data_dataset_len: NULL dataset");
        return -1;
    }
    return d->vt->len(d);
}

CtStatus data_dataset_get(const Dataset *d, int64_t i, const DataCtx *ctx,
                          DataSample *out)
{
    if (!out) return ct_error(CT_ERR_NULL, "data_dataset_get: NULL output sample");
    memset(out, 0, sizeof *out);
    if (!d || !d->vt || !d->vt->get)
        return ct_error(CT_ERR_NULL, "data_dataset_get: NULL dataset");
    int64_t n = d->vt->len(d);
    if (i < 0 || i >= n)
        return ct_error(CT_ERR_INVALID, "dataset %s: index %lld out of range [0, %lld)",
                        d->vt->type, (long long)i, (long long)n);
    DataCtx local = {0, 0, i};
    if (!ctx) ctx = &local;
    CtStatus st = d->vt->get(d, i, ctx, out);
    if (st != CT_OK) memset(out, 0, sizeof *out);
    return st;
}

void data_dataset_free(Dataset *d)
{
    if (d && d->vt && d->vt->free) d->vt->free(d);
}

/* ------------------------------------------------------- tensor dataset */

typedef struct TensorDataset {
    Dataset base;
    int n;
    int64_t len;
    Tensor *t[DATA_MAX_FIELDS];
} TensorDataset;

static int64_t tds_len(const Dataset *d)
{
    return ((const TensorDataset *)d)->len;
}

static CtStatus tds_get(const Dataset *d, int64_t i, const DataCtx *ctx, DataSample *out)
{
    const TensorDataset *td = (const TensorDataset *)d;
    out->n = td->n;
    for (int k = 0; k < td->n; k++)
        if (!(out->t[k] = tensor_select(td->t[k], 0, i))) return ct_last_status();
    return CT_OK;
}

static void tds_free(Dataset *d)
{
    TensorDataset *td = (TensorDataset *)d;
    for (int k = 0; k < td->n; k++) tensor_free(td->t[k]);
    free(td);
}

static const DatasetVtable tds_vt = {"tensor", tds_len, tds_get, tds_free};

Dataset *data_tensor_dataset_create(int n, Tensor *const *tensors)
{
    if (n < 1 || n > DATA_MAX_FIELDS) {
        ct_error(CT_ERR_INVALID, "tensor dataset: %d tensors, expected 1..%d", n,
                 DATA_MAX_FIELDS);
        return NULL;
    }
    if (!tensors) {
        ct_error(CT_ERR_NULL, "tensor dataset: NULL tensor list");
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!tensors[k]) {
            ct_error(CT_ERR_NULL, "tensor dataset: tensor %d is NULL", k);
            return NULL;
        }
        if (tensor_ndim(tensors[k]) == 0) {
            ct_error(CT_ERR_SHAPE, "tensor dataset: tensor %d is 0-d", k);
            return NULL;
        }
        if (tensor_size(tensors[k], 0) != tensor_size(tensors[0], 0)) {
            ct_error(CT_ERR_SHAPE,
                     "tensor dataset: tensor %d has %lld rows, tensor 0 has %lld", k,
                     (long long)tensor_size(tensors[k], 0),
                     (long long)tensor_size(tensors[0], 0));
            return NULL;
        }
    }
    TensorDataset *td = calloc(1, sizeof *td);
    if (!td) {
        ct_error(CT_ERR_OOM, "tensor dataset: out of memory");
        return NULL;
    }
    td->base.vt = &tds_vt;
    td->n = n;
    td->len = tensor_size(tensors[0], 0);
    for (int k = 0; k < n; k++) td->t[k] = tensor_retain(tensors[k]);
    return &td->base;
}

/* -------------------------------------------------- transformed dataset */

typedef struct MapDataset {
    Dataset base;
    const Dataset *inner;
    int field;
    DataTransform tr;
} MapDataset;

static int64_t map_len(const Dataset *d)
{
    return data_dataset_len(((const MapDataset *)d)->inner);
}

static CtStatus map_get(const Dataset *d, int64_t i, const DataCtx *ctx, DataSample *out)
{
    const MapDataset *m = (const MapDataset *)d;
    CtStatus st = data_dataset_get(m->inner, i, ctx, out);
    if (st != CT_OK) return st;
    if (m->field >= out->n)
        return ct_error(CT_ERR_INVALID,
                        "transformed dataset: sample %lld has %d fields, no field %d",
                        (long long)i, out->n, m->field);
    return data_apply(m->tr, &out->t[m->field], ctx) ? CT_OK : ct_last_status();
}

static void map_free(Dataset *d)
{
    free(d);
}

static const DatasetVtable map_vt = {"transformed", map_len, map_get, map_free};

Dataset *data_transformed_create(const Dataset *base, int field, DataTransform t)
{
    if (!base || !t.fn) {
        ct_error(CT_ERR_NULL, "transformed dataset: NULL %s",
                 base ? "transform" : "base dataset");
        return NULL;
    }
    if (field < 0 || field >= DATA_MAX_FIELDS) {
        ct_error(CT_ERR_INVALID, "transformed dataset: field %d outside [0, %d)", field,
                 DATA_MAX_FIELDS);
        return NULL;
    }
    MapDataset *m = calloc(1, sizeof *m);
    if (!m) {
        ct_error(CT_ERR_OOM, "transformed dataset: out of memory");
        return NULL;
    }
    *m = (MapDataset){{&map_vt}, base, field, t};
    return &m->base;
}
