/* What a checkpoint holds besides the model and optimizer, as named tensors:
 * the trainer's counters and run history, each process's RNG states and
 * partial epoch loss, and the callbacks' states. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

/* A new host tensor from data, added to d. Its own scope releases the
 * creation reference (the dict keeps one), inside a step's scope or not. */
static CtStatus add_data(CtStateDict *d, const char *name, const void *data, int ndim,
                         const int64_t *shape, CtDType dt)
{
    CtScope *sc = ct_scope_open();
    if (!sc) return ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    Tensor *x = tensor_from_data(data, ndim, shape, dt, ct_cpu());
    CtStatus st = x ? ct_state_dict_add(d, name, x) : ct_last_status();
    ct_scope_close(sc);
    return st;
}

CtStatus ckpt_add_i64(CtStateDict *d, const char *name, int64_t v)
{
    return add_data(d, name, &v, 0, NULL, CT_I64);
}

CtStatus ckpt_add_f64(CtStateDict *d, const char *name, const double *v, int64_t n)
{
    return add_data(d, name, v, n < 0 ? 0 : 1, (int64_t[]){n}, CT_F64);
}

/* A single-element entry of dtype dt, copied to out (8 bytes). */
static CtStatus get_scalar(const CtStateDict *d, const char *name, const char *file,
                           CtDType dt, void *out)
{
    Tensor *x = ct_state_dict_get(d, name);
    if (!x || tensor_dtype(x) != dt || tensor_numel(x) != 1)
        return ct_error(CT_ERR_FORMAT, "checkpoint file %s: entry '%s' %s", file, name,
                        !x             ? "is missing"
                        : dt == CT_I64 ? "is not a single int64"
                                       : "is not a single float64");
    memcpy(out, tensor_data(x), 8);
    return CT_OK;
}

CtStatus ckpt_get_i64(const CtStateDict *d, const char *name, const char *file,
                      int64_t *v)
{
    return get_scalar(d, name, file, CT_I64, v);
}

static CtStatus get_f64(const CtStateDict *d, const char *name, const char *file,
                        double *v)
{
    return get_scalar(d, name, file, CT_F64, v);
}

CtStateDict *ckpt_clone_dict(const CtStateDict *d)
{
    CtStateDict *c = ct_state_dict_create();
    bool grad = ct_set_grad_enabled(false);
    CtScope *sc = ct_scope_open(); /* the dict keeps its own references */
    for (int64_t i = 0; c && sc && d && i < ct_state_dict_size(d); i++) {
        Tensor *x = tensor_clone(ct_state_dict_tensor(d, i));
        CtStatus st = x ? ct_state_dict_add(c, ct_state_dict_name(d, i), x) : CT_ERR_OOM;
        if (st != CT_OK) {
            ct_state_dict_free(c);
            c = NULL;
        }
    }
    if (sc)
        ct_scope_close(sc);
    else {
        ct_state_dict_free(c);
        c = NULL;
    }
    ct_set_grad_enabled(grad);
    if (!c && ct_last_status() == CT_OK)
        ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    return c;
}

/* ------------------------------------------------------------ trainer */

CtStatus ckpt_trainer_state(const Trainer *t, CtStateDict *out)
{
    const TrainerState *s = t->state;
    CtStatus st = ckpt_add_i64(out, "global_step", s->global_step);
    if (st == CT_OK) st = ckpt_add_i64(out, "epoch", s->pos_epoch);
    if (st == CT_OK) st = ckpt_add_i64(out, "batch", s->pos_batch);
    if (s->train_dl) { /* what the position means: the same epochs of batches */
        const DataLoaderArgs *a = data_loader_args(s->train_dl);
        int64_t seed;
        memcpy(&seed, &a->seed, sizeof seed);
        if (st == CT_OK) st = ckpt_add_i64(out, "loader.seed", seed);
        if (st == CT_OK) st = ckpt_add_i64(out, "loader.batch_size", a->batch_size);
        if (st == CT_OK)
            st = ckpt_add_i64(out, "loader.batches", data_loader_len(s->train_dl));
    }
    const RunHistory *h = s->history;
    char name[RUN_HISTORY_MAX_NAME + 16];
    for (int i = 0; st == CT_OK && i < run_history_num_metrics(h); i++) {
        int64_t n = 0;
        const char *m = run_history_metric_name(h, i);
        const double *v = run_history_values(h, m, &n);
        snprintf(name, sizeof name, "history.%s", m);
        st = ckpt_add_f64(out, name, v, n);
    }
    return st;
}

