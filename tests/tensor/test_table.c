/* CtTable (ctrainer/table.h): order, lookup, growth, removal, errors. */
#include <stdio.h>
#include <string.h>

#include "ctrainer/table.h"
#include "testutil.h"

typedef struct Pair {
    int64_t a;
    double b;
} Pair;

START_TEST(test_add_find_in_order)
{
    CtTable t = CT_TABLE_INIT(Pair);
    ck_assert_int_eq(t.n, 0);
    ck_assert_ptr_null(ct_table_find(&t, "x"));
    ck_assert_int_eq(ct_table_index(&t, "x"), -1);
    /* past the first growth, so items move */
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        Pair *p = ct_table_add(&t, name);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(p->a, 0); /* zeroed */
        ck_assert(p->b == 0.0);
        *p = (Pair){i, i * 0.5};
    }
    ck_assert_int_eq(t.n, 20);
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        ck_assert_str_eq(ct_table_name(&t, i), name);
        ck_assert_int_eq(ct_table_index(&t, name), i);
        const Pair *p = ct_table_find(&t, name);
        ck_assert_ptr_eq(p, ct_table_at(&t, i));
        ck_assert_int_eq(p->a, i);
        ck_assert(p->b == i * 0.5);
    }
    ck_assert_ptr_null(ct_table_at(&t, 20));
    ck_assert_ptr_null(ct_table_at(&t, -1));
    ck_assert_ptr_null(ct_table_name(&t, 20));
    ck_assert_ptr_null(ct_table_find(&t, "m20"));
    ct_table_free(&t);
    ck_assert_int_eq(t.n, 0);
    ck_assert_uint_eq(t.item_size, sizeof(Pair));
    /* reusable after free */
    Pair *p = ct_table_add(&t, "again");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(ct_table_index(&t, "again"), 0);
    ct_table_free(&t);
}
END_TEST

START_TEST(test_names_are_copies)
{
    CtTable t = CT_TABLE_INIT(int);
    char name[8] = "loss";
    *(int *)ct_table_add(&t, name) = 7;
    strcpy(name, "acc");
    ck_assert_str_eq(ct_table_name(&t, 0), "loss");
    ck_assert_int_eq(*(int *)ct_table_find(&t, "loss"), 7);
    ck_assert_ptr_null(ct_table_find(&t, "acc"));
    ct_table_free(&t);
}
END_TEST

START_TEST(test_remove_keeps_order)
{
    CtTable t = CT_TABLE_INIT(int);
    const char *names[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) *(int *)ct_table_add(&t, names[i]) = 10 * i;
    ct_table_remove(&t, 1);
    ct_table_remove(&t, 7);  /* out of range: no-op */
    ct_table_remove(&t, -1); /* idem */
    ck_assert_int_eq(t.n, 3);
    ck_assert_str_eq(ct_table_name(&t, 0), "a");
    ck_assert_str_eq(ct_table_name(&t, 1), "c");
    ck_assert_str_eq(ct_table_name(&t, 2), "d");
    ck_assert_int_eq(*(int *)ct_table_at(&t, 1), 20);
    ck_assert_int_eq(*(int *)ct_table_at(&t, 2), 30);
    ck_assert_int_eq(ct_table_index(&t, "b"), -1);
    ct_table_remove(&t, 2); /* the last one */
    ck_assert_int_eq(t.n, 2);
    /* a removed name can be added again, at the end */
    ck_assert_ptr_nonnull(ct_table_add(&t, "b"));
    ck_assert_int_eq(ct_table_index(&t, "b"), 2);
    ct_table_free(&t);
}
END_TEST

START_TEST(test_bad_input)
{
    CtTable t = CT_TABLE_INIT(int);
    ck_assert_ptr_nonnull(ct_table_add(&t, "x"));
    ck_assert_ptr_null(ct_table_add(&t, "x"));
    tu_assert_error(CT_ERR_INVALID, "ct_table_add: duplicate name \"x\"");
    ck_assert_int_eq(t.n, 1);
    ck_assert_ptr_null(ct_table_add(&t, NULL));
    tu_assert_error(CT_ERR_NULL, "ct_table_add: NULL name");
    ck_assert_ptr_null(ct_table_add(NULL, "y"));
    tu_assert_error(CT_ERR_NULL, "ct_table_add: NULL table");
    ck_assert_int_eq(ct_table_index(NULL, "x"), -1);
    ck_assert_int_eq(ct_table_index(&t, NULL), -1);
    ck_assert_ptr_null(ct_table_find(NULL, "x"));
    ck_assert_ptr_null(ct_table_at(NULL, 0));
    ck_assert_ptr_null(ct_table_name(NULL, 0));
    ct_table_remove(NULL, 0);
    ct_table_free(NULL);
    ct_table_free(&t);
}
END_TEST

static Suite *table_suite(void)
{
    Suite *s = suite_create("tensor_table");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_add_find_in_order);
    tcase_add_test(tc, test_names_are_copies);
    tcase_add_test(tc, test_remove_keeps_order);
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(table_suite());
}
