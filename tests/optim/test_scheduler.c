/* LR schedulers against torch 1.13 (fixtures: tests/fixtures/scheduler.py). */
#include <math.h>
#include <stdlib.h>

#include "ctrainer/optim.h"
#include "testutil.h"

/* ---- fixtures: /usr/bin/python3 tests/fixtures/scheduler.py > scheduler_fixtures.h */
/* [g][t]: group g's LR (or momentum) after t scheduler steps; groups have
 * base LRs 0.1 and 0.03, SGD momentum 0.9 (Adam betas (0.9, 0.999)).
 * WARMUP_DECAY_LR is transformers' lr_lambda evaluated by formula in a torch
 * LambdaLR (transformers is not installed). COS_WARMUP_* are our formula
 * (no torch reference exists), also checked by hand below. */
#include "scheduler_fixtures.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct Fixture {
    Tensor *p[2];
    Optimizer *opt;
} Fixture;

/* Two groups of one f64 tensor each, base LRs 0.1 and 0.03. */
static Fixture make_fixture(bool adam)
{
    Fixture f;
    int64_t shape[] = {2};
    for (int i = 0; i < 2; i++) f.p[i] = tu_rand64(1, shape, -1, 1, 7 + i, true);
    OptimGroup gs[2] = {optim_group(&f.p[0], 1), optim_group(&f.p[1], 1)};
    gs[0].lr = 0.1;
    gs[1].lr = 0.03;
    if (adam) {
        AdamArgs a = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
        f.opt = optim_adam_create_groups(2, gs, &a);
    } else {
        SgdArgs a = {.lr = 0.5, .momentum = 0.9};
        f.opt = optim_sgd_create_groups(2, gs, &a);
    }
    ck_assert_ptr_nonnull(f.opt);
    return f;
}

/* Back to the base LRs (a scheduler takes the optimizer's current LRs as its
 * base, so tests reusing an optimizer reset them first). */
static Optimizer *fresh(Fixture *f)
{
    optim_set_lr(f->opt, 0, 0.1);
    optim_set_lr(f->opt, 1, 0.03);
    return f->opt;
}

static void free_fixture(Fixture *f)
{
    optim_free(f->opt);
    for (int i = 0; i < 2; i++) tensor_free(f->p[i]);
}

static void assert_close(const char *what, int t, int g, double got, double want)
{
    double tol = 1e-10 * fabs(want) + 1e-16;
    ck_assert_msg(fabs(got - want) <= tol, "%s: step %d group %d: got %.17g, want %.17g",
                  what, t, g, got, want);
}

/* Steps s n-1 times and compares every group's LR in the optimizer and
 * get_last_lr (and the optimizer's momentum when mom is given) with the
 * fixture, step 0 included. */
static void check_run(Scheduler *s, Optimizer *o, int n, const double *lr0,
                      const double *lr1, const double *m0, const double *m1)
{
    const double *lr[2] = {lr0, lr1}, *m[2] = {m0, m1};
    for (int t = 0; t < n; t++) {
        if (t > 0) ck_assert_int_eq(scheduler_step(s), CT_OK);
        ck_assert_int_eq(scheduler_step_count(s), t);
        for (int g = 0; g < 2; g++) {
            assert_close(scheduler_name(s), t, g, optim_get_lr(o, g), lr[g][t]);
            assert_close(scheduler_name(s), t, g, scheduler_get_last_lr(s, g), lr[g][t]);
            if (m[g]) assert_close("momentum", t, g, optim_get_momentum(o, g), m[g][t]);
        }
    }
}

#define CHECK_LR(s, o, FIX)                                                              \
    check_run((s), (o), (int)(sizeof FIX[0] / sizeof FIX[0][0]), FIX[0], FIX[1], NULL,   \
              NULL)
#define CHECK_LR_MOM(s, o, FIX, MOM)                                                     \
    check_run((s), (o), (int)(sizeof FIX[0] / sizeof FIX[0][0]), FIX[0], FIX[1], MOM[0], \
              MOM[1])

/* ---- value sequences against torch -------------------------------------- */

