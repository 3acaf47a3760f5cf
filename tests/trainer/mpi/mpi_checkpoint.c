/* Training-state checkpoints across processes (run under mpirun, except
 * for the one-process halves of the world-size checks):
 *
 *   mpi_checkpoint resume DIR      a run stopped in the middle of an epoch
 *                                  and resumed from its last checkpoint ends
 *                                  with the same bits as the uninterrupted run
 *                                  (parameters, optimizer state, history)
 *   mpi_checkpoint fault R DIR     rank R fails during the second save:
 *                                  every rank's trainer_train fails with
 *                                  rank R's error, `latest` still names the
 *                                  first checkpoint, which loads; exits 1
 *   mpi_checkpoint save DIR        trains 1 epoch, checkpoints into DIR
 *   mpi_checkpoint mismatch DIR    resumes DIR/latest: must fail on every
 *                                  rank with the world-size error
 *
 * Every rank checks its own results and prints "rank R: ok: ..." when they
 * hold; exit status 0 (1 for fault, whose run must fail) when every check
 * passed on this rank, else 2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctrainer/ctrainer.h"
#include "rank_expect.h"
#include "tests/trainer/trainer_testutil.h"
#include "tensor/mem.h"

enum { FEATURES = 3, HIDDEN = 16, B = 4, ROWS = 2 * B * 10, EPOCHS = 3 };

static Runtime *rt;
static int R, W, failures;

/* Row i: x = sin(0.7 i + j), y a smooth function of x. */
static Dataset *table(int64_t n, int64_t offset)
{
    float *x = malloc(sizeof(float) * (size_t)(n * FEATURES)),
          *y = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        for (int j = 0; j < FEATURES; j++)
            x[i * FEATURES + j] = (float)sin(0.7 * (double)(i + offset) + j);
        y[i] = 0.5f * x[i * FEATURES] - x[i * FEATURES + 1] * x[i * FEATURES + 2];
    }
    Tensor *tx = tensor_from_data(x, 2, (int64_t[]){n, FEATURES}, CT_F32, ct_cpu());
    Tensor *ty = tensor_from_data(y, 2, (int64_t[]){n, 1}, CT_F32, ct_cpu());
    free(x);
    free(y);
    Dataset *ds = data_tensor_dataset_create(2, (Tensor *[]){tx, ty});
    tensor_free(tx);
    tensor_free(ty);
    return ds;
}

/* On rank `rank`, makes the next tensor-layer allocation fail at the start
 * of the step after update `at` (before the Checkpoint callback saves). */
typedef struct Injector {
    Callback base;
    int64_t at;
    int rank;
} Injector;

static CtStatus injector_step_start(Callback *cb, Trainer *t)
{
    Injector *in = (Injector *)cb;
    if (R == in->rank && trainer_global_step(t) == in->at) ct_alloc_fail_at(1);
    return CT_OK;
}
static const CallbackVtable injector_vt = {.type = "Injector",
                                           .on_train_step_start = injector_step_start};

/* Linear, ReLU, Dropout (a different stream per rank), Linear; AdamW,
 * StepLR, the sharded default loaders (shuffled by seed 5). */
typedef struct Run {
    CtGenerator init, drop;
    Module *m;
    Optimizer *o;
    NnLoss *mse;
    Trainer *t;
    Dataset *train, *eval;
} Run;

static Scheduler *step_lr(Trainer *t, Optimizer *o, void *user)
{
    (void)t, (void)user;
    return scheduler_step_lr(o, 4, 0.8);
}

static void run_open(Run *r, int n_callbacks, Callback **callbacks)
{
    r->init = ct_generator(3, 0);
    r->drop = ct_generator(100 + (uint64_t)R, 1);
    r->m = nn_sequential(4, (Module *[]){nn_linear(FEATURES, HIDDEN, true, &r->init),
                                         nn_relu(), nn_dropout(0.2, &r->drop),
                                         nn_linear(HIDDEN, 1, true, &r->init)});
    r->o = optim_adamw_create(
        r->m,
        &(AdamArgs){
            .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01});
    r->mse = nn_loss_mse(CT_REDUCTION_MEAN);
    r->t = trainer_create(&(TrainerConfig){.model = r->m,
                                           .loss = r->mse,
                                           .optimizer = r->o,
                                           .runtime = rt,
                                           .callbacks = callbacks,
                                           .n_callbacks = n_callbacks});
    r->train = table(ROWS, 0);
    r->eval = table(2 * B * 3 + 2, 1000);
    EXPECT(r->t != NULL, "trainer_create: %s", ct_last_error());
}

static CtStatus run_train(Run *r, int64_t epochs, const char *resume, const char *dir)
{
    return trainer_train(
        r->t, &(TrainArgs){.train_dataset = r->train,
                           .eval_dataset = r->eval,
                           .num_epochs = epochs,
                           .per_device_batch_size = B,
                           .create_scheduler_fn = step_lr,
                           .train_dataloader_args = &(TrainerLoaderArgs){.seed = 5},
                           .resume_from = resume,
                           .checkpoint_dir = dir});
}

