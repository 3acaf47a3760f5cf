/* The CSV parser behind data_csv_dataset_create (and the CSV fuzz target):
 * numbers only, one label column, errors at path:line:column. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

typedef struct Field {
    const char *s; /* trimmed text, not NUL-terminated */
    size_t n;
    int64_t col; /* 1-based character column of the field's start */
} Field;

typedef struct Parser {
    const char *buf, *end, *p; /* p: start of the next line */
    const char *path;
    char delim;
    int64_t line;        /* 1-based number of the line last read */
    const char *ls, *le; /* the line last read, without its end */
    int64_t first_line;  /* the line that fixed the column count */
} Parser;

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* Reads the next non-blank line into ls/le; false at the end. */
static bool next_line(Parser *ps)
{
    while (ps->p < ps->end) {
        const char *s = ps->p, *e = memchr(s, '\n', (size_t)(ps->end - s));
        ps->p = e ? e + 1 : ps->end;
        if (!e) e = ps->end;
        ps->line++;
        if (e > s && e[-1] == '\r') e--;
        const char *q = s;
        while (q < e && is_space(*q)) q++;
        if (q == e) continue; /* blank */
        ps->ls = s;
        ps->le = e;
        return true;
    }
    return false;
}

/* Skips n physical lines (blank or not); false when the file has fewer. */
static bool skip_lines(Parser *ps, int64_t n)
{
    for (; n > 0; n--) {
        if (ps->p >= ps->end) return false;
        const char *e = memchr(ps->p, '\n', (size_t)(ps->end - ps->p));
        ps->p = e ? e + 1 : ps->end;
        ps->line++;
    }
    return true;
}

/* The field starting at *q (advanced past it and its delimiter). */
static Field next_field(const Parser *ps, const char **q)
{
    const char *s = *q, *e = s;
    while (e < ps->le && *e != ps->delim) e++;
    *q = e < ps->le ? e + 1 : NULL; /* NULL: no more fields on this line */
    Field f = {s, 0, (int64_t)(s - ps->ls) + 1};
    while (f.s < e && is_space(*f.s)) f.s++;
    while (e > f.s && is_space(e[-1])) e--;
    f.n = (size_t)(e - f.s);
    f.col = (int64_t)(f.s - ps->ls) + 1;
    return f;
}

/* Parses a whole field as a number. */
static bool parse_number(Field f, double *v)
{
    char tmp[128];
    if (f.n == 0 || f.n >= sizeof tmp) return false;
    memcpy(tmp, f.s, f.n);
    tmp[f.n] = 0;
    char *endp;
    *v = strtod(tmp, &endp);
    return endp == tmp + f.n;
}

static int64_t count_fields(const Parser *ps)
{
    int64_t n = 0;
    for (const char *q = ps->ls; q; n++) next_field(ps, &q);
    return n;
}

static bool line_is_numeric(const Parser *ps)
{
    double v;
    for (const char *q = ps->ls; q;)
        if (!parse_number(next_field(ps, &q), &v)) return false;
    return true;
}

/* Index of the header field equal to name (surrounding quotes ignored). */
static int64_t find_column(const Parser *ps, const char *name)
{
    size_t len = strlen(name);
    int64_t k = 0;
    for (const char *q = ps->ls; q; k++) {
        Field f = next_field(ps, &q);
        if (f.n >= 2 && (f.s[0] == '"' || f.s[0] == '\'') && f.s[f.n - 1] == f.s[0]) {
            f.s++;
            f.n -= 2;
        }
        if (f.n == len && !memcmp(f.s, name, len)) return k;
    }
    return -1;
}

static CtStatus err_at(const Parser *ps, int64_t col, const char *what, Field f)
{
    return ct_error(CT_ERR_FORMAT, "%s:%lld:%lld: %s '%.*s'", ps->path,
                    (long long)ps->line, (long long)col, what, (int)(f.n > 40 ? 40 : f.n),
                    f.s);
}

/* Grows the table to hold at least `rows` rows. */
static bool reserve(DataCsvTable *t, int64_t *cap, int64_t rows, bool regression)
{
    if (rows <= *cap) return true;
    int64_t nc = *cap ? *cap * 2 : 256;
    float *x = realloc(t->x, (size_t)(nc * (t->features ? t->features : 1)) * sizeof *x);
    if (!x) return false;
    t->x = x;
    if (regression) {
        float *y = realloc(t->y_f32, (size_t)nc * sizeof *y);
        if (!y) return false;
        t->y_f32 = y;
    } else {
        int64_t *y = realloc(t->y_i64, (size_t)nc * sizeof *y);
        if (!y) return false;
        t->y_i64 = y;
    }
    *cap = nc;
    return true;
}

