/* Private helpers shared by the built-in callbacks. */
#ifndef CTRAINER_CB_INTERNAL_H
#define CTRAINER_CB_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "ctrainer/callbacks.h"
#include "ctrainer/status.h"
#include "ctrainer/trainer.h"

/* calloc(size) with cb->vt = vt; NULL with CT_ERR_OOM naming the type. */
Callback *cb_alloc(size_t size, const CallbackVtable *vt);
/* cb is non-NULL and built with vt (the queries' type check). */
static inline bool cb_is(const Callback *cb, const CallbackVtable *vt)
{
    return cb && cb->vt == vt;
}
/* strdup of s, or of dflt when s is NULL; NULL (CT_ERR_OOM) on failure. */
char *cb_strdup(const char *s, const char *dflt);
/* mkdir -p dir; CT_ERR_IO naming `who` and the directory that failed. */
CtStatus cb_make_dirs(const char *who, const char *dir);
/* out, or stdout for NULL. */
static inline FILE *cb_out(FILE *out)
{
    return out ? out : stdout;
}
/* This process writes logs and files (the runtime's main process; true
 * without a runtime). */
bool cb_is_main(const Trainer *t);
/* cur is strictly better than best (NAN best: always). */
bool cb_improved(double cur, double best, bool greater_is_better);

/* Callback state for checkpoints: a 0-d f64 entry (counters fit exactly
 * below 2^53). get: CT_ERR_INVALID naming the callback type and entry when
 * it is missing or not a single f64. */
CtStatus cb_state_put(CtStateDict *out, const char *name, double v);
CtStatus cb_state_get(const CtStateDict *in, const char *type, const char *name,
                      double *v);
/* A 1-d array entry of n elements of dt (n >= 1). get: *n < 0 takes any
 * length and returns it, else the entry must have *n elements; *data is
 * the entry's, valid while `in` lives. */
CtStatus cb_state_put_array(CtStateDict *out, const char *name, const void *data,
                            int64_t n, CtDType dt);
CtStatus cb_state_get_array(const CtStateDict *in, const char *type, const char *name,
                            CtDType dt, int64_t *n, const void **data);

/* A growable string for building file contents. */
typedef struct CbBuf {
    char *data;
    size_t len, cap;
    bool oom;
} CbBuf;
void cb_buf_printf(CbBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cb_buf_free(CbBuf *b);

#endif
