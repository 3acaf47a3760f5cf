/* trainer_load_state: all or nothing. The manifest and every file's SHA-256
 * are verified and every file parsed and checked against the trainer's
 * model and optimizer before anything changes; what is applied is
 * snapshotted first and put back should a later part fail. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

typedef struct Loaded {
    const char *dir;
    CtStateDict *model, *optimizer, *scheduler, *scaler, *trainer, *rank, *callbacks;
    char rank_file[64];
} Loaded;

static void loaded_free(Loaded *l)
{
    ct_state_dict_free(l->model);
    ct_state_dict_free(l->optimizer);
    ct_state_dict_free(l->scheduler);
    ct_state_dict_free(l->scaler);
    ct_state_dict_free(l->trainer);
    ct_state_dict_free(l->rank);
    ct_state_dict_free(l->callbacks);
}

/* The manifest's world size is this run's: the position and the random
 * states are per process. */
static CtStatus check_world_size(const char *mpath, json_t *root, int world)
{
    json_t *ws = json_object_get(root, "world_size");
    if (!json_is_integer(ws) || json_integer_value(ws) < 1)
        return ct_error(CT_ERR_FORMAT, "checkpoint %s: no valid world_size", mpath);
    if (json_integer_value(ws) != world)
        return ct_error(CT_ERR_INVALID,
                        "checkpoint %s: saved with world size %lld, this run's is %d "
                        "(resuming with another number of processes is not supported: "
                        "each process resumes its own random states and data shard)",
                        mpath, (long long)json_integer_value(ws), world);
    return CT_OK;
}