/* Parses the current line as row r of t. */
static CtStatus parse_row(const Parser *ps, const DataCsvArgs *a, int64_t ncols,
                          int64_t label, DataCsvTable *t)
{
    int64_t r = t->rows, k = 0, j = 0;
    const char *q = ps->ls;
    for (; q && k < ncols; k++) {
        Field f = next_field(ps, &q);
        double v;
        if (!parse_number(f, &v))
            return err_at(ps, f.col, f.n ? "not a number:" : "empty field", f);
        if (k != label) {
            t->x[r * t->features + j++] = (float)v;
        } else if (a->regression) {
            t->y_f32[r] = (float)v;
        } else {
            if (!(v == floor(v) && fabs(v) < 9007199254740992.0))
                return err_at(ps, f.col, "label is not an integer:", f);
            if (a->num_classes > 0 && (v < 0 || v >= (double)a->num_classes)) {
                ct_error(CT_ERR_FORMAT,
                         "%s:%lld:%lld: label %.0f is out of range for %lld classes",
                         ps->path, (long long)ps->line, (long long)f.col, v,
                         (long long)a->num_classes);
                return CT_ERR_FORMAT;
            }
            t->y_i64[r] = (int64_t)v;
        }
    }
    if ((k < ncols || q) && t->rows == 0 && ps->line != ps->first_line)
        return ct_error(
            CT_ERR_FORMAT,
            "%s:%lld: line %lld has %lld fields, line %lld has %lld (a title or "
            "metadata line before the header? skip it with skip_rows)",
            ps->path, (long long)ps->line, (long long)ps->first_line, (long long)ncols,
            (long long)ps->line, (long long)count_fields(ps));
    if (k < ncols || q) {
        int64_t col = (int64_t)(ps->le - ps->ls) + 1;
        if (q) col = next_field(ps, &q).col;
        return ct_error(CT_ERR_FORMAT,
                        "%s:%lld:%lld: ragged row: %lld fields, expected %lld", ps->path,
                        (long long)ps->line, (long long)col, (long long)count_fields(ps),
                        (long long)ncols);
    }
    t->rows++;
    return CT_OK;
}

/* Decides on the header and the label column from the first line. */
static CtStatus parse_layout(Parser *ps, const DataCsvArgs *a, int64_t *ncols,
                             int64_t *label, bool *header)
{
    *ncols = count_fields(ps);
    ps->first_line = ps->line;
    *header = a->header == DATA_CSV_HEADER_YES ||
              (a->header == DATA_CSV_HEADER_AUTO && !line_is_numeric(ps));
    if (*ncols < 2)
        return ct_error(CT_ERR_FORMAT,
                        "%s:%lld: %lld column: needs a label and at least one feature",
                        ps->path, (long long)ps->line, (long long)*ncols);
    if (a->label_name) {
        if (!*header)
            return ct_error(CT_ERR_INVALID,
                            "%s: label column '%s' named, but the file has no header",
                            ps->path, a->label_name);
        *label = find_column(ps, a->label_name);
        if (*label < 0)
            return ct_error(CT_ERR_INVALID, "%s:%lld: no column named '%s' in the header",
                            ps->path, (long long)ps->line, a->label_name);
    } else {
        *label = a->label_column < 0 ? *ncols + a->label_column : a->label_column;
        if (*label < 0 || *label >= *ncols)
            return ct_error(CT_ERR_INVALID,
                            "%s: label column %d is out of range for %lld columns",
                            ps->path, a->label_column, (long long)*ncols);
    }
    return CT_OK;
}

void data_csv_table_free(DataCsvTable *t)
{
    if (!t) return;
    free(t->x);
    free(t->y_i64);
    free(t->y_f32);
    memset(t, 0, sizeof *t);
}

CtStatus data_csv_parse(const char *buf, size_t len, const DataCsvArgs *a,
                        DataCsvTable *out)
{
    memset(out, 0, sizeof *out);
    const char *path = a->path ? a->path : "<csv>";
    /* a UTF-8 byte order mark (spreadsheets export one) is not part of the
     * first field: left in, it turned a numeric first row into a header */
    if (len >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3)) buf += 3, len -= 3;
    Parser ps = {buf, buf + len, buf,  path, a->delimiter ? a->delimiter : ',',
                 0,   NULL,      NULL, 0};
    if (a->skip_rows < 0)
        return ct_error(CT_ERR_INVALID, "%s: skip_rows is %lld, must be >= 0", path,
                        (long long)a->skip_rows);
    if (!skip_lines(&ps, a->skip_rows))
        return ct_error(CT_ERR_FORMAT,
                        "%s: skip_rows %lld skips the whole file (%lld lines)", path,
                        (long long)a->skip_rows, (long long)ps.line);
    if (!next_line(&ps))
        return ct_error(CT_ERR_FORMAT, "%s: empty file: no data rows", path);
    int64_t ncols = 0, label = 0, cap = 0;
    bool header;
    CtStatus st = parse_layout(&ps, a, &ncols, &label, &header);
    if (st != CT_OK) return st;
    out->features = ncols - 1;
    bool more = header ? next_line(&ps) : true;
    while (more && st == CT_OK) {
        if (!reserve(out, &cap, out->rows + 1, a->regression))
            st = ct_error(CT_ERR_OOM, "%s:%lld: out of memory", path, (long long)ps.line);
        else
            st = parse_row(&ps, a, ncols, label, out);
        more = next_line(&ps);
    }
    if (st == CT_OK && out->rows == 0)
        st = ct_error(CT_ERR_FORMAT, "%s: no data rows after the header", path);
    if (st != CT_OK) data_csv_table_free(out);
    return st;
}