static void run_close(Run *r)
{
    trainer_free(r->t);
    nn_loss_free(r->mse);
    optim_free(r->o);
    nn_module_free(r->m);
    data_dataset_free(r->train);
    data_dataset_free(r->eval);
}

static Callback *checkpoint(const char *dir, int64_t every)
{
    return callback_checkpoint_create(
        &(CheckpointArgs){.dir = dir, .every_n_updates = every});
}

/* Rank 0 empties dir; the others wait. */
static void fresh_dir(const char *dir)
{
    if (R == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
        EXPECT(system(cmd) == 0, "cannot create %s", dir);
    }
    runtime_barrier(rt);
}

/* ------------------------------------------------------------ compare */

static bool same_tensor(Tensor *a, Tensor *b)
{
    return a && b && tensor_dtype(a) == tensor_dtype(b) &&
           tensor_numel(a) == tensor_numel(b) &&
           memcmp(tensor_data(a), tensor_data(b),
                  (size_t)tensor_numel(a) * ct_dtype_size(tensor_dtype(a))) == 0;
}

static void expect_same_dicts(const CtStateDict *a, const CtStateDict *b,
                              const char *what)
{
    EXPECT(ct_state_dict_size(a) == ct_state_dict_size(b), "%s: %lld vs %lld entries",
           what, (long long)ct_state_dict_size(a), (long long)ct_state_dict_size(b));
    for (int64_t i = 0; i < ct_state_dict_size(a); i++) {
        const char *name = ct_state_dict_name(a, i);
        EXPECT(same_tensor(ct_state_dict_tensor(a, i), ct_state_dict_get(b, name)),
               "%s: '%s' differs", what, name);
    }
}

static void expect_same_history(Trainer *a, Trainer *b, const char *metric)
{
    int64_t na = 0, nb = 0;
    const double *va = run_history_values(trainer_run_history(a), metric, &na);
    const double *vb = run_history_values(trainer_run_history(b), metric, &nb);
    EXPECT(na == EPOCHS && nb == na, "%s: %lld and %lld values", metric, (long long)na,
           (long long)nb);
    EXPECT(na == nb && va && vb && !memcmp(va, vb, sizeof *va * (size_t)na), "%s differs",
           metric);
}

/* b ended exactly as a: parameters, optimizer state, history, counters. */
static void expect_same_run(Run *a, Run *b)
{
    CtStateDict *pa = nn_module_state_dict(a->m), *pb = nn_module_state_dict(b->m);
    expect_same_dicts(pa, pb, "model");
    ct_state_dict_free(pa);
    ct_state_dict_free(pb);
    CtStateDict *oa = ct_state_dict_create(), *ob = ct_state_dict_create();
    EXPECT(optim_state_save(a->o, oa) == CT_OK && optim_state_save(b->o, ob) == CT_OK,
           "optim_state_save: %s", ct_last_error());
    expect_same_dicts(oa, ob, "optimizer");
    ct_state_dict_free(oa);
    ct_state_dict_free(ob);
    expect_same_history(a->t, b->t, "train_loss_epoch");
    expect_same_history(a->t, b->t, "eval_loss_epoch");
    EXPECT(trainer_global_step(a->t) == trainer_global_step(b->t),
           "global step %lld vs %lld", (long long)trainer_global_step(a->t),
           (long long)trainer_global_step(b->t));
}

/* The manifest of dir/name lists every rank's file and the world size. */
static void expect_manifest(const char *dir, const char *name)
{
    char path[1024], text[8192] = {0};
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL, "no %s", path);
    if (!f) return;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char want[64];
    snprintf(want, sizeof want, "\"world_size\": %d", W);
    EXPECT(strstr(text, want) != NULL, "%s: no %s", path, want);
    for (int r = 0; r < W; r++) {
        snprintf(want, sizeof want, "\"random_states_%d.safetensors\"", r);
        EXPECT(strstr(text, want) != NULL, "%s: no %s", path, want);
    }
}

/* -------------------------------------------------------------- modes */

