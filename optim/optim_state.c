/* optim_state_save / optim_state_load.
 *
 * Names (PyTorch's state_dict flattened):
 *   step                              0-d f64, optimizer steps taken
 *   param_groups.<g>.params           1-d i64, global indices of the group's parameters
 *   param_groups.<g>.<hp>             0-d f64, hp in lr weight_decay momentum beta2 eps
 *   state.<i>.<buffer>                the live buffer ("momentum_buffer", "exp_avg", ...)
 *   state.<i>.step                    0-d f64, updates of parameter i (Adam, RMSprop)
 *   type                              1-d u8, the optimizer's name ("SGD", "AdamW", ...)
 *   options.<o>                       0-d f64, o in dampening nesterov amsgrad centered
 *
 * Indices are canonical decimals ("0", "12"; never "00" or "+1"). type and
 * options (the optimizer-wide settings the update rule or the buffers depend
 * on) make load refuse a state of another optimizer or configuration; a
 * state without them (saved before they existed) is loaded unchecked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

#define NHP 5
static const char *const HP_NAMES[NHP] = {"lr", "weight_decay", "momentum", "beta2",
                                          "eps"};

static double *hp_field(OptimGroupHp *h, int k)
{
    double *f[NHP] = {&h->lr, &h->weight_decay, &h->momentum, &h->beta2, &h->eps};
    return f[k];
}

#define NOPT 4
static const char *const OPT_NAMES[NOPT] = {"dampening", "nesterov", "amsgrad",
                                            "centered"};

static double opt_value(const Optimizer *o, int k)
{
    const OptimFlags *f = &o->flags;
    const double v[NOPT] = {f->dampening, f->nesterov, f->amsgrad, f->centered};
    return v[k];
}

/* The longest optimizer name a "type" entry may hold, NUL included. */
#define TYPE_MAX 32

/* Adds a 0-d f64 scalar; the private scope lets the dict hold the only
 * reference whether or not the caller has a scope open. */
static CtStatus add_scalar(CtStateDict *d, const char *name, double v)
{
    CtScope *s = ct_scope_open();
    if (!s) return ct_error(CT_ERR_OOM, "optim_state_save: out of memory");
    Tensor *t = tensor_scalar(v, CT_F64, ct_cpu());
    CtStatus st = t ? ct_state_dict_add(d, name, t) : ct_last_status();
    ct_scope_close(s);
    return st;
}

static CtStatus add_indices(CtStateDict *d, const char *name, const OptimGroupHp *h)
{
    int64_t *idx = malloc((size_t)h->n * sizeof *idx);
    if (!idx) return ct_error(CT_ERR_OOM, "optim_state_save: out of memory");
    for (int64_t i = 0; i < h->n; i++) idx[i] = h->first + i;
    CtScope *s = ct_scope_open();
    Tensor *t = s ? tensor_from_data(idx, 1, &h->n, CT_I64, ct_cpu()) : NULL;
    CtStatus st =
        t ? ct_state_dict_add(d, name, t) : ct_error(CT_ERR_OOM, "out of memory");
    ct_scope_close(s);
    free(idx);
    return st;
}

/* Adds "type": the optimizer's name as the bytes of a 1-d u8 tensor. */
static CtStatus add_type(CtStateDict *d, const char *type)
{
    int64_t n = (int64_t)strlen(type);
    CtScope *s = ct_scope_open();
    if (!s) return ct_error(CT_ERR_OOM, "optim_state_save: out of memory");
    Tensor *t = tensor_from_data(type, 1, &n, CT_U8, ct_cpu());
    CtStatus st = t ? ct_state_dict_add(d, "type", t) : ct_last_status();
    ct_scope_close(s);
    return st;
}

static CtStatus save_into(const Optimizer *o, CtStateDict *d)
{
    char name[96];
    CtStatus st = add_type(d, o->vt->name);
    for (int k = 0; k < NOPT && st == CT_OK; k++) {
        snprintf(name, sizeof name, "options.%s", OPT_NAMES[k]);
        st = add_scalar(d, name, opt_value(o, k));
    }
    if (st == CT_OK) st = add_scalar(d, "step", (double)o->step);
    for (int g = 0; g < o->ngroups && st == CT_OK; g++) {
        OptimGroupHp *h = &o->groups[g];
        snprintf(name, sizeof name, "param_groups.%d.params", g);
        st = add_indices(d, name, h);
        for (int k = 0; k < NHP && st == CT_OK; k++) {
            snprintf(name, sizeof name, "param_groups.%d.%s", g, HP_NAMES[k]);
            st = add_scalar(d, name, *hp_field(h, k));
        }
    }
    const OptimVtable *vt = o->vt;
    for (int64_t i = 0; i < o->nparams && st == CT_OK; i++) {
        if (vt->has_step && o->psteps[i] > 0) {
            snprintf(name, sizeof name, "state.%lld.step", (long long)i);
            st = add_scalar(d, name, (double)o->psteps[i]);
        }
        for (int b = 0; b < vt->nbuf && st == CT_OK; b++) {
            Tensor *t = o->state[i * vt->nbuf + b];
            if (!t) continue;
            snprintf(name, sizeof name, "state.%lld.%s", (long long)i, vt->buf_names[b]);
            st = ct_state_dict_add(d, name, t);
        }
    }
    return st;
}

