/* Packed groups: one op per parameter group instead of one per parameter.
 *
 * When a model is packed (nn_module_pack), its parameters and gradients lie
 * back to back in one block each, and the state buffers made here do too,
 * so a group's update is one op over 1-d spans of the blocks. The formulas
 * are per element and the hyper-parameters are the group's, so the result
 * is bit for bit the per-parameter one. The spans are cached per group and
 * re-checked before each use (no allocation); a changed layout rebuilds
 * them, and a group that is not packed takes the per-parameter path. */
#include <stdlib.h>

#include "optim_internal.h"

static Tensor **state_slot(const Optimizer *o, int64_t idx, int b)
{
    return &o->state[idx * o->vt->nbuf + b];
}

/* Tensor behind operand `what` of parameter idx: -1 grad, -2 param, else
 * state buffer what. */
static Tensor *operand(const Optimizer *o, int64_t idx, Tensor *p, int what)
{
    return what == -2 ? p : what == -1 ? tensor_grad(p) : *state_slot(o, idx, what);
}

/* Points *span at operand `what` of group gi's parameters when they lie
 * back to back, reusing the cached view when it still fits. */
static bool span_ok(Optimizer *o, int gi, int what, Tensor **span)
{
    const OptimGroupHp *h = &o->groups[gi];
    for (int64_t i = 0; i < h->n; i++) {
        o->scratch[i] = operand(o, h->first + i, h->params[i], what);
        if (!o->scratch[i]) return false;
    }
    if (tensor_is_span(*span, o->scratch, h->n)) return true;
    tensor_free(*span);
    *span = tensor_span(o->scratch, h->n);
    return *span != NULL;
}

CtStatus optim_group_make_buffer(Optimizer *o, int gi, int b, unsigned *fresh)
{
    const OptimGroupHp *h = &o->groups[gi];
    Tensor *p0 = h->params[0];
    int64_t total = 0;
    for (int64_t i = 0; i < h->n; i++) {
        Tensor *p = h->params[i];
        if (!optim_wants_update(p) || *state_slot(o, h->first + i, b) ||
            tensor_dtype(p) != tensor_dtype(p0) ||
            !ct_device_eq(tensor_device(p), tensor_device(p0)))
            return CT_OK;
        total += tensor_numel(p);
    }
    CtScope *s = ct_scope_open();
    Tensor *block =
        s ? tensor_zeros(1, &total, tensor_dtype(p0), tensor_device(p0)) : NULL;
    CtStatus st = block ? CT_OK
                        : ct_error_wrap(CT_OK, "%s: cannot create state %s", o->vt->name,
                                        o->vt->buf_names[b]);
    int64_t off = 0, made = 0;
    for (; made < h->n && st == CT_OK; made++) {
        Tensor *p = h->params[made], *t = optim_new_state(p);
        st = t ? tensor_rebind(t, block, off) : ct_last_status();
        if (st != CT_OK) {
            tensor_free(t);
            break;
        }
        *state_slot(o, h->first + made, b) = t;
        off += tensor_numel(p);
    }
    for (int64_t i = 0; i < made; i++) {
        if (st == CT_OK && fresh) fresh[h->first + i] |= 1u << b;
        if (st == CT_OK) continue;
        tensor_free(*state_slot(o, h->first + i, b));
        *state_slot(o, h->first + i, b) = NULL;
    }
    ct_scope_close(s);
    return st;
}

/* Whether some state of buffer b of group gi lies on another device than
 * its parameter. */
static bool buffer_elsewhere(const Optimizer *o, const OptimGroupHp *h, int b)
{
    for (int64_t i = 0; i < h->n; i++) {
        const Tensor *t = *state_slot(o, h->first + i, b);
        if (t && !ct_device_eq(tensor_device(t), tensor_device(h->params[i])))
            return true;
    }
    return false;
}

CtStatus optim_group_follow(Optimizer *o, int gi, int b)
{
    const OptimGroupHp *h = &o->groups[gi];
    if (!buffer_elsewhere(o, h, b)) return CT_OK;
    Tensor **old = malloc((size_t)h->n * sizeof *old);
    if (!old) return ct_error(CT_ERR_OOM, "%s: out of memory", o->vt->name);
    bool all = true;
    for (int64_t i = 0; i < h->n; i++) {
        old[i] = *state_slot(o, h->first + i, b);
        *state_slot(o, h->first + i, b) = NULL;
        all = all && old[i];
    }
    /* one block where every parameter has this state and the group allows
     * it, else a tensor per state: a parameter without one gets a fresh
     * buffer at its first update, not a block's zeros taken for history */
    CtStatus st = all ? optim_group_make_buffer(o, gi, b, NULL) : CT_OK;
    for (int64_t i = 0; i < h->n && st == CT_OK; i++) {
        Tensor **slot = state_slot(o, h->first + i, b);
        if (!old[i]) continue;
        if (!*slot && !(*slot = optim_new_state(h->params[i]))) st = ct_last_status();
        if (st == CT_OK) st = tensor_copy_(*slot, old[i]);
    }
    for (int64_t i = 0; i < h->n; i++) { /* the old states, or on failure the new */
        Tensor **slot = state_slot(o, h->first + i, b);
        Tensor *drop = st == CT_OK ? old[i] : *slot;
        if (st != CT_OK) *slot = old[i];
        tensor_free(drop);
    }
    free(old);
    return st == CT_OK
               ? CT_OK
               : ct_error_wrap(CT_OK, "%s: moving state %s to its parameters' device",
                               o->vt->name, o->vt->buf_names[b]);
}

CtStatus optim_group_update(Optimizer *o, int gi, const unsigned *fresh, bool zero_grad,
                            bool *done)
{
    const OptimVtable *vt = o->vt;
    const OptimGroupHp *h = &o->groups[gi];
    OptimSpans *sp = &o->spans[gi];
    int64_t first = h->first;
    *done = false;
    for (int64_t i = 0; i < h->n; i++)
        if (!optim_wants_update(h->params[i]) ||
            o->psteps[first + i] != o->psteps[first] || fresh[first + i] != fresh[first])
            return CT_OK;
    if (!span_ok(o, gi, -2, &sp->param) || !span_ok(o, gi, -1, &sp->grad)) return CT_OK;
    OptimStep s = {.param = sp->param,
                   .grad = sp->grad,
                   .fresh = fresh[first],
                   .step = o->psteps[first] + 1,
                   .zero_grad = zero_grad};
    for (int b = 0; b < vt->nbuf; b++) {
        if (!vt->uses_buf(o, h, b)) continue;
        if (!span_ok(o, gi, b, &sp->buf[b])) return CT_OK;
        s.buf[b] = sp->buf[b];
    }
    CtStatus st = vt->update(o, h, &s);
    if (st != CT_OK) return st;
    for (int64_t i = 0; i < h->n; i++) o->psteps[first + i]++;
    *done = true;
    return CT_OK;
}

CtStatus optim_group_zero_grad(Optimizer *o, int gi, bool *done)
{
    *done = span_ok(o, gi, -1, &o->spans[gi].grad);
    return *done ? tensor_zero_(o->spans[gi].grad) : CT_OK;
}

void optim_spans_free(Optimizer *o)
{
    if (!o->spans) return;
    for (int g = 0; g < o->ngroups; g++) {
        tensor_free(o->spans[g].param);
        tensor_free(o->spans[g].grad);
        for (int b = 0; b < OPTIM_MAX_BUFS; b++) tensor_free(o->spans[g].buf[b]);
    }
    free(o->spans);
}
