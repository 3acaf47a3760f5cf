/* The Optimizer base: groups, accessors, the generic step loop, zero_grad. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

OptimGroup optim_group(Tensor *const *params, int64_t n)
{
    OptimGroup g = {.params = params,
                    .n = n,
                    .lr = NAN,
                    .weight_decay = NAN,
                    .momentum = NAN,
                    .beta2 = NAN,
                    .eps = NAN};
    return g;
}

static double pick(double v, double def)
{
    return isnan(v) ? def : v;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (Tensor *const *)a, y = (uintptr_t) * (Tensor *const *)b;
    return x < y ? -1 : x > y;
}

/* Rejects a parameter listed twice (in one group or across groups), as
 * PyTorch does: it would be updated twice per step. */
static CtStatus check_unique(const Optimizer *o, const char *who)
{
    Tensor **all = malloc((size_t)o->nparams * sizeof *all);
    if (!all) return ct_error(CT_ERR_OOM, "%s: out of memory", who);
    int64_t k = 0;
    for (int g = 0; g < o->ngroups; g++)
        for (int64_t i = 0; i < o->groups[g].n; i++) all[k++] = o->groups[g].params[i];
    qsort(all, (size_t)k, sizeof *all, cmp_ptr);
    CtStatus st = CT_OK;
    for (int64_t i = 1; i < k && st == CT_OK; i++)
        if (all[i] == all[i - 1])
            st = ct_error(CT_ERR_INVALID,
                          "%s: parameter \"%s\" appears more than once in the groups",
                          who, tensor_name(all[i]));
    free(all);
    return st;
}

static CtStatus check_hp(const OptimGroupHp *h, const char *who, int gi)
{
    const char *names[] = {"lr", "weight_decay", "eps"};
    const double vals[] = {h->lr, h->weight_decay, h->eps};
    for (int k = 0; k < 3; k++)
        if (!optim_nonneg(vals[k]))
            return ct_error(CT_ERR_INVALID, "%s: group %d: %s %g must be finite and >= 0",
                            who, gi, names[k], vals[k]);
    return CT_OK;
}

/* Copies group gi into o->groups[gi], resolving NAN fields. */
static CtStatus add_group(Optimizer *o, const OptimGroup *src, int gi,
                          const OptimDefaults *def, const char *who)
{
    if (src->n < 1 || !src->params)
        return ct_error(src->params ? CT_ERR_INVALID : CT_ERR_NULL, "%s: group %d has %s",
                        who, gi, src->params ? "no parameters" : "NULL params");
    for (int64_t i = 0; i < src->n; i++)
        if (!src->params[i])
            return ct_error(CT_ERR_NULL, "%s: group %d: parameter %lld is NULL", who, gi,
                            (long long)i);
    OptimGroupHp *h = &o->groups[gi];
    h->params = malloc((size_t)src->n * sizeof *h->params);
    if (!h->params) return ct_error(CT_ERR_OOM, "%s: out of memory", who);
    memcpy(h->params, src->params, (size_t)src->n * sizeof *h->params);
    h->n = src->n;
    h->first = o->nparams;
    o->nparams += src->n;
    h->lr = pick(src->lr, def->lr);
    h->weight_decay = pick(src->weight_decay, def->weight_decay);
    h->momentum = pick(src->momentum, def->momentum);
    h->beta2 = pick(src->beta2, def->beta2);
    h->eps = pick(src->eps, def->eps);
    return check_hp(h, who, gi);
}

