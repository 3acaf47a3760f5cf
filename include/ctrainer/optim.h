/* ctrainer — optimizers, gradient clipping and learning-rate schedulers.
 *
 * Formulas are PyTorch's (torch.optim), including bias correction, the
 * placement of eps and decoupled weight decay, so recipes port unchanged.
 * Parameters that do not require grad, or have no gradient yet, are skipped
 * (frozen layers cost nothing). Optimizer state (momentum buffers, moments)
 * is f32 or the parameter's dtype if wider, created on first step.
 * Steps and clipping run as backend ops on contiguous f32/f64 tensors on
 * any device (one op per packed group: see tensor_optim.h); other
 * parameters fail the step with CT_ERR_UNSUPPORTED before anything is
 * written.
 *
 * Schedulers step once per optimizer update and set each parameter group's
 * learning rate (and, for OneCycleLR, momentum) in the optimizer; but
 * ReduceLROnPlateau steps with a metric (scheduler_step_metric).
 */
#ifndef CTRAINER_OPTIM_H
#define CTRAINER_OPTIM_H

#include "ctrainer/nn.h"
#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- optimizer */

typedef struct Optimizer Optimizer;

/* A parameter group. Hyper-parameter fields left NAN take the optimizer's
 * defaults (the *Args given at creation). params are borrowed: they must
 * outlive the optimizer (the pointer array is copied). A group needs n >= 1;
 * a parameter may appear in only one group, once. */
typedef struct OptimGroup {
    Tensor *const *params;
    int64_t n;
    double lr, weight_decay;
    double momentum; /* SGD, RMSprop; beta1 for Adam/AdamW */
    double beta2;    /* Adam/AdamW; alpha for RMSprop */
    double eps;
} OptimGroup;
/* A group with every hyper-parameter at the default. */
OptimGroup optim_group(Tensor *const *params, int64_t n);

typedef struct SgdArgs {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
} SgdArgs;
typedef struct AdamArgs {
    double lr;           /* 1e-3 in PyTorch */
    double beta1, beta2; /* 0.9, 0.999 */
    double eps;          /* 1e-8 */
    double weight_decay; /* Adam: L2 added to the gradient; AdamW: decoupled (0.01) */
    bool amsgrad;
} AdamArgs;
typedef struct RmspropArgs {
    double lr, alpha, eps, weight_decay, momentum; /* 0.01, 0.99, 1e-8, 0, 0 */
    bool centered;
} RmspropArgs;

/* One group holding every parameter of `model` (packed or not; frozen ones
 * included, and skipped while frozen). The Args are taken as given: fill
 * every field (PyTorch's defaults are in comments); NULL args is an error.
 * Errors (NULL + message): a model without parameters, lr, eps or
 * weight_decay negative or not finite, momentum < 0, Adam betas outside
 * [0, 1), RMSprop alpha < 0, nesterov without momentum or with dampening. */
Optimizer *optim_sgd_create(Module *model, const SgdArgs *args);
Optimizer *optim_adam_create(Module *model, const AdamArgs *args);
Optimizer *optim_adamw_create(Module *model, const AdamArgs *args);
Optimizer *optim_rmsprop_create(Module *model, const RmspropArgs *args);
/* Explicit groups with per-group overrides (validated per group, as above;
 * ngroups < 1 is an error). */
Optimizer *optim_sgd_create_groups(int ngroups, const OptimGroup *groups,
                                   const SgdArgs *args);
Optimizer *optim_adam_create_groups(int ngroups, const OptimGroup *groups,
                                    const AdamArgs *args);
Optimizer *optim_adamw_create_groups(int ngroups, const OptimGroup *groups,
                                     const AdamArgs *args);
Optimizer *optim_rmsprop_create_groups(int ngroups, const OptimGroup *groups,
                                       const RmspropArgs *args);

/* One update from the current gradients. Validates every parameter first:
 * on error nothing has been updated and the step count is unchanged. */
