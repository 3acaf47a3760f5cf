/* libFuzzer target for loading training-state checkpoints
 * (trainer_load_state: the manifest, every file's SHA-256, the model,
 * optimizer, scheduler, loss scaler, trainer (counters, run history),
 * rank and callback files). A valid checkpoint of a short run is saved
 * once; each input replaces one of its files: the first byte picks which
 * (FILES[]), the rest is its content, and the manifest is given the
 * content's SHA-256 (unless the manifest itself is the file), so the
 * parsers behind the hash check are reached. Any checkpoint must load or
 * fail with an error and the model unchanged (all or nothing); one that
 * loads resumes in a run of two epochs. The scheduler, optimizer and
 * callback files also go to scheduler_state_load of several schedulers,
 * optim_state_load of the other optimizer types and
 * ckpt_apply_callback_state. Built with -DCTRAINER_FUZZ=ON and clang.
 * Run e.g.
 *   ./fuzz_checkpoint -max_total_time=20 corpus-dir tests/fuzz/corpus/checkpoint */
#define _GNU_SOURCE
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrainer/ctrainer.h"
#include "trainer/checkpoint_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
    F_MANIFEST,
    F_MODEL,
    F_OPTIM,
    F_SCHED,
    F_SCALER,
    F_TRAINER,
    F_RANK,
    F_CALLBACKS,
    NF
};
static const char *const FILES[NF] = {CKPT_MANIFEST,
                                      CKPT_MODEL,
                                      CKPT_OPTIMIZER,
                                      CKPT_SCHEDULER,
                                      CKPT_SCALER,
                                      CKPT_TRAINER,
                                      "random_states_0.safetensors",
                                      CKPT_CALLBACKS};

/* What every input starts from: the trainer of a one-epoch run, its saved
 * checkpoint (directory and file contents), and the scratch optimizers and
 * schedulers the single files also go to. */
static struct {
    char root[64], dir[96];
    char *content[NF];
    size_t len[NF];
    Trainer *t;
    Dataset *ds;
    Optimizer *sgd, *rmsprop;
    Scheduler *sched[6];
    int nsched;
} fx;

static void check(bool ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_checkpoint setup: %s: %s\n", what, ct_last_error());
    __builtin_trap();
}

static void write_file(const char *name, const void *p, size_t n)
{
    char *path = ckpt_join(fx.dir, name);
    FILE *f = path ? fopen(path, "wb") : NULL;
    check(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, name);
    free(path);
}

static void remove_all(void)
{
    ckpt_remove_tree(fx.root);
}

static double lambda_half(int64_t step, void *ctx)
{
    (void)ctx;
    return 1.0 / (1.0 + (double)step);
}

static Scheduler *make_sched(Trainer *t, Optimizer *o, void *user)
{
    (void)t, (void)user;
    return scheduler_step_lr(o, 2, 0.5);
}

/* A run of `epochs` epochs of 2 batches (resuming a loaded checkpoint). */
static CtStatus train(int64_t epochs)
{
    return trainer_train(fx.t, &(TrainArgs){.train_dataset = fx.ds,
                                            .num_epochs = epochs,
                                            .per_device_batch_size = 4,
                                            .create_scheduler_fn = make_sched});
}