Optimizer *optim_create_common(const OptimVtable *vt, const char *who, int ngroups,
                               const OptimGroup *groups, const OptimDefaults *def,
                               const OptimFlags *flags)
{
    if (ngroups < 1 || !groups) {
        ct_error(groups ? CT_ERR_INVALID : CT_ERR_NULL,
                 "%s: empty group list (ngroups %d%s)", who, ngroups,
                 groups ? "" : ", groups NULL");
        return NULL;
    }
    Optimizer *o = calloc(1, sizeof *o);
    if (!o || !(o->groups = calloc((size_t)ngroups, sizeof *o->groups))) {
        free(o);
        ct_error(CT_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    o->vt = vt;
    o->flags = *flags;
    o->ngroups = ngroups;
    CtStatus st = CT_OK;
    for (int g = 0; g < ngroups && st == CT_OK; g++)
        st = add_group(o, &groups[g], g, def, who);
    if (st == CT_OK) st = check_unique(o, who);
    for (int g = 0; g < ngroups && st == CT_OK && vt->check; g++)
        st = vt->check(o, &o->groups[g], g);
    if (st == CT_OK) {
        o->state =
            calloc((size_t)(o->nparams * (vt->nbuf ? vt->nbuf : 1)), sizeof *o->state);
        o->psteps = calloc((size_t)o->nparams, sizeof *o->psteps);
        o->fresh = calloc((size_t)o->nparams, sizeof *o->fresh);
        o->spans = calloc((size_t)ngroups, sizeof *o->spans);
        o->scratch = calloc((size_t)o->nparams, sizeof *o->scratch);
        if (!o->state || !o->psteps || !o->fresh || !o->spans || !o->scratch)
            st = ct_error(CT_ERR_OOM, "%s: out of memory", who);
    }
    if (st != CT_OK) {
        optim_free(o);
        return NULL;
    }
    return o;
}

void optim_free(Optimizer *o)
{
    if (!o) return;
    if (o->state)
        for (int64_t i = 0; i < o->nparams * o->vt->nbuf; i++) tensor_free(o->state[i]);
    optim_spans_free(o);
    free(o->fresh);
    free(o->scratch);
    for (int g = 0; g < o->ngroups; g++) free(o->groups[g].params);
    free(o->groups);
    free(o->state);
    free(o->psteps);
    free(o);
}

/* ------------------------------------------------------------- accessors */

static bool group_ok(const Optimizer *o, int group, const char *fn)
{
    if (!o) {
        ct_error(CT_ERR_NULL, "%s: NULL optimizer", fn);
        return false;
    }
    if (group < 0 || group >= o->ngroups) {
        ct_error(CT_ERR_INVALID, "%s: %s has no group %d (%d groups)", fn, o->vt->name,
                 group, o->ngroups);
        return false;
    }
    return true;
}

const char *optim_name(const Optimizer *o)
{
    return o ? o->vt->name : "(null)";
}

int optim_num_groups(const Optimizer *o)
{
    return o ? o->ngroups : 0;
}

int64_t optim_step_count(const Optimizer *o)
{
    return o ? o->step : 0;
}

double optim_get_lr(const Optimizer *o, int group)
{
    return group_ok(o, group, "optim_get_lr") ? o->groups[group].lr : NAN;
}

void optim_set_lr(Optimizer *o, int group, double lr)
{
    if (group_ok(o, group, "optim_set_lr")) o->groups[group].lr = lr;
}

double optim_get_momentum(const Optimizer *o, int group)
{
    return group_ok(o, group, "optim_get_momentum") ? o->groups[group].momentum : NAN;
}

void optim_set_momentum(Optimizer *o, int group, double momentum)
{
    if (group_ok(o, group, "optim_set_momentum")) o->groups[group].momentum = momentum;
}

/* ------------------------------------------------------------ zero_grad */

CtStatus optim_zero_grad(Optimizer *o)
{
    if (!o) return ct_error(CT_ERR_NULL, "optim_zero_grad: NULL optimizer");
    for (int g = 0; g < o->ngroups; g++) {
        bool done;
        CtStatus st = optim_group_zero_grad(o, g, &done);
        for (int64_t i = 0; i < o->groups[g].n && st == CT_OK && !done; i++) {
            Tensor *grad = tensor_grad(o->groups[g].params[i]);
            if (grad) st = tensor_zero_(grad);
        }
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

/* ----------------------------------------------------------------- step */

/* Everything the fused kernels assume, checked before anything is written. */
static CtStatus check_param(const Optimizer *o, int64_t idx, const Tensor *p)
{
    const Tensor *g = tensor_grad(p);
    char pb[96], gb[96];
    CtDType dt = tensor_dtype(p);
    if (!tensor_is_contiguous(p) || !tensor_is_contiguous(g) ||
        (dt != CT_F32 && dt != CT_F64))
        return ct_error(CT_ERR_UNSUPPORTED,
                        "%s: parameter %lld \"%s\" %s (grad %s): only contiguous f32 "
                        "and f64 parameters and gradients are supported",
                        o->vt->name, (long long)idx, tensor_name(p),
                        tensor_describe(p, pb, sizeof pb),
                        tensor_describe(g, gb, sizeof gb));
    if (tensor_dtype(g) != dt || tensor_numel(g) != tensor_numel(p) ||
        !ct_device_eq(tensor_device(g), tensor_device(p)))
        return ct_error(CT_ERR_SHAPE, "%s: parameter %lld \"%s\" %s has a gradient %s",
                        o->vt->name, (long long)idx, tensor_name(p),
                        tensor_describe(p, pb, sizeof pb),
                        tensor_describe(g, gb, sizeof gb));
    return CT_OK;
}

/* A zeroed tensor like p that no caller's scope owns: made inside a private
 * scope and retained before the scope closes. */
Tensor *optim_new_state(Tensor *p)
{
    CtScope *s = ct_scope_open();
    if (!s) return NULL;
    Tensor *t = tensor_zeros_like(p);
    if (t) tensor_retain(t);
    ct_scope_close(s);
    return t;
}

/* Creates the buffers this step needs, one block per group where the
 * whole group needs them; fresh[idx] gets a bit per new one. On failure the
 * buffers made here are released again. */
static CtStatus make_buffers(Optimizer *o, unsigned *fresh)
{
    const OptimVtable *vt = o->vt;
    CtStatus st = CT_OK;
    for (int g = 0; g < o->ngroups && st == CT_OK; g++) {
        const OptimGroupHp *h = &o->groups[g];
        for (int b = 0; b < vt->nbuf && st == CT_OK; b++)
            if (vt->uses_buf(o, h, b)) st = optim_group_make_buffer(o, g, b, fresh);
        for (int64_t i = 0; i < h->n && st == CT_OK; i++) {
            int64_t idx = h->first + i;
            if (!optim_wants_update(h->params[i])) continue;
            for (int b = 0; b < vt->nbuf && st == CT_OK; b++) {
                Tensor **slot = &o->state[idx * vt->nbuf + b];
                if (*slot || !vt->uses_buf(o, h, b)) continue;
                if (!(*slot = optim_new_state(h->params[i])))
                    st = ct_error_wrap(CT_OK,
                                       "%s: cannot create state %s for parameter %lld",
                                       vt->name, vt->buf_names[b], (long long)idx);
                else
                    fresh[idx] |= 1u << b;
            }
        }
    }
    if (st != CT_OK)
        for (int64_t idx = 0; idx < o->nparams; idx++)
            for (int b = 0; b < vt->nbuf; b++)
                if (fresh[idx] & (1u << b)) {
                    tensor_free(o->state[idx * vt->nbuf + b]);
                    o->state[idx * vt->nbuf + b] = NULL;
                }
    return st;
}

/* One op per parameter: the path of groups that are not packed. With
 * zero_grad, each update zeroes its gradient, and a gradient of a
 * parameter not updated (frozen) is zeroed on its own. */
static CtStatus update_params(Optimizer *o, const OptimGroupHp *h, const unsigned *fresh,
                              bool zero_grad)
{
    const OptimVtable *vt = o->vt;
    CtStatus st = CT_OK;
    for (int64_t i = 0; i < h->n && st == CT_OK; i++) {
        Tensor *p = h->params[i];
        int64_t idx = h->first + i;
        if (!optim_wants_update(p)) {
            if (zero_grad && tensor_grad(p)) st = tensor_zero_(tensor_grad(p));
            continue;
        }
        OptimStep s = {.param = p,
                       .grad = tensor_grad(p),
                       .fresh = fresh[idx],
                       .step = ++o->psteps[idx],
                       .zero_grad = zero_grad};
        for (int b = 0; b < vt->nbuf; b++)
            s.buf[b] = vt->uses_buf(o, h, b) ? o->state[idx * vt->nbuf + b] : NULL;
        st = vt->update(o, h, &s);
    }
    return st;
}

static CtStatus step(Optimizer *o, bool zero_grad, const char *fn)
{
    if (!o) return ct_error(CT_ERR_NULL, "%s: NULL optimizer", fn);
    for (int g = 0; g < o->ngroups; g++) {
        const OptimGroupHp *h = &o->groups[g];
        for (int64_t i = 0; i < h->n; i++) {
            if (!optim_wants_update(h->params[i])) continue;
            CtStatus st = check_param(o, h->first + i, h->params[i]);
            if (st != CT_OK) return st;
        }
    }
    CtStatus st = CT_OK;
    for (int g = 0; g < o->ngroups && st == CT_OK; g++)
        for (int b = 0; b < o->vt->nbuf && st == CT_OK; b++)
            st = optim_group_follow(o, g, b);
    memset(o->fresh, 0, (size_t)o->nparams * sizeof *o->fresh);
    if (st == CT_OK) st = make_buffers(o, o->fresh);
    for (int g = 0; g < o->ngroups && st == CT_OK; g++) {
        bool done;
        st = optim_group_update(o, g, o->fresh, zero_grad, &done);
        if (st == CT_OK && !done)
            st = update_params(o, &o->groups[g], o->fresh, zero_grad);
    }
    if (st == CT_OK) o->step++;
    return st;
}

CtStatus optim_step(Optimizer *o)
{
    return step(o, false, "optim_step");
}

CtStatus optim_step_zero_grad(Optimizer *o)
{
    return step(o, true, "optim_step_zero_grad");
}