CtStatus optim_step(Optimizer *o);
/* Zeroes the gradients of every parameter (those that have one). */
CtStatus optim_zero_grad(Optimizer *o);
/* optim_step then optim_zero_grad, with the same results, but each update
 * zeroes the gradient it has just read in its own pass: a packed group
 * takes one op for both, where the two calls take two (on CUDA, one launch
 * instead of two). A validation error changes nothing, as in optim_step. */
CtStatus optim_step_zero_grad(Optimizer *o);
const char *optim_name(const Optimizer *o); /* "SGD", "AdamW", ... */
int optim_num_groups(const Optimizer *o);
/* Current group hyper-parameters (schedulers use these). momentum means
 * beta1 for Adam/AdamW. */
double optim_get_lr(const Optimizer *o, int group);
void optim_set_lr(Optimizer *o, int group, double lr);
double optim_get_momentum(const Optimizer *o, int group);
void optim_set_momentum(Optimizer *o, int group, double momentum);
/* Number of optimizer steps taken. */
int64_t optim_step_count(const Optimizer *o);
/* State as named tensors, PyTorch's state_dict flattened:
 *   "step"                     0-d f64: optimizer steps taken
 *   "param_groups.<g>.params"  1-d i64: global indices of group g's parameters
 *   "param_groups.<g>.<hp>"    0-d f64, hp one of lr, weight_decay, momentum,
 *                              beta2, eps (the OptimGroup fields)
 *   "state.<i>.<buffer>"       the i-th parameter over all groups, with
 *                              PyTorch's buffer names: momentum_buffer (SGD,
 *                              RMSprop), exp_avg, exp_avg_sq, max_exp_avg_sq
 *                              (Adam/AdamW), square_avg, grad_avg (RMSprop)
 *   "state.<i>.step"           0-d f64: the parameter's updates (Adam/AdamW,
 *                              RMSprop)
 *   "type"                     1-d u8: the optimizer's name (optim_name)
 *   "options.<o>"              0-d f64, o one of dampening, nesterov (SGD),
 *                              amsgrad (Adam/AdamW), centered (RMSprop); 0
 *                              where the optimizer has no such option
 * <g> and <i> are decimal without leading zeros. Parameters without state
 * have no state.<i> entries. save appends to `out` (all entries or, on
 * error, none); the buffers are the live tensors, not copies. load restores
 * the state and the group hyper-parameters; it first checks that the state
 * is of this optimizer's type and options (a state without "type" and
 * "options.*", saved before they existed, is not checked), that every name
 * is known for this optimizer, every required entry is there, group sizes
 * and buffer shapes match, and changes nothing on error (CT_ERR_INVALID
 * naming both types or the option, or CT_ERR_SHAPE naming entry and
 * parameter). */
CtStatus optim_state_save(const Optimizer *o, CtStateDict *out);
CtStatus optim_state_load(Optimizer *o, const CtStateDict *in);
/* The optimizer name a state records ("type") into type[cap], "" for a
 * state saved before types were; CT_ERR_INVALID when the entry is not a
 * name of 1 to cap - 1 bytes. */
CtStatus optim_state_type(const CtStateDict *in, char *type, size_t cap);
void optim_free(Optimizer *o);

/* ------------------------------------------------------------- clipping */

/* Scales all gradients so their global norm (norm_type 2, or INFINITY) is at
 * most max_norm, as torch.nn.utils.clip_grad_norm_ (coefficient max_norm /
 * (norm + 1e-6), clamped to 1). Returns the total norm before clipping
 * (accumulated in f64, independent of the thread count); a non-finite norm
 * is returned as is, leaves the gradients unchanged, and is recorded as a
 * CT_ERR_INVALID error naming it. Parameters without a gradient are
 * skipped. Other errors (another norm_type, max_norm < 0, a NULL parameter,
 * an unsupported gradient) return NAN with nothing scaled. */
double optim_clip_grad_norm(Tensor *const *params, int64_t n, double max_norm,
                            double norm_type);
/* Clamps every gradient element to [-clip, clip] (clip >= 0). */
CtStatus optim_clip_grad_value(Tensor *const *params, int64_t n, double clip);

/* ------------------------------------------------------------ schedulers */

typedef struct Scheduler Scheduler;

