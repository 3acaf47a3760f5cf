/* tools/kprof's table: per-name sums, order, the time window, many names
 * (the hash table growing), and the summary's format. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tools/kprof/kprof_table.h"

/* The summary of t over window as a string (caller frees). */
static char *summary(const KprofTable *t, uint64_t window)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(kprof_table_write(t, window, f), 0);
    fclose(f);
    return buf;
}

START_TEST(test_sums_and_order)
{
    KprofTable *t = kprof_table_new();
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(kprof_table_add(t, "gemm", 0, 3000000), 0); /* 3 ms */
    ck_assert_int_eq(kprof_table_add(t, "relu", 3000000, 3500000), 0);
    ck_assert_int_eq(kprof_table_add(t, "gemm", 4000000, 5000000), 0);
    ck_assert_int_eq(kprof_table_add(t, "[memset]", 5000000, 5500000), 0);
    char *s = summary(t, 0); /* ties in the order first seen */
    const char *want = "# 4 records over 5.500 ms, summed time 5.000 ms\n"
                       "#          ms       %    calls  name\n"
                       "        4.000   80.00        2  gemm\n"
                       "        0.500   10.00        1  relu\n"
                       "        0.500   10.00        1  [memset]\n";
    ck_assert_str_eq(s, want);
    free(s);
    /* the last 2 ms: the second gemm and the memset */
    s = summary(t, 2000000);
    ck_assert_ptr_nonnull(strstr(s, "# 2 records over 1.500 ms, summed time 1.500 ms\n"));
    ck_assert_ptr_null(strstr(s, "relu"));
    ck_assert_ptr_nonnull(strstr(s, "1.000   66.67        1  gemm"));
    free(s);
    kprof_table_free(t);
}
END_TEST

START_TEST(test_many_names)
{
    KprofTable *t = kprof_table_new();
    char name[32];
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 1000; i++) {
            snprintf(name, sizeof name, "kernel_%d", i);
            ck_assert_int_eq(kprof_table_add(t, name, 0, (uint64_t)(i + 1) * 1000), 0);
        }
    char *s = summary(t, 0);
    ck_assert_ptr_nonnull(strstr(s, "# 3000 records"));
    /* the largest first: kernel_999, 3 calls of 1 ms */
    ck_assert_ptr_nonnull(strstr(s, "name\n        3.000 "));
    ck_assert_ptr_nonnull(strstr(s, "3  kernel_999\n"));
    int lines = 0;
    for (const char *p = s; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 2 + 1000);
    free(s);
    kprof_table_free(t);
}
END_TEST

START_TEST(test_empty)
{
    KprofTable *t = kprof_table_new();
    char *s = summary(t, 1000);
    ck_assert_str_eq(s, "# 0 records over 0.000 ms, summed time 0.000 ms\n"
                        "#          ms       %    calls  name\n");
    free(s);
    kprof_table_free(t);
    kprof_table_free(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kprof_table");
    TCase *tc = tcase_create("kprof_table");
    tcase_add_test(tc, test_sums_and_order);
    tcase_add_test(tc, test_many_names);
    tcase_add_test(tc, test_empty);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
