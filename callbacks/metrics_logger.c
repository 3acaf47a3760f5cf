/* MetricsLogger: the run history per epoch as CSV and JSON lines files. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "cb_internal.h"
#include "ctrainer/io.h"
#include "ctrainer/table.h"

typedef struct LogRow {
    int64_t epoch;
    int ncols;      /* columns known when the row was taken */
    double *values; /* ncols */
    bool *present;  /* ncols */
} LogRow;

typedef struct MetricsLogger {
    Callback base;
    char *csv_path, *jsonl_path;
    /* columns: metric names in order of first appearance, each with the
     * number of values the metric had at the last row (int64_t) */
    CtTable cols;
    LogRow *rows;
    int nrows, cap_rows;
} MetricsLogger;

static void clear_rows(MetricsLogger *l)
{
    for (int i = 0; i < l->nrows; i++) {
        free(l->rows[i].values);
        free(l->rows[i].present);
    }
    l->nrows = 0;
}

static void ml_free(Callback *cb)
{
    MetricsLogger *l = (MetricsLogger *)cb;
    clear_rows(l);
    free(l->rows);
    ct_table_free(&l->cols);
    free(l->csv_path);
    free(l->jsonl_path);
    free(l);
}

static const char *col_name(const MetricsLogger *l, int c)
{
    return ct_table_name(&l->cols, c);
}

/* Values metric c had at the last row. */
static int64_t *col_count(const MetricsLogger *l, int c)
{
    return ct_table_at(&l->cols, c);
}

/* Appends a row with the latest value of every metric updated since the
 * last row. */
static CtStatus take_row(MetricsLogger *l, Trainer *t)
{
    RunHistory *h = trainer_run_history(t);
    int nm = run_history_num_metrics(h);
    for (int i = 0; i < nm; i++)
        if (ct_table_index(&l->cols, run_history_metric_name(h, i)) < 0 &&
            !ct_table_add(&l->cols, run_history_metric_name(h, i)))
            return ct_error(CT_ERR_OOM, "MetricsLogger: out of memory");
    if (l->nrows == l->cap_rows) {
        int cap = l->cap_rows ? 2 * l->cap_rows : 16;
        LogRow *r = realloc(l->rows, (size_t)cap * sizeof *r);
        if (!r) return ct_error(CT_ERR_OOM, "MetricsLogger: out of memory");
        l->rows = r;
        l->cap_rows = cap;
    }
    int ncols = (int)l->cols.n;
    LogRow row = {run_history_current_epoch(h), ncols,
                  calloc((size_t)ncols + 1, sizeof(double)),
                  calloc((size_t)ncols + 1, sizeof(bool))};
    if (!row.values || !row.present) {
        free(row.values);
        free(row.present);
        return ct_error(CT_ERR_OOM, "MetricsLogger: out of memory");
    }
    for (int c = 0; c < ncols; c++) {
        int64_t n = 0;
        const double *v = run_history_values(h, col_name(l, c), &n);
        if (n > 0 && n != *col_count(l, c)) {
            row.values[c] = v[n - 1];
            row.present[c] = true;
        }
        *col_count(l, c) = n;
    }
    l->rows[l->nrows++] = row;
    return CT_OK;
}

static void csv_value(CbBuf *b, double v)
{
    if (isnan(v))
        cb_buf_printf(b, "nan");
    else if (isinf(v))
        cb_buf_printf(b, v > 0 ? "inf" : "-inf");
    else
        cb_buf_printf(b, "%.17g", v);
}

static CtStatus write_csv(MetricsLogger *l)
{
    CbBuf b = {0};
    cb_buf_printf(&b, "epoch");
    for (int c = 0; c < l->cols.n; c++) cb_buf_printf(&b, ",%s", col_name(l, c));
    cb_buf_printf(&b, "\n");
    for (int r = 0; r < l->nrows; r++) {
        const LogRow *row = &l->rows[r];
        cb_buf_printf(&b, "%lld", (long long)row->epoch);
        for (int c = 0; c < l->cols.n; c++) {
            cb_buf_printf(&b, ",");
            if (c < row->ncols && row->present[c]) csv_value(&b, row->values[c]);
        }
        cb_buf_printf(&b, "\n");
    }
    CtStatus st = b.oom ? ct_error(CT_ERR_OOM, "MetricsLogger: out of memory")
                        : ct_write_file_atomic(l->csv_path, b.data, b.len);
    cb_buf_free(&b);
    return st;
}

