/* trainer_save_state: every file into a temporary directory next to the
 * target, each fsynced, a manifest with their SHA-256 last, the directory
 * fsynced, renamed into place, the parent fsynced. A crash at any moment
 * leaves either the old directory or the complete new one. With several
 * processes each writes its own files into the one temporary directory
 * and the main process does the rest (the directories are on a file
 * system every process sees). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_internal.h"
#include "ctrainer/io.h"

#ifndef CTRAINER_VERSION
#define CTRAINER_VERSION "unknown"
#endif

typedef struct Written {
    char names[8][64];
    int n;
} Written;

typedef CtStatus (*FillFn)(Trainer *t, CtStateDict *out);

/* Writes fill's dict as dir/name (nothing when it is empty and optional),
 * recorded in *w unless w is NULL. */
static CtStatus write_dict(Trainer *t, const char *dir, const char *name, FillFn fill,
                           bool optional, Written *w)
{
    CtStateDict *d = ct_state_dict_create();
    if (!d) return ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    CtStatus st = fill(t, d);
    char *path = st == CT_OK ? ckpt_join(dir, name) : NULL;
    if (st == CT_OK && !path) st = ct_last_status();
    if (st == CT_OK && !(optional && ct_state_dict_size(d) == 0)) {
        st = nn_safetensors_save(path, d, 0, NULL, NULL);
        if (st == CT_OK && w) snprintf(w->names[w->n++], sizeof w->names[0], "%s", name);
    }
    free(path);
    ct_state_dict_free(d);
    return st;
}

static CtStatus fill_model(Trainer *t, CtStateDict *out)
{
    CtStateDict *d = nn_module_state_dict(t->model);
    if (!d) return ct_last_status();
    CtStatus st = CT_OK;
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(d); i++)
        st = ct_state_dict_add(out, ct_state_dict_name(d, i), ct_state_dict_tensor(d, i));
    ct_state_dict_free(d);
    return st;
}
static CtStatus fill_optimizer(Trainer *t, CtStateDict *out)
{
    return optim_state_save(t->optimizer, out);
}
static CtStatus fill_scheduler(Trainer *t, CtStateDict *out)
{
    return t->scheduler ? scheduler_state_save(t->scheduler, out) : CT_OK;
}
static CtStatus fill_scaler(Trainer *t, CtStateDict *out)
{
    return scaler_state_save(t->state->scaler, out, NULL);
}
static CtStatus fill_trainer(Trainer *t, CtStateDict *out)
{
    return ckpt_trainer_state(t, out);
}
static CtStatus fill_rank(Trainer *t, CtStateDict *out)
{
    return ckpt_rank_state(t, out);
}
static CtStatus fill_callbacks(Trainer *t, CtStateDict *out)
{
    return ckpt_callback_state(t, out);
}

/* Adds name's SHA-256 to the manifest's files. */
static CtStatus add_hash(json_t *files, const char *dir, const char *name)
{
    char *path = ckpt_join(dir, name), hex[65];
    CtStatus st = path ? ckpt_sha256_file(path, hex) : ct_last_status();
    if (st == CT_OK &&
        json_object_set_new(files, name, json_pack("{s:s}", "sha256", hex)) != 0)
        st = ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    free(path);
    return st;
}

/* The manifest: the main process's files and every process's rank file. */
static CtStatus write_manifest(Trainer *t, const char *dir, const Written *w)
{
    int world = runtime_world_size(trainer_runtime(t));
    json_t *root = json_pack("{s:s, s:i, s:s, s:i, s:{}}", "format", CKPT_FORMAT,
                             "format_version", CKPT_FORMAT_VERSION, "library_version",
                             CTRAINER_VERSION, "world_size", world, "files");
    if (!root) return ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    json_t *files = json_object_get(root, "files");
    CtStatus st = CT_OK;
    for (int i = 0; st == CT_OK && i < w->n; i++) st = add_hash(files, dir, w->names[i]);
    char rank_file[64];
    for (int r = 0; st == CT_OK && r < world; r++) {
        snprintf(rank_file, sizeof rank_file, CKPT_RANK_FMT, r);
        st = add_hash(files, dir, rank_file);
    }
    char *text =
        st == CT_OK ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (st != CT_OK) return st;
    if (!text) return ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    char *path = ckpt_join(dir, CKPT_MANIFEST);
    st = path ? ct_write_file_atomic(path, text, strlen(text)) : ct_last_status();
    free(path);
    free(text);
    return st;
}

/* This process's files: the shared ones on the main process (listed in
 * *w), and every process's random_states_<rank>. */
