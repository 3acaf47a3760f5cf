/* MetricCollection: named metrics in insertion order, updated together with
 * one host copy of the batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/table.h"
#include "metrics_internal.h"

/* Longest metric name, in bytes. */
#define MAX_NAME 63

struct MetricCollection {
    CtTable metrics; /* of Metric *, owned */
};

/* The metric of entry i (0 <= i < size). */
static Metric *at(const MetricCollection *c, int64_t i)
{
    return *(Metric **)ct_table_at(&c->metrics, i);
}

MetricCollection *metric_collection_create(void)
{
    MetricCollection *c = malloc(sizeof *c);
    if (!c) {
        ct_error(CT_ERR_OOM, "metric_collection_create: out of memory");
        return NULL;
    }
    c->metrics = CT_TABLE_INIT(Metric *);
    return c;
}

void metric_collection_free(MetricCollection *c)
{
    if (!c) return;
    for (int64_t i = 0; i < c->metrics.n; i++) metric_free(at(c, i));
    ct_table_free(&c->metrics);
    free(c);
}

static CtStatus add_entry(MetricCollection *c, const char *name, Metric *m)
{
    if (strlen(name) > MAX_NAME)
        return ct_error(CT_ERR_INVALID,
                        "metric_collection_add: name '%s' is longer than %d", name,
                        MAX_NAME);
    if (metric_collection_find(c, name))
        return ct_error(CT_ERR_INVALID,
                        "metric_collection_add: a metric named '%s' is already in the "
                        "collection",
                        name);
    Metric **slot = ct_table_add(&c->metrics, name);
    if (!slot) return ct_error(CT_ERR_OOM, "metric_collection_add: out of memory");
    *slot = m;
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
    return c ? c->metrics.n : 0;
}

Metric *metric_collection_get(const MetricCollection *c, int64_t i)
{
    return c && i >= 0 && i < c->metrics.n ? at(c, i) : NULL;
}

const char *metric_collection_name(const MetricCollection *c, int64_t i)
{
    return c ? ct_table_name(&c->metrics, i) : NULL;
}

Metric *metric_collection_find(const MetricCollection *c, const char *name)
{
    int64_t i = c ? ct_table_index(&c->metrics, name) : -1;
    return i >= 0 ? at(c, i) : NULL;
}

CtStatus metric_collection_update(MetricCollection *c, Tensor *preds, Tensor *target)
{
    if (!c) return metric_null("metric_collection_update", "collection");
    if (!preds) return metric_null("metric_collection_update", "preds");
    MetricBatch b = {.preds = preds, .target = target};
    CtStatus st = CT_OK;
    for (int64_t i = 0; i < c->metrics.n && st == CT_OK; i++)
        st = metric_check_batch(at(c, i), &b);
    /* after every check passed, an update fails only on OOM (AUROC growing) */
    for (int64_t i = 0; i < c->metrics.n && st == CT_OK; i++)
        st = metric_update_batch(at(c, i), &b);
    metric_batch_release(&b);
    return st;
}

CtStatus metric_collection_compute(MetricCollection *c, MetricValue *out, int64_t cap)
{
    if (!c) return metric_null("metric_collection_compute", "collection");
    if (!out || cap < c->metrics.n)
        return ct_error(
            CT_ERR_INVALID,
            "metric_collection_compute: out holds %lld values, the collection "
            "has %lld metrics",
            out ? (long long)cap : 0LL, (long long)c->metrics.n);
    for (int64_t i = 0; i < c->metrics.n; i++) {
        Metric *m = at(c, i);
        out[i] = (MetricValue){ct_table_name(&c->metrics, i), NAN, metric_is_scalar(m)};
        if (out[i].scalar && metric_compute(m, &out[i].value) != CT_OK)
            return ct_last_status();
    }
    return CT_OK;
}

void metric_collection_reset(MetricCollection *c)
{
    for (int64_t i = 0; c && i < c->metrics.n; i++) metric_reset(at(c, i));
}
