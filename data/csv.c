/* The CSV dataset: a table of numbers read once into two tensors. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

typedef struct CsvDataset {
    Dataset base;
    Tensor *x; /* (rows, features) f32 */
    Tensor *y; /* (rows) i64 or f32 */
    DataTransform transform, target_transform;
} CsvDataset;

static int64_t csv_len(const Dataset *d)
{
    return tensor_size(((const CsvDataset *)d)->x, 0);
}

static CtStatus csv_get(const Dataset *d, int64_t i, const DataCtx *ctx, DataSample *out)
{
    const CsvDataset *c = (const CsvDataset *)d;
    out->t[0] = tensor_select(c->x, 0, i);
    out->t[1] = tensor_select(c->y, 0, i);
    out->n = 2;
    if (!out->t[0] || !out->t[1] || !data_apply(c->transform, &out->t[0], ctx) ||
        !data_apply(c->target_transform, &out->t[1], ctx))
        return ct_last_status();
    return CT_OK;
}

static void csv_free(Dataset *d)
{
    CsvDataset *c = (CsvDataset *)d;
    tensor_free(c->x);
    tensor_free(c->y);
    free(c);
}

static const DatasetVtable csv_vt = {"csv", csv_len, csv_get, csv_free};

/* The table's arrays as two persistent tensors (one reference each, ours
 * whatever scope the caller has open). */
static bool csv_tensors(const DataCsvTable *t, bool regression, Tensor **x, Tensor **y)
{
    CtScope *s = ct_scope_open();
    if (!s) return false;
    *x = tensor_retain(tensor_from_data(t->x, 2, (const int64_t[]){t->rows, t->features},
                                        CT_F32, ct_cpu()));
    *y = tensor_retain(
        tensor_from_data(regression ? (const void *)t->y_f32 : (const void *)t->y_i64, 1,
                         &t->rows, regression ? CT_F32 : CT_I64, ct_cpu()));
    ct_scope_close(s);
    if (*x && *y) return true;
    tensor_free(*x);
    tensor_free(*y);
    return false;
}

Dataset *data_csv_dataset_create(const DataCsvArgs *args)
{
    if (!args || !args->path) {
        ct_error(CT_ERR_NULL, "csv dataset: no path given");
        return NULL;
    }
    uint8_t *buf;
    size_t len;
    if (data_read_file(args->path, &buf, &len) != CT_OK) return NULL;
    DataCsvTable t;
    CtStatus st = data_csv_parse((const char *)buf, len, args, &t);
    free(buf);
    if (st != CT_OK) return NULL;
    CsvDataset *c = calloc(1, sizeof *c);
    Tensor *x = NULL, *y = NULL;
    if (!c || !csv_tensors(&t, args->regression, &x, &y)) {
        if (!c) ct_error(CT_ERR_OOM, "csv dataset %s: out of memory", args->path);
        free(c);
        data_csv_table_free(&t);
        return NULL;
    }
    data_csv_table_free(&t);
    *c = (CsvDataset){{&csv_vt}, x, y, args->transform, args->target_transform};
    return &c->base;
}

int64_t data_csv_num_features(const Dataset *d)
{
    if (!d || d->vt != &csv_vt) {
        ct_error(CT_ERR_INVALID, "data_csv_num_features: not a csv dataset");
        return -1;
    }
    return tensor_size(((const CsvDataset *)d)->x, 1);
}
