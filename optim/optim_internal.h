/* Private to optim/: the Optimizer base shared by SGD, Adam(W) and RMSprop.
 *
 * optimizer.c owns everything generic: parameter groups and their resolved
 * hyper-parameters, per-parameter state tensors (created lazily, persistent),
 * per-parameter step counts, validation of a step before anything is
 * written, zero_grad and state save/load. An algorithm supplies a const
 * OptimVtable whose `update` builds one backend op (ctrainer/tensor_optim.h)
 * over one parameter, or over a whole group when its parameters, gradients
 * and state buffers each lie back to back in one block (group.c).
 */
#ifndef CTRAINER_OPTIM_INTERNAL_H
#define CTRAINER_OPTIM_INTERNAL_H

#include <math.h>

#include "ctrainer/optim.h"
#include "ctrainer/tensor_optim.h"

#define OPTIM_MAX_BUFS 4

/* A group's resolved hyper-parameters (no NAN left). */
typedef struct OptimGroupHp {
    Tensor **params; /* owned array of borrowed tensors */
    int64_t n;
    int64_t first; /* global index of params[0] over all groups */
    double lr, weight_decay, momentum, beta2, eps;
} OptimGroupHp;

/* Optimizer-wide options that OptimGroup has no field for. */
typedef struct OptimFlags {
    double dampening; /* SGD */
    bool nesterov;    /* SGD */
    bool amsgrad;     /* Adam, AdamW */
    bool centered;    /* RMSprop */
} OptimFlags;

/* The operands of one update: one parameter and its gradient, or the spans
 * of a whole group; buf[b] is NULL when the configuration does not use
 * buffer b. fresh has bit b set when buffer b was created (zeroed) for this
 * step. step is the update count including this one (1 on the first).
 * zero_grad: the update zeroes grad in its pass (the Tensor*Args field). */
typedef struct OptimStep {
    Tensor *param;
    Tensor *grad;
    Tensor *buf[OPTIM_MAX_BUFS];
    unsigned fresh;
    int64_t step;
    bool zero_grad;
} OptimStep;

typedef struct OptimVtable {
    const char *name; /* "SGD", "Adam", ... */
    int nbuf;
    /* PyTorch's state key for each buffer ("momentum_buffer", "exp_avg"). */
    const char *buf_names[OPTIM_MAX_BUFS];
    /* Whether state.<i>.step is kept and saved (Adam, RMSprop; not SGD). */
    bool has_step;
    /* Whether buffer b is needed under group g's current settings. */
    bool (*uses_buf)(const Optimizer *o, const OptimGroupHp *g, int b);
    /* Validates resolved settings at creation (group index gi for messages). */
    CtStatus (*check)(const Optimizer *o, const OptimGroupHp *g, int gi);
    /* One op over s's operands (checked by the caller: contiguous, one
     * float dtype and numel). */
    CtStatus (*update)(const Optimizer *o, const OptimGroupHp *g, const OptimStep *s);
} OptimVtable;

/* One group's block views: params, grads and each state buffer as one 1-d
 * tensor each (NULL until built or when the group is not packed). */
typedef struct OptimSpans {
    Tensor *param, *grad, *buf[OPTIM_MAX_BUFS];
} OptimSpans;

struct Optimizer {
    const OptimVtable *vt;
    int ngroups;
    OptimGroupHp *groups;
    int64_t nparams; /* over all groups */
    Tensor **state;  /* nparams * vt->nbuf, NULL until created */
    int64_t *psteps; /* per-parameter update counts */
    int64_t step;    /* optim_step calls that updated */
    OptimFlags flags;
    unsigned *fresh;   /* nparams: per-step scratch of optim_step */
    OptimSpans *spans; /* ngroups: cached block views (group.c) */
    Tensor **scratch;  /* nparams: operand lists of group.c */
};

/* Defaults that fill a group's NAN fields. */
typedef struct OptimDefaults {
    double lr, weight_decay, momentum, beta2, eps;
} OptimDefaults;

/* Builds an optimizer from explicit groups; validates the groups (non-empty
 * list, no NULL or duplicated parameter, lr/eps/weight_decay/momentum >= 0)
 * and then vt->check. `who` names the constructor in messages. */
Optimizer *optim_create_common(const OptimVtable *vt, const char *who, int ngroups,
                               const OptimGroup *groups, const OptimDefaults *def,
                               const OptimFlags *flags);

/* Builds an optimizer with one group holding every parameter of model. */
Optimizer *optim_create_from_module(const OptimVtable *vt, const char *who, Module *model,
                                    const OptimDefaults *def, const OptimFlags *flags);

/* Each algorithm's vtable and the translation of its Args (from_module.c
 * uses them for the Module constructors). */
extern const OptimVtable optim_sgd_vt, optim_adam_vt, optim_adamw_vt, optim_rmsprop_vt;
void optim_sgd_settings(const SgdArgs *a, OptimDefaults *d, OptimFlags *f);
void optim_adam_settings(const AdamArgs *a, OptimDefaults *d, OptimFlags *f);
void optim_rmsprop_settings(const RmspropArgs *a, OptimDefaults *d, OptimFlags *f);

/* Whether parameter p takes part in this step. */
static inline bool optim_wants_update(const Tensor *p)
{
    return tensor_requires_grad(p) && tensor_grad(p);
}

/* group.c: creates buffer b (zeroed) for every parameter of group gi as
 * views into one new block, when no parameter has it yet; sets bit b of
 * fresh[] for each (fresh may be NULL). Otherwise does nothing. */
CtStatus optim_group_make_buffer(Optimizer *o, int gi, int b, unsigned *fresh);
/* group.c: where buffer b of group gi lies on another device than its
 * parameters (state loaded before the model moved to its GPU), copies it
 * to theirs, in one block as optim_group_make_buffer lays it out where
 * every parameter has the state and the group allows; the old states are
 * released. Nothing to do otherwise. */
CtStatus optim_group_follow(Optimizer *o, int gi, int b);
/* group.c: runs the update of group gi as ONE op over its spans when the
 * group is packed (every parameter updated, spans back to back, state
 * buffers alike, one step count), zeroing the gradients in the same pass
 * when zero_grad; *done says whether it did. Cheap when the spans are
 * cached: no allocation after the first step. */
CtStatus optim_group_update(Optimizer *o, int gi, const unsigned *fresh, bool zero_grad,
                            bool *done);
/* group.c: zeroes group gi's gradients with one fill when they lie back to
 * back; *done says whether it did. */
CtStatus optim_group_zero_grad(Optimizer *o, int gi, bool *done);
/* group.c: releases the cached spans. */
void optim_spans_free(Optimizer *o);

/* A zeroed persistent tensor like p (owned by the caller, by no scope). */
Tensor *optim_new_state(Tensor *p);

/* True when x is finite and >= 0. */
static inline bool optim_nonneg(double x)
{
    return isfinite(x) && x >= 0;
}

#endif
