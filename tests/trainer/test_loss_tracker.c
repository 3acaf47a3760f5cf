/* The trainer's running loss (trainer/loss_tracker.c): one op per step and
 * no host read until the total is asked for (or a log of LOG_SLOTS steps
 * is full); the total has the bits of a host-side f64 sum of loss *
 * batch_size in step order; trackers assigned from each other keep their
 * own steps. */
#include <string.h>

#include "testutil.h"
#include "trainer/trainer_internal.h"

enum { STEPS = 9000 }; /* over two logs' worth (4096 slots each) */

/* The loss of step i: an f32 value with all its bits in play. */
static float loss_at(int64_t i)
{
    return (float)(0.1 + 3.0 * (double)((i * 2654435761u) % 100003) / 100003.0);
}

static int64_t batch_at(int64_t i)
{
    return 1 + i % 37;
}

/* start + loss * batch_size over steps [0, n), as a host sum would. */
static double host_sum(double start, int64_t n)
{
    double t = start;
    for (int64_t i = 0; i < n; i++) {
        double w = (double)loss_at(i) * (double)batch_at(i);
        t += w;
    }
    return t;
}

static void add_step(LossTracker *lt, int64_t i)
{
    Tensor *l = tensor_full(0, NULL, loss_at(i), CT_F32, ct_cpu());
    ck_assert_int_eq(loss_tracker_add(lt, l, batch_at(i)), CT_OK);
}

static double total_of(const LossTracker *lt)
{
    double v;
    ck_assert_int_eq(loss_tracker_total(lt, &v), CT_OK);
    return v;
}

START_TEST(test_total_bits_ops_and_reads)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    LossTracker lt = {.total = 1.25, .count = 3};
    double count = 3;
    for (int64_t i = 0; i < STEPS; i++) {
        Tensor *l = tensor_full(0, NULL, loss_at(i), CT_F32, ct_cpu());
        uint64_t ops = ct_op_count(), reads = ct_host_sync_count();
        ck_assert_int_eq(loss_tracker_add(&lt, l, batch_at(i)), CT_OK);
        /* a full log is read back once (a copy), when the next step comes */
        bool full = i > 0 && i % 4096 == 0;
        ck_assert_msg(ct_op_count() - ops == (full ? 2u : 1u), "step %lld: %llu ops",
                      (long long)i, (unsigned long long)(ct_op_count() - ops));
        ck_assert_uint_eq(ct_host_sync_count() - reads, full ? 1 : 0);
        count += (double)batch_at(i);
        if (i % 1000 == 999 || i == 4096) {
            double want = host_sum(1.25, i + 1), got = total_of(&lt);
            ck_assert_msg(!memcmp(&want, &got, sizeof got), "step %lld: %.17g != %.17g",
                          (long long)i, got, want);
        }
    }
    ck_assert_double_eq(lt.count, count);
    double want = host_sum(1.25, STEPS), got = total_of(&lt);
    ck_assert(!memcmp(&want, &got, sizeof got));
    loss_tracker_reset(&lt);
    ck_assert_double_eq(total_of(&lt), 0);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* A snapshot (assign) keeps its steps while the original goes on; a
 * snapshot that goes on itself does not write over the original's. */
START_TEST(test_assigned_trackers_keep_their_steps)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    LossTracker a = {0}, b = {0}, c = {0};
    for (int64_t i = 0; i < 5; i++) add_step(&a, i);
    ck_assert_int_eq(loss_tracker_assign(&b, &a), CT_OK);
    ck_assert_int_eq(loss_tracker_assign(&b, &b), CT_OK);
    for (int64_t i = 5; i < 8; i++) add_step(&a, i);
    ck_assert_double_eq(total_of(&b), host_sum(0, 5));
    ck_assert_double_eq(total_of(&a), host_sum(0, 8));
    /* b goes on from step 5 with other losses: a's steps 5-7 stay */
    ck_assert_int_eq(loss_tracker_assign(&c, &b), CT_OK);
    Tensor *l = tensor_full(0, NULL, 1000.0, CT_F32, ct_cpu());
    ck_assert_int_eq(loss_tracker_add(&b, l, 2), CT_OK);
    ck_assert_double_eq(total_of(&b), host_sum(0, 5) + 2000.0);
    ck_assert_double_eq(total_of(&a), host_sum(0, 8));
    ck_assert_double_eq(total_of(&c), host_sum(0, 5));
    ck_assert_double_eq(b.count, c.count + 2);
    /* a released original leaves the snapshot whole */
    loss_tracker_reset(&a);
    ck_assert_double_eq(total_of(&c), host_sum(0, 5));
    loss_tracker_reset(&b);
    loss_tracker_reset(&c);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Any one-element loss: shape [1, 1], f64, and a loss that requires grad. */
START_TEST(test_loss_shapes_and_dtypes)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    LossTracker lt = {0};
    Tensor *a = tensor_full(2, (const int64_t[]){1, 1}, 0.5, CT_F32, ct_cpu());
    Tensor *b = tensor_full(1, (const int64_t[]){1}, 0.1, CT_F64, ct_cpu());
    Tensor *c = tensor_full(0, NULL, 2.0, CT_F32, ct_cpu());
    tensor_set_requires_grad(c, true);
    ck_assert_int_eq(loss_tracker_add(&lt, a, 4), CT_OK);
    ck_assert_int_eq(loss_tracker_add(&lt, b, 3), CT_OK);
    ck_assert_int_eq(loss_tracker_add(&lt, tensor_mul_scalar(c, 1.0), 1), CT_OK);
    double w = 0.1 * 3.0, want = 0.5 * 4.0;
    want += w;
    want += 2.0;
    ck_assert_double_eq(total_of(&lt), want);
    loss_tracker_reset(&lt);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loss_tracker");
    TCase *tc = tcase_create("loss_tracker");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_total_bits_ops_and_reads);
    tcase_add_test(tc, test_assigned_trackers_keep_their_steps);
    tcase_add_test(tc, test_loss_shapes_and_dtypes);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
