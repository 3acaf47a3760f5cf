/* Thread-local error state (status.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctrainer/status.h"

static _Thread_local char last_msg[1024];
static _Thread_local CtStatus last_status = CT_OK;

const char *ct_status_str(CtStatus s)
{
    switch (s) {
    case CT_OK: return "ok";
    case CT_ERR_INVALID: return "invalid argument";
    case CT_ERR_SHAPE: return "shape mismatch";
    case CT_ERR_DTYPE: return "dtype mismatch";
    case CT_ERR_DEVICE: return "device mismatch";
    case CT_ERR_NULL: return "null argument";
    case CT_ERR_OOM: return "out of memory";
    case CT_ERR_IO: return "i/o error";
    case CT_ERR_FORMAT: return "malformed data";
    case CT_ERR_UNSUPPORTED: return "unsupported";
    case CT_ERR_BACKEND: return "backend error";
    case CT_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}

const char *ct_last_error(void)
{
    return last_msg;
}

CtStatus ct_last_status(void)
{
    return last_status;
}

void ct_clear_error(void)
{
    last_msg[0] = '\0';
    last_status = CT_OK;
}

CtStatus ct_error(CtStatus s, const char *fmt, ...)
{
    /* formatted aside: an argument may point into last_msg */
    char msg[sizeof last_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_msg, msg, sizeof last_msg);
    last_status = s;
    return s;
}

/* Copies s into last_msg from offset `at`, as much as fits; returns the new
 * length. */
static size_t append(size_t at, const char *s)
{
    size_t n = strlen(s), room = sizeof last_msg - 1 - at;
    if (n > room) n = room;
    memcpy(last_msg + at, s, n);
    last_msg[at + n] = '\0';
    return at + n;
}

CtStatus ct_error_wrap(CtStatus s, const char *fmt, ...)
{
    /* copies first: fmt's arguments may point into last_msg */
    char inner[sizeof last_msg], ctx[sizeof last_msg];
    memcpy(inner, last_msg, sizeof inner);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    size_t n = append(0, ctx);
    if (inner[0]) append(append(n, ": "), inner);
    if (s == CT_OK) s = last_status != CT_OK ? last_status : CT_ERR_INVALID;
    last_status = s;
    return s;
}
