/* The TensorBoard callback: CRC-32C and record framing checked byte by
 * byte, bad arguments and unwritable directories. (tests/tensorboard reads
 * a whole run back with TensorBoard's own reader.) */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callbacks/tb_event.h"
#include "ctrainer/callbacks.h"
#include "testutil.h"

START_TEST(test_crc32c)
{
    /* the CRC-32C check value, and RFC 3720's 32 zero bytes */
    ck_assert_uint_eq(tb_crc32c("123456789", 9), 0xe3069283u);
    uint8_t zeros[32] = {0};
    ck_assert_uint_eq(tb_crc32c(zeros, 32), 0x8a9136aau);
    ck_assert_uint_eq(tb_mask_crc(0), 0xa282ead8u);
    ck_assert_uint_eq(tb_mask_crc(0x00008000u), 0xa282ead8u + 1u);
}
END_TEST

/* A scalar event, framed: length, masked CRC of the length, the Event
 * message, masked CRC of the message. */
START_TEST(test_scalar_record_bytes)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(tb_write_scalar(f, 2.0, 300, "a/b", 0.5f), CT_OK);
    fclose(f);
    const uint8_t want_msg[] = {0x09, 0,    0,    0,    0,
                                0,    0,    0,    0x40,        /* wall_time 2.0 */
                                0x10, 0xac, 0x02,              /* step 300 */
                                0x2a, 0x0c, 0x0a, 0x0a,        /* summary { value { */
                                0x0a, 0x03, 'a',  '/',  'b',   /* tag "a/b" */
                                0x15, 0,    0,    0,    0x3f}; /* simple_value 0.5 } } */
    size_t n = sizeof want_msg;
    ck_assert_uint_eq(len, 12 + n + 4);
    uint64_t rec_len;
    uint32_t crc;
    memcpy(&rec_len, buf, 8);
    ck_assert_uint_eq(rec_len, n);
    memcpy(&crc, buf + 8, 4);
    ck_assert_uint_eq(crc, tb_mask_crc(tb_crc32c(buf, 8)));
    ck_assert_int_eq(memcmp(buf + 12, want_msg, n), 0);
    memcpy(&crc, buf + 12 + n, 4);
    ck_assert_uint_eq(crc, tb_mask_crc(tb_crc32c(want_msg, n)));
    free(buf);
    char tag[1100];
    memset(tag, 'x', sizeof tag - 1);
    tag[sizeof tag - 1] = 0;
    ck_assert_int_eq(tb_write_scalar(stdout, 0, 0, tag, 0), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "is over 1000 bytes");
}
END_TEST

START_TEST(test_bad_args)
{
    ck_assert_ptr_null(callback_tensorboard_create(NULL));
    tu_assert_error(CT_ERR_INVALID, "TensorBoard: log_dir is required");
    ck_assert_ptr_null(callback_tensorboard_create(
        &(TensorBoardArgs){.log_dir = "/tmp/x", .log_every_n_steps = -2}));
    tu_assert_error(CT_ERR_INVALID, "log_every_n_steps must be >= 0 (got -2)");
    Callback *cb = callback_tensorboard_create(&(TensorBoardArgs){.log_dir = "/tmp/x"});
    ck_assert_ptr_nonnull(cb);
    ck_assert_ptr_null(callback_tensorboard_path(cb)); /* nothing written before a run */
    ck_assert_ptr_null(callback_tensorboard_path(NULL));
    callback_free(cb);
}
END_TEST

/* A log_dir under a regular file: the run fails with the directory named. */
START_TEST(test_unwritable_dir)
{
    TU_MEM_BEGIN;
    char dir[64], file[96], logs[128];
    tu_make_temp_dir(dir, sizeof dir, "ct_tb");
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(logs, sizeof logs, "%s/logs", file);
    CtGenerator g = ct_generator(1, 0);
    Module *m = nn_linear(1, 1, true, &g);
    Optimizer *o = optim_sgd_create(m, &(SgdArgs){.lr = 0.1});
    NnLoss *loss = nn_loss_mse(CT_REDUCTION_MEAN);
    Tensor *x = tu_tensor(CT_F32, 2, (int64_t[]){2, 1}, (double[]){1, 2});
    Dataset *d = data_tensor_dataset_create(2, (Tensor *[]){x, x});
    Callback *cbs[] = {callback_tensorboard_create(&(TensorBoardArgs){.log_dir = logs})};
    Trainer *t = trainer_create(&(TrainerConfig){
        .model = m, .loss = loss, .optimizer = o, .callbacks = cbs, .n_callbacks = 1});
    ck_assert_ptr_nonnull(t);
    CtStatus st = trainer_train(
        t, &(TrainArgs){.train_dataset = d, .num_epochs = 1, .per_device_batch_size = 2});
    ck_assert_int_eq(st, CT_ERR_IO);
    char want[160];
    snprintf(want, sizeof want, "TensorBoard: cannot create directory %s", file);
    tu_assert_error(CT_ERR_IO, want);
    trainer_free(t);
    data_dataset_free(d);
    tensor_free(x);
    nn_loss_free(loss);
    optim_free(o);
    nn_module_free(m);
    tu_remove_dir(dir);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("callbacks_tensorboard");
    TCase *tc = tcase_create("tensorboard");
    tcase_add_test(tc, test_crc32c);
    tcase_add_test(tc, test_scalar_record_bytes);
    tcase_add_test(tc, test_bad_args);
    tcase_add_test(tc, test_unwritable_dir);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