CtStatus ckpt_check_loader(const Trainer *t, const CtStateDict *d, const char *dir)
{
    const TrainerState *s = t->state;
    int64_t v[3];
    const char *names[3] = {"loader.seed", "loader.batch_size", "loader.batches"};
    for (int i = 0; i < 3; i++)
        if (get_scalar(d, names[i], CKPT_TRAINER, CT_I64, &v[i]) != CT_OK) {
            ct_clear_error();
            return CT_OK; /* saved outside a training run: nothing to compare */
        }
    const DataLoaderArgs *a = data_loader_args(s->train_dl);
    int64_t seed;
    memcpy(&seed, &a->seed, sizeof seed);
    int64_t now[3] = {seed, a->batch_size, data_loader_len(s->train_dl)};
    for (int i = 0; i < 3; i++)
        if (v[i] != now[i])
            return ct_error(CT_ERR_INVALID,
                            "checkpoint %s: the train loader differs: %s %lld in the "
                            "checkpoint, %lld in this run (the saved position would not "
                            "continue the same batches)",
                            dir, names[i] + 7, (long long)v[i], (long long)now[i]);
    return CT_OK;
}

CtStatus ckpt_check_history(const CtStateDict *d, const char *dir)
{
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        const char *name = ct_state_dict_name(d, i);
        Tensor *x = ct_state_dict_tensor(d, i);
        if (strncmp(name, "history.", 8) != 0) continue;
        size_t len = strlen(name + 8);
        if (len == 0 || len >= RUN_HISTORY_MAX_NAME)
            return ct_error(CT_ERR_FORMAT,
                            "checkpoint %s: %s: '%.40s%s' is not a metric name (1 to %d "
                            "bytes)",
                            dir, CKPT_TRAINER, name, len > 32 ? "..." : "",
                            RUN_HISTORY_MAX_NAME - 1);
        if (tensor_dtype(x) == CT_F64 && tensor_ndim(x) == 1 &&
            tensor_device(x).type == CT_DEVICE_CPU && tensor_is_contiguous(x))
            continue;
        char desc[96];
        return ct_error(CT_ERR_FORMAT, "checkpoint %s: %s: '%s' is %s, expected f64[n]",
                        dir, CKPT_TRAINER, name, tensor_describe(x, desc, sizeof desc));
    }
    return CT_OK;
}

/* Restores the run history from "history.<metric>" entries, at `epoch`. */
CtStatus ckpt_apply_history(RunHistory *h, const CtStateDict *d, int64_t epoch)
{
    run_history_reset(h);
    char prefix[RUN_HISTORY_MAX_NAME];
    snprintf(prefix, sizeof prefix, "%s", run_history_prefix(h));
    CtStatus st = run_history_set_prefix(h, "");
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(d); i++) {
        const char *name = ct_state_dict_name(d, i);
        if (strncmp(name, "history.", 8) != 0) continue;
        Tensor *x = ct_state_dict_tensor(d, i);
        const double *v = tensor_data(x);
        for (int64_t j = 0; st == CT_OK && j < tensor_numel(x); j++)
            st = run_history_update(h, name + 8, v[j]);
    }
    if (st == CT_OK) st = run_history_set_epoch(h, epoch);
    run_history_set_prefix(h, prefix);
    return st;
}

/* -------------------------------------------------------------- ranks */

/* Visits the generators the model's modules draw from, with their dotted
 * module names ("" for the root). */
typedef CtStatus (*GenVisit)(const char *name, CtGenerator *g, void *ctx);

static CtStatus visit_generators(Module *m, const char *name, GenVisit fn, void *ctx)
{
    CtGenerator *g = nn_module_generator(m);
    CtStatus st = g ? fn(name, g, ctx) : CT_OK;
    for (int i = 0; st == CT_OK && i < nn_module_num_children(m); i++) {
        char child[512];
        const char *cn = nn_module_child_name(m, i);
        if ((size_t)snprintf(child, sizeof child, "%s%s%s", name, *name ? "." : "", cn) >=
            sizeof child)
            return ct_error(CT_ERR_INVALID, "checkpoint: module name %s.%s too long",
                            name, cn);
        st = visit_generators(nn_module_child_at(m, i), child, fn, ctx);
    }
    return st;
}

static CtStatus save_generator(const char *name, CtGenerator *g, void *ctx)
{
    char key[600];
    snprintf(key, sizeof key, "rng.%s", name);
    int64_t v[3];
    memcpy(v, (uint64_t[]){g->seed, g->stream, g->offset}, sizeof v);
    return add_data(ctx, key, v, 1, (int64_t[]){3}, CT_I64);
}

CtStatus ckpt_rank_state(const Trainer *t, CtStateDict *out)
{
    const LossTracker *lt = &t->state->pos_loss;
    double total;
    CtStatus st = loss_tracker_total(lt, &total); /* a host read per save */
    if (st == CT_OK) st = ckpt_add_f64(out, "train_loss.total", &total, -1);
    if (st == CT_OK) st = ckpt_add_f64(out, "train_loss.count", &lt->count, -1);
    if (st == CT_OK) st = visit_generators(t->model, "", save_generator, out);
    return st;
}

typedef struct GenLoad {
    const CtStateDict *d;
    const char *file;
    bool apply;
} GenLoad;

