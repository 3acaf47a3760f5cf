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
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    last_status = s;
    return s;
}

CtStatus ct_error_wrap(CtStatus s, const char *fmt, ...)
{
    char inner[sizeof last_msg];
    memcpy(inner, last_msg, sizeof inner); /* fmt's arguments may point here */
    if (s == CT_OK) s = last_status != CT_OK ? last_status : CT_ERR_INVALID;
    va_list ap;
    va_start(ap, fmt);
    char ctx[sizeof last_msg];
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    if (inner[0])
        snprintf(last_msg, sizeof last_msg, "%s: %s", ctx, inner);
    else
        memcpy(last_msg, ctx, sizeof last_msg);
    last_status = s;
    return s;
}