CtStatus optim_state_save(const Optimizer *o, CtStateDict *out)
{
    if (!o || !out) return ct_error(CT_ERR_NULL, "optim_state_save: NULL argument");
    /* Built aside and appended only when complete: out is never half-filled. */
    CtStateDict *tmp = ct_state_dict_create();
    if (!tmp) return ct_error(CT_ERR_OOM, "optim_state_save: out of memory");
    CtStatus st = save_into(o, tmp);
    for (int64_t i = 0; i < ct_state_dict_size(tmp) && st == CT_OK; i++)
        if (ct_state_dict_get(out, ct_state_dict_name(tmp, i)))
            st = ct_error(CT_ERR_INVALID, "optim_state_save: out already holds \"%s\"",
                          ct_state_dict_name(tmp, i));
    for (int64_t i = 0; i < ct_state_dict_size(tmp) && st == CT_OK; i++)
        st = ct_state_dict_add(out, ct_state_dict_name(tmp, i),
                               ct_state_dict_tensor(tmp, i));
    ct_state_dict_free(tmp);
    return st;
}

/* ------------------------------------------------------------------ load */

/* A parsed entry name: kind 'S' step, 'G' group field (k = hp index or NHP
 * for params), 'P' parameter state (k = buffer index or -1 for step), 'T'
 * type, 'O' option (k = option index). */
typedef struct Entry {
    char kind;
    int64_t index;
    int k;
} Entry;

/* Reads "<prefix><i>.<rest>" with i a canonical decimal (no sign, space or
 * leading zero), so that an accepted name is the one load looks up. */
static bool parse_index(const char *s, const char *prefix, int64_t *idx,
                        const char **rest)
{
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0) return false;
    const char *p = s + n;
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || digits > 18 || p[digits] != '.' || (p[0] == '0' && digits > 1))
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < digits; i++) v = v * 10 + (p[i] - '0');
    *idx = v;
    *rest = p + digits + 1;
    return true;
}

static bool parse_setting(const char *name, Entry *e)
{
    if (strcmp(name, "type") == 0) {
        e->kind = 'T';
        return true;
    }
    if (strncmp(name, "options.", 8) != 0) return false;
    e->kind = 'O';
    for (e->k = 0; e->k < NOPT; e->k++)
        if (strcmp(name + 8, OPT_NAMES[e->k]) == 0) return true;
    return false;
}

static bool parse_name(const Optimizer *o, const char *name, Entry *e)
{
    const char *rest;
    if (strcmp(name, "step") == 0) {
        e->kind = 'S';
        return true;
    }
    if (parse_setting(name, e)) return true;
    if (parse_index(name, "param_groups.", &e->index, &rest)) {
        e->kind = 'G';
        for (e->k = 0; e->k < NHP; e->k++)
            if (strcmp(rest, HP_NAMES[e->k]) == 0) return e->index < o->ngroups;
        return strcmp(rest, "params") == 0 && e->index < o->ngroups;
    }
    if (parse_index(name, "state.", &e->index, &rest)) {
        e->kind = 'P';
        if (e->index >= o->nparams) return false;
        if (o->vt->has_step && strcmp(rest, "step") == 0) {
            e->k = -1;
            return true;
        }
        for (e->k = 0; e->k < o->vt->nbuf; e->k++)
            if (strcmp(rest, o->vt->buf_names[e->k]) == 0) return true;
    }
    return false;
}

static Tensor *param_at(const Optimizer *o, int64_t idx)
{
    for (int g = 0; g < o->ngroups; g++)
        if (idx < o->groups[g].first + o->groups[g].n)
            return o->groups[g].params[idx - o->groups[g].first];
    return NULL;
}