static CtStatus load_generator(const char *name, CtGenerator *g, void *ctx)
{
    GenLoad *gl = ctx;
    char key[600];
    snprintf(key, sizeof key, "rng.%s", name);
    Tensor *x = ct_state_dict_get(gl->d, key);
    if (!x || tensor_dtype(x) != CT_I64 || tensor_numel(x) != 3)
        return ct_error(CT_ERR_INVALID,
                        "checkpoint file %s: no generator state '%s' for module '%s' "
                        "(the checkpoint is of another model)",
                        gl->file, key, name);
    if (gl->apply) {
        uint64_t v[3];
        memcpy(v, tensor_data(x), sizeof v);
        *g = (CtGenerator){.seed = v[0], .stream = v[1], .offset = v[2]};
    }
    return CT_OK;
}

/* The partial epoch loss of a rank-state dict, checked. */
static CtStatus get_loss(const CtStateDict *d, const char *file, LossTracker *l)
{
    *l = (LossTracker){0};
    CtStatus st = get_f64(d, "train_loss.total", file, &l->total);
    if (st == CT_OK) st = get_f64(d, "train_loss.count", file, &l->count);
    if (st == CT_OK && !(l->count >= 0 && isfinite(l->count)))
        st = ct_error(CT_ERR_FORMAT,
                      "checkpoint file %s: entry 'train_loss.count' is %g, not a count",
                      file, l->count);
    return st;
}

CtStatus ckpt_check_rank_state(const Trainer *t, const CtStateDict *d, const char *file)
{
    LossTracker l;
    CtStatus st = get_loss(d, file, &l);
    GenLoad gl = {.d = d, .file = file, .apply = false};
    if (st == CT_OK) st = visit_generators(t->model, "", load_generator, &gl);
    return st;
}

CtStatus ckpt_apply_rank_state(Trainer *t, const CtStateDict *d, LossTracker *lt,
                               const char *file)
{
    LossTracker l;
    CtStatus st = ckpt_check_rank_state(t, d, file);
    if (st == CT_OK) st = get_loss(d, file, &l);
    GenLoad gl = {.d = d, .file = file, .apply = true};
    if (st == CT_OK) st = visit_generators(t->model, "", load_generator, &gl);
    if (st == CT_OK) *lt = l;
    return st;
}

/* ---------------------------------------------------------- callbacks */

CtStatus ckpt_callback_state(Trainer *t, CtStateDict *out)
{
    CallbackList *l = trainer_callbacks(t);
    CtStatus st = CT_OK;
    for (int i = 0; st == CT_OK && i < callback_list_count(l); i++) {
        Callback *cb = callback_list_at(l, i);
        if (!cb->vt->state_save) continue;
        CtStateDict *own = ct_state_dict_create();
        st = own ? cb->vt->state_save(cb, t, own)
                 : ct_error(CT_ERR_OOM, "checkpoint: out of memory");
        char key[512];
        for (int64_t j = 0; st == CT_OK && j < ct_state_dict_size(own); j++) {
            snprintf(key, sizeof key, "%s.%s", callback_type(cb),
                     ct_state_dict_name(own, j));
            st = ct_state_dict_add(out, key, ct_state_dict_tensor(own, j));
        }
        if (st != CT_OK && cb->vt->state_save)
            st = ct_error_wrap(st, "checkpoint: saving the state of callback %s",
                               callback_type(cb));
        ct_state_dict_free(own);
    }
    return st;
}

/* The entries of d for callback `type`, without the "<type>." prefix. */
static CtStateDict *entries_of(const CtStateDict *d, const char *type)
{
    CtStateDict *own = ct_state_dict_create();
    size_t n = strlen(type);
    for (int64_t i = 0; own && i < ct_state_dict_size(d); i++) {
        const char *name = ct_state_dict_name(d, i);
        if (strncmp(name, type, n) == 0 && name[n] == '.' &&
            ct_state_dict_add(own, name + n + 1, ct_state_dict_tensor(d, i)) != CT_OK) {
            ct_state_dict_free(own);
            own = NULL;
        }
    }
    return own;
}

CtStatus ckpt_apply_callback_state(Trainer *t, const CtStateDict *d)
{
    CallbackList *l = trainer_callbacks(t);
    CtStatus st = CT_OK;
    for (int i = 0; st == CT_OK && i < callback_list_count(l); i++) {
        Callback *cb = callback_list_at(l, i);
        if (!cb->vt->state_load) continue;
        CtStateDict *own = entries_of(d, callback_type(cb));
        if (!own) return ct_error(CT_ERR_OOM, "checkpoint: out of memory");
        if (ct_state_dict_size(own) > 0) st = cb->vt->state_load(cb, t, own);
        if (st != CT_OK)
            st = ct_error_wrap(st, "checkpoint: restoring the state of callback %s",
                               callback_type(cb));
        ct_state_dict_free(own);
    }
    return st;
}
