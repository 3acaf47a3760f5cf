/* MetricsLogger: the run history per epoch as CSV and JSON lines files. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------------------------- state
 *
 * The rows logged so far, so a resumed run rewrites the whole files:
 * row_epochs, row_columns (i64 per row: epoch, columns known then) and,
 * with columns, columns (u8: the names, each NUL-terminated),
 * column_counts (i64 per column) and values/present (f64/u8, row-major
 * rows x columns). */

typedef struct MlState {
    int64_t nr, nc;
    int64_t *epochs, *row_cols, *counts;
    double *values;
    uint8_t *present;
    char *names;
    int64_t names_len;
} MlState;

static void ml_state_free(MlState *m)
{
    free(m->epochs);
    free(m->row_cols);
    free(m->counts);
    free(m->values);
    free(m->present);
    free(m->names);
}

/* The logger's state flattened into *m. */
static CtStatus ml_flatten(const MetricsLogger *l, MlState *m)
{
    int64_t nr = l->nrows, nc = l->cols.n, len = 0;
    for (int c = 0; c < nc; c++) len += (int64_t)strlen(col_name(l, c)) + 1;
    *m = (MlState){.nr = nr,
                   .nc = nc,
                   .epochs = malloc((size_t)nr * sizeof(int64_t)),
                   .row_cols = malloc((size_t)nr * sizeof(int64_t)),
                   .counts = malloc((size_t)(nc + 1) * sizeof(int64_t)),
                   .values = calloc((size_t)(nr * nc + 1), sizeof(double)),
                   .present = calloc((size_t)(nr * nc + 1), 1),
                   .names = malloc((size_t)len + 1),
                   .names_len = len};
    if (!m->epochs || !m->row_cols || !m->counts || !m->values || !m->present ||
        !m->names)
        return ct_error(CT_ERR_OOM, "MetricsLogger: out of memory");
    for (int64_t c = 0, at = 0; c < nc; c++) {
        size_t k = strlen(col_name(l, (int)c)) + 1;
        memcpy(m->names + at, col_name(l, (int)c), k);
        at += (int64_t)k;
        m->counts[c] = *col_count(l, (int)c);
    }
    for (int64_t r = 0; r < nr; r++) {
        const LogRow *row = &l->rows[r];
        m->epochs[r] = row->epoch;
        m->row_cols[r] = row->ncols;
        for (int c = 0; c < row->ncols; c++) {
            m->values[r * nc + c] = row->values[c];
            m->present[r * nc + c] = row->present[c];
        }
    }
    return CT_OK;
}

static CtStatus ml_state_save(Callback *cb, Trainer *t, CtStateDict *out)
{
    (void)t;
    const MetricsLogger *l = (const MetricsLogger *)cb;
    if (l->nrows == 0) return CT_OK;
    MlState m;
    CtStatus st = ml_flatten(l, &m);
    if (st == CT_OK) st = cb_state_put_array(out, "row_epochs", m.epochs, m.nr, CT_I64);
    if (st == CT_OK)
        st = cb_state_put_array(out, "row_columns", m.row_cols, m.nr, CT_I64);
    if (st == CT_OK && m.nc > 0)
        st = cb_state_put_array(out, "columns", m.names, m.names_len, CT_U8);
    if (st == CT_OK && m.nc > 0)
        st = cb_state_put_array(out, "column_counts", m.counts, m.nc, CT_I64);
    if (st == CT_OK && m.nc > 0)
        st = cb_state_put_array(out, "values", m.values, m.nr * m.nc, CT_F64);
    if (st == CT_OK && m.nc > 0)
        st = cb_state_put_array(out, "present", m.present, m.nr * m.nc, CT_U8);
    ml_state_free(&m);
    return st;
}

/* The column names of a "columns" entry into cols (empty for n == 0). */
static CtStatus ml_read_columns(const char *names, int64_t n, CtTable *cols)
{
    if (n > 0 && names[n - 1] != '\0')
        return ct_error(CT_ERR_INVALID, "MetricsLogger: state entry 'columns' is not "
                                        "NUL-terminated names");
    for (int64_t at = 0; at < n; at += (int64_t)strlen(names + at) + 1)
        if (!names[at] || !ct_table_add(cols, names + at))
            return ct_error(CT_ERR_INVALID,
                            "MetricsLogger: state entry 'columns' has an empty or "
                            "repeated name");
    return CT_OK;
}

