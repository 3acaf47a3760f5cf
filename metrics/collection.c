/* MetricCollection: named metrics in insertion order, updated together with
 * one host copy of the batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef struct Entry {
    char name[64];
    Metric *metric;
} Entry;

struct MetricCollection {
    Entry *items;
    int64_t n, cap;
};

MetricCollection *metric_collection_create(void)
{
    MetricCollection *c = calloc(1, sizeof *c);
    if (!c) ct_error(CT_ERR_OOM, "metric_collection_create: out of memory");
    return c;
}

void metric_collection_free(MetricCollection *c)
{
    if (!c) return;
    for (int64_t i = 0; i < c->n; i++) metric_free(c->items[i].metric);
    free(c->items);
    free(c);
}

static CtStatus add_entry(MetricCollection *c, const char *name, Metric *m)
{
    if (strlen(name) >= sizeof c->items[0].name)
        return ct_error(CT_ERR_INVALID,
                        "metric_collection_add: name '%s' is longer than %zu", name,
                        sizeof c->items[0].name - 1);
    if (metric_collection_find(c, name))
        return ct_error(CT_ERR_INVALID,
                        "metric_collection_add: a metric named '%s' is already in the "
                        "collection",
                        name);
    if (c->n == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 8;
        Entry *items = realloc(c->items, (size_t)cap * sizeof *items);
        if (!items) return ct_error(CT_ERR_OOM, "metric_collection_add: out of memory");
        c->items = items;
        c->cap = cap;
    }
    Entry *e = &c->items[c->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->metric = m;
    return CT_OK;
}

CtStatus metric_collection_add(MetricCollection *c, const char *name, Metric *m)
{
    if (!m) return metric_null("metric_collection_add", "metric");
    if (!c) {
        metric_free(m);
        return ct_error(CT_ERR_NULL, "metric_collection_add: collection is NULL");
    }
    CtStatus st = add_entry(c, name ? name : metric_name(m), m);
    if (st != CT_OK) metric_free(m);
    return st;
}

int64_t metric_collection_size(const MetricCollection *c)
{
    return c ? c->n : 0;
}

Metric *metric_collection_get(const MetricCollection *c, int64_t i)
{
    return c && i >= 0 && i < c->n ? c->items[i].metric : NULL;
}

const char *metric_collection_name(const MetricCollection *c, int64_t i)
{
    return c && i >= 0 && i < c->n ? c->items[i].name : NULL;
}

Metric *metric_collection_find(const MetricCollection *c, const char *name)
{
    for (int64_t i = 0; c && name && i < c->n; i++)
        if (strcmp(c->items[i].name, name) == 0) return c->items[i].metric;
    return NULL;
}

CtStatus metric_collection_update(MetricCollection *c, Tensor *preds, Tensor *target)
{
    if (!c) return metric_null("metric_collection_update", "collection");
    if (!preds) return metric_null("metric_collection_update", "preds");
    MetricBatch b = {.preds = preds, .target = target};
    CtStatus st = CT_OK;
    for (int64_t i = 0; i < c->n && st == CT_OK; i++)
        st = metric_check_batch(c->items[i].metric, &b);
    /* after every check passed, an update fails only on OOM (AUROC growing) */
    for (int64_t i = 0; i < c->n && st == CT_OK; i++)
        st = metric_update_batch(c->items[i].metric, &b);
    metric_batch_release(&b);
    return st;
}

CtStatus metric_collection_compute(MetricCollection *c, MetricValue *out, int64_t cap)
{
    if (!c) return metric_null("metric_collection_compute", "collection");
    if (!out || cap < c->n)
        return ct_error(
            CT_ERR_INVALID,
            "metric_collection_compute: out holds %lld values, the collection "
            "has %lld metrics",
            out ? (long long)cap : 0LL, (long long)c->n);
    for (int64_t i = 0; i < c->n; i++) {
        Metric *m = c->items[i].metric;
        out[i] = (MetricValue){c->items[i].name, NAN, metric_is_scalar(m)};
        if (out[i].scalar && metric_compute(m, &out[i].value) != CT_OK)
            return ct_last_status();
    }
    return CT_OK;
}

void metric_collection_reset(MetricCollection *c)
{
    for (int64_t i = 0; c && i < c->n; i++) metric_reset(c->items[i].metric);
}
