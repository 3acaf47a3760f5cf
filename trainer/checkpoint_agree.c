/* Agreement between the processes of a run at each step of a collective
 * checkpoint operation: every process learns whether every process
 * succeeded, and which error the first failed one had. Only
 * runtime_reduce_f64 is used, which allocates nothing before it reaches
 * the other processes: a process that fails locally (even out of memory)
 * still meets the others, so nobody waits for the collective deadline. */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint_internal.h"

/* Characters of an error message sent to the other processes. */
enum { MSG_CHARS = 480 };

/* The message of the failed process `root`, sent to every process (one
 * character per double: a MAX over root's characters and everyone else's
 * zeros). Returns the reduce's status; *code and text get root's. */
static CtStatus share_error(Runtime *rt, int root, CtStatus st, const char *own,
                            CtStatus *code, char text[MSG_CHARS + 1])
{
    double v[1 + MSG_CHARS] = {0};
    if (runtime_rank(rt) == root) {
        v[0] = (double)st;
        for (int i = 0; i < MSG_CHARS && own[i]; i++) v[1 + i] = (unsigned char)own[i];
    }
    CtStatus cst = runtime_reduce_f64(rt, v, 1 + MSG_CHARS, RUNTIME_REDUCE_MAX);
    *code = (CtStatus)(int)v[0];
    for (int i = 0; i < MSG_CHARS; i++) text[i] = (char)(unsigned char)v[1 + i];
    text[MSG_CHARS] = '\0';
    return cst;
}

CtStatus ckpt_agree(Trainer *t, CtStatus st, int64_t *main_value)
{
    Runtime *rt = trainer_runtime(t);
    int w = runtime_world_size(rt), rank = runtime_rank(rt);
    if (w == 1) return st;
    char own[MSG_CHARS + 1];
    snprintf(own, sizeof own, "%s", st != CT_OK ? ct_last_error() : "");
    /* MIN of [first failed rank (w: none), the main process's value] */
    double v[2] = {st != CT_OK ? rank : w, DBL_MAX};
    if (main_value && runtime_is_main_process(rt)) v[1] = (double)*main_value;
    CtStatus cst = runtime_reduce_f64(rt, v, 2, RUNTIME_REDUCE_MIN);
    if (cst != CT_OK) /* the processes cannot agree: the group is broken */
        return st != CT_OK ? ct_error(st, "%s", own) : cst;
    if (main_value && v[1] != DBL_MAX) *main_value = (int64_t)v[1];
    if (v[0] >= w) return CT_OK;
    int root = (int)v[0];
    CtStatus code;
    char text[MSG_CHARS + 1];
    cst = share_error(rt, root, st, own, &code, text);
    /* a failed process reports its own error, the others the first one's */
    if (st != CT_OK) return ct_error(st, "rank %d: %s", rank, own);
    if (cst != CT_OK) return cst;
    return ct_error(code != CT_OK ? code : CT_ERR_STATE, "rank %d: %s", root, text);
}
