/* Private to optim/: the Optimizer base shared by SGD, Adam(W) and RMSprop.
 *
 * optimizer.c owns everything generic: parameter groups and their resolved
 * hyper-parameters, per-parameter state tensors (created lazily, persistent),
 * per-parameter step counts, validation of a step before anything is
 * written, zero_grad and state save/load. An algorithm supplies a const
 * OptimVtable whose `update` is one fused pass over one parameter's data.
 */
#ifndef CTRAINER_OPTIM_INTERNAL_H
#define CTRAINER_OPTIM_INTERNAL_H

#include <math.h>

#include "ctrainer/optim.h"

/* Same threshold as the tensor layer's CPU kernels (tensor/cpu/cpu.h): below
 * ~1M elements an OpenMP fork/join costs more than the loop. */
#define OPTIM_PAR_MIN 1048576

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

/* One parameter's view for an update: contiguous CPU data of one float
 * dtype (f32 or f64), state buffers of the same dtype and numel (NULL when
 * the configuration does not use them). fresh has bit b set when buffer b
 * was created (zeroed) for this step. step is the parameter's update count
 * including this one (1 on the first update). */
typedef struct OptimParam {
    void *p;
    const void *g;
    void *buf[OPTIM_MAX_BUFS];
    unsigned fresh;
    int64_t numel;
    CtDType dtype;
    int64_t step;
} OptimParam;

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
    /* One fused pass over one parameter; cannot fail. */
    void (*update)(const Optimizer *o, const OptimGroupHp *g, OptimParam *p);
} OptimVtable;

struct Optimizer {
    const OptimVtable *vt;
    int ngroups;
    OptimGroupHp *groups;
    int64_t nparams; /* over all groups */
    Tensor **state;  /* nparams * vt->nbuf, NULL until created */
    int64_t *psteps; /* per-parameter update counts */
    int64_t step;    /* optim_step calls that updated */
    OptimFlags flags;
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

/* Runs fn over [0, op->numel) in fixed chunks, on OpenMP threads when the
 * parameter has at least OPTIM_PAR_MIN elements. The kernels are plain
 * loops over [lo, hi): outside the OpenMP region their restrict pointers and
 * constant flags let the compiler vectorize them. */
typedef void (*OptimRangeFn)(const void *ctx, const OptimParam *op, int64_t lo,
                             int64_t hi);
void optim_parallel_for(OptimRangeFn fn, const void *ctx, const OptimParam *op);

/* Forces inlining, so a kernel body called with constant flags is
 * specialised per flag combination. */
#if defined(__GNUC__)
#define OPTIM_INLINE static inline __attribute__((always_inline))
#else
#define OPTIM_INLINE static inline
#endif

/* A zeroed persistent tensor like p (owned by the caller, by no scope). */
Tensor *optim_new_state(Tensor *p);

/* True when x is finite and >= 0. */
static inline bool optim_nonneg(double x)
{
    return isfinite(x) && x >= 0;
}

#endif
