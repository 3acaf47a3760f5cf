/* Sharded loaders in the trainer and gather_for_metrics: the default loaders
 * take the runtime's rank and world size (world 1 here: no sharding), and
 * on a fake shard (rank 1 of 3, set through the dl-args hooks) the rows
 * trainer_gather_for_metrics keeps count every sample of the shard once.
 * Also runtime_gather_for_metrics's row dropping and errors. */
#include "trainer_testutil.h"

/* What the hooks saw, and the rows gathered per epoch. */
typedef struct Seen {
    int default_rank, default_world;
    int64_t train_rows, eval_rows, eval_batches;
    int64_t eval_index[16]; /* dataset indices of the gathered eval rows */
    int64_t eval_size[8];   /* batch_size of each eval batch output */
    double eval_loss[8];    /* and its loss */
} Seen;

static Seen seen;

static DataLoaderArgs fake_shard(DataLoaderArgs a)
{
    seen.default_rank = a.shard_rank;
    seen.default_world = a.shard_world_size;
    a.shard_rank = 1;
    a.shard_world_size = 3;
    return a;
}

static DataLoaderArgs shard_train_args(Trainer *t, int64_t bs)
{
    return fake_shard(trainer_default_get_default_train_dl_args(t, bs));
}

static DataLoaderArgs shard_eval_args(Trainer *t, int64_t bs)
{
    return fake_shard(trainer_default_get_default_eval_dl_args(t, bs));
}

/* Rows of x kept by trainer_gather_for_metrics, the gathered tensor's first
 * column into col[] when given. */
static int64_t gathered_rows(Trainer *t, Tensor *x, double *col)
{
    Tensor *g = trainer_gather_for_metrics(t, x);
    ck_assert_ptr_nonnull(g);
    int64_t rows = tensor_shape(g)[0];
    ck_assert_int_eq(tensor_shape(g)[1], tensor_shape(x)[1]);
    if (col && rows) {
        double v[32];
        ck_assert_int_le(tensor_numel(g), 32);
        tensor_copy_to_host(g, v, CT_F64);
        for (int64_t i = 0; i < rows; i++) col[i] = v[i * tensor_shape(g)[1]];
    }
    return rows;
}

static CtStatus count_train(Callback *cb, Trainer *t, const DataBatch *b,
                            const TrainerBatchOutput *o, int64_t step)
{
    (void)cb, (void)o, (void)step;
    seen.train_rows += gathered_rows(t, b->t[0], NULL);
    return CT_OK;
}

static CtStatus count_eval(Callback *cb, Trainer *t, const DataBatch *b,
                           const TrainerBatchOutput *o, int64_t step)
{
    (void)cb, (void)step;
    seen.eval_size[seen.eval_batches] = o->batch_size;
    seen.eval_loss[seen.eval_batches] = tensor_item(o->loss);
    double col[16];
    int64_t rows = gathered_rows(t, b->t[0], col);
    /* x_i0 = i / 10: back to dataset indices */
    for (int64_t i = 0; i < rows; i++)
        seen.eval_index[seen.eval_rows + i] = (int64_t)(col[i] * 10 + 0.5);
    seen.eval_rows += rows;
    seen.eval_batches++;
    return CT_OK;
}

static void counter_free(Callback *cb)
{
    free(cb);
}

static const CallbackVtable counter_vt = {
    .type = "Counter",
    .free = counter_free,
    .on_train_step_end = count_train,
    .on_eval_step_end = count_eval,
};

START_TEST(trainer_fake_shard_counts)
{
    TU_MEM_BEGIN;
    seen = (Seen){.default_rank = -1, .default_world = -1};
    CtGenerator g = ct_generator(7, 0);
    Module *model = nn_linear(2, 1, true, &g);
    Optimizer *opt = optim_sgd_create(model, &(SgdArgs){.lr = 0.01});
    NnLoss *loss = nn_loss_mse(CT_REDUCTION_MEAN);
    Callback *counter = calloc(1, sizeof *counter);
    counter->vt = &counter_vt;
    Trainer *t = trainer_create(&(TrainerConfig){
        .model = model,
        .loss = loss,
        .optimizer = opt,
        .callbacks = (Callback *[]){counter},
        .n_callbacks = 1,
        .hooks = {.get_default_train_dl_args = shard_train_args,
                  .get_default_eval_dl_args = shard_eval_args},
    });
    ck_assert_ptr_nonnull(t);
    Dataset *train = regression_dataset(7), *eval = regression_dataset(10);
    ck_assert_int_eq(trainer_train(t, &(TrainArgs){.train_dataset = train,
                                                   .eval_dataset = eval,
                                                   .num_epochs = 2,
                                                   .per_device_batch_size = 3}),
                     CT_OK);
    /* the defaults: this process's rank and world (one process) */
    ck_assert_int_eq(seen.default_rank, 0);
    ck_assert_int_eq(seen.default_world, 1);
    /* train: 7 samples over 3 ranks -> 9 positions; rank 1 holds positions
     * 1, 4, 7 (7 wraps around): one batch of 3, 2 real, per epoch */
    ck_assert_int_eq(trainer_train_dataloader_len(t), 1);
    ck_assert_int_eq(seen.train_rows, 2 * 2);
    /* eval: 10 samples -> 12 positions; rank 1 holds 1, 4, 7 and 10 (-> 0):
     * batches of 3 and 1, the second all padding */
    ck_assert_int_eq(trainer_eval_dataloader_len(t), 2);
    ck_assert_int_eq(seen.eval_batches, 2 * 2);
    ck_assert_int_eq(seen.eval_rows, 2 * 3);
    const int64_t want[6] = {1, 4, 7, 1, 4, 7};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(seen.eval_index[i], want[i]);
    /* the eval loss counts real rows only: the batch of padding counts 0,
     * so the epoch's eval loss is its first batch's */
    for (int i = 0; i < 4; i++) ck_assert_int_eq(seen.eval_size[i], i % 2 ? 0 : 3);
    ck_assert_double_eq_tol(run_history_latest(trainer_run_history(t), "eval_loss_epoch"),
                            seen.eval_loss[2], 1e-12);
    trainer_free(t);
    data_dataset_free(train);
    data_dataset_free(eval);
    optim_free(opt);
    nn_loss_free(loss);
    nn_module_free(model);
    TU_MEM_END;
}
END_TEST