static bool same_shape(const Tensor *a, const Tensor *b)
{
    if (tensor_ndim(a) != tensor_ndim(b)) return false;
    for (int d = 0; d < tensor_ndim(a); d++)
        if (tensor_shape(a)[d] != tensor_shape(b)[d]) return false;
    return true;
}

static CtStatus check_group_params(const Optimizer *o, int g, const Tensor *t)
{
    const OptimGroupHp *h = &o->groups[g];
    char tb[96];
    if (tensor_ndim(t) != 1 || tensor_numel(t) != h->n)
        return ct_error(
            CT_ERR_INVALID,
            "optim_state_load: param_groups.%d.params is %s but %s's group %d "
            "has %lld parameters",
            g, tensor_describe(t, tb, sizeof tb), o->vt->name, g, (long long)h->n);
    return CT_OK;
}

/* Checks one entry against o; sets *seen bits for required entries. */
static CtStatus check_entry(const Optimizer *o, const char *name, const Tensor *t,
                            unsigned char *seen)
{
    Entry e;
    char tb[96], pb[96];
    if (!parse_name(o, name, &e))
        return ct_error(
            CT_ERR_INVALID,
            "optim_state_load: unexpected entry \"%s\" for %s with %d group(s) "
            "and %lld parameters",
            name, o->vt->name, o->ngroups, (long long)o->nparams);
    if (e.kind == 'T' || e.kind == 'O') return CT_OK; /* check_kind's */
    if (e.kind == 'G' && e.k == NHP) {
        seen[1 + e.index * (NHP + 1) + NHP] = 1;
        return check_group_params(o, (int)e.index, t);
    }
    if (e.kind == 'S' || e.kind == 'G' || e.k == -1) {
        if (tensor_numel(t) != 1)
            return ct_error(CT_ERR_INVALID,
                            "optim_state_load: \"%s\" is %s, expected a scalar", name,
                            tensor_describe(t, tb, sizeof tb));
        /* step counts are whole numbers in [0, 2^53]: load rounds them to
         * int64_t and steps count on from there */
        double v = e.kind == 'G' ? 0 : tensor_item(t);
        if (!(v >= 0 && v <= 0x1p53 && v == floor(v)))
            return ct_error(CT_ERR_INVALID,
                            "optim_state_load: \"%s\" is %g, not a step count (a whole "
                            "number in [0, 2^53])",
                            name, v);
        if (e.kind == 'S') seen[0] = 1;
        if (e.kind == 'G') seen[1 + e.index * (NHP + 1) + e.k] = 1;
        return CT_OK;
    }
    const Tensor *p = param_at(o, e.index);
    if (!same_shape(t, p))
        return ct_error(CT_ERR_SHAPE,
                        "optim_state_load: \"%s\" is %s but parameter %lld is %s", name,
                        tensor_describe(t, tb, sizeof tb), (long long)e.index,
                        tensor_describe(p, pb, sizeof pb));
    return CT_OK;
}

CtStatus optim_state_type(const CtStateDict *in, char *type, size_t cap)
{
    const Tensor *t = ct_state_dict_get(in, "type");
    char tb[96];
    if (cap > 0) type[0] = '\0';
    if (!t) return CT_OK;
    int64_t n = tensor_numel(t);
    if (tensor_dtype(t) != CT_U8 || tensor_ndim(t) != 1 || n < 1 || (uint64_t)n >= cap)
        return ct_error(CT_ERR_INVALID,
                        "optim_state_load: \"type\" is %s, expected an optimizer name "
                        "(u8[1..%d])",
                        tensor_describe(t, tb, sizeof tb), (int)cap - 1);
    type[n] = '\0';
    return tensor_copy_to_host(t, type, CT_U8);
}

/* A state of another optimizer type, or saved with other options, would
 * load by slot into the wrong hyper-parameters and buffers: refused. */
static CtStatus check_kind(const Optimizer *o, const CtStateDict *in)
{
    char type[TYPE_MAX], name[32], tb[96];
    CtStatus st = optim_state_type(in, type, sizeof type);
    if (st != CT_OK) return st;
    if (*type && strcmp(type, o->vt->name) != 0)
        return ct_error(CT_ERR_INVALID,
                        "optim_state_load: the state was saved by %s, this optimizer is "
                        "%s (another optimizer type)",
                        type, o->vt->name);
    for (int k = 0; k < NOPT; k++) {
        snprintf(name, sizeof name, "options.%s", OPT_NAMES[k]);
        const Tensor *t = ct_state_dict_get(in, name);
        if (!t) continue;
        if (tensor_numel(t) != 1)
            return ct_error(CT_ERR_INVALID,
                            "optim_state_load: \"%s\" is %s, expected a scalar", name,
                            tensor_describe(t, tb, sizeof tb));
        double v = tensor_item(t);
        if (v != opt_value(o, k))
            return ct_error(CT_ERR_INVALID,
                            "optim_state_load: the state was saved with %s %g, this %s "
                            "has %s %g",
                            OPT_NAMES[k], v, o->vt->name, OPT_NAMES[k], opt_value(o, k));
    }
    return CT_OK;
}

