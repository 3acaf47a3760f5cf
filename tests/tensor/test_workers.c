/* The GEMM/conv engine pool (tensor/cpu/workers.h): every item runs once,
 * slots stay below the thread count, nested and concurrent calls complete,
 * a pool whose threads get no core steps aside. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "tensor/cpu/workers.h"
#include "testutil.h"

#define N 1000

typedef struct Count {
    atomic_int hits[N];
    atomic_int bad_slot;
    int nt;
    atomic_int order_breaks; /* items seen out of order (inline runs) */
    atomic_int last;
} Count;

static void count_item(void *ctx, int64_t i, int slot)
{
    Count *c = ctx;
    atomic_fetch_add(&c->hits[i], 1);
    if (slot < 0 || slot >= c->nt) atomic_fetch_add(&c->bad_slot, 1);
    if (atomic_exchange(&c->last, (int)i) != (int)i - 1)
        atomic_fetch_add(&c->order_breaks, 1);
}

static void assert_once(Count *c, int n)
{
    for (int i = 0; i < n; i++) ck_assert_int_eq(atomic_load(&c->hits[i]), 1);
    for (int i = n; i < N; i++) ck_assert_int_eq(atomic_load(&c->hits[i]), 0);
    ck_assert_int_eq(atomic_load(&c->bad_slot), 0);
}

START_TEST(test_workers_each_item_once)
{
    for (int round = 0; round < 50; round++) {
        Count c = {.nt = 2, .last = -1};
        ct_workers_run(N, 2, count_item, &c);
        assert_once(&c, N);
    }
}
END_TEST

START_TEST(test_workers_inline_in_order)
{
    Count c = {.nt = 1, .last = -1};
    ct_workers_run(N, 1, count_item, &c);
    assert_once(&c, N);
    ck_assert_int_eq(atomic_load(&c.order_breaks), 0);
    Count z = {.nt = 2, .last = -1};
    ct_workers_run(0, 2, count_item, &z);
    ct_workers_run(-3, 2, count_item, &z);
    assert_once(&z, 0);
}
END_TEST

/* each outer item runs a whole inner job: inline, on its own thread */
typedef struct Nested {
    Count inner[8];
} Nested;

static void nested_item(void *ctx, int64_t i, int slot)
{
    (void)slot;
    Nested *n = ctx;
    ck_assert_int_eq(ct_workers_max(), 1);
    ct_workers_run(N, 2, count_item, &n->inner[i]);
}

START_TEST(test_workers_nested_runs_inline)
{
    Nested n = {0};
    for (int i = 0; i < 8; i++) n.inner[i] = (Count){.nt = 1, .last = -1};
    ct_workers_run(8, 2, nested_item, &n);
    for (int i = 0; i < 8; i++) {
        assert_once(&n.inner[i], N);
        ck_assert_int_eq(atomic_load(&n.inner[i].order_breaks), 0);
    }
}
END_TEST

static void *caller(void *arg)
{
    for (int round = 0; round < 20; round++) {
        Count *c = (Count *)arg + round;
        ct_workers_run(N, 2, count_item, c);
    }
    return NULL;
}

START_TEST(test_workers_concurrent_callers)
{
    static Count c[2][20];
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 20; r++) c[t][r] = (Count){.nt = 2, .last = -1};
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, caller, c[t]), 0);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 20; r++) assert_once(&c[t][r], N);
}
END_TEST

/* Items that sleep on pool threads, as on a machine whose other cores are
 * taken: every job is a miss (the caller waits for them, or runs every
 * item itself), so the pool soon steps aside, and the jobs run inline, on
 * the caller and in order, for CT_WORKERS_SKIP_JOBS calls. */
static void slow_on_pool(void *ctx, int64_t i, int slot)
{
    if (slot > 0) usleep(20000);
    count_item(ctx, i, slot);
}

START_TEST(test_workers_busy_cores_run_inline)
{
    /* earlier tests in this process may have left a skip running: let it
     * end, then miss until the pool steps aside */
    int jobs = 0;
    while (ct_workers_skipping() > 0 && jobs++ < 2 * CT_WORKERS_SKIP_JOBS) {
        Count c = {.nt = 2, .last = -1};
        ct_workers_run(64, 2, count_item, &c);
    }
    ck_assert_int_eq(ct_workers_skipping(), 0);
    for (jobs = 0; ct_workers_skipping() == 0 && jobs < 2 * CT_WORKERS_MISSES_OFF;
         jobs++) {
        Count c = {.nt = 2, .last = -1};
        ct_workers_run(64, 2, slow_on_pool, &c);
        assert_once(&c, 64);
    }
    ck_assert_int_le(jobs, CT_WORKERS_MISSES_OFF);
    ck_assert_int_eq(ct_workers_skipping(), CT_WORKERS_SKIP_JOBS);
    for (int j = 0; j < CT_WORKERS_SKIP_JOBS; j++) {
        Count c = {.nt = 1, .last = -1}; /* a pool slot counts as bad */
        ct_workers_run(64, 2, count_item, &c);
        assert_once(&c, 64);
        ck_assert_int_eq(atomic_load(&c.order_breaks), 0);
    }
    ck_assert_int_eq(ct_workers_skipping(), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("workers");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, test_workers_each_item_once);
    tcase_add_test(tc, test_workers_inline_in_order);
    tcase_add_test(tc, test_workers_nested_runs_inline);
    tcase_add_test(tc, test_workers_concurrent_callers);
    tcase_add_test(tc, test_workers_busy_cores_run_inline);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
