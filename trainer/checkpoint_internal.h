/* Private to trainer/: training-state checkpoints (trainer_save_state,
 * trainer_load_state) and their files. The layout is in docs/checkpoints.md. */
#ifndef CTRAINER_CHECKPOINT_INTERNAL_H
#define CTRAINER_CHECKPOINT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "trainer_internal.h"

#define CKPT_FORMAT         "ctrainer-checkpoint"
#define CKPT_FORMAT_VERSION 1
#define CKPT_MANIFEST       "manifest.json"
#define CKPT_MODEL          "model.safetensors"
#define CKPT_OPTIMIZER      "optimizer.safetensors"
#define CKPT_SCHEDULER      "scheduler.safetensors"
#define CKPT_TRAINER        "trainer_state.safetensors"
#define CKPT_CALLBACKS      "callbacks.safetensors"
/* The loss scaler's state (runtime.h, scaler_state_save): written when the
 * run has a scaler (fp16, or one given in TrainerConfig), absent otherwise. */
#define CKPT_SCALER "scaler.safetensors"
/* random_states_<rank>.safetensors: one per process (RNG states and the
 * process's partial epoch loss). */
#define CKPT_RANK_FMT "random_states_%d.safetensors"

/* ---- files (checkpoint_files.c); errors name the path ---- */

/* dir + "/" + name (no second slash when dir ends with one), malloc'd
 * (NULL on OOM, error recorded). */
char *ckpt_join(const char *dir, const char *name);
/* path without its trailing slashes ("x/" and "x//": "x"; "/" stays),
 * malloc'd (NULL on OOM, error recorded): the directory names a save builds
 * from it ("x.tmp-<pid>") are then next to it, not inside. */
char *ckpt_trim(const char *path);
/* The directory part of path ("." without a slash), malloc'd. */
char *ckpt_parent(const char *path);
CtStatus ckpt_fsync_path(const char *path);
/* The whole file, NUL-terminated, malloc'd into *data. */
CtStatus ckpt_read_file(const char *path, char **data, size_t *n);
/* 64 lowercase hex digits and a NUL. */
CtStatus ckpt_sha256_file(const char *path, char hex[65]);
CtStatus ckpt_remove_tree(const char *dir);
bool ckpt_exists(const char *path);

/* ---- processes (checkpoint_agree.c) ---- */

/* Collective: every process passes the status of its own part of a step
 * and gets the same verdict. CT_OK when every process passed CT_OK; else
 * the error of the lowest failed rank R, as "rank R: <its message>" (a
 * failed process keeps its own message, as "rank <own>: ..."), or the
 * collective's error when the processes cannot meet. main_value (may be
 * NULL) is set on every process to the main process's *main_value: how
 * the main process hands out a decision. With one process: returns st. */
CtStatus ckpt_agree(Trainer *t, CtStatus st, int64_t *main_value);
/* Frees what a resume holds and zeroes it (trainer_resume_clear for one
 * moved aside). */
void ckpt_resume_free(TrainerResume *r);
/* trainer_load_state's body, collective. dir NULL: this process could not
 * name the checkpoint (error recorded); it still meets the others, which
 * then fail with its error. */
CtStatus ckpt_load(Trainer *t, const char *dir);

/* ---- state (checkpoint_state.c) ---- */

/* Appends the trainer's counters and run history (trainer_state file). */
CtStatus ckpt_trainer_state(const Trainer *t, CtStateDict *out);
/* The train loader of the current run (t->state->train_dl, not NULL) has
 * the seed, batch size and length the checkpoint's trainer_state records
 * (nothing to check for one saved outside a training run). */
CtStatus ckpt_check_loader(const Trainer *t, const CtStateDict *d, const char *dir);
/* Restores the run history from a trainer_state dict, at `epoch`. */
CtStatus ckpt_apply_history(RunHistory *h, const CtStateDict *d, int64_t epoch);
/* CT_ERR_FORMAT naming dir and the entry unless every "history.<metric>"
 * entry of d has a metric name the run history takes (1 to
 * RUN_HISTORY_MAX_NAME - 1 bytes) and is a 1-d f64 CPU tensor: what
 * ckpt_apply_history reads, so that it can only fail for memory. */
CtStatus ckpt_check_history(const CtStateDict *d, const char *dir);
/* Appends this process's RNG states and partial epoch loss. */
CtStatus ckpt_rank_state(const Trainer *t, CtStateDict *out);
/* Appends every callback's state (entries "<type>.<name>"). */
CtStatus ckpt_callback_state(Trainer *t, CtStateDict *out);
/* CT_ERR_FORMAT or CT_ERR_INVALID naming file and entry unless d holds a
 * valid partial epoch loss (train_loss.total, train_loss.count: single f64,
 * the count a finite number >= 0) and a generator state for every
 * generator of the model: what ckpt_apply_rank_state takes. Changes
 * nothing. */
CtStatus ckpt_check_rank_state(const Trainer *t, const CtStateDict *d, const char *file);
/* Applies a rank-state dict (generators, loss tracker into *lt). Validates
 * everything (ckpt_check_rank_state) before changing anything. */
CtStatus ckpt_apply_rank_state(Trainer *t, const CtStateDict *d, LossTracker *lt,
                               const char *file);
/* Applies callback states (the built-ins reset at on_training_run_start, so
 * a resumed run calls this after that event). */
CtStatus ckpt_apply_callback_state(Trainer *t, const CtStateDict *d);
/* Deep copy (tensors cloned). */
CtStateDict *ckpt_clone_dict(const CtStateDict *d);
/* An i64 0-d entry. */
CtStatus ckpt_add_i64(CtStateDict *d, const char *name, int64_t v);
CtStatus ckpt_add_f64(CtStateDict *d, const char *name, const double *v, int64_t n);
/* Reads an i64 0-d entry; error naming file and entry when absent or not. */
CtStatus ckpt_get_i64(const CtStateDict *d, const char *name, const char *file,
                      int64_t *v);

#endif
