/* Datasets over other datasets: Subset, ConcatDataset and random_split.
 * All of them borrow their bases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

/* ---------------------------------------------------------------- subset */

typedef struct Subset {
    Dataset base;
    const Dataset *inner;
    int64_t n;
    int64_t idx[]; /* n indices into inner */
} Subset;

static int64_t subset_len(const Dataset *d)
{
    return ((const Subset *)d)->n;
}

/* ctx passes through unchanged: its index is the position in the subset,
 * which is what the loader keyed it by, so augmentation stays reproducible. */
static CtStatus subset_get(const Dataset *d, int64_t i, const DataCtx *ctx,
                           DataSample *out)
{
    const Subset *s = (const Subset *)d;
    return data_dataset_get(s->inner, s->idx[i], ctx, out);
}

static void subset_free(Dataset *d)
{
    free(d);
}

static const DatasetVtable subset_vt = {"subset", subset_len, subset_get, subset_free};

Dataset *data_subset_create(const Dataset *base, int64_t n, const int64_t *indices)
{
    if (!base || (n > 0 && !indices)) {
        ct_error(CT_ERR_NULL, "subset: NULL %s", base ? "indices" : "base dataset");
        return NULL;
    }
    int64_t len = data_dataset_len(base);
    if (n < 0) {
        ct_error(CT_ERR_INVALID, "subset: negative size %lld", (long long)n);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (indices[i] < 0 || indices[i] >= len) {
            ct_error(CT_ERR_INVALID,
                     "subset: index %lld at position %lld is out of range for a "
                     "dataset of %lld samples",
                     (long long)indices[i], (long long)i, (long long)len);
            return NULL;
        }
    }
    Subset *s = malloc(sizeof *s + (size_t)n * sizeof(int64_t));
    if (!s) {
        ct_error(CT_ERR_OOM, "subset: out of memory for %lld indices", (long long)n);
        return NULL;
    }
    s->base.vt = &subset_vt;
    s->inner = base;
    s->n = n;
    if (n) memcpy(s->idx, indices, (size_t)n * sizeof(int64_t));
    return &s->base;
}

/* ---------------------------------------------------------------- concat */

typedef struct Concat {
    Dataset base;
    int n;
    Dataset **parts;
    int64_t *ends; /* cumulative lengths: part k holds [ends[k-1], ends[k]) */
} Concat;

static int64_t concat_len(const Dataset *d)
{
    const Concat *c = (const Concat *)d;
    return c->ends[c->n - 1];
}

static CtStatus concat_get(const Dataset *d, int64_t i, const DataCtx *ctx,
                           DataSample *out)
{
    const Concat *c = (const Concat *)d;
    int lo = 0, hi = c->n - 1; /* first part with ends[k] > i */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->ends[mid] > i)
            hi = mid;
        else
            lo = mid + 1;
    }
    int64_t start = lo ? c->ends[lo - 1] : 0;
    return data_dataset_get(c->parts[lo], i - start, ctx, out);
}

static void concat_free(Dataset *d)
{
    Concat *c = (Concat *)d;
    free(c->parts);
    free(c->ends);
    free(c);
}

static const DatasetVtable concat_vt = {"concat", concat_len, concat_get, concat_free};

Dataset *data_concat_create(int n, Dataset *const *parts)
{
    if (n < 1 || !parts) {
        ct_error(n < 1 ? CT_ERR_INVALID : CT_ERR_NULL, "concat dataset: %s",
                 n < 1 ? "needs at least one dataset" : "NULL dataset list");
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!parts[k]) {
            ct_error(CT_ERR_NULL, "concat dataset: dataset %d is NULL", k);
            return NULL;
        }
    }
    Concat *c = calloc(1, sizeof *c);
    if (c) {
        c->parts = malloc((size_t)n * sizeof *c->parts);
        c->ends = malloc((size_t)n * sizeof *c->ends);
    }
    if (!c || !c->parts || !c->ends) {
        if (c) concat_free(&c->base);
        ct_error(CT_ERR_OOM, "concat dataset: out of memory");
        return NULL;
    }
    c->base.vt = &concat_vt;
    c->n = n;
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        c->parts[k] = parts[k];
        total += data_dataset_len(parts[k]);
        c->ends[k] = total;
    }
    return &c->base;
}