/* Checks the manifest's format, world size and every listed file's hash. */
static CtStatus verify_manifest(const char *dir, json_t *root, const char *mpath,
                                int world)
{
    const char *format = json_string_value(json_object_get(root, "format"));
    json_t *ver = json_object_get(root, "format_version");
    json_t *files = json_object_get(root, "files");
    if (!format || strcmp(format, CKPT_FORMAT) != 0 || !json_is_integer(ver) ||
        !json_is_object(files))
        return ct_error(CT_ERR_FORMAT,
                        "checkpoint %s: not a ctrainer checkpoint manifest (format, "
                        "format_version and files expected)",
                        mpath);
    if (json_integer_value(ver) != CKPT_FORMAT_VERSION)
        return ct_error(CT_ERR_FORMAT,
                        "checkpoint %s: format_version %lld, this library reads %d",
                        mpath, (long long)json_integer_value(ver), CKPT_FORMAT_VERSION);
    CtStatus wst = check_world_size(mpath, root, world);
    if (wst != CT_OK) return wst;
    const char *name;
    json_t *entry;
    json_object_foreach(files, name, entry)
    {
        const char *want = json_string_value(json_object_get(entry, "sha256"));
        if (!want || strlen(want) != 64 || strchr(name, '/') || name[0] == '.')
            return ct_error(CT_ERR_FORMAT, "checkpoint %s: bad entry for file '%s'",
                            mpath, name);
        char *path = ckpt_join(dir, name), hex[65];
        if (!path) return ct_last_status();
        CtStatus st =
            ckpt_exists(path)
                ? ckpt_sha256_file(path, hex)
                : ct_error(CT_ERR_IO, "checkpoint %s: file %s is missing", dir, path);
        if (st == CT_OK && strcmp(hex, want) != 0)
            st = ct_error(CT_ERR_FORMAT,
                          "checkpoint %s: file %s is corrupt (SHA-256 %.12s..., manifest "
                          "says %.12s...)",
                          dir, path, hex, want);
        free(path);
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

/* Loads dir/name when the manifest lists it; *d stays NULL otherwise (an
 * error when required). */
static CtStatus load_file(const char *dir, json_t *files, const char *name, bool required,
                          CtStateDict **d)
{
    if (!json_object_get(files, name))
        return required ? ct_error(CT_ERR_FORMAT,
                                   "checkpoint %s: the manifest lists no %s (incomplete "
                                   "checkpoint)",
                                   dir, name)
                        : CT_OK;
    char *path = ckpt_join(dir, name);
    if (!path) return ct_last_status();
    *d = nn_safetensors_load(path, ct_cpu());
    free(path);
    return *d ? CT_OK : ct_last_status();
}

static CtStatus read_all(Loaded *l, const char *dir, int world)
{
    char *mpath = ckpt_join(dir, CKPT_MANIFEST), *text = NULL;
    size_t n = 0;
    if (!mpath) return ct_last_status();
    CtStatus st = ckpt_exists(mpath)
                      ? ckpt_read_file(mpath, &text, &n)
                      : ct_error(CT_ERR_IO, "checkpoint %s: no manifest (%s is missing)",
                                 dir, mpath);
    json_error_t jerr;
    json_t *root = st == CT_OK ? json_loadb(text, n, 0, &jerr) : NULL;
    if (st == CT_OK && !root)
        st = ct_error(CT_ERR_FORMAT, "checkpoint %s: invalid JSON at line %d: %s", mpath,
                      jerr.line, jerr.text);
    if (st == CT_OK) st = verify_manifest(dir, root, mpath, world);
    json_t *files = root ? json_object_get(root, "files") : NULL;
    if (st == CT_OK) st = load_file(dir, files, CKPT_MODEL, true, &l->model);
    if (st == CT_OK) st = load_file(dir, files, CKPT_OPTIMIZER, true, &l->optimizer);
    if (st == CT_OK) st = load_file(dir, files, CKPT_SCHEDULER, false, &l->scheduler);
    if (st == CT_OK) st = load_file(dir, files, CKPT_SCALER, false, &l->scaler);
    if (st == CT_OK) st = load_file(dir, files, CKPT_TRAINER, true, &l->trainer);
    if (st == CT_OK) st = load_file(dir, files, l->rank_file, true, &l->rank);
    if (st == CT_OK) st = load_file(dir, files, CKPT_CALLBACKS, false, &l->callbacks);
    json_decref(root);
    free(text);
    free(mpath);
    return st;
}

static bool same_tensor_kind(const Tensor *a, const Tensor *b)
{
    if (tensor_dtype(a) != tensor_dtype(b) || tensor_ndim(a) != tensor_ndim(b))
        return false;
    for (int i = 0; i < tensor_ndim(a); i++)
        if (tensor_shape(a)[i] != tensor_shape(b)[i]) return false;
    return true;
}

/* The model file must hold exactly the model's names, shapes and dtypes. */
static CtStatus check_model(const Trainer *t, const Loaded *l)
{
    CtStateDict *own = nn_module_state_dict(t->model);
    if (!own) return ct_last_status();
    CtStatus st = CT_OK;
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(own); i++) {
        const char *name = ct_state_dict_name(own, i);
        Tensor *x = ct_state_dict_get(l->model, name);
        if (!x)
            st = ct_error(CT_ERR_INVALID,
                          "checkpoint %s: %s has no '%s' (the checkpoint is of another "
                          "model)",
                          l->dir, CKPT_MODEL, name);
        else if (!same_tensor_kind(x, ct_state_dict_tensor(own, i)))
            st = ct_error(CT_ERR_SHAPE,
                          "checkpoint %s: %s: '%s' differs in shape or dtype from the "
                          "model's (the checkpoint is of another model)",
                          l->dir, CKPT_MODEL, name);
    }
    if (st == CT_OK && ct_state_dict_size(own) != ct_state_dict_size(l->model))
        st =
            ct_error(CT_ERR_INVALID,
                     "checkpoint %s: %s has %lld entries, the model %lld (the checkpoint "
                     "is of another model)",
                     l->dir, CKPT_MODEL, (long long)ct_state_dict_size(l->model),
                     (long long)ct_state_dict_size(own));
    ct_state_dict_free(own);
    return st;
}

/* The optimizer type the file records (none before types were saved) is
 * the trainer's. */
static CtStatus check_optimizer_type(const Trainer *t, const Loaded *l)
{
    char type[32];
    CtStatus st = optim_state_type(l->optimizer, type, sizeof type);
    if (st != CT_OK)
        return ct_error_wrap(st, "checkpoint %s: %s", l->dir, CKPT_OPTIMIZER);
    if (*type && strcmp(type, optim_name(t->optimizer)) != 0)
        return ct_error(CT_ERR_INVALID,
                        "checkpoint %s: %s was saved by %s, the trainer's optimizer is "
                        "%s (mismatched optimizer)",
                        l->dir, CKPT_OPTIMIZER, type, optim_name(t->optimizer));
    return CT_OK;
}

/* The type and the group count; the options and buffers are checked by
 * optim_state_load, which apply() runs first, before anything changes. */
static CtStatus check_optimizer(const Trainer *t, const Loaded *l)
{
    CtStatus st = check_optimizer_type(t, l);
    if (st != CT_OK) return st;
    int groups = 0;
    char name[64];
    for (;; groups++) {
        snprintf(name, sizeof name, "param_groups.%d.params", groups);
        if (!ct_state_dict_get(l->optimizer, name)) break;
    }
    if (groups != optim_num_groups(t->optimizer))
        return ct_error(CT_ERR_INVALID,
                        "checkpoint %s: %s has %d parameter groups, the optimizer %d "
                        "(mismatched optimizer)",
                        l->dir, CKPT_OPTIMIZER, groups, optim_num_groups(t->optimizer));
    return CT_OK;
}

/* A scaler state exactly when the trainer has a scaler, and a valid one
 * (loaded into a scratch scaler). */
static CtStatus check_scaler(const Trainer *t, const Loaded *l)
{
    bool have = t->state->scaler != NULL;
    if (have != (l->scaler != NULL))
        return ct_error(CT_ERR_INVALID,
                        "checkpoint %s: %s (mismatched mixed precision: resume an fp16 "
                        "run as fp16, and a bf16 or f32 run without a loss scaler)",
                        l->dir,
                        have ? "the run has a loss scaler, the checkpoint no " CKPT_SCALER
                             : "it holds a loss scaler state (" CKPT_SCALER
                               "), the run has no loss scaler");
    if (!have) return CT_OK;
    GradScaler *scratch = scaler_create(NULL);
    CtStatus st =
        scratch ? scaler_state_load(scratch, l->scaler, NULL) : ct_last_status();
    scaler_free(scratch);
    return st == CT_OK ? st : ct_error_wrap(st, "checkpoint %s: %s", l->dir, CKPT_SCALER);
}

static CtStatus check_callbacks(Trainer *t, const Loaded *l)
{
    CallbackList *cl = trainer_callbacks(t);
    for (int64_t i = 0; l->callbacks && i < ct_state_dict_size(l->callbacks); i++) {
        const char *name = ct_state_dict_name(l->callbacks, i);
        const char *dot = strchr(name, '.');
        char type[256];
        snprintf(type, sizeof type, "%.*s", dot ? (int)(dot - name) : 0, name);
        Callback *cb = callback_list_find(cl, type);
        if (!cb || !cb->vt->state_load)
            return ct_error(CT_ERR_INVALID,
                            "checkpoint %s: %s holds state of callback '%s', which this "
                            "trainer %s",
                            l->dir, CKPT_CALLBACKS, type,
                            cb ? "cannot restore (no state_load)" : "does not have");
    }
    return CT_OK;
}

/* What apply() changes, to put back on failure. */
typedef struct Snapshot {
    CtStateDict *model, *optimizer, *scaler, *trainer, *rank;
    int64_t pos_epoch, pos_batch, history_epoch;
} Snapshot;

static CtStatus apply(Trainer *t, Loaded *l, int64_t epoch, int64_t batch, int64_t step)
{
    TrainerState *s = t->state;
    LossTracker lt;
    /* the optimizer first: optim_state_load checks everything (type,
     * options, buffers) before it changes anything */
    CtStatus st = optim_state_load(t->optimizer, l->optimizer);
    if (st == CT_OK) st = nn_module_load_state_dict(t->model, l->model, true, NULL);
    /* outside a run t->scheduler is the last run's: the next run makes a
     * new one, which gets the state then (resume_into_run) */
    Scheduler *sched = s->running ? t->scheduler : NULL;
    if (st == CT_OK && sched && l->scheduler)
        st = scheduler_state_load(sched, l->scheduler);
    if (st == CT_OK && s->scaler) st = scaler_state_load(s->scaler, l->scaler, NULL);
    if (st == CT_OK) st = ckpt_apply_rank_state(t, l->rank, &lt, l->rank_file);
    if (st == CT_OK) st = ckpt_apply_history(s->history, l->trainer, epoch);
    if (st != CT_OK) return ct_error_wrap(st, "checkpoint %s", l->dir);
    /* the scheduler state stays with the resume, applied or not: NULL
     * there means the checkpoint has none */
    s->resume = (TrainerResume){.pending = true,
                                .epoch = epoch,
                                .batch = batch,
                                .global_step = step,
                                .train_loss = lt,
                                .scheduler = l->scheduler,
                                .callbacks = l->callbacks,
                                .trainer = l->trainer};
    snprintf(s->resume.dir, sizeof s->resume.dir, "%s", l->dir);
    l->scheduler = l->callbacks = l->trainer = NULL; /* moved */
    s->pos_epoch = epoch;
    s->pos_batch = batch;
    loss_tracker_reset(&s->pos_loss);
    s->pos_loss = lt;
    return CT_OK;
}

static CtStatus take_snapshot(Trainer *t, Snapshot *sn)
{
    CtStateDict *live = nn_module_state_dict(t->model);
    sn->model = live ? ckpt_clone_dict(live) : NULL;
    ct_state_dict_free(live);
    live = ct_state_dict_create();
    if (live && optim_state_save(t->optimizer, live) == CT_OK)
        sn->optimizer = ckpt_clone_dict(live);
    ct_state_dict_free(live);
    sn->scaler = ct_state_dict_create();
    sn->trainer = ct_state_dict_create();
    sn->rank = ct_state_dict_create();
    GradScaler *sc = t->state->scaler;
    bool ok = sn->model && sn->optimizer && sn->scaler && sn->trainer && sn->rank &&
              (!sc || scaler_state_save(sc, sn->scaler, NULL) == CT_OK) &&
              ckpt_trainer_state(t, sn->trainer) == CT_OK &&
              ckpt_rank_state(t, sn->rank) == CT_OK;
    sn->pos_epoch = t->state->pos_epoch;
    sn->pos_batch = t->state->pos_batch;
    sn->history_epoch = run_history_current_epoch(t->state->history);
    return ok ? CT_OK : ct_error(CT_ERR_OOM, "trainer_load_state: out of memory");
}

/* Puts back what apply() changed, keeping the recorded error. */
static void restore_snapshot(Trainer *t, const Snapshot *sn)
{
    TrainerState *s = t->state;
    CtStatus err = ct_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    LossTracker lt;
    if (s->scaler) scaler_state_load(s->scaler, sn->scaler, NULL);
    nn_module_load_state_dict(t->model, sn->model, true, NULL);
    optim_state_load(t->optimizer, sn->optimizer);
    if (ckpt_apply_rank_state(t, sn->rank, &lt, "(snapshot)") == CT_OK) {
        loss_tracker_reset(&s->pos_loss);
        s->pos_loss = lt;
    }
    ckpt_apply_history(s->history, sn->trainer, sn->history_epoch);
    s->pos_epoch = sn->pos_epoch;
    s->pos_batch = sn->pos_batch;
    ct_error(err, "%s", msg);
}

static void snapshot_free(Snapshot *sn)
{
    ct_state_dict_free(sn->model);
    ct_state_dict_free(sn->optimizer);
    ct_state_dict_free(sn->scaler);
    ct_state_dict_free(sn->trainer);
    ct_state_dict_free(sn->rank);
}

/* Reads and checks everything, changing nothing; the position into
 * pos[] (epoch, batch, global step). */
static CtStatus read_checked(Trainer *t, Loaded *l, int64_t pos[3])
{
    CtStatus st = read_all(l, l->dir, runtime_world_size(trainer_runtime(t)));
    if (st == CT_OK) st = ckpt_get_i64(l->trainer, "epoch", CKPT_TRAINER, &pos[0]);
    if (st == CT_OK) st = ckpt_get_i64(l->trainer, "batch", CKPT_TRAINER, &pos[1]);
    if (st == CT_OK) st = ckpt_get_i64(l->trainer, "global_step", CKPT_TRAINER, &pos[2]);
    if (st == CT_OK && (pos[0] < 1 || pos[1] < 0 || pos[2] < 0))
        st = ct_error(CT_ERR_FORMAT,
                      "checkpoint %s: %s: bad position (epoch %lld, batch %lld)", l->dir,
                      CKPT_TRAINER, (long long)pos[0], (long long)pos[1]);
    if (st == CT_OK) st = ckpt_check_history(l->trainer, l->dir);
    if (st == CT_OK) st = ckpt_check_rank_state(t, l->rank, l->rank_file);
    if (st == CT_OK) st = check_model(t, l);
    if (st == CT_OK) st = check_optimizer(t, l);
    if (st == CT_OK) st = check_scaler(t, l);
    if (st == CT_OK) st = check_callbacks(t, l);
    if (st == CT_OK && t->state->running && t->state->train_dl)
        st = ckpt_check_loader(t, l->trainer, l->dir);
    if (st == CT_OK && t->state->running && t->scheduler && !l->scheduler)
        st = ct_error(CT_ERR_INVALID,
                      "checkpoint %s: the run has a scheduler, the checkpoint none "
                      "(mismatched scheduler)",
                      l->dir);
    if (st == CT_OK && t->state->running && !t->scheduler && l->scheduler)
        st = ct_error(CT_ERR_INVALID,
                      "checkpoint %s: the checkpoint has a scheduler state, the run no "
                      "scheduler (create_scheduler_fn)",
                      l->dir);
    return st;
}

/* Every process checks what it read, then applies it once all of them
 * could; should applying fail on any process, every process puts its
 * trainer back, a resume pending from an earlier load included. l->dir
 * NULL: this process failed before (error recorded). */
static CtStatus load_checked(Trainer *t, Loaded *l)
{
    int64_t pos[3] = {0, 0, 0};
    CtStatus st =
        ckpt_agree(t, l->dir ? read_checked(t, l, pos) : ct_last_status(), NULL);
    if (st != CT_OK) return st;
    Snapshot sn = {0};
    TrainerResume kept = t->state->resume; /* moved aside, put back on failure */
    t->state->resume = (TrainerResume){0};
    st = take_snapshot(t, &sn);
    bool applied = false;
    if (st == CT_OK) {
        st = apply(t, l, pos[0], pos[1], pos[2]);
        applied = st == CT_OK;
        if (!applied) restore_snapshot(t, &sn);
    }
    st = ckpt_agree(t, st, NULL);
    if (st != CT_OK && applied) restore_snapshot(t, &sn); /* another process failed */
    if (st != CT_OK) {
        trainer_resume_clear(t);
        t->state->resume = kept;
    } else {
        ckpt_resume_free(&kept);
    }
    snapshot_free(&sn);
    return st;
}

CtStatus ckpt_load(Trainer *t, const char *dir)
{
    Loaded l = {.dir = dir};
    snprintf(l.rank_file, sizeof l.rank_file, CKPT_RANK_FMT,
             runtime_rank(trainer_runtime(t)));
    CtStatus st = load_checked(t, &l);
    loaded_free(&l);
    return st;
}

CtStatus trainer_load_state(Trainer *t, const char *dir)
{
    if (!t || !t->state) return ct_error(CT_ERR_NULL, "trainer_load_state: NULL trainer");
    if (!dir || !*dir) return ct_error(CT_ERR_NULL, "trainer_load_state: NULL/empty dir");
    ct_clear_error();
    char *d = ckpt_trim(dir); /* NULL: ckpt_load fails with the error, collectively */
    CtStatus st = ckpt_load(t, d);
    free(d);
    return st;
}