static CtStatus no_rows_eval(Trainer *t, const DataBatch *b, TrainerBatchOutput *out)
{
    CtStatus st = trainer_default_calculate_eval_batch_loss(t, b, out);
    out->batch_size = 0;
    return st;
}

/* batch_size 0 is for a batch of padding only; on real rows it is an error */
START_TEST(trainer_eval_batch_size_zero_without_padding)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(7, 0);
    Module *model = nn_linear(2, 1, true, &g);
    Optimizer *opt = optim_sgd_create(model, &(SgdArgs){.lr = 0.01});
    NnLoss *loss = nn_loss_mse(CT_REDUCTION_MEAN);
    Trainer *t = trainer_create(
        &(TrainerConfig){.model = model,
                         .loss = loss,
                         .optimizer = opt,
                         .no_callbacks = true,
                         .hooks = {.calculate_eval_batch_loss = no_rows_eval}});
    ck_assert_ptr_nonnull(t);
    Dataset *eval = regression_dataset(4);
    ck_assert_int_eq(
        trainer_evaluate(t, &(EvalArgs){.dataset = eval, .per_device_batch_size = 2}),
        CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "calculate_eval_batch_loss gave batch_size 0 (must be > 0)");
    trainer_free(t);
    data_dataset_free(eval);
    optim_free(opt);
    nn_loss_free(loss);
    nn_module_free(model);
    TU_MEM_END;
}
END_TEST

START_TEST(runtime_gather_for_metrics_rows)
{
    TU_MEM_BEGIN;
    Runtime *rt = runtime_create(NULL);
    ck_assert_ptr_nonnull(rt);
    Tensor *x = tu_tensor(CT_F32, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6});
    CtScope *s = ct_scope_open(); /* the results belong to it */
    Tensor *g = runtime_gather_for_metrics(rt, x, 1);
    tu_assert_shape(g, 2, 2, 2);
    tu_assert_values(g, ((double[]){1, 2, 3, 4}), 4, 0, 0);
    tu_assert_values(runtime_gather_for_metrics(rt, x, 0), ((double[]){1, 2, 3, 4, 5, 6}),
                     6, 0, 0);
    tu_assert_shape(runtime_gather_for_metrics(rt, x, 3), 2, 0, 2);
    ck_assert_ptr_null(runtime_gather_for_metrics(rt, NULL, 0)); /* sticky */
    ck_assert_int_eq(ct_last_status(), CT_OK);
    ct_scope_close(s);

    ck_assert_ptr_null(runtime_gather_for_metrics(rt, x, 4));
    tu_assert_error(CT_ERR_INVALID, "4 padding rows outside [0, 3]");
    ck_assert_ptr_null(runtime_gather_for_metrics(rt, x, -1));
    tu_assert_error(CT_ERR_INVALID, "-1 padding rows outside [0, 3]");
    Tensor *scalar = tensor_scalar(1, CT_F32, ct_cpu());
    ck_assert_ptr_null(runtime_gather_for_metrics(rt, scalar, 0));
    tu_assert_error(CT_ERR_SHAPE, "a 0-d tensor has no rows");
    tensor_free(scalar);
    ck_assert_ptr_null(runtime_gather_for_metrics(NULL, x, 0));
    tu_assert_error(CT_ERR_NULL, "runtime_gather_for_metrics: NULL runtime");
    tensor_free(x);
    runtime_free(rt);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trainer_sharding");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, trainer_fake_shard_counts);
    tcase_add_test(tc, trainer_eval_batch_size_zero_without_padding);
    tcase_add_test(tc, runtime_gather_for_metrics_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
