/* The running epoch loss (trainer_internal.h, LossTracker), kept on the
 * loss's device so that a step never waits for the device.
 *
 * Each step's loss is copied, widened to f64, into the next slot of a log
 * on its device (one op); its batch size stays on the host. Reading the
 * total reads the slots back once and sums loss * batch_size in f64 in
 * step order, the bits of a host-side sum of the values. A log is shared
 * by the trackers assigned from each other, each holding a prefix of it;
 * only the tracker holding all of it appends. */
#include <stdlib.h>

#include "trainer_internal.h"

#define LOG_SLOTS 4096 /* steps between host reads, at most */

struct LossLog {
    int refs;
    Tensor *vals;             /* f64[LOG_SLOTS] on the losses' device */
    int64_t used;             /* slots written */
    double weight[LOG_SLOTS]; /* their batch sizes */
};

static void log_release(LossLog *g)
{
    if (!g || --g->refs > 0) return;
    tensor_free(g->vals);
    free(g);
}

static LossLog *log_new(CtDevice dev)
{
    LossLog *g = malloc(sizeof *g);
    CtScope *sc = g ? ct_scope_open() : NULL;
    Tensor *v =
        sc ? tensor_retain(tensor_empty(1, (const int64_t[]){LOG_SLOTS}, CT_F64, dev))
           : NULL;
    ct_scope_close(sc);
    if (!v) {
        free(g);
        if (ct_last_status() == CT_OK)
            ct_error(CT_ERR_OOM, "trainer: out of memory for the loss tracker");
        return NULL;
    }
    g->refs = 1;
    g->vals = v;
    g->used = 0;
    return g;
}

/* total + sum of slot * batch size over lt's slots, in step order. */
static CtStatus log_sum(const LossTracker *lt, double *total)
{
    double *v = malloc((size_t)(lt->n ? lt->n : 1) * sizeof *v);
    if (!v) return ct_error(CT_ERR_OOM, "trainer: out of memory reading the loss");
    CtScope *sc = ct_scope_open();
    Tensor *head = sc ? tensor_slice(lt->log->vals, 0, 0, lt->n, 1) : NULL;
    CtStatus st = head ? tensor_copy_to_host(head, v, CT_F64) : ct_last_status();
    ct_scope_close(sc);
    double t = lt->total;
    for (int64_t i = 0; st == CT_OK && i < lt->n; i++) {
        double w = v[i] * lt->log->weight[i]; /* not fused with the sum */
        t += w;
    }
    free(v);
    if (st == CT_OK) *total = t;
    return st;
}

/* Moves lt's slots into its host total and drops its log. */
static CtStatus fold(LossTracker *lt)
{
    if (!lt->log) return CT_OK;
    CtStatus st = lt->n ? log_sum(lt, &lt->total) : CT_OK;
    if (st != CT_OK) return st;
    log_release(lt->log);
    lt->log = NULL;
    lt->n = 0;
    return CT_OK;
}

/* Whether lt can append to its log: it holds all of it, there is room,
 * and the log is on the loss's device. */
static bool can_append(const LossTracker *lt, const Tensor *loss)
{
    return lt->log && lt->log->used == lt->n && lt->n < LOG_SLOTS &&
           ct_device_eq(tensor_device(lt->log->vals), tensor_device(loss));
}

CtStatus loss_tracker_add(LossTracker *lt, Tensor *loss, int64_t batch_size)
{
    if (!can_append(lt, loss)) {
        CtStatus st = fold(lt);
        if (st != CT_OK) return st;
        if (!(lt->log = log_new(tensor_device(loss)))) return ct_last_status();
    }
    CtScope *sc = ct_scope_open();
    if (!sc) return ct_last_status();
    Tensor *slot = tensor_slice(lt->log->vals, 0, lt->n, lt->n + 1, 1);
    Tensor *one = tensor_reshape(tensor_detach(loss), 1, (const int64_t[]){1});
    CtStatus st = slot && one ? tensor_copy_(slot, one) : ct_last_status();
    ct_scope_close(sc);
    if (st != CT_OK) return st;
    lt->log->weight[lt->n++] = (double)batch_size;
    lt->log->used = lt->n;
    lt->count += (double)batch_size;
    return CT_OK;
}

CtStatus loss_tracker_total(const LossTracker *lt, double *total)
{
    if (!lt->log || lt->n == 0) {
        *total = lt->total;
        return CT_OK;
    }
    return log_sum(lt, total);
}

CtStatus loss_tracker_assign(LossTracker *dst, const LossTracker *src)
{
    if (dst == src) return CT_OK;
    /* a log's slots are never rewritten: sharing it is a copy, without an
     * op */
    if (src->log) src->log->refs++;
    log_release(dst->log);
    *dst = *src;
    return CT_OK;
}

void loss_tracker_reset(LossTracker *lt)
{
    log_release(lt->log);
    *lt = (LossTracker){0};
}
