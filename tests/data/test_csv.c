/* The CSV dataset: layouts, header detection, label options, and errors
 * naming path:line:column. Fixtures are written into a temporary directory. */
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/data.h"
#include "testutil.h"

static char tmpdir[64];
static char path[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ct_csv_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Writes text to tmpdir/name; returns the path (valid until the next call). */
static const char *fixture(const char *name, const char *text)
{
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Asserts sample i: features x[0..nf) and label y. */
static void assert_sample(const Dataset *d, int64_t i, const double *x, int nf, double y,
                          CtDType label_dt)
{
    CtScope *s = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(d, i, NULL, &smp), CT_OK);
    ck_assert_int_eq(smp.n, 2);
    ck_assert_int_eq(tensor_dtype(smp.t[0]), CT_F32);
    tu_assert_shape(smp.t[0], 1, nf);
    tu_assert_values(smp.t[0], x, nf, 0, 1e-7);
    ck_assert_int_eq(tensor_dtype(smp.t[1]), label_dt);
    ck_assert_int_eq(tensor_ndim(smp.t[1]), 0);
    tu_assert_values(smp.t[1], (&y), 1, 0, 1e-7);
    ct_scope_close(s);
}

START_TEST(test_header_auto_label_by_name)
{
    TU_MEM_BEGIN;
    const char *p = fixture("a.csv", "x1, label ,x2\n1.5,3,-2\n\n  0.25 , 1 , 1e3\r\n");
    Dataset *d =
        data_csv_dataset_create(&(DataCsvArgs){.path = p, .label_name = "label"});
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(data_dataset_len(d), 2);
    ck_assert_int_eq(data_csv_num_features(d), 2);
    assert_sample(d, 0, (double[]){1.5, -2}, 2, 3, CT_I64);
    assert_sample(d, 1, (double[]){0.25, 1000}, 2, 1, CT_I64);
    data_dataset_free(d);
    TU_MEM_END;
}
END_TEST

START_TEST(test_no_header_label_last_regression)
{
    TU_MEM_BEGIN;
    const char *p = fixture("b.csv", "1;2;0.5\n3;4;-1.25");
    Dataset *d = data_csv_dataset_create(&(DataCsvArgs){
        .path = p, .label_column = -1, .delimiter = ';', .regression = true});
    ck_assert_int_eq(data_dataset_len(d), 2);
    assert_sample(d, 0, (double[]){1, 2}, 2, 0.5, CT_F32);
    assert_sample(d, 1, (double[]){3, 4}, 2, -1.25, CT_F32);
    data_dataset_free(d);
    /* default: label is column 0; header NO keeps a numeric-looking first row */
    p = fixture("c.csv", "7,1,2\n8,3,4\n");
    d = data_csv_dataset_create(&(DataCsvArgs){.path = p, .header = DATA_CSV_HEADER_NO});
    assert_sample(d, 0, (double[]){1, 2}, 2, 7, CT_I64);
    assert_sample(d, 1, (double[]){3, 4}, 2, 8, CT_I64);
    data_dataset_free(d);
    /* header YES drops the first row even when it is numeric */
    d = data_csv_dataset_create(&(DataCsvArgs){.path = p, .header = DATA_CSV_HEADER_YES});
    ck_assert_int_eq(data_dataset_len(d), 1);
    assert_sample(d, 0, (double[]){3, 4}, 2, 8, CT_I64);
    data_dataset_free(d);
    TU_MEM_END;
}
END_TEST

static void csv_fails(const char *text, DataCsvArgs a, CtStatus st, const char *needle)
{
    a.path = fixture("bad.csv", text);
    ck_assert_ptr_null(data_csv_dataset_create(&a));
    char want[512];
    snprintf(want, sizeof want, "%s%s", needle[0] == ':' ? path : "", needle);
    tu_assert_error(st, want);
}

/* A UTF-8 byte order mark (Excel's "CSV UTF-8" writes one) is skipped, as
 * pandas.read_csv and Python's csv with encoding="utf-8-sig" do: it neither
 * turns a numeric first row into a header nor hides the first column name. */
START_TEST(test_utf8_bom)
{
    TU_MEM_BEGIN;
    const char *p = fixture("bom1.csv", "\xEF\xBB\xBF"
                                        "1,2,3\n0,5,6\n");
    Dataset *d = data_csv_dataset_create(&(DataCsvArgs){.path = p});
    ck_assert_msg(d != NULL, "%s", ct_last_error());
    ck_assert_int_eq(data_dataset_len(d), 2);
    assert_sample(d, 0, (double[]){2, 3}, 2, 1, CT_I64);
    data_dataset_free(d);
    p = fixture("bom2.csv", "\xEF\xBB\xBF"
                            "label,x\n1,2\n3,4\n");
    d = data_csv_dataset_create(&(DataCsvArgs){.path = p, .label_name = "label"});
    ck_assert_msg(d != NULL, "%s", ct_last_error());
    ck_assert_int_eq(data_dataset_len(d), 2);
    assert_sample(d, 1, (double[]){4}, 1, 3, CT_I64);
    data_dataset_free(d);
    p = fixture("bom3.csv", "\xEF\xBB\xBF"
                            "1,2\n3,4\n");
    d = data_csv_dataset_create(&(DataCsvArgs){.path = p, .header = DATA_CSV_HEADER_NO});
    ck_assert_msg(d != NULL, "%s", ct_last_error());
    assert_sample(d, 0, (double[]){2}, 1, 1, CT_I64);
    data_dataset_free(d);
    TU_MEM_END;
}
END_TEST

START_TEST(test_errors)
{
    TU_MEM_BEGIN;
    DataCsvArgs a = {0};
    csv_fails("a,b,c\n1,2,3\n4,5\n", a, CT_ERR_FORMAT,
              ":3:4: ragged row: 2 fields, expected 3");
    csv_fails("a,b,c\n1,2,3\n4,5,6,7\n", a, CT_ERR_FORMAT,
              ":3:7: ragged row: 4 fields, expected 3");
    csv_fails("150,4,name_a,name_b\n1,2,3,4,5\n", (DataCsvArgs){.label_column = -1},
              CT_ERR_FORMAT,
              ":2: line 1 has 4 fields, line 2 has 5 (a title or metadata line");
    csv_fails("\n\nx,y\n1,2\n", (DataCsvArgs){.skip_rows = 5}, CT_ERR_FORMAT,
              ": skip_rows 5 skips the whole file (4 lines)");
    csv_fails("x,y\n1,2\n", (DataCsvArgs){.skip_rows = -1}, CT_ERR_INVALID,
              ": skip_rows is -1, must be >= 0");
    csv_fails("a,b,c\n1,2,3\n4, x5 ,6\n", a, CT_ERR_FORMAT, ":3:4: not a number: 'x5'");
    csv_fails("1,2,3\n4,,6\n", a, CT_ERR_FORMAT, ":2:3: empty field");
    csv_fails("1.5,2,3\n", a, CT_ERR_FORMAT, ":1:1: label is not an integer: '1.5'");
    csv_fails("1,2\n12,3\n", (DataCsvArgs){.num_classes = 10}, CT_ERR_FORMAT,
              ":2:1: label 12 is out of range for 10 classes");
    csv_fails("", a, CT_ERR_FORMAT, ": empty file: no data rows");
    csv_fails("\n \n", a, CT_ERR_FORMAT, ": empty file: no data rows");
    csv_fails("a,b\n", a, CT_ERR_FORMAT, ": no data rows after the header");
    csv_fails("1\n2\n", a, CT_ERR_FORMAT, ":1: 1 column: needs a label and at least one");
    csv_fails("a,b\n1,2\n", (DataCsvArgs){.label_name = "y"}, CT_ERR_INVALID,
              ":1: no column named 'y' in the header");
    csv_fails("1,2\n", (DataCsvArgs){.label_name = "y"}, CT_ERR_INVALID,
              ": label column 'y' named, but the file has no header");
    csv_fails("1,2\n", (DataCsvArgs){.label_column = 2}, CT_ERR_INVALID,
              ": label column 2 is out of range for 2 columns");
    ck_assert_ptr_null(
        data_csv_dataset_create(&(DataCsvArgs){.path = "/nonexistent.csv"}));
    tu_assert_error(CT_ERR_IO, "/nonexistent.csv: cannot open");
    ck_assert_ptr_null(data_csv_dataset_create(NULL));
    tu_assert_error(CT_ERR_NULL, "no path given");
    TU_MEM_END;
}
END_TEST

/* skip_rows drops a metadata line (counted in later line numbers); a
 * gzip'd file reads like the plain one. */
START_TEST(test_skip_rows_and_gzip)
{
    TU_MEM_BEGIN;
    const char *p =
        fixture("m.csv", "3,2,setosa,versicolor\nf1,f2,y\n1,2,0\n3,4,1\n5,6,1\n");
    DataCsvArgs a = {.path = p, .skip_rows = 1, .label_name = "y", .num_classes = 2};
    Dataset *d = data_csv_dataset_create(&a);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(data_dataset_len(d), 3);
    assert_sample(d, 2, (double[]){5, 6}, 2, 1, CT_I64);
    data_dataset_free(d);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "gzip -k %s", p);
    ck_assert_int_eq(system(cmd), 0);
    char gz[300];
    snprintf(gz, sizeof gz, "%s.gz", p);
    a.path = gz;
    d = data_csv_dataset_create(&a);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(data_dataset_len(d), 3);
    assert_sample(d, 0, (double[]){1, 2}, 2, 0, CT_I64);
    assert_sample(d, 1, (double[]){3, 4}, 2, 1, CT_I64);
    data_dataset_free(d);
    /* line numbers count the skipped lines */
    fixture("m.csv", "# exported\nf1,y\n1,0\n2,x\n");
    a.path = p;
    ck_assert_ptr_null(data_csv_dataset_create(&a));
    char want[300];
    snprintf(want, sizeof want, "%s:4:3: not a number: 'x'", p);
    tu_assert_error(CT_ERR_FORMAT, want);
    TU_MEM_END;
}
END_TEST

START_TEST(test_loader_over_csv)
{
    TU_MEM_BEGIN;
    const char *p = fixture("l.csv", "f,y\n0,0\n1,1\n2,0\n3,1\n4,0\n");
    Dataset *d = data_csv_dataset_create(&(DataCsvArgs){.path = p, .label_name = "y"});
    DataLoader *dl = data_loader_create(d, &(DataLoaderArgs){.batch_size = 2});
    DataBatch b;
    ck_assert(data_loader_next(dl, &b));
    tu_assert_shape(b.t[0], 2, 2, 1);
    tu_assert_values(b.t[0], ((double[]){0, 1}), 2, 0, 0);
    tu_assert_values(b.t[1], ((double[]){0, 1}), 2, 0, 0);
    data_loader_free(dl);
    data_dataset_free(d);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("data_csv");
    TCase *tc = tcase_create("csv");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_header_auto_label_by_name);
    tcase_add_test(tc, test_no_header_label_last_regression);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_utf8_bom);
    tcase_add_test(tc, test_skip_rows_and_gzip);
    tcase_add_test(tc, test_loader_over_csv);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