static void setup(void)
{
    snprintf(fx.root, sizeof fx.root, "/dev/shm/ct_fuzz_ckpt_XXXXXX");
    if (!mkdtemp(fx.root)) {
        snprintf(fx.root, sizeof fx.root, "/tmp/ct_fuzz_ckpt_XXXXXX");
        check(mkdtemp(fx.root) != NULL, "mkdtemp");
    }
    snprintf(fx.dir, sizeof fx.dir, "%s/state", fx.root);
    atexit(remove_all);

    /* Linear 3-2 with dropout (a generator to save), AdamW, a loss scaler,
     * EarlyStopping (callback state), a StepLR scheduler; 8 samples */
    static CtGenerator init, drop;
    init = ct_generator(1, 0);
    drop = ct_generator(2, 1);
    Module *model = nn_sequential(
        2, (Module *[]){nn_linear(3, 2, true, &init), nn_dropout(0.25, &drop)});
    check(model != NULL, "model");
    Optimizer *opt = optim_adamw_create(
        model, &(AdamArgs){.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
    check(opt != NULL, "optimizer");
    Callback *cbs[1] = {callback_early_stopping_create(
        &(EarlyStoppingArgs){.watch_metric = "train_loss_epoch"})};
    fx.t = trainer_create(&(TrainerConfig){.model = model,
                                           .loss = nn_loss_mse(CT_REDUCTION_MEAN),
                                           .optimizer = opt,
                                           .callbacks = cbs,
                                           .n_callbacks = 1,
                                           .scaler = scaler_create(NULL)});
    check(fx.t != NULL, "trainer");
    float xs[8 * 3], ys[8 * 2];
    for (int i = 0; i < 8 * 3; i++) xs[i] = (float)((i * 7) % 5) - 2;
    for (int i = 0; i < 8 * 2; i++) ys[i] = (float)(i % 3);
    CtScope *sc = ct_scope_open();
    Tensor *x = tensor_from_data(xs, 2, (int64_t[]){8, 3}, CT_F32, ct_cpu());
    Tensor *y = tensor_from_data(ys, 2, (int64_t[]){8, 2}, CT_F32, ct_cpu());
    Dataset *ds = data_tensor_dataset_create(2, (Tensor *[]){x, y});
    ct_scope_close(sc);
    check(ds != NULL, "dataset");
    fx.ds = ds;
    check(train(1) == CT_OK, "train");
    check(trainer_save_state(fx.t, fx.dir) == CT_OK, "save");
    for (int i = 0; i < NF; i++) {
        char *path = ckpt_join(fx.dir, FILES[i]);
        check(path && ckpt_read_file(path, &fx.content[i], &fx.len[i]) == CT_OK,
              FILES[i]);
        free(path);
    }

    /* the other optimizer types, and schedulers of every kind with a
     * state of their own (on a scratch optimizer: they set its LRs) */
    fx.sgd =
        optim_sgd_create(model, &(SgdArgs){.lr = 0.1, .momentum = 0.9, .nesterov = true});
    fx.rmsprop = optim_rmsprop_create(
        model,
        &(RmspropArgs){
            .lr = 0.01, .alpha = 0.99, .eps = 1e-8, .momentum = 0.5, .centered = true});
    check(fx.sgd && fx.rmsprop, "optimizers");
    Optimizer *o = fx.sgd;
    Scheduler *s[] = {
        scheduler_multistep_lr(o, 2, (int64_t[]){2, 5}, 0.5),
        scheduler_cosine_annealing_lr(o, 10, 0.001),
        scheduler_one_cycle_lr(o, &(OneCycleArgs){.max_lr = 0.1, .total_steps = 20}),
        scheduler_cosine_warmup(o, &(CosineWarmupArgs){.total_steps = 20,
                                                       .warmup_steps = 3,
                                                       .cooldown_steps = 2}),
        scheduler_lambda_lr(o, lambda_half, NULL),
        scheduler_sequential_lr(o, 2,
                                (Scheduler *[]){scheduler_linear_lr(o, 0.5, 1.0, 4),
                                                scheduler_exponential_lr(o, 0.9)},
                                (int64_t[]){4}),
    };
    for (int i = 0; i < 6; i++) check(s[i] != NULL, "scheduler");
    memcpy(fx.sched, s, sizeof s);
    fx.nsched = 6;
}

/* The manifest of the saved checkpoint with file `name` given the SHA-256
 * of its current content. */
static void write_manifest_for(const char *name)
{
    char *path = ckpt_join(fx.dir, name), hex[65];
    check(path && ckpt_sha256_file(path, hex) == CT_OK, "sha256");
    free(path);
    json_t *root = json_loadb(fx.content[F_MANIFEST], fx.len[F_MANIFEST], 0, NULL);
    json_t *files = json_object_get(root, "files");
    check(json_object_set_new(files, name, json_pack("{s:s}", "sha256", hex)) == 0,
          "manifest");
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    check(text != NULL, "manifest");
    write_file(CKPT_MANIFEST, text, strlen(text));
    free(text);
    json_decref(root);
}

/* The model's parameters and buffers, as bytes (malloc'd). */
static uint8_t *model_bytes(size_t *n)
{
    CtStateDict *d = nn_module_state_dict(fx.t->model);
    size_t total = 0;
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        Tensor *x = ct_state_dict_tensor(d, i);
        total += (size_t)tensor_numel(x) * ct_dtype_size(tensor_dtype(x));
    }
    uint8_t *p = malloc(total ? total : 1);
    size_t k = 0;
    for (int64_t i = 0; p && i < ct_state_dict_size(d); i++) {
        Tensor *x = ct_state_dict_tensor(d, i);
        size_t m = (size_t)tensor_numel(x) * ct_dtype_size(tensor_dtype(x));
        memcpy(p + k, tensor_data(x), m);
        k += m;
    }
    ct_state_dict_free(d);
    *n = total;
    return p;
}

/* The single file, as a dict, into the other loaders. */
static void load_single(int which)
{
    if (which != F_SCHED && which != F_OPTIM && which != F_CALLBACKS) return;
    char *path = ckpt_join(fx.dir, FILES[which]);
    CtStateDict *d = path ? nn_safetensors_load(path, ct_cpu()) : NULL;
    free(path);
    if (!d) {
        ct_clear_error();
        return;
    }
    if (which == F_SCHED) {
        for (int i = 0; i < fx.nsched; i++) {
            if (scheduler_state_load(fx.sched[i], d) != CT_OK &&
                ct_last_status() == CT_OK)
                __builtin_trap();
            ct_clear_error();
        }
    } else if (which == F_OPTIM) {
        if (optim_state_load(fx.sgd, d) != CT_OK && ct_last_status() == CT_OK)
            __builtin_trap();
        ct_clear_error();
        if (optim_state_load(fx.rmsprop, d) != CT_OK && ct_last_status() == CT_OK)
            __builtin_trap();
        ct_clear_error();
    } else {
        if (ckpt_apply_callback_state(fx.t, d) != CT_OK && ct_last_status() == CT_OK)
            __builtin_trap();
        ct_clear_error();
    }
    ct_state_dict_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    if (!fx.t) setup();
    int which = data[0] % NF;
    write_file(FILES[which], data + 1, size - 1);
    if (which != F_MANIFEST) write_manifest_for(FILES[which]);

    size_t n0, n1;
    uint8_t *before = model_bytes(&n0);
    CtStatus st = trainer_load_state(fx.t, fx.dir);
    if (st != CT_OK) {
        if (ct_last_status() != st || !*ct_last_error()) __builtin_trap();
        /* all or nothing: a failed load leaves the model as it was */
        uint8_t *after = model_bytes(&n1);
        if (n0 != n1 || memcmp(before, after, n0) != 0) __builtin_trap();
        free(after);
    }
    free(before);
    ct_clear_error();
    /* a loaded checkpoint resumes in the next run: its scheduler and
     * callback states, its position in the epochs */
    if (st == CT_OK && train(2) != CT_OK && ct_last_status() == CT_OK) __builtin_trap();
    ct_clear_error();
    load_single(which);

    /* back to the saved checkpoint */
    write_file(FILES[which], fx.content[which], fx.len[which]);
    if (which != F_MANIFEST)
        write_file(CKPT_MANIFEST, fx.content[F_MANIFEST], fx.len[F_MANIFEST]);
    return 0;
}