/* One JSON lines row: {"epoch": 1, "train_loss_epoch": 0.5, ...} in column
 * order, non-finite values as null. NULL when out of memory. */
static char *row_json(const MetricsLogger *l, const LogRow *row)
{
    json_t *o = json_object();
    bool ok = o && json_object_set_new(o, "epoch", json_integer(row->epoch)) == 0;
    for (int c = 0; ok && c < row->ncols; c++) {
        if (!row->present[c]) continue;
        double v = row->values[c];
        ok = json_object_set_new(o, col_name(l, c),
                                 isfinite(v) ? json_real(v) : json_null()) == 0;
    }
    char *s = ok ? json_dumps(o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    return s;
}

static CtStatus write_jsonl(MetricsLogger *l)
{
    CbBuf b = {0};
    for (int r = 0; r < l->nrows && !b.oom; r++) {
        char *line = row_json(l, &l->rows[r]);
        if (line)
            cb_buf_printf(&b, "%s\n", line);
        else
            b.oom = true;
        free(line);
    }
    CtStatus st = b.oom ? ct_error(CT_ERR_OOM, "MetricsLogger: out of memory")
                        : ct_write_file_atomic(l->jsonl_path, b.data, b.len);
    cb_buf_free(&b);
    return st;
}

static CtStatus log_row(Callback *cb, Trainer *t)
{
    MetricsLogger *l = (MetricsLogger *)cb;
    if (!cb_is_main(t)) return CT_OK;
    CtStatus st = take_row(l, t);
    if (st == CT_OK && l->csv_path) st = write_csv(l);
    if (st == CT_OK && l->jsonl_path) st = write_jsonl(l);
    return st;
}

/* The run history starts again: values are counted from zero. */
static void forget_counts(MetricsLogger *l)
{
    for (int c = 0; c < l->cols.n; c++) *col_count(l, c) = 0;
}

static CtStatus ml_run_start(Callback *cb, Trainer *t)
{
    MetricsLogger *l = (MetricsLogger *)cb;
    if (run_history_current_epoch(trainer_run_history(t)) == 1 &&
        run_history_num_metrics(trainer_run_history(t)) == 0) {
        clear_rows(l); /* a fresh run history: fresh files */
        forget_counts(l);
    }
    return CT_OK;
}

static CtStatus ml_evaluation_start(Callback *cb, Trainer *t)
{
    forget_counts((MetricsLogger *)cb); /* trainer_evaluate reset the history */
    return CT_OK;
}

static const CallbackVtable metrics_logger_vt = {
    .type = "MetricsLogger",
    .free = ml_free,
    .on_training_run_start = ml_run_start,
    .on_training_run_epoch_end = log_row,
    .on_evaluation_run_start = ml_evaluation_start,
    .on_evaluation_run_end = log_row,
};

Callback *callback_metrics_logger_create(const MetricsLoggerArgs *args)
{
    if (!args || (!args->csv_path && !args->jsonl_path)) {
        ct_error(CT_ERR_INVALID, "MetricsLogger: give csv_path or jsonl_path (or both)");
        return NULL;
    }
    MetricsLogger *l = (MetricsLogger *)cb_alloc(sizeof *l, &metrics_logger_vt);
    if (!l) return NULL;
    l->cols = CT_TABLE_INIT(int64_t);
    bool ok = true;
    if (args->csv_path) ok = (l->csv_path = cb_strdup(args->csv_path, NULL)) != NULL;
    if (ok && args->jsonl_path)
        ok = (l->jsonl_path = cb_strdup(args->jsonl_path, NULL)) != NULL;
    if (!ok) {
        ml_free(&l->base);
        return NULL;
    }
    return &l->base;
}