/* A scheduler is a function of its step count: after t updates group g's LR
 * is a closed-form lr(t, g) of the base LRs (PyTorch's chainable recurrences
 * give the same values up to rounding, see tests/optim/test_scheduler.c). We
 * differ from PyTorch in one way: an LR set by hand in the optimizer is
 * overwritten at the next step, not chained from. The exception is
 * ReduceLROnPlateau, which follows a metric instead (see
 * scheduler_reduce_on_plateau).
 *
 * Advances one optimizer update and writes the new learning rates (and
 * momenta) into the optimizer. The first LR (step 0) is written at
 * creation, as PyTorch does. Stepping past the end of a schedule that has
 * one (OneCycleLR: total_steps) is CT_ERR_STATE and changes nothing. For
 * ReduceLROnPlateau it only counts the update and leaves the LRs alone, so
 * the Trainer's automatic per-update step is harmless. */
CtStatus scheduler_step(Scheduler *s);
/* One ReduceLROnPlateau step with the epoch's metric (e.g. the eval loss),
 * torch's scheduler.step(metric): may lower the optimizer's LRs. Any value is
 * taken, NaN counting as no improvement (as in torch). CT_ERR_INVALID for any
 * other scheduler (they step with scheduler_step only). */
CtStatus scheduler_step_metric(Scheduler *s, double metric);
/* The LR last written into group `group` (NAN and an error for a bad group). */
double scheduler_get_last_lr(const Scheduler *s, int group);
int64_t scheduler_step_count(const Scheduler *s);
const char *scheduler_name(const Scheduler *s); /* "StepLR", "OneCycleLR", ... */
/* State: "step" (0-d i64) and "base_lrs.<g>" (0-d f64) per group, appended to
 * `out` (all or, on error such as a name already there, none). A
 * ReduceLROnPlateau adds torch's state: "best" (0-d f64, +-inf before any
 * improvement), "num_bad_epochs", "cooldown_counter", "last_epoch" (metric
 * steps taken; 0-d i64 each) and "last_lrs.<g>" (0-d f64, its current LRs).
 * A WSD scheduler adds its configuration ("total_steps", "warmup_steps",
 * "num_checkpoints", "decay_shape", "continuation": 0-d i64;
 * "decay_fraction", "min_lr_ratio", "warmup_start_lr": 0-d f64), and load
 * refuses a state saved with another configuration. load checks the entry
 * count, names, shapes and values (and the step against the schedule's end)
 * before changing anything, then writes the loaded step's LRs (and momenta;
 * ReduceLROnPlateau: last_lrs) into the optimizer, so a run resumed
 * mid-schedule continues with the LRs an uninterrupted one has (the
 * Trainer's checkpoints save and load it so). */
CtStatus scheduler_state_save(const Scheduler *s, CtStateDict *out);
CtStatus scheduler_state_load(Scheduler *s, const CtStateDict *in);
void scheduler_free(Scheduler *s);

/* Each constructor reads the optimizer's current group LRs as base LRs,
 * writes the step-0 LRs, and returns NULL with a CT_ERR_INVALID error naming
 * the scheduler and the bad value (CT_ERR_NULL for a NULL optimizer, which
 * keeps an earlier error: sticky). The optimizer must outlive the scheduler.
 * gamma must be finite and > 0; step_size, t_max, total_iters >= 1;
 * milestones strictly increasing and >= 0. */
Scheduler *scheduler_step_lr(Optimizer *o, int64_t step_size, double gamma);
Scheduler *scheduler_multistep_lr(Optimizer *o, int n, const int64_t *milestones,
                                  double gamma);
Scheduler *scheduler_exponential_lr(Optimizer *o, double gamma);
Scheduler *scheduler_cosine_annealing_lr(Optimizer *o, int64_t t_max, double eta_min);
/* PyTorch's CosineAnnealingWarmRestarts (SGDR), stepped as its step()
 * without an epoch: a cosine from the base LR towards eta_min over t_0
 * steps, then restarting at the base LR with a period t_mult times longer
 * each time (t_0, t_0 * t_mult, ...). t_0, t_mult >= 1, eta_min finite. */