static CtStatus check_all(const Optimizer *o, const CtStateDict *in)
{
    CtStatus kst = check_kind(o, in);
    if (kst != CT_OK) return kst;
    size_t nseen = 1 + (size_t)o->ngroups * (NHP + 1);
    unsigned char *seen = calloc(nseen, 1);
    if (!seen) return ct_error(CT_ERR_OOM, "optim_state_load: out of memory");
    CtStatus st = CT_OK;
    for (int64_t i = 0; i < ct_state_dict_size(in) && st == CT_OK; i++)
        st = check_entry(o, ct_state_dict_name(in, i), ct_state_dict_tensor(in, i), seen);
    for (size_t k = 0; k < nseen && st == CT_OK; k++) {
        if (seen[k]) continue;
        int g = (int)((k - 1) / (NHP + 1)), f = (int)((k - 1) % (NHP + 1));
        if (k == 0)
            st = ct_error(CT_ERR_INVALID, "optim_state_load: missing entry \"step\"");
        else
            st = ct_error(CT_ERR_INVALID,
                          "optim_state_load: missing entry \"param_groups.%d.%s\"", g,
                          f == NHP ? "params" : HP_NAMES[f]);
    }
    free(seen);
    return st;
}

/* Replaces parameter i's state with the dict's (absent buffers are dropped). */
static CtStatus load_param(Optimizer *o, int64_t i, const CtStateDict *in)
{
    const OptimVtable *vt = o->vt;
    char name[96];
    snprintf(name, sizeof name, "state.%lld.step", (long long)i);
    const Tensor *st_t = vt->has_step ? ct_state_dict_get(in, name) : NULL;
    o->psteps[i] = st_t ? (int64_t)llround(tensor_item(st_t)) : 0;
    for (int b = 0; b < vt->nbuf; b++) {
        Tensor **slot = &o->state[i * vt->nbuf + b];
        snprintf(name, sizeof name, "state.%lld.%s", (long long)i, vt->buf_names[b]);
        const Tensor *src = ct_state_dict_get(in, name);
        if (!src) {
            tensor_free(*slot);
            *slot = NULL;
            continue;
        }
        if (!*slot && !(*slot = optim_new_state(param_at(o, i))))
            return ct_error(CT_ERR_OOM, "optim_state_load: cannot create %s", name);
        CtStatus st = tensor_copy_(*slot, src);
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

/* Whether `in` holds buffer b for every parameter of group g (then the
 * buffers are made as one block, as a step would). */
static bool group_has_all(const Optimizer *o, int g, int b, const CtStateDict *in)
{
    char name[96];
    const OptimGroupHp *h = &o->groups[g];
    for (int64_t i = 0; i < h->n; i++) {
        snprintf(name, sizeof name, "state.%lld.%s", (long long)(h->first + i),
                 o->vt->buf_names[b]);
        if (!ct_state_dict_get(in, name)) return false;
    }
    return true;
}

CtStatus optim_state_load(Optimizer *o, const CtStateDict *in)
{
    if (!o || !in) return ct_error(CT_ERR_NULL, "optim_state_load: NULL argument");
    CtStatus st = check_all(o, in);
    if (st != CT_OK) return st;
    char name[96];
    o->step = (int64_t)llround(tensor_item(ct_state_dict_get(in, "step")));
    for (int g = 0; g < o->ngroups; g++)
        for (int k = 0; k < NHP; k++) {
            snprintf(name, sizeof name, "param_groups.%d.%s", g, HP_NAMES[k]);
            *hp_field(&o->groups[g], k) = tensor_item(ct_state_dict_get(in, name));
        }
    for (int g = 0; g < o->ngroups && st == CT_OK; g++)
        for (int b = 0; b < o->vt->nbuf && st == CT_OK; b++)
            if (group_has_all(o, g, b, in)) st = optim_group_make_buffer(o, g, b, NULL);
    for (int64_t i = 0; i < o->nparams && st == CT_OK; i++) st = load_param(o, i, in);
    return st;
}
