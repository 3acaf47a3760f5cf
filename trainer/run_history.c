/* RunHistory: per-epoch metrics by name, in memory (trainer.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/io.h"
#include "ctrainer/table.h"
#include "ctrainer/trainer.h"

/* One metric's values, one per update. */
typedef struct Series {
    double *values;
    int64_t n, cap;
} Series;

struct RunHistory {
    CtTable metrics; /* of Series, in order of first update */
    int64_t epoch;
    char prefix[RUN_HISTORY_MAX_NAME];
};

RunHistory *run_history_create(void)
{
    RunHistory *h = calloc(1, sizeof *h);
    if (!h) {
        ct_error(CT_ERR_OOM, "run_history_create: out of memory");
        return NULL;
    }
    h->metrics = CT_TABLE_INIT(Series);
    h->epoch = 1;
    return h;
}

void run_history_free(RunHistory *h)
{
    if (!h) return;
    run_history_reset(h);
    free(h);
}

static Series *find(const RunHistory *h, const char *name)
{
    return h ? ct_table_find(&h->metrics, name) : NULL;
}

static Series *add_metric(RunHistory *h, const char *name)
{
    Series *m = ct_table_add(&h->metrics, name);
    if (!m) ct_error(CT_ERR_OOM, "run history: out of memory adding metric '%s'", name);
    return m;
}

CtStatus run_history_update(RunHistory *h, const char *name, double value)
{
    if (!h) return ct_error(CT_ERR_NULL, "run_history_update: NULL history");
    if (!name || !name[0])
        return ct_error(CT_ERR_INVALID, "run_history_update: NULL or empty metric name");
    char full[RUN_HISTORY_MAX_NAME];
    if ((size_t)snprintf(full, sizeof full, "%s%s", h->prefix, name) >= sizeof full)
        return ct_error(CT_ERR_INVALID,
                        "run_history_update: metric name '%s%s' is longer "
                        "than %d bytes",
                        h->prefix, name, RUN_HISTORY_MAX_NAME - 1);
    Series *m = find(h, full);
    if (!m && !(m = add_metric(h, full))) return CT_ERR_OOM;
    if (m->n == m->cap) {
        int64_t cap = m->cap ? 2 * m->cap : 16;
        double *v = realloc(m->values, (size_t)cap * sizeof *v);
        if (!v) return ct_error(CT_ERR_OOM, "run history: out of memory for '%s'", full);
        m->values = v;
        m->cap = cap;
    }
    m->values[m->n++] = value;
    return CT_OK;
}

int run_history_num_metrics(const RunHistory *h)
{
    return h ? (int)h->metrics.n : 0;
}

const char *run_history_metric_name(const RunHistory *h, int i)
{
    return h ? ct_table_name(&h->metrics, i) : NULL;
}

bool run_history_has_metric(const RunHistory *h, const char *name)
{
    return find(h, name) != NULL;
}

const double *run_history_values(const RunHistory *h, const char *name, int64_t *n)
{
    const Series *m = find(h, name);
    if (n) *n = m ? m->n : 0;
    return m && m->n ? m->values : NULL;
}

double run_history_latest(const RunHistory *h, const char *name)
{
    const Series *m = find(h, name);
    if (!m || m->n == 0) {
        ct_error(CT_ERR_INVALID, "run history: no values recorded for metric '%s'",
                 name ? name : "(null)");
        return NAN;
    }
    return m->values[m->n - 1];
}

CtStatus run_history_delete(RunHistory *h, const char *name)
{
    int64_t i = h ? ct_table_index(&h->metrics, name) : -1;
    if (i < 0)
        return ct_error(CT_ERR_INVALID, "run_history_delete: no metric '%s'",
                        name ? name : "(null)");
    free(((Series *)ct_table_at(&h->metrics, i))->values);
    ct_table_remove(&h->metrics, i);
    return CT_OK;
}

CtStatus run_history_set_prefix(RunHistory *h, const char *prefix)
{
    if (!h) return ct_error(CT_ERR_NULL, "run_history_set_prefix: NULL history");
    if (!prefix) prefix = "";
    if (strlen(prefix) >= sizeof h->prefix)
        return ct_error(CT_ERR_INVALID,
                        "run_history_set_prefix: prefix '%s' is longer than "
                        "%d bytes",
                        prefix, RUN_HISTORY_MAX_NAME - 1);
    snprintf(h->prefix, sizeof h->prefix, "%s", prefix);
    return CT_OK;
}

const char *run_history_prefix(const RunHistory *h)
{
    return h ? h->prefix : "";
}

int64_t run_history_current_epoch(const RunHistory *h)
{
    return h ? h->epoch : 0;
}

void run_history_increment_epoch(RunHistory *h)
{
    if (h) h->epoch++;
}

CtStatus run_history_set_epoch(RunHistory *h, int64_t epoch)
{
    if (!h) return ct_error(CT_ERR_NULL, "run_history_set_epoch: NULL history");
    if (epoch < 1)
        return ct_error(CT_ERR_INVALID,
                        "run_history_set_epoch: epoch %lld is not >= 1 "
                        "(epochs count from 1)",
                        (long long)epoch);
    h->epoch = epoch;
    return CT_OK;
}

void run_history_reset(RunHistory *h)
{
    if (!h) return;
    for (int64_t i = 0; i < h->metrics.n; i++)
        free(((Series *)ct_table_at(&h->metrics, i))->values);
    ct_table_free(&h->metrics);
    h->epoch = 1;
}

/* JSON number, or null for NaN and infinities (JSON has neither). */
static json_t *json_value(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

char *run_history_to_json(const RunHistory *h)
{
    if (!h) {
        ct_error(CT_ERR_NULL, "run_history_to_json: NULL history");
        return NULL;
    }
    json_t *root = json_object(), *metrics = json_object();
    bool ok = root && metrics;
    ok = ok && json_object_set_new(root, "current_epoch", json_integer(h->epoch)) == 0;
    ok = ok &&
         json_object_set_new(root, "metric_name_prefix", json_string(h->prefix)) == 0;
    for (int64_t i = 0; ok && i < h->metrics.n; i++) {
        const Series *m = ct_table_at(&h->metrics, i);
        json_t *arr = json_array();
        ok = arr && json_object_set_new(metrics, ct_table_name(&h->metrics, i), arr) == 0;
        for (int64_t j = 0; ok && j < m->n; j++)
            ok = json_array_append_new(arr, json_value(m->values[j])) == 0;
    }
    char *s = NULL;
    if (ok && json_object_set_new(root, "metrics", metrics) == 0) {
        metrics = NULL; /* owned by root now */
        s = json_dumps(root, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    }
    json_decref(metrics);
    json_decref(root);
    if (!s) ct_error(CT_ERR_OOM, "run_history_to_json: out of memory");
    return s;
}

CtStatus run_history_save_json(const RunHistory *h, const char *path)
{
    if (!path) return ct_error(CT_ERR_NULL, "run_history_save_json: NULL path");
    char *s = run_history_to_json(h);
    if (!s) return ct_last_status();
    size_t len = strlen(s);
    char *text = realloc(s, len + 1); /* the newline replaces the terminator */
    if (!text) {
        free(s);
        return ct_error(CT_ERR_OOM, "run_history_save_json: out of memory");
    }
    text[len] = '\n';
    CtStatus st = ct_write_file_atomic(path, text, len + 1);
    free(text);
    return st;
}