Scheduler *scheduler_cosine_warm_restarts(Optimizer *o, int64_t t_0, int64_t t_mult,
                                          double eta_min);
/* PyTorch's LinearLR: factor goes from start_factor to end_factor over
 * total_iters steps. start_factor in (0, 1], end_factor in [0, 1]. */
Scheduler *scheduler_linear_lr(Optimizer *o, double start_factor, double end_factor,
                               int64_t total_iters);
/* PyTorch's ConstantLR: base * factor for the first total_iters steps, then
 * base. factor in (0, 1] (torch 1.13 takes 0 and then divides by zero),
 * total_iters >= 1. */
Scheduler *scheduler_constant_lr(Optimizer *o, double factor, int64_t total_iters);
/* PyTorch's PolynomialLR: base * (1 - min(t, total_iters) / total_iters)^power,
 * reaching 0 at total_iters (power > 0). total_iters >= 1, power finite and
 * >= 0 (torch's defaults: 5 and 1). */
Scheduler *scheduler_polynomial_lr(Optimizer *o, int64_t total_iters, double power);

typedef struct OneCycleArgs {
    double max_lr; /* per group: the same for all (and base LRs are ignored) */
    int64_t total_steps;
    double pct_start;        /* 0 -> 0.3 */
    bool anneal_linear;      /* false: cosine (PyTorch's default) */
    double div_factor;       /* 0 -> 25 */
    double final_div_factor; /* 0 -> 1e4 */
    bool no_cycle_momentum;  /* false: cycle momentum (default) */
    double base_momentum;    /* 0 -> 0.85 */
    double max_momentum;     /* 0 -> 0.95 */
    bool three_phase;
} OneCycleArgs;
/* PyTorch's OneCycleLR. Cycles the optimizer's momentum (beta1 for Adam)
 * unless no_cycle_momentum, and steps up to total_steps (stepping further is
 * an error, as in torch). pct_start in (0, 1] ((0, 0.5] with three_phase);
 * momenta in (0, 1). */
Scheduler *scheduler_one_cycle_lr(Optimizer *o, const OneCycleArgs *args);

/* transformers' get_linear_schedule_with_warmup: factor step/warmup during
 * warmup, then linear decay to 0 at total_steps (and 0 after).
 * 0 <= warmup_steps <= total_steps, total_steps >= 1. */
Scheduler *scheduler_linear_warmup_decay(Optimizer *o, int64_t warmup_steps,
                                         int64_t total_steps);

/* pytorch-accelerated's CosineLrScheduler, in update steps: linear warmup
 * from warmup_start_lr over warmup_steps, then cosine with k-decay from the
 * base LR to lr_min over exactly the remaining total - warmup - cooldown
 * steps (the reference's early cut-off is fixed), then lr_min for cooldown
 * and beyond. The exact formula is in optim/scheduler_cosine_warmup.c. Needs
 * warmup_steps + cooldown_steps < total_steps, ratios in [0, 1]. */
typedef struct CosineWarmupArgs {
    int64_t total_steps, warmup_steps, cooldown_steps;
    double lr_min;          /* absolute; used when min_lr_ratio is 0 */
    double min_lr_ratio;    /* lr_min = ratio * base lr when > 0 */
    double warmup_start_lr; /* used when warmup_start_ratio is 0 */
    double warmup_start_ratio;
    double k_decay; /* 0 -> 1 */
} CosineWarmupArgs;
Scheduler *scheduler_cosine_warmup(Optimizer *o, const CosineWarmupArgs *args);