static CtStatus write_own(Trainer *t, const char *tmp, Written *w)
{
    bool main = runtime_is_main_process(trainer_runtime(t));
    char rank_file[64];
    snprintf(rank_file, sizeof rank_file, CKPT_RANK_FMT,
             runtime_rank(trainer_runtime(t)));
    CtStatus st = CT_OK;
    if (main) st = write_dict(t, tmp, CKPT_MODEL, fill_model, false, w);
    if (main && st == CT_OK)
        st = write_dict(t, tmp, CKPT_OPTIMIZER, fill_optimizer, false, w);
    if (main && st == CT_OK && t->scheduler)
        st = write_dict(t, tmp, CKPT_SCHEDULER, fill_scheduler, false, w);
    if (main && st == CT_OK && t->state->scaler)
        st = write_dict(t, tmp, CKPT_SCALER, fill_scaler, false, w);
    if (main && st == CT_OK)
        st = write_dict(t, tmp, CKPT_TRAINER, fill_trainer, false, w);
    if (main && st == CT_OK)
        st = write_dict(t, tmp, CKPT_CALLBACKS, fill_callbacks, true, w);
    /* not in *w: the manifest lists every process's rank file itself */
    if (st == CT_OK) st = write_dict(t, tmp, rank_file, fill_rank, false, NULL);
    return st;
}

/* Renames tmp to dir, replacing an existing dir (moved aside, then removed). */
static CtStatus put_in_place(const char *tmp, const char *dir)
{
    size_t n = strlen(dir) + 32;
    char *old = malloc(n);
    if (!old) return ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    snprintf(old, n, "%s.old-%ld", dir, (long)getpid());
    bool replaced = ckpt_exists(dir);
    CtStatus st = CT_OK;
    if (replaced && rename(dir, old) != 0)
        st = ct_error(CT_ERR_IO, "trainer_save_state: cannot move the old %s aside: %s",
                      dir, strerror(errno));
    if (st == CT_OK && rename(tmp, dir) != 0)
        st = ct_error(CT_ERR_IO, "trainer_save_state: rename %s to %s: %s", tmp, dir,
                      strerror(errno));
    char *parent = st == CT_OK ? ckpt_parent(dir) : NULL;
    if (st == CT_OK) st = parent ? ckpt_fsync_path(parent) : ct_last_status();
    if (st == CT_OK && replaced) st = ckpt_remove_tree(old);
    free(parent);
    free(old);
    return st;
}

/* dir.tmp-<pid>, malloc'd into *tmp. */
static CtStatus tmp_name(const char *dir, int64_t pid, char **tmp)
{
    size_t n = strlen(dir) + 32;
    *tmp = malloc(n);
    if (!*tmp) return ct_error(CT_ERR_OOM, "trainer_save_state: out of memory");
    snprintf(*tmp, n, "%s.tmp-%lld", dir, (long long)pid);
    return CT_OK;
}

/* The main process's fresh temporary directory (one a crash left removed). */
static CtStatus make_tmp(const char *dir, int64_t pid, char **tmp)
{
    CtStatus st = tmp_name(dir, pid, tmp);
    if (st == CT_OK) st = ckpt_remove_tree(*tmp);
    if (st == CT_OK && mkdir(*tmp, 0755) != 0)
        st = ct_error(CT_ERR_IO, "trainer_save_state: cannot create %s: %s", *tmp,
                      strerror(errno));
    return st;
}

/* The main process, once every process's files are there: the manifest,
 * fsyncs, the rename. */
static CtStatus publish(Trainer *t, const char *tmp, const char *dir, const Written *w)
{
    CtStatus st = write_manifest(t, tmp, w);
    if (st == CT_OK) st = ckpt_fsync_path(tmp);
    if (st == CT_OK) st = put_in_place(tmp, dir);
    return st;
}

/* Collective. Each step ends with an agreement, so no process goes on
 * before the step is done everywhere, and a failure anywhere fails it
 * everywhere: the main process creates the temporary directory (named
 * after its pid, which every process learns), every process writes its
 * files, then the main process hashes them all and renames. */
CtStatus trainer_save_state(Trainer *t, const char *dir)
{
    if (!t || !t->state) return ct_error(CT_ERR_NULL, "trainer_save_state: NULL trainer");
    if (!dir || !*dir) return ct_error(CT_ERR_NULL, "trainer_save_state: NULL/empty dir");
    ct_clear_error();
    bool main = runtime_is_main_process(trainer_runtime(t));
    int64_t pid = (int64_t)getpid();
    char *tmp = NULL, *target = ckpt_trim(dir);
    Written w = {.n = 0};
    CtStatus st = !target ? ct_last_status() : main ? make_tmp(target, pid, &tmp) : CT_OK;
    st = ckpt_agree(t, st, &pid);
    if (st == CT_OK) {
        CtStatus mine = main ? CT_OK : tmp_name(target, pid, &tmp);
        if (mine == CT_OK) mine = write_own(t, tmp, &w);
        st = ckpt_agree(t, mine, NULL);
    }
    if (st == CT_OK) st = ckpt_agree(t, main ? publish(t, tmp, target, &w) : CT_OK, NULL);
    if (st != CT_OK) {
        st = ct_error_wrap(st, "trainer_save_state %s", dir);
        if (main && tmp) ckpt_remove_tree(tmp);
    }
    free(tmp);
    free(target);
    return st;
}