/* Checks in's entries and reads them into cols (column counts set) and m
 * (borrowing in's arrays: only nr, nc, epochs, row_cols, values and
 * present are set). */
static CtStatus ml_read_state(const CtStateDict *in, CtTable *cols, MlState *m)
{
    const char *T = "MetricsLogger";
    const void *p = NULL;
    int64_t nr = -1, n = -1, nc = 0;
    CtStatus st = cb_state_get_array(in, T, "row_epochs", CT_I64, &nr, &p);
    m->epochs = (int64_t *)p;
    if (st == CT_OK && nr < 1)
        st = ct_error(CT_ERR_INVALID, "MetricsLogger: state entry 'row_epochs' is empty");
    if (st == CT_OK) st = cb_state_get_array(in, T, "row_columns", CT_I64, &nr, &p);
    m->row_cols = (int64_t *)p;
    if (st == CT_OK && ct_state_dict_get(in, "columns")) {
        st = cb_state_get_array(in, T, "columns", CT_U8, &n, &p);
        if (st == CT_OK) st = ml_read_columns(p, n, cols);
        nc = cols->n;
        if (st == CT_OK) st = cb_state_get_array(in, T, "column_counts", CT_I64, &nc, &p);
        for (int64_t c = 0; st == CT_OK && c < nc; c++)
            *(int64_t *)ct_table_at(cols, c) = ((const int64_t *)p)[c];
        n = nr * nc;
        if (st == CT_OK) st = cb_state_get_array(in, T, "values", CT_F64, &n, &p);
        m->values = (double *)p;
        if (st == CT_OK) st = cb_state_get_array(in, T, "present", CT_U8, &n, &p);
        m->present = (uint8_t *)p;
    }
    for (int64_t r = 0; st == CT_OK && r < nr; r++)
        if (m->row_cols[r] < 0 || m->row_cols[r] > nc)
            st = ct_error(CT_ERR_INVALID,
                          "MetricsLogger: state row %lld has %lld columns of %lld",
                          (long long)r, (long long)m->row_cols[r], (long long)nc);
    m->nr = nr;
    m->nc = nc;
    return st;
}

/* Rows from a checked state; false when out of memory (rows[0..) freed). */
static bool ml_make_rows(const MlState *m, LogRow *rows)
{
    for (int64_t r = 0; r < m->nr; r++) {
        int nc = (int)m->row_cols[r];
        rows[r] = (LogRow){m->epochs[r], nc, calloc((size_t)nc + 1, sizeof(double)),
                           calloc((size_t)nc + 1, sizeof(bool))};
        if (!rows[r].values || !rows[r].present) {
            for (int64_t k = 0; k <= r; k++) {
                free(rows[k].values);
                free(rows[k].present);
            }
            return false;
        }
        for (int c = 0; c < nc; c++) {
            rows[r].values[c] = m->values[r * m->nc + c];
            rows[r].present[c] = m->present[r * m->nc + c] != 0;
        }
    }
    return true;
}

static CtStatus ml_state_load(Callback *cb, Trainer *t, const CtStateDict *in)
{
    (void)t;
    MetricsLogger *l = (MetricsLogger *)cb;
    CtTable cols = CT_TABLE_INIT(int64_t);
    MlState m = {0};
    CtStatus st = ml_read_state(in, &cols, &m);
    LogRow *rows = st == CT_OK ? malloc((size_t)m.nr * sizeof *rows) : NULL;
    if (st == CT_OK && (!rows || !ml_make_rows(&m, rows)))
        st = ct_error(CT_ERR_OOM, "MetricsLogger: out of memory");
    if (st != CT_OK) {
        free(rows);
        ct_table_free(&cols);
        return st;
    }
    clear_rows(l);
    free(l->rows);
    ct_table_free(&l->cols);
    l->cols = cols;
    l->rows = rows;
    l->nrows = l->cap_rows = (int)m.nr;
    return CT_OK;
}

static const CallbackVtable metrics_logger_vt = {
    .type = "MetricsLogger",
    .state_save = ml_state_save,
    .state_load = ml_state_load,
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
