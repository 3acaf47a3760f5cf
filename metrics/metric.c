/* The Metric handle: dispatch to the vtable, the shared batch and its host
 * copies, and small helpers used by the built-ins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

struct Metric {
    char name[32];
    const MetricVtable *vt;
    void *self;
};

CtStatus metric_null(const char *name, const char *what)
{
    if (ct_last_status() == CT_OK) ct_error(CT_ERR_NULL, "%s: %s is NULL", name, what);
    return CT_ERR_NULL;
}

const char *metric_shape_str(const Tensor *t, char *buf)
{
    int nd = tensor_ndim(t), off = 0;
    const int64_t *shape = tensor_shape(t);
    off += snprintf(buf + off, 128 - off, "[");
    for (int i = 0; i < nd && off < 100; i++)
        off +=
            snprintf(buf + off, 128 - off, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(buf + off, 128 - off, "]");
    return buf;
}

bool metric_dtype_is_index(CtDType dt)
{
    return dt == CT_I64 || dt == CT_I32 || dt == CT_U8 || dt == CT_BOOL;
}

Metric *metric_create(const char *name, const MetricVtable *vt, void *self)
{
    if (!vt || !vt->update || !vt->reset || !vt->state || !vt->merge || !vt->free ||
        (!vt->compute && !vt->compute_tensor)) {
        if (vt && vt->free) vt->free(self);
        ct_error(CT_ERR_INVALID,
                 "metric_create(%s): the vtable needs update, reset, "
                 "state, merge, free and compute or compute_tensor",
                 name ? name : "?");
        return NULL;
    }
    Metric *m = calloc(1, sizeof *m);
    if (!m) {
        vt->free(self);
        ct_error(CT_ERR_OOM, "metric_create(%s): out of memory", name ? name : "?");
        return NULL;
    }
    snprintf(m->name, sizeof m->name, "%s", name ? name : "metric");
    m->vt = vt;
    m->self = self;
    return m;
}

void metric_free(Metric *m)
{
    if (!m) return;
    m->vt->free(m->self);
    free(m);
}

const char *metric_name(const Metric *m)
{
    return m ? m->name : "";
}

/* ----------------------------------------------------------------- batch */

Tensor *metric_batch_preds(const MetricBatch *b)
{
    return b->preds;
}
Tensor *metric_batch_target(const MetricBatch *b)
{
    return b->target;
}

/* A row-major host copy of t as dt (numel elements, at least one allocated). */
static void *host_copy(const Tensor *t, CtDType dt, const char *what)
{
    if (!t) {
        metric_null("metric batch", what);
        return NULL;
    }
    int64_t n = tensor_numel(t);
    void *p = malloc((size_t)(n > 0 ? n : 1) * ct_dtype_size(dt));
    if (!p) {
        ct_error(CT_ERR_OOM, "metric batch: out of memory copying %s (%lld elements)",
                 what, (long long)n);
        return NULL;
    }
    if (n > 0 && tensor_copy_to_host(t, p, dt) != CT_OK) {
        free(p);
        return NULL;
    }
    return p;
}

const double *metric_batch_preds_f64(MetricBatch *b)
{
    if (!b->preds_f64) b->preds_f64 = host_copy(b->preds, CT_F64, "preds");
    return b->preds_f64;
}

const double *metric_batch_target_f64(MetricBatch *b)
{
    if (!b->target_f64) b->target_f64 = host_copy(b->target, CT_F64, "target");
    return b->target_f64;
}

const int64_t *metric_batch_target_i64(MetricBatch *b)
{
    if (!b->target_i64) b->target_i64 = host_copy(b->target, CT_I64, "target");
    return b->target_i64;
}

void metric_batch_release(MetricBatch *b)
{
    free(b->preds_f64);
    free(b->target_f64);
    free(b->target_i64);
    b->preds_f64 = b->target_f64 = NULL;
    b->target_i64 = NULL;
}

/* ---------------------------------------------------------------- update */

CtStatus metric_check_batch(Metric *m, MetricBatch *b)
{
    return m->vt->check ? m->vt->check(m->self, b) : CT_OK;
}

CtStatus metric_update_batch(Metric *m, MetricBatch *b)
{
    return m->vt->update(m->self, b);
}

CtStatus metric_update(Metric *m, Tensor *preds, Tensor *target)
{
    if (!m) return metric_null("metric_update", "metric");
    if (!preds) return metric_null(m->name, "preds");
    MetricBatch b = {.preds = preds, .target = target};
    CtStatus st = metric_check_batch(m, &b);
    if (st == CT_OK) st = metric_update_batch(m, &b);
    metric_batch_release(&b);
    return st;
}

CtStatus metric_update_scalar(Metric *m, double value, double weight)
{
    if (!m) return metric_null("metric_update_scalar", "metric");
    CtScope *s = ct_scope_open();
    if (!s) return ct_error(CT_ERR_OOM, "%s: out of memory", m->name);
    Tensor *v = tensor_scalar(value, CT_F64, ct_cpu());
    Tensor *w = weight == 1.0 ? NULL : tensor_scalar(weight, CT_F64, ct_cpu());
    CtStatus st = (v && (w || weight == 1.0)) ? metric_update(m, v, w) : ct_last_status();
    ct_scope_close(s);
    return st;
}

/* ------------------------------------------------------- compute & state */

bool metric_is_scalar(const Metric *m)
{
    return m && m->vt->compute;
}

CtStatus metric_compute(Metric *m, double *value)
{
    if (!m) return metric_null("metric_compute", "metric");
    if (!value) return ct_error(CT_ERR_NULL, "%s: value is NULL", m->name);
    if (!m->vt->compute)
        return ct_error(CT_ERR_STATE,
                        "%s: the value is not a scalar: use metric_compute_tensor",
                        m->name);
    return m->vt->compute(m->self, value);
}

Tensor *metric_compute_tensor(Metric *m)
{
    if (!m) {
        metric_null("metric_compute_tensor", "metric");
        return NULL;
    }
    if (m->vt->compute_tensor) return m->vt->compute_tensor(m->self);
    double v;
    if (m->vt->compute(m->self, &v) != CT_OK) return NULL;
    return tensor_scalar(v, CT_F64, ct_cpu());
}

void metric_reset(Metric *m)
{
    if (m) m->vt->reset(m->self);
}

const double *metric_state(const Metric *m, int64_t *n)
{
    if (!m) {
        if (n) *n = 0;
        return NULL;
    }
    int64_t k = 0;
    const double *s = m->vt->state(m->self, &k);
    if (n) *n = k;
    return s;
}

CtStatus metric_merge(Metric *m, const double *other_state)
{
    if (!m) return metric_null("metric_merge", "metric");
    if (!other_state) return ct_error(CT_ERR_NULL, "%s: other_state is NULL", m->name);
    return m->vt->merge(m->self, other_state);
}

MetricMergeRule metric_merge_rule(const Metric *m)
{
    return m ? m->vt->merge_rule : METRIC_MERGE_SUM;
}
