/* Atomic file writes (ctrainer/io.h): all or nothing, no temporary left. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrainer/io.h"
#include "testutil.h"

static char dir[] = "/tmp/ct_io_XXXXXX";

static void make_dir(void)
{
    tu_make_temp_dir(dir, sizeof dir, "ct_io");
}

static const char *in_dir(const char *name)
{
    static char p[300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Entries of the test directory besides . and .. */
static int dir_entries(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static const char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            const char *p = in_dir(e->d_name);
            if (rmdir(p) != 0) remove(p);
        }
    closedir(d);
    ck_assert_int_eq(rmdir(dir), 0);
}

START_TEST(test_write_and_replace)
{
    make_dir();
    const char *p = in_dir("a.txt");
    ck_assert_int_eq(ct_write_file_atomic(p, "first", 5), CT_OK);
    ck_assert_str_eq(slurp(p), "first");
    ck_assert_int_eq(ct_write_file_atomic(p, "second!", 7), CT_OK);
    ck_assert_str_eq(slurp(p), "second!");
    ck_assert_int_eq(ct_write_file_atomic(p, NULL, 0), CT_OK);
    ck_assert_str_eq(slurp(p), "");
    ck_assert_int_eq(dir_entries(), 1);
    remove_dir();
}
END_TEST

START_TEST(test_stream_commit)
{
    make_dir();
    const char *p = in_dir("s.txt");
    ck_assert_int_eq(ct_write_file_atomic(p, "old", 3), CT_OK);
    CtAtomicFile *af = ct_atomic_file_open(p);
    ck_assert_ptr_nonnull(af);
    fprintf(ct_atomic_file_stream(af), "%s-%d", "new", 42);
    ck_assert_str_eq(slurp(p), "old"); /* nothing visible before the commit */
    ck_assert_int_eq(dir_entries(), 2);
    ck_assert_int_eq(ct_atomic_file_commit(af), CT_OK);
    ck_assert_str_eq(slurp(p), "new-42");
    ck_assert_int_eq(dir_entries(), 1);
    remove_dir();
}
END_TEST

START_TEST(test_abort_keeps_old_file)
{
    make_dir();
    const char *p = in_dir("k.txt");
    ck_assert_int_eq(ct_write_file_atomic(p, "kept", 4), CT_OK);
    CtAtomicFile *af = ct_atomic_file_open(p);
    ck_assert_ptr_nonnull(af);
    fputs("half-writ", ct_atomic_file_stream(af));
    ct_atomic_file_abort(af);
    ck_assert_str_eq(slurp(p), "kept");
    ck_assert_int_eq(dir_entries(), 1);
    ct_atomic_file_abort(NULL); /* no-op */
    remove_dir();
}
END_TEST

START_TEST(test_unwritable_directory)
{
    make_dir();
    ck_assert_int_eq(ct_write_file_atomic("/nonexistent-ctrainer/x.bin", "x", 1),
                     CT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "No such file or directory"));
    tu_assert_error(CT_ERR_IO, "/nonexistent-ctrainer/x.bin: cannot create "
                               "/nonexistent-ctrainer/x.bin.tmp.");
    /* a "directory" that is a file */
    ck_assert_int_eq(ct_write_file_atomic(in_dir("f"), "f", 1), CT_OK);
    char p[320];
    snprintf(p, sizeof p, "%s/x.bin", in_dir("f"));
    ck_assert_ptr_null(ct_atomic_file_open(p));
    tu_assert_error(CT_ERR_IO, "Not a directory");
    ck_assert_int_eq(dir_entries(), 1);
    remove_dir();
}
END_TEST

/* The rename fails (the target is a directory): the target is untouched and
 * the temporary file is gone. */
START_TEST(test_failed_rename_leaves_target)
{
    make_dir();
    const char *p = in_dir("d");
    ck_assert_int_eq(mkdir(p, 0700), 0);
    ck_assert_int_eq(ct_write_file_atomic(in_dir("d/inner"), "in", 2), CT_OK);
    ck_assert_int_eq(ct_write_file_atomic(in_dir("d"), "data", 4), CT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ct_last_error(), "into place: Is a directory"));
    tu_assert_error(CT_ERR_IO, "/d: renaming ");
    ck_assert_str_eq(slurp(in_dir("d/inner")), "in");
    ck_assert_int_eq(dir_entries(), 1);
    ck_assert_int_eq(remove(in_dir("d/inner")), 0);
    remove_dir();
}
END_TEST

START_TEST(test_null_arguments)
{
    ck_assert_int_eq(ct_write_file_atomic(NULL, "x", 1), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "ct_write_file_atomic: NULL path");
    ck_assert_int_eq(ct_write_file_atomic("/tmp/ct_io_never", NULL, 3), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "ct_write_file_atomic: NULL data");
    ck_assert_int_eq(access("/tmp/ct_io_never", F_OK), -1);
    ck_assert_ptr_null(ct_atomic_file_open(NULL));
    tu_assert_error(CT_ERR_NULL, "ct_atomic_file_open: NULL path");
    ck_assert_int_eq(ct_atomic_file_commit(NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "ct_atomic_file_commit: NULL file");
    ck_assert_ptr_null(ct_atomic_file_stream(NULL));
}
END_TEST

static Suite *io_suite(void)
{
    Suite *s = suite_create("tensor_io");
    TCase *tc = tcase_create("atomic_write");
    tcase_add_test(tc, test_write_and_replace);
    tcase_add_test(tc, test_stream_commit);
    tcase_add_test(tc, test_abort_keeps_old_file);
    tcase_add_test(tc, test_unwritable_directory);
    tcase_add_test(tc, test_failed_rename_leaves_target);
    tcase_add_test(tc, test_null_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(io_suite());
}
