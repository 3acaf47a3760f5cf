/* The default collate function: stack each field along a new dim 0. */
#include <stdio.h>
#include <stdlib.h>

#include "data_internal.h"

CtStatus data_collate_default(const DataSample *samples, int64_t n, DataBatch *out,
                              void *user)
{
    if (!samples || !out) return ct_error(CT_ERR_NULL, "collate: NULL argument");
    if (n < 1 || n > INT32_MAX)
        return ct_error(CT_ERR_INVALID, "collate: %lld samples", (long long)n);
    int nf = samples[0].n;
    if (nf < 1 || nf > DATA_MAX_FIELDS)
        return ct_error(CT_ERR_INVALID, "collate: sample 0 of the batch has %d fields",
                        nf);
    for (int64_t i = 1; i < n; i++) {
        if (samples[i].n != nf)
            return ct_error(CT_ERR_SHAPE,
                            "collate: sample %lld of the batch has %d fields, sample 0 "
                            "has %d",
                            (long long)i, samples[i].n, nf);
    }
    Tensor **ts = malloc((size_t)n * sizeof *ts);
    if (!ts) return ct_error(CT_ERR_OOM, "collate: out of memory");
    CtStatus st = CT_OK;
    for (int f = 0; f < nf && st == CT_OK; f++) {
        for (int64_t i = 0; i < n; i++) ts[i] = samples[i].t[f];
        out->t[f] = tensor_stack((int)n, ts, 0);
        if (!out->t[f]) {
            char inner[768];
            snprintf(inner, sizeof inner, "%s", ct_last_error());
            CtStatus why = ct_last_status() != CT_OK ? ct_last_status() : CT_ERR_NULL;
            st = ct_error(why, "collate: field %d: %s", f, inner);
        }
    }
    free(ts);
    out->n = st == CT_OK ? nf : 0;
    return st;
}