/* pytorch-accelerated's WSDLrScheduler (Warmup-Stable-Decay, arXiv
 * 2410.05192), in update steps. The run of total_steps is cut into
 * num_checkpoints periods; each holds the base LR and then decays over its
 * last decay_fraction, so the model at each period end is a finished
 * ("post-decay") model, and the state at the period's pre-decay step can be
 * resumed to train longer instead. The exact formula is in
 * optim/scheduler_wsd.c. Deliberate differences, each a reference bug:
 *  - period ends are total, total/2, total/4, ... (floor), the spacing the
 *    reference documents ("2 checkpoints for 100K steps: [50K, 100K]"); its
 *    code puts them at total//4 * 2^i, so 2 checkpoints give [25K, 50K] and
 *    the LR stays at its minimum for the second half;
 *  - a period whose decay would be 0 steps is an error at creation (the
 *    reference divides by zero at the end of the run);
 *  - the decay_steps updates of a period all run at decayed LRs, the last
 *    one at m * base (the reference runs the first of them at the base LR
 *    and reaches m only after the period, so one decay step decays
 *    nothing);
 *  - as every scheduler here, the LR after t updates is lr(t) with lr(0)
 *    written at creation; the reference writes the base LR at creation and
 *    lr(t - 1) after t updates (its schedule runs one update late). */
typedef enum WsdDecayShape {
    WSD_DECAY_SQRT = 0,             /* m + (1 - m)(1 - sqrt(r)): the reference's
                                       default (use_inverse_sqrt_decay=True) */
    WSD_DECAY_INVERSE_PROPORTIONAL, /* 1 / (r / m + (1 - r)): the paper's
                                       (use_inverse_sqrt_decay=False); needs m > 0 */
    WSD_DECAY_LINEAR,               /* m + (1 - m)(1 - r) */
    WSD_DECAY_COSINE,               /* m + (1 - m)(1 + cos(pi r)) / 2 */
} WsdDecayShape;

/* min_lr_ratio value meaning exactly 0 (a zero field means 1e-6). */
#define WSD_MIN_LR_RATIO_ZERO (-1.0)

typedef struct WsdArgs {
    int64_t total_steps;    /* >= 1: updates of the whole run */
    int64_t warmup_steps;   /* linear warmup from warmup_start_lr (0: none);
                               at most the first period's pre-decay step */
    double warmup_start_lr; /* absolute, in [0, every base LR] when warming up
                               (the reference's default is 1e-6; 0 here means 0) */
    double decay_fraction;  /* of each period, in (0, 1]; 0 -> 0.1; at most 1/3
                               with more than one checkpoint (as the reference) */
    double min_lr_ratio;    /* m: the decay ends at m * base LR, m in [0, 1];
                               0 -> 1e-6 (the reference's lr_min);
                               WSD_MIN_LR_RATIO_ZERO for 0 */
    WsdDecayShape decay_shape;
    int num_checkpoints; /* periods (0 -> 1); needs total_steps >= 2^(n-1) */
    /* The reference's is_continuation_from_checkpoint: a new run trained on
     * from a pre-decay checkpoint's weights and optimizer state; no warmup
     * (warmup_steps and warmup_start_lr are ignored), periods over the new
     * total_steps. Load the old run's model and optimizer, not its
     * scheduler state (whose configuration differs). */
    bool continuation;
} WsdArgs;

/* One period of a WSD schedule, in update steps: [start, end); the first
 * pre_decay_step - start updates run at the base LR, and the decay_steps =
 * end - pre_decay_step updates that follow at decayed LRs, down to m * base
 * for the last. The reference's get_decay_info entries. */
typedef struct WsdPeriod {
    int64_t start, pre_decay_step, end, decay_steps;
} WsdPeriod;

/* Errors: as the other constructors (the bad field and value), NULL args. */
Scheduler *scheduler_wsd(Optimizer *o, const WsdArgs *args);
/* The number of periods, or -1 with CT_ERR_INVALID when s is not a WSD
 * scheduler (CT_ERR_NULL for NULL). */
int scheduler_wsd_num_periods(const Scheduler *s);
/* Period i (0-based) into *out. Errors: s not WSD, i out of range. */
CtStatus scheduler_wsd_period(const Scheduler *s, int i, WsdPeriod *out);
/* The reference's get_phase_info(step): the first period whose end is >=
 * step (the last one past the end). Errors: s not WSD, step < 0. */
CtStatus scheduler_wsd_phase_info(const Scheduler *s, int64_t step, WsdPeriod *out);
/* The arguments as resolved (defaults filled in). Errors: s not WSD. */
CtStatus scheduler_wsd_args(const Scheduler *s, WsdArgs *out);