START_TEST(test_step_family)
{
    TU_MEM_BEGIN;
    Fixture f = make_fixture(false);
    Scheduler *s = scheduler_step_lr(fresh(&f), 7, 0.5);
    ck_assert_str_eq(scheduler_name(s), "StepLR");
    CHECK_LR(s, f.opt, STEP_LR);
    scheduler_free(s);
    s = scheduler_multistep_lr(fresh(&f), 3, (const int64_t[]){5, 12, 30}, 0.3);
    CHECK_LR(s, f.opt, MULTISTEP_LR);
    scheduler_free(s);
    s = scheduler_exponential_lr(fresh(&f), 0.93);
    CHECK_LR(s, f.opt, EXP_LR);
    scheduler_free(s);
    free_fixture(&f);
    TU_MEM_END;
}
END_TEST

/* Past t_max torch's chainable recurrence climbs back up (period 2 t_max);
 * 45 steps cover four half-periods of t_max 10 and six of t_max 7. */
START_TEST(test_cosine_annealing)
{
    Fixture f = make_fixture(false);
    Scheduler *s = scheduler_cosine_annealing_lr(fresh(&f), 10, 0.001);
    CHECK_LR(s, f.opt, COS_LR);
    scheduler_free(s);
    s = scheduler_cosine_annealing_lr(fresh(&f), 7, 0.0);
    CHECK_LR(s, f.opt, COS_LR_ETA0);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

START_TEST(test_linear)
{
    Fixture f = make_fixture(false);
    Scheduler *s = scheduler_linear_lr(fresh(&f), 0.25, 0.9, 12);
    CHECK_LR(s, f.opt, LINEAR_LR);
    scheduler_free(s);
    s = scheduler_linear_lr(fresh(&f), 1.0, 0.1, 20);
    CHECK_LR(s, f.opt, LINEAR_LR_DOWN);
    scheduler_free(s);
    s = scheduler_linear_warmup_decay(fresh(&f), 8, 30);
    ck_assert_str_eq(scheduler_name(s), "LinearWarmupDecay");
    CHECK_LR(s, f.opt, WARMUP_DECAY_LR);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

START_TEST(test_one_cycle)
{
    Fixture f = make_fixture(false);
    OneCycleArgs a = {.max_lr = 0.5, .total_steps = 40};
    Scheduler *s = scheduler_one_cycle_lr(fresh(&f), &a);
    CHECK_LR_MOM(s, f.opt, ONECYCLE_LR, ONECYCLE_MOM);
    /* step 40 == total_steps was allowed; one more is an error that changes
     * nothing */
    double lr = optim_get_lr(f.opt, 0);
    ck_assert_int_eq(scheduler_step(s), CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "OneCycleLR: step 41 is past total_steps=40");
    ck_assert_int_eq(scheduler_step_count(s), 40);
    ck_assert(optim_get_lr(f.opt, 0) == lr);
    scheduler_free(s);

    OneCycleArgs b = {.max_lr = 0.8,
                      .total_steps = 40,
                      .pct_start = 0.25,
                      .anneal_linear = true,
                      .div_factor = 10,
                      .final_div_factor = 100,
                      .base_momentum = 0.8,
                      .max_momentum = 0.9,
                      .three_phase = true};
    s = scheduler_one_cycle_lr(fresh(&f), &b);
    CHECK_LR_MOM(s, f.opt, ONECYCLE3_LR, ONECYCLE3_MOM);
    scheduler_free(s);

    /* no_cycle_momentum leaves the optimizer's momentum alone */
    optim_set_momentum(f.opt, 0, 0.5);
    OneCycleArgs c = {.max_lr = 0.5, .total_steps = 40, .no_cycle_momentum = true};
    s = scheduler_one_cycle_lr(fresh(&f), &c);
    for (int t = 0; t < 10; t++) ck_assert_int_eq(scheduler_step(s), CT_OK);
    ck_assert(optim_get_momentum(f.opt, 0) == 0.5);
    assert_close("no-momentum lr", 10, 0, optim_get_lr(f.opt, 0), ONECYCLE_LR[0][10]);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

/* Adam: the cycled momentum is beta1. */
START_TEST(test_one_cycle_adam)
{
    Fixture f = make_fixture(true);
    OneCycleArgs a = {.max_lr = 0.01, .total_steps = 33, .pct_start = 0.4};
    Scheduler *s = scheduler_one_cycle_lr(fresh(&f), &a);
    CHECK_LR_MOM(s, f.opt, ONECYCLE_ADAM_LR, ONECYCLE_ADAM_BETA1);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

static double inv_lambda(int64_t t, void *ctx)
{
    return *(const double *)ctx / (1.0 + 0.1 * (double)t);
}

static double half_lambda(int64_t t, void *ctx)
{
    (void)t;
    (void)ctx;
    return 0.5;
}

START_TEST(test_lambda)
{
    Fixture f = make_fixture(false);
    double one = 1.0;
    Scheduler *s = scheduler_lambda_lr(fresh(&f), inv_lambda, &one);
    CHECK_LR(s, f.opt, LAMBDA_LR);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

START_TEST(test_sequential)
{
    Fixture f = make_fixture(false);
    /* LinearLR writes 0.1 * base at creation; the later children still use
     * the original base LRs (torch's initial_lr). */
    /* children are created one statement each: the evaluation order inside
     * an initializer list is unspecified, and the first child's creation
     * must see the base LRs */
    Scheduler *kids[3];
    kids[0] = scheduler_linear_lr(f.opt, 0.1, 1.0, 5);
    kids[1] = scheduler_cosine_annealing_lr(f.opt, 20, 0.002);
    kids[2] = scheduler_exponential_lr(f.opt, 0.9);
    Scheduler *s = scheduler_sequential_lr(fresh(&f), 3, kids, (const int64_t[]){5, 25});
    ck_assert_str_eq(scheduler_name(s), "SequentialLR");
    CHECK_LR(s, f.opt, SEQUENTIAL_LR);
    scheduler_free(s); /* frees the children */

    Scheduler *kids2[2];
    kids2[0] = scheduler_lambda_lr(fresh(&f), half_lambda, NULL);
    kids2[1] = scheduler_step_lr(f.opt, 4, 0.5);
    s = scheduler_sequential_lr(f.opt, 2, kids2, (const int64_t[]){10});
    CHECK_LR(s, f.opt, SEQUENTIAL2_LR);
    scheduler_free(s);

    /* a LinearLR before a OneCycleLR starts from OneCycle's initial_lr */
    Scheduler *kids4[2];
    kids4[0] = scheduler_linear_lr(fresh(&f), 0.5, 1.0, 3);
    kids4[1] =
        scheduler_one_cycle_lr(f.opt, &(OneCycleArgs){.max_lr = 1.0, .total_steps = 10});
    s = scheduler_sequential_lr(f.opt, 2, kids4, (const int64_t[]){3});
    CHECK_LR(s, f.opt, SEQUENTIAL_ONECYCLE_LR);
    scheduler_free(s);

    /* a OneCycle child's momentum and end-of-schedule check pass through,
     * in its own steps */
    OneCycleArgs a = {.max_lr = 0.5, .total_steps = 40};
    Scheduler *kids3[2];
    kids3[0] = scheduler_step_lr(fresh(&f), 100, 0.5);
    kids3[1] = scheduler_one_cycle_lr(f.opt, &a);
    s = scheduler_sequential_lr(f.opt, 2, kids3, (const int64_t[]){3});
    for (int t = 0; t <= 43; t++) {
        if (t > 0) ck_assert_int_eq(scheduler_step(s), CT_OK);
        for (int g = 0; g < 2; g++) {
            /* before the milestone: torch's initial_lr, which OneCycle's
             * creation overwrote with max_lr / div_factor = 0.5 / 25 */
            assert_close("seq onecycle lr", t, g, optim_get_lr(f.opt, g),
                         t < 3 ? 0.02 : ONECYCLE_LR[g][t - 3]);
            /* before the milestone: what OneCycle wrote at creation */
            assert_close("seq onecycle momentum", t, g, optim_get_momentum(f.opt, g),
                         t < 3 ? 0.95 : ONECYCLE_MOM[g][t - 3]);
        }
    }
    ck_assert_int_eq(scheduler_step(s), CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "step 41 is past total_steps=40");
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

/* ---- cosine with warmup and cooldown ------------------------------------ */

START_TEST(test_cosine_warmup)
{
    Fixture f = make_fixture(false);
    /* total 30, warmup 5 from 1e-4, cooldown 5, lr_min = 0.1 * base: the
     * cosine runs over the 20 steps t = 5..24 and reaches lr_min at t = 25. */
    CosineWarmupArgs a = {.total_steps = 30,
                          .warmup_steps = 5,
                          .cooldown_steps = 5,
                          .min_lr_ratio = 0.1,
                          .warmup_start_lr = 1e-4};
    Scheduler *s = scheduler_cosine_warmup(fresh(&f), &a);
    ck_assert_str_eq(scheduler_name(s), "CosineLrScheduler");
    CHECK_LR(s, f.opt, COS_WARMUP_LR);
    scheduler_free(s);
    /* hand-computed points for group 0 (base 0.1, lr_min 0.01):
     *   t=2:  1e-4 + 2 * (0.1 - 1e-4) / 5            = 0.04006
     *   t=5:  base                                   = 0.1
     *   t=15: c = 10 = D/2, cos(pi/2) = 0: (0.1 + 0.01) / 2 = 0.055
     *   t=20: c = 15, cos(3pi/4) = -sqrt(2)/2:
     *         0.01 + 0.09 * (1 - sqrt(2)/2) / 2      = 0.023180194846605356
     *   t>=25: lr_min                                = 0.01 */
    const double hand[][2] = {{2, 0.04006}, {5, 0.1},
                              {15, 0.055},  {20, 0.023180194846605356},
                              {25, 0.01},   {39, 0.01}};
    for (int i = 0; i < 6; i++)
        assert_close("hand", (int)hand[i][0], 0, COS_WARMUP_LR[0][(int)hand[i][0]],
                     hand[i][1]);

    /* k_decay 2, absolute lr_min, warmup from half the base LR */
    CosineWarmupArgs b = {.total_steps = 30,
                          .warmup_steps = 4,
                          .cooldown_steps = 6,
                          .lr_min = 0.001,
                          .warmup_start_ratio = 0.5,
                          .k_decay = 2};
    s = scheduler_cosine_warmup(fresh(&f), &b);
    CHECK_LR(s, f.opt, COS_WARMUP_K2_LR);
    scheduler_free(s);
    /* by hand, group 1 (base 0.03):
     *   t=2:  0.015 + 2 * 0.015 / 4                  = 0.0225
     *   t=14: c = 10, D = 20: (c/D)^2 = 1/4, cos(pi/4) = sqrt(2)/2:
     *         0.001 + 0.029 * (1 + sqrt(2)/2) / 2    = 0.02575304832720494
     *   t=24: lr_min = 0.001 */
    assert_close("hand k2", 2, 1, COS_WARMUP_K2_LR[1][2], 0.0225);
    assert_close("hand k2", 14, 1, COS_WARMUP_K2_LR[1][14], 0.02575304832720494);
    assert_close("hand k2", 24, 1, COS_WARMUP_K2_LR[1][24], 0.001);
    ck_assert(COS_WARMUP_K2_LR[1][23] > 0.001); /* still in the cosine */
    free_fixture(&f);
}
END_TEST

/* ---- state save / load -------------------------------------------------- */

typedef Scheduler *(*MakeSched)(Optimizer *o);

static Scheduler *make_onecycle(Optimizer *o)
{
    OneCycleArgs a = {.max_lr = 0.5, .total_steps = 40, .three_phase = true};
    return scheduler_one_cycle_lr(o, &a);
}

static Scheduler *make_sequential(Optimizer *o)
{
    Scheduler *k[2];
    k[0] = scheduler_linear_lr(o, 0.1, 1.0, 5);
    k[1] = scheduler_cosine_annealing_lr(o, 20, 0.002);
    return scheduler_sequential_lr(o, 2, k, (const int64_t[]){5});
}

static Scheduler *make_cos_warmup(Optimizer *o)
{
    CosineWarmupArgs a = {.total_steps = 30,
                          .warmup_steps = 5,
                          .cooldown_steps = 5,
                          .lr_min = 1e-3,
                          .k_decay = 1.5};
    return scheduler_cosine_warmup(o, &a);
}

/* Runs a for k steps, saves, loads into a fresh optimizer + scheduler, and
 * checks both continue identically (LR and momentum) to step n. */
static void check_resume(MakeSched make, int k, int n)
{
    Fixture fa = make_fixture(false), fb = make_fixture(false);
    Scheduler *a = make(fa.opt), *b = make(fb.opt);
    for (int t = 0; t < k; t++) ck_assert_int_eq(scheduler_step(a), CT_OK);
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(a, d), CT_OK);
    ck_assert_int_eq(ct_state_dict_size(d), 3);
    ck_assert(tensor_item(ct_state_dict_get(d, "step")) == k);
    ck_assert_int_eq(tensor_ndim(ct_state_dict_get(d, "base_lrs.1")), 0);
    ck_assert_int_eq(scheduler_state_load(b, d), CT_OK);
    ct_state_dict_free(d);
    ck_assert_int_eq(scheduler_step_count(b), k);
    for (int t = k; t <= n; t++) {
        if (t > k) {
            ck_assert_int_eq(scheduler_step(a), CT_OK);
            ck_assert_int_eq(scheduler_step(b), CT_OK);
        }
        for (int g = 0; g < 2; g++) {
            ck_assert(optim_get_lr(fa.opt, g) == optim_get_lr(fb.opt, g));
            ck_assert(optim_get_momentum(fa.opt, g) == optim_get_momentum(fb.opt, g));
            ck_assert(scheduler_get_last_lr(b, g) == optim_get_lr(fb.opt, g));
        }
    }
    scheduler_free(a);
    scheduler_free(b);
    free_fixture(&fa);
    free_fixture(&fb);
}

START_TEST(test_state_resume)
{
    TU_MEM_BEGIN;
    check_resume(make_onecycle, 17, 40);
    check_resume(make_sequential, 3, 30); /* saved before the milestone */
    check_resume(make_sequential, 12, 30);
    check_resume(make_cos_warmup, 8, 35);
    TU_MEM_END;
}
END_TEST

/* The base LRs come from the state, not from the optimizer the new scheduler
 * was created on (e.g. one whose state was loaded first). */
START_TEST(test_state_restores_base)
{
    Fixture fa = make_fixture(false), fb = make_fixture(false);
    Scheduler *a = scheduler_exponential_lr(fa.opt, 0.9);
    for (int t = 0; t < 6; t++) scheduler_step(a);
    optim_set_lr(fb.opt, 0, 0.7);
    Scheduler *b = scheduler_exponential_lr(fb.opt, 0.9);
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(a, d), CT_OK);
    ck_assert_int_eq(scheduler_state_load(b, d), CT_OK);
    assert_close("restored", 6, 0, optim_get_lr(fb.opt, 0), 0.1 * pow(0.9, 6));
    scheduler_step(b);
    assert_close("restored", 7, 0, optim_get_lr(fb.opt, 0), 0.1 * pow(0.9, 7));
    /* saving twice into one dict is refused without adding anything */
    ck_assert_int_eq(scheduler_state_save(b, d), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "ExponentialLR state save: \"step\" already in the dict");
    ck_assert_int_eq(ct_state_dict_size(d), 3);
    ct_state_dict_free(d);
    scheduler_free(a);
    scheduler_free(b);
    free_fixture(&fa);
    free_fixture(&fb);
}
END_TEST

/* Adds a persistent scalar (the dict keeps its own reference). */
static void put(CtStateDict *d, const char *name, double v)
{
    Tensor *t = tensor_scalar(v, CT_F64, ct_cpu());
    ck_assert_int_eq(ct_state_dict_add(d, name, t), CT_OK);
    tensor_free(t);
}

/* A bad state is rejected with a clear error and changes nothing. */
static void check_bad_state(Scheduler *s, Optimizer *o, CtStateDict *d, CtStatus st,
                            const char *needle)
{
    int64_t step = scheduler_step_count(s);
    double lr = optim_get_lr(o, 1);
    ck_assert_int_eq(scheduler_state_load(s, d), st);
    tu_assert_error(st, needle);
    ck_assert_int_eq(scheduler_step_count(s), step);
    ck_assert(optim_get_lr(o, 1) == lr);
    ct_state_dict_free(d);
}

START_TEST(test_state_bad)
{
    TU_MEM_BEGIN;
    Fixture f = make_fixture(false);
    OneCycleArgs a = {.max_lr = 0.5, .total_steps = 40};
    Scheduler *s = scheduler_one_cycle_lr(fresh(&f), &a);
    for (int t = 0; t < 5; t++) scheduler_step(s);

    CtStateDict *d = ct_state_dict_create();
    put(d, "step", 3);
    put(d, "base_lrs.0", 0.1);
    check_bad_state(s, f.opt, d, CT_ERR_FORMAT,
                    "OneCycleLR state load: 2 entries, expected 3 (step and 2 base LRs)");

    d = ct_state_dict_create();
    put(d, "steps", 3);
    put(d, "base_lrs.0", 0.1);
    put(d, "base_lrs.1", 0.1);
    check_bad_state(s, f.opt, d, CT_ERR_FORMAT,
                    "OneCycleLR state load: missing \"step\"");

    d = ct_state_dict_create();
    put(d, "step", -2);
    put(d, "base_lrs.0", 0.1);
    put(d, "base_lrs.1", 0.1);
    check_bad_state(s, f.opt, d, CT_ERR_FORMAT, "step -2 is not a count");

    d = ct_state_dict_create();
    put(d, "step", 41);
    put(d, "base_lrs.0", 0.1);
    put(d, "base_lrs.1", 0.1);
    check_bad_state(s, f.opt, d, CT_ERR_STATE,
                    "OneCycleLR: step 41 is past total_steps=40");

    d = ct_state_dict_create();
    put(d, "step", 3);
    put(d, "base_lrs.0", 0.1);
    put(d, "base_lrs.1", -1);
    check_bad_state(s, f.opt, d, CT_ERR_FORMAT, "\"base_lrs.1\" = -1 is not a valid LR");

    d = ct_state_dict_create();
    Tensor *v = tensor_zeros(1, (const int64_t[]){2}, CT_I64, ct_cpu());
    ck_assert_int_eq(ct_state_dict_add(d, "step", v), CT_OK);
    tensor_free(v);
    put(d, "base_lrs.0", 0.1);
    put(d, "base_lrs.1", 0.1);
    check_bad_state(s, f.opt, d, CT_ERR_SHAPE, "\"step\" has 2 elements, expected 1");

    ck_assert_int_eq(scheduler_state_load(s, NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "scheduler_state_load: state dict is NULL");
    scheduler_free(s);
    free_fixture(&f);
    TU_MEM_END;
}
END_TEST

/* ---- bad arguments ------------------------------------------------------ */

START_TEST(test_bad_args)
{
    TU_MEM_BEGIN;
    Fixture f = make_fixture(false);
    Optimizer *o = f.opt;
    double lr0 = optim_get_lr(o, 0);

    ck_assert_ptr_null(scheduler_step_lr(o, 0, 0.5));
    tu_assert_error(CT_ERR_INVALID, "StepLR: step_size must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_exponential_lr(o, NAN));
    tu_assert_error(CT_ERR_INVALID,
                    "ExponentialLR: gamma must be finite and > 0, got nan");
    ck_assert_ptr_null(scheduler_multistep_lr(o, 3, (const int64_t[]){5, 12, 12}, 0.1));
    tu_assert_error(CT_ERR_INVALID,
                    "MultiStepLR: milestones must be strictly increasing: "
                    "milestones[2]=12 after milestones[1]=12");
    ck_assert_ptr_null(scheduler_multistep_lr(o, 2, NULL, 0.1));
    tu_assert_error(CT_ERR_INVALID, "MultiStepLR: need n >= 0 milestones");
    ck_assert_ptr_null(scheduler_cosine_annealing_lr(o, 0, 0.0));
    tu_assert_error(CT_ERR_INVALID, "CosineAnnealingLR: t_max must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_cosine_annealing_lr(o, -3, 0.0));
    tu_assert_error(CT_ERR_INVALID, "t_max must be >= 1, got -3");
    ck_assert_ptr_null(scheduler_linear_lr(o, 0.0, 1.0, 5));
    tu_assert_error(CT_ERR_INVALID, "LinearLR: start_factor must be in (0, 1], got 0");
    ck_assert_ptr_null(scheduler_linear_lr(o, 0.5, 1.0, 0));
    tu_assert_error(CT_ERR_INVALID, "LinearLR: total_iters must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_linear_warmup_decay(o, 5, 0));
    tu_assert_error(CT_ERR_INVALID, "LinearWarmupDecay: total_steps must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_linear_warmup_decay(o, 11, 10));
    tu_assert_error(CT_ERR_INVALID,
                    "warmup_steps must be in [0, total_steps=10], got 11");
    ck_assert_ptr_null(scheduler_lambda_lr(o, NULL, NULL));
    tu_assert_error(CT_ERR_NULL, "LambdaLR: fn is NULL");

    OneCycleArgs oc = {.max_lr = 0.1, .total_steps = 0};
    ck_assert_ptr_null(scheduler_one_cycle_lr(o, &oc));
    tu_assert_error(CT_ERR_INVALID, "OneCycleLR: total_steps must be >= 1, got 0");
    oc = (OneCycleArgs){
        .max_lr = 0.1, .total_steps = 10, .pct_start = 0.6, .three_phase = true};
    ck_assert_ptr_null(scheduler_one_cycle_lr(o, &oc));
    tu_assert_error(
        CT_ERR_INVALID,
        "OneCycleLR: pct_start must be in (0, 0.5] with three_phase, got 0.6");
    oc = (OneCycleArgs){.max_lr = -1, .total_steps = 10};
    ck_assert_ptr_null(scheduler_one_cycle_lr(o, &oc));
    tu_assert_error(CT_ERR_INVALID, "OneCycleLR: max_lr must be finite and > 0, got -1");
    ck_assert_ptr_null(scheduler_one_cycle_lr(o, NULL));
    tu_assert_error(CT_ERR_NULL, "OneCycleLR: args is NULL");

    CosineWarmupArgs cw = {.total_steps = 0};
    ck_assert_ptr_null(scheduler_cosine_warmup(o, &cw));
    tu_assert_error(CT_ERR_INVALID, "CosineLrScheduler: total_steps must be >= 1, got 0");
    cw = (CosineWarmupArgs){.total_steps = 10, .warmup_steps = 5, .cooldown_steps = 5};
    ck_assert_ptr_null(scheduler_cosine_warmup(o, &cw));
    tu_assert_error(CT_ERR_INVALID, "warmup_steps + cooldown_steps (5 + 5) must be < "
                                    "total_steps (10)");
    cw = (CosineWarmupArgs){.total_steps = 10, .k_decay = -1};
    ck_assert_ptr_null(scheduler_cosine_warmup(o, &cw));
    tu_assert_error(CT_ERR_INVALID, "k_decay must be finite and >= 0");

    /* NULL optimizer: a clear error, or the earlier one kept (sticky) */
    ck_assert_ptr_null(scheduler_step_lr(NULL, 3, 0.5));
    tu_assert_error(CT_ERR_NULL, "StepLR: optimizer is NULL");
    ck_assert_ptr_null(scheduler_one_cycle_lr(NULL, &oc));
    tu_assert_error(CT_ERR_NULL, "OneCycleLR: optimizer is NULL");
    ck_assert_ptr_null(scheduler_cosine_warmup(NULL, NULL));
    tu_assert_error(CT_ERR_NULL, "CosineLrScheduler: optimizer is NULL");
    ct_error(CT_ERR_OOM, "first failure");
    ck_assert_ptr_null(scheduler_exponential_lr(NULL, 0.9));
    tu_assert_error(CT_ERR_OOM, "first failure");
    ck_assert_int_eq(scheduler_step(NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "scheduler_step: scheduler is NULL");

    /* nothing was written into the optimizer by the failed constructors */
    ck_assert(optim_get_lr(o, 0) == lr0);

    Scheduler *s = scheduler_step_lr(o, 3, 0.5);
    ck_assert(isnan(scheduler_get_last_lr(s, 2)));
    tu_assert_error(CT_ERR_INVALID, "StepLR: group 2 out of range [0, 2)");
    scheduler_free(s);
    free_fixture(&f);
    TU_MEM_END;
}
END_TEST

/* SequentialLR owns its children, also when it fails: none of these leak
 * (the sanitizer build checks). */
START_TEST(test_sequential_bad)
{
    TU_MEM_BEGIN;
    Fixture f = make_fixture(false), g = make_fixture(false);
    Optimizer *o = f.opt;

    ck_assert_ptr_null(scheduler_sequential_lr(o, 0, NULL, NULL));
    tu_assert_error(CT_ERR_INVALID, "SequentialLR: needs at least one scheduler, got 0");

    Scheduler *k1[] = {scheduler_step_lr(o, 3, 0.5), scheduler_exponential_lr(o, 0.9)};
    ck_assert_ptr_null(scheduler_sequential_lr(o, 2, k1, (const int64_t[]){0}));
    tu_assert_error(CT_ERR_INVALID, "milestones must be strictly increasing and >= 1: "
                                    "milestones[0]=0");

    Scheduler *k2[] = {scheduler_step_lr(o, 3, 0.5), scheduler_exponential_lr(o, 0.9),
                       scheduler_exponential_lr(o, 0.8)};
    ck_assert_ptr_null(scheduler_sequential_lr(o, 3, k2, (const int64_t[]){6, 4}));
    tu_assert_error(CT_ERR_INVALID, "milestones[1]=4 after a larger or equal one");

    Scheduler *k3[] = {scheduler_step_lr(o, 3, 0.5),
                       scheduler_exponential_lr(g.opt, 0.9)};
    ck_assert_ptr_null(scheduler_sequential_lr(o, 2, k3, (const int64_t[]){4}));
    tu_assert_error(CT_ERR_INVALID,
                    "scheduler 1 (ExponentialLR) belongs to a different optimizer");

    /* a child that failed to build: its error is kept, the others freed */
    Scheduler *k4[] = {scheduler_step_lr(o, 3, 0.5),
                       scheduler_cosine_annealing_lr(o, 0, 0.0)};
    ck_assert_ptr_null(scheduler_sequential_lr(o, 2, k4, (const int64_t[]){4}));
    tu_assert_error(CT_ERR_INVALID, "CosineAnnealingLR: t_max must be >= 1, got 0");

    Scheduler *one = scheduler_step_lr(o, 3, 0.5);
    Scheduler *k5[] = {one, one};
    ck_assert_ptr_null(scheduler_sequential_lr(o, 2, k5, (const int64_t[]){4}));
    tu_assert_error(CT_ERR_INVALID, "schedulers 0 and 1 are the same object");

    Scheduler *k6[] = {scheduler_step_lr(o, 3, 0.5), scheduler_exponential_lr(o, 0.9)};
    ck_assert_ptr_null(scheduler_sequential_lr(o, 2, k6, NULL));
    tu_assert_error(CT_ERR_INVALID, "2 schedulers need 1 milestones, got NULL");

    Scheduler *k7[] = {scheduler_step_lr(o, 3, 0.5)};
    ck_assert_ptr_null(scheduler_sequential_lr(NULL, 1, k7, NULL));
    tu_assert_error(CT_ERR_NULL, "SequentialLR: optimizer is NULL");

    /* one child, no milestones: the child alone */
    Scheduler *k8[] = {scheduler_exponential_lr(o, 0.93)};
    Scheduler *s = scheduler_sequential_lr(o, 1, k8, NULL);
    CHECK_LR(s, o, EXP_LR);
    scheduler_free(s);
    free_fixture(&f);
    free_fixture(&g);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("sched");
    tcase_add_test(tc, test_step_family);
    tcase_add_test(tc, test_cosine_annealing);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_one_cycle);
    tcase_add_test(tc, test_one_cycle_adam);
    tcase_add_test(tc, test_lambda);
    tcase_add_test(tc, test_sequential);
    tcase_add_test(tc, test_cosine_warmup);
    tcase_add_test(tc, test_state_resume);
    tcase_add_test(tc, test_state_restores_base);
    tcase_add_test(tc, test_state_bad);
    tcase_add_test(tc, test_bad_args);
    tcase_add_test(tc, test_sequential_bad);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
