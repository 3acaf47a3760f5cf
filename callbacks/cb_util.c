/* Shared helpers of the built-in callbacks. */
#include "cb_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

Callback *cb_alloc(size_t size, const CallbackVtable *vt)
{
    Callback *cb = calloc(1, size);
    if (!cb) {
        ct_error(CT_ERR_OOM, "callback %s: out of memory", vt->type);
        return NULL;
    }
    cb->vt = vt;
    return cb;
}

char *cb_strdup(const char *s, const char *dflt)
{
    const char *src = s ? s : dflt;
    if (!src) return NULL;
    char *d = malloc(strlen(src) + 1);
    if (!d) {
        ct_error(CT_ERR_OOM, "callback: out of memory copying \"%s\"", src);
        return NULL;
    }
    return strcpy(d, src);
}

bool cb_is_main(const Trainer *t)
{
    Runtime *rt = t ? trainer_runtime(t) : NULL;
    return !rt || runtime_is_main_process(rt);
}

bool cb_improved(double cur, double best, bool greater_is_better)
{
    if (isnan(best)) return true;
    return greater_is_better ? cur > best : cur < best;
}

void cb_buf_printf(CbBuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int k = vsnprintf(b->data ? b->data + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)k < room) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap - b->len <= (size_t)k) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->oom = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
}

void cb_buf_free(CbBuf *b)
{
    free(b->data);
    *b = (CbBuf){0};
}

/* data as an ndim tensor (0: a scalar) of n elements named name in out. */
static CtStatus put(CtStateDict *out, const char *name, const void *data, int ndim,
                    int64_t n, CtDType dt)
{
    CtScope *sc = ct_scope_open(); /* inside a step's scope or not */
    if (!sc) return ct_error(CT_ERR_OOM, "callback state: out of memory");
    Tensor *x = tensor_from_data(data, ndim, &n, dt, ct_cpu());
    CtStatus st = x ? ct_state_dict_add(out, name, x) : ct_last_status();
    ct_scope_close(sc);
    return st;
}

CtStatus cb_state_put(CtStateDict *out, const char *name, double v)
{
    return put(out, name, &v, 0, 1, CT_F64);
}

CtStatus cb_state_put_array(CtStateDict *out, const char *name, const void *data,
                            int64_t n, CtDType dt)
{
    return put(out, name, data, 1, n, dt);
}

CtStatus cb_state_get(const CtStateDict *in, const char *type, const char *name,
                      double *v)
{
    Tensor *x = ct_state_dict_get(in, name);
    if (!x || tensor_dtype(x) != CT_F64 || tensor_numel(x) != 1)
        return ct_error(CT_ERR_INVALID, "%s: state entry '%s' %s", type, name,
                        x ? "is not a single float64" : "is missing");
    *v = *(const double *)tensor_data(x);
    return CT_OK;
}

CtStatus cb_state_get_array(const CtStateDict *in, const char *type, const char *name,
                            CtDType dt, int64_t *n, const void **data)
{
    Tensor *x = ct_state_dict_get(in, name);
    if (!x || tensor_dtype(x) != dt || tensor_ndim(x) != 1 ||
        (*n >= 0 && tensor_numel(x) != *n))
        return ct_error(CT_ERR_INVALID,
                        "%s: state entry '%s' %s a 1-d %s array of the expected length",
                        type, name, x ? "is not" : "is missing: expected",
                        ct_dtype_name(dt));
    *n = tensor_numel(x);
    *data = tensor_data(x);
    return CT_OK;
}

CtStatus cb_make_dirs(const char *who, const char *dir)
{
    char *p = cb_strdup(dir, NULL);
    if (!p) return ct_last_status();
    CtStatus st = CT_OK;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            st = ct_error(CT_ERR_IO, "%s: cannot create directory %s: %s", who, p,
                          strerror(errno));
            break;
        }
        *s = c;
        if (c == '\0') break;
    }
    free(p);
    return st;
}