/* LambdaLR: lr = base_lr * fn(step, ctx). ctx is borrowed. */
Scheduler *scheduler_lambda_lr(Optimizer *o, double (*fn)(int64_t step, void *ctx),
                               void *ctx);
/* PyTorch's ReduceLROnPlateau (torch 1.13). Start from
 * scheduler_plateau_args(), which has torch's defaults, and change fields:
 *     PlateauArgs pa = scheduler_plateau_args();
 *     pa.patience = 2;
 *     Scheduler *s = scheduler_reduce_on_plateau(opt, &pa);
 * (a zeroed struct means patience 0, threshold 0, eps 0, not torch's
 * defaults). */
typedef struct PlateauArgs {
    bool mode_max;         /* false: "min", a lower metric is better */
    double factor;         /* 0.1; new lr = max(lr * factor, min_lr) */
    int64_t patience;      /* 10: metric steps without improvement tolerated */
    double threshold;      /* 1e-4 */
    bool threshold_abs;    /* false: "rel" (best * (1 -+ threshold)) */
    int64_t cooldown;      /* 0: metric steps after a reduction whose bad
                              results are not counted */
    double min_lr;         /* 0, for every group ... */
    const double *min_lrs; /* ... or [ngroups] per group (read at creation) */
    double eps;            /* 1e-8: smaller reductions are skipped */
} PlateauArgs;
PlateauArgs scheduler_plateau_args(void);
/* Each scheduler_step_metric(s, m) does what torch's step(m) does: m
 * improves on the best metric when (mode min) m < best * (1 - threshold),
 * or m < best - threshold with threshold_abs (mode max: > and +); after
 * more than `patience` metric steps without improvement every group's LR
 * becomes max(lr * factor, min_lr) where that lowers it by more than eps,
 * and the next `cooldown` metric steps ignore bad results. As in torch the
 * LR reduced is the optimizer's current one (an LR set by hand is reduced
 * from, not overwritten); creation writes nothing; scheduler_step only
 * counts updates; scheduler_get_last_lr is the LRs after the last metric
 * step (the base LRs before one). It cannot be a SequentialLR child.
 * factor in [0, 1), patience, cooldown >= 0, threshold, eps, min_lr(s)
 * finite and >= 0 (torch checks only factor < 1); NULL args is
 * CT_ERR_NULL.
 *
 * With the Trainer, create it in TrainArgs.create_scheduler_fn and step it
 * from a callback at the end of each evaluation epoch, when the eval loss
 * has just been recorded in the run history:
 *     static CtStatus plateau_on_eval_epoch_end(Callback *cb, Trainer *t,
 *                                               bool is_intermediate) {
 *         if (is_intermediate) return CT_OK;  // mid-epoch evaluations
 *         double loss = run_history_latest(trainer_run_history(t),
 *                                          "eval_loss_epoch");
 *         return scheduler_step_metric(t->scheduler, loss);
 *     }
 * The Trainer's own per-update scheduler_step then only counts updates, and
 * its checkpoints save and restore the whole state above. */
Scheduler *scheduler_reduce_on_plateau(Optimizer *o, const PlateauArgs *args);

/* SequentialLR: runs scheds[i] from milestones[i-1] on (n-1 milestones,
 * strictly increasing, >= 1), each restarted from its own step 0 at its
 * milestone, as torch 1.13 does. Every child uses torch's initial_lr,
 * whatever the optimizer held when it was created: the first child's base
 * LRs, or where a OneCycleLR child overwrote them, max_lr / div_factor of
 * the last OneCycleLR in scheds (torch's too, children being created in
 * order: a LinearLR before a OneCycleLR starts from max_lr / div_factor).
 * Create the first child before any other (its creation must see the
 * optimizer's base LRs; note C leaves the evaluation order inside an
 * initializer list unspecified). Takes ownership of the schedulers (all on
 * optimizer o), also when it fails, so a failed child creation needs no
 * cleanup; do not use the children directly afterwards. */
Scheduler *scheduler_sequential_lr(Optimizer *o, int n, Scheduler *const *scheds,
                                   const int64_t *milestones);

#ifdef __cplusplus
}
#endif
#endif