/* ---------------------------------------------------------- random split */

CtStatus data_random_split(const Dataset *base, int n, const int64_t *sizes,
                           uint64_t seed, Dataset **out)
{
    if (!out) return ct_error(CT_ERR_NULL, "random_split: NULL output array");
    if (n >= 1) memset(out, 0, (size_t)n * sizeof *out);
    if (!base || !sizes)
        return ct_error(CT_ERR_NULL, "random_split: NULL %s", base ? "sizes" : "dataset");
    if (n < 1) return ct_error(CT_ERR_INVALID, "random_split: %d splits", n);
    int64_t len = data_dataset_len(base), sum = 0;
    if (len < 0) return ct_last_status();
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 0)
            return ct_error(CT_ERR_INVALID, "random_split: size %d is negative (%lld)", k,
                            (long long)sizes[k]);
        if (sizes[k] > len - sum) /* sum <= len: no overflow */
            return ct_error(CT_ERR_INVALID,
                            "random_split: sizes sum to more than the dataset's %lld "
                            "samples (size %d is %lld)",
                            (long long)len, k, (long long)sizes[k]);
        sum += sizes[k];
    }
    if (sum != len)
        return ct_error(CT_ERR_INVALID,
                        "random_split: sizes sum to %lld, the dataset has %lld samples",
                        (long long)sum, (long long)len);
    int64_t *perm = malloc((size_t)(len ? len : 1) * sizeof *perm);
    if (!perm) return ct_error(CT_ERR_OOM, "random_split: out of memory");
    CtGenerator g = data_ctx_generator(&(DataCtx){seed, 0, 0}, DATA_PURPOSE_SPLIT);
    CtStatus st = ct_randperm(&g, len, perm);
    for (int64_t k = 0, off = 0; k < n && st == CT_OK; off += sizes[k++]) {
        out[k] = data_subset_create(base, sizes[k], perm + off);
        if (!out[k]) st = ct_last_status();
    }
    free(perm);
    if (st != CT_OK) {
        for (int k = 0; k < n; k++) {
            data_dataset_free(out[k]);
            out[k] = NULL;
        }
    }
    return st;
}

CtStatus data_random_split_fractions(const Dataset *base, int n, const double *fractions,
                                     uint64_t seed, Dataset **out)
{
    if (!out) return ct_error(CT_ERR_NULL, "random_split: NULL output array");
    if (n >= 1) memset(out, 0, (size_t)n * sizeof *out);
    if (!base || !fractions)
        return ct_error(CT_ERR_NULL, "random_split: NULL %s",
                        base ? "fractions" : "dataset");
    if (n < 1) return ct_error(CT_ERR_INVALID, "random_split: %d splits", n);
    double total = 0;
    for (int k = 0; k < n; k++) {
        if (!(fractions[k] >= 0 && fractions[k] <= 1))
            return ct_error(CT_ERR_INVALID,
                            "random_split: fraction %d is %g, not in [0, 1]", k,
                            fractions[k]);
        total += fractions[k];
    }
    if (fabs(total - 1) > 1e-6)
        return ct_error(CT_ERR_INVALID, "random_split: fractions sum to %g, not 1",
                        total);
    int64_t len = data_dataset_len(base), sum = 0;
    int64_t *sizes = malloc((size_t)n * sizeof *sizes);
    if (!sizes) return ct_error(CT_ERR_OOM, "random_split: out of memory");
    for (int k = 0; k < n; k++) {
        sizes[k] = (int64_t)floor((double)len * fractions[k]);
        sum += sizes[k];
    }
    for (int64_t r = 0; r < len - sum; r++) sizes[r % n]++;
    CtStatus st = data_random_split(base, n, sizes, seed, out);
    free(sizes);
    return st;
}
