/* ctrainer — status codes and the thread-local error message.
 *
 * Functions that can fail return a CtStatus or NULL and record a message
 * naming what failed, where and why. The message is thread-local.
 *
 * Sticky errors: a tensor op given a NULL input returns NULL without touching
 * the recorded message, so a forward pass can be written without checks and
 * the first failure is reported once:
 *
 *     Tensor *y = tensor_relu(tensor_linear(x, w, b));   // may be NULL
 *     if (!y) fprintf(stderr, "%s\n", ct_last_error());
 */
#ifndef CTRAINER_STATUS_H
#define CTRAINER_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum CtStatus {
    CT_OK = 0,
    CT_ERR_INVALID,     /* bad argument value */
    CT_ERR_SHAPE,       /* shapes do not fit the operation */
    CT_ERR_DTYPE,       /* dtype not accepted by the operation */
    CT_ERR_DEVICE,      /* tensors on different devices, or no such device */
    CT_ERR_NULL,        /* a required argument was NULL */
    CT_ERR_OOM,         /* allocation failed */
    CT_ERR_IO,          /* file or stream error */
    CT_ERR_FORMAT,      /* malformed input data */
    CT_ERR_UNSUPPORTED, /* op/dtype/device combination not implemented */
    CT_ERR_BACKEND,     /* a backend library call failed (CUDA, cuBLAS, ...) */
    CT_ERR_STATE,       /* call not valid in the current state */
} CtStatus;

/* Short, static name of a status ("shape mismatch"). Never NULL. */
const char *ct_status_str(CtStatus s);

/* The last error message on this thread ("" when none). The pointer stays
 * valid until the next error is recorded on this thread. */
const char *ct_last_error(void);

/* The status of the last recorded error on this thread (CT_OK when none). */
CtStatus ct_last_status(void);

/* Forget the recorded error on this thread. Entry points that start a unit
 * of work (trainer_train, trainer_evaluate) call it first, and so does code
 * before calling a hook or transform that may fail without recording why,
 * so an error the program already handled is never reported as the cause of
 * a new failure. Tensor ops do not: they keep the first error (sticky). */
void ct_clear_error(void);

/* Record an error (printf-style) and return `s` (the arguments may point into
 * ct_last_error()), for one-line returns:
 *     return ct_error(CT_ERR_IO, "open %s: %s", path, strerror(errno)); */
CtStatus ct_error(CtStatus s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix context to the recorded message ("<context>: <message>") and record
 * status `s`; s == CT_OK keeps the recorded status (CT_ERR_INVALID when none
 * is recorded). With no message recorded the context alone becomes the
 * message. The arguments may point into ct_last_error(): the message is
 * copied before it is rewritten. Over-long results are truncated. Returns the
 * recorded status:
 *     if (st != CT_OK) return ct_error_wrap(st, "loading %s", path); */
CtStatus ct_error_wrap(CtStatus s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