static void resume(const char *dir)
{
    fresh_dir(dir);
    Run full = {0}, first = {0}, second = {0};
    run_open(&full, 1, (Callback *[]){stopper(-1)}); /* no default callbacks */
    EXPECT(run_train(&full, EPOCHS, NULL, NULL) == CT_OK, "full run: %s",
           ct_last_error());
    /* 10 updates an epoch: checkpoints at updates 4, 8 and 12 (the last in
     * the middle of epoch 2), then stopped at 14 (a stop inside a step is
     * not an exact position: no checkpoint at the end) */
    Callback *ck = callback_checkpoint_create(
        &(CheckpointArgs){.dir = dir, .every_n_updates = 4, .no_at_end = true});
    run_open(&first, 2, (Callback *[]){ck, stopper(14)});
    EXPECT(run_train(&first, EPOCHS, NULL, dir) == CT_OK, "first run: %s",
           ct_last_error());
    EXPECT(trainer_global_step(first.t) == 14, "stopped at update %lld",
           (long long)trainer_global_step(first.t));
    char *latest = trainer_latest_checkpoint(dir);
    EXPECT(latest && strstr(latest, "/checkpoint_2"), "latest %s", latest);
    free(latest);
    expect_manifest(dir, "checkpoint_2");
    run_open(&second, 1, (Callback *[]){checkpoint(dir, 4)});
    EXPECT(run_train(&second, EPOCHS, "latest", dir) == CT_OK, "resumed run: %s",
           ct_last_error());
    expect_same_run(&full, &second);
    if (!failures)
        printf(
            "rank %d: ok: resumed at update 12 with the same bits after %lld updates\n",
            R, (long long)trainer_global_step(full.t));
    run_close(&full);
    run_close(&first);
    run_close(&second);
}

/* True when dir holds an entry whose name contains part. */
static bool has_entry(const char *dir, const char *part)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q -- '%s'", dir, part);
    return system(cmd) == 0;
}

static int fault(int rank, const char *dir)
{
    fresh_dir(dir);
    Injector *in = calloc(1, sizeof *in);
    *in = (Injector){.base.vt = &injector_vt, .at = 6, .rank = rank};
    Run run = {0};
    run_open(&run, 2, (Callback *[]){&in->base, checkpoint(dir, 3)});
    CtStatus st = run_train(&run, EPOCHS, NULL, dir);
    ct_alloc_fail_at(0);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    char want[64];
    snprintf(want, sizeof want, "rank %d: ", rank);
    EXPECT(st != CT_OK, "the run went on after rank %d failed to save", rank);
    EXPECT(strstr(msg, "trainer_save_state") && strstr(msg, want),
           "the error does not name the save and rank %d: %s", rank, msg);
    EXPECT(trainer_global_step(run.t) == 6, "ended at update %lld",
           (long long)trainer_global_step(run.t));
    runtime_barrier(rt);
    char *latest = trainer_latest_checkpoint(dir);
    EXPECT(latest && strstr(latest, "/checkpoint_0"), "latest %s", latest);
    EXPECT(!has_entry(dir, "checkpoint_1") && !has_entry(dir, ".tmp-"),
           "the failed save left files in %s", dir);
    run_close(&run);
    /* the previous checkpoint is intact: every rank loads it */
    Run check = {0};
    run_open(&check, 0, NULL);
    CtStatus lst = latest ? trainer_load_state(check.t, latest) : CT_ERR_IO;
    EXPECT(lst == CT_OK, "loading %s: %s", latest, ct_last_error());
    free(latest);
    run_close(&check);
    if (!failures) printf("rank %d: ok: the save failed on every rank: %s\n", R, msg);
    return 1; /* what a program whose trainer_train failed returns */
}

static void save(const char *dir)
{
    fresh_dir(dir);
    Run run = {0};
    run_open(&run, 1, (Callback *[]){checkpoint(dir, 0)});
    EXPECT(run_train(&run, 1, NULL, dir) == CT_OK, "saving run: %s", ct_last_error());
    if (!failures) printf("rank %d: ok: saved with %d processes\n", R, W);
    run_close(&run);
}

static void mismatch(const char *dir)
{
    Run run = {0};
    run_open(&run, 0, NULL);
    CtStatus st = run_train(&run, 2, "latest", dir);
    char want[96];
    snprintf(want, sizeof want, "this run's is %d ", W);
    EXPECT(st == CT_ERR_INVALID && strstr(ct_last_error(), "saved with world size") &&
               strstr(ct_last_error(), want),
           "resume with another world size: status %d, '%s'", (int)st, ct_last_error());
    EXPECT(trainer_global_step(run.t) == 0, "trained %lld updates",
           (long long)trainer_global_step(run.t));
    if (!failures) printf("rank %d: ok: refused: %s\n", R, ct_last_error());
    run_close(&run);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[1] : "";
    rt = runtime_create(NULL);
    if (!rt) return runtime_abort(NULL, ct_last_status());
    R = runtime_rank(rt), W = runtime_world_size(rt);
    int ok_status = 0;
    if (!strcmp(mode, "resume"))
        resume(argv[2]);
    else if (!strcmp(mode, "fault") && argc > 3)
        ok_status = fault(atoi(argv[2]), argv[3]);
    else if (!strcmp(mode, "save"))
        save(argv[2]);
    else if (!strcmp(mode, "mismatch"))
        mismatch(argv[2]);
    else {
        fprintf(stderr, "usage: %s resume|save|mismatch DIR, or fault RANK DIR\n",
                argv[0]);
        failures++;
    }
    runtime_free(rt);
    return failures ? 2 : ok_status;
}
