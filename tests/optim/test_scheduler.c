/* LR schedulers against torch 1.13 (fixtures: tests/fixtures/scheduler.py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/ctrainer.h"
#include "tensor/mem.h"
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

/* ---- edge cases against torch 1.13 --------------------------------------
 * Values printed by torch 1.13 (same two SGD groups as the fixtures):
 *     S.CosineAnnealingLR(o, T_max=1, eta_min=0.01)                 8 values
 *     S.OneCycleLR(o, max_lr=1.0, total_steps=1)                    2 values
 *     S.OneCycleLR(o, max_lr=1.0, total_steps=2)                    3 values
 *     S.OneCycleLR(o, max_lr=1.0, total_steps=3, pct_start=0.5,
 *                  three_phase=True)                                4 values
 *     S.OneCycleLR(o, max_lr=0.5, total_steps=10, pct_start=0.05)  11 values
 *     S.SequentialLR(o, [S.LinearLR(o, start_factor=0.5, total_iters=3),
 *                        S.StepLR(o, step_size=2, gamma=0.5),
 *                        S.ExponentialLR(o, gamma=0.5)], milestones=[1, 2])
 * (*_MOM: group 0's momentum, the same for both groups). Every OneCycleLR
 * raised one step past total_steps. */
/* clang-format off */
static const double EDGE_COS_T1[2][8] = {
    {0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 0.1, 0.01},
    {0.03, 0.01, 0.03, 0.01, 0.03, 0.01, 0.03, 0.01},
};
static const double EDGE_ONECYCLE_T1[2][2] = {
    {4e-06, 0.6112620219362891},
    {4e-06, 0.6112620219362891},
};
static const double EDGE_ONECYCLE_T1_MOM[2] = {0.95, 0.8888739533021843};
static const double EDGE_ONECYCLE_T2[2][3] = {
    {0.811745653949763, 4e-06, 0.811745653949763},
    {0.811745653949763, 4e-06, 0.811745653949763},
};
static const double EDGE_ONECYCLE_T2_MOM[3] = {0.8688255099070633, 0.95, 0.8688255099070633};
static const double EDGE_ONECYCLE3_T3[2][4] = {
    {0.040000000000000036, 0.04, 4e-06, 0.04},
    {0.040000000000000036, 0.04, 4e-06, 0.04},
};
static const double EDGE_ONECYCLE3_T3_MOM[4] = {0.95, 0.95, 0.95, 0.95};
static const double EDGE_ONECYCLE_PCT[2][11] = {
    {0.4965903394893772, 0.46986855832787106, 0.41932071562486367, 0.3504244544678177, 0.2706457537887377, 0.18862987370028736, 0.11326450741755145, 0.05271666179141103, 0.013547635392083042, 2e-06, 0.01354763539208307},
    {0.4965903394893772, 0.46986855832787106, 0.41932071562486367, 0.3504244544678177, 0.2706457537887377, 0.18862987370028736, 0.11326450741755145, 0.05271666179141103, 0.013547635392083042, 2e-06, 0.01354763539208307},
};
static const double EDGE_ONECYCLE_PCT_MOM[11] = {0.8506819348298639, 0.8560263124396755, 0.8661359214187129, 0.8799152287673515, 0.8958710327263834, 0.9122742743570399, 0.9273474079061212, 0.9394570254698197, 0.9472908620850317, 0.95, 0.9472908620850317};
static const double EDGE_SEQ_M1[2][7] = {
    {0.05, 0.1, 0.1, 0.05, 0.025, 0.0125, 0.00625},
    {0.015, 0.03, 0.03, 0.015, 0.0075, 0.00375, 0.001875},
};
/* clang-format on */

/* Extremes the fixtures miss: a period of one step, one-cycle schedules of
 * one to three steps (phase ends before step 0, an empty middle phase),
 * and a SequentialLR switching at step 1. */
START_TEST(test_edge_cases)
{
    Fixture f = make_fixture(false);
    Scheduler *s = scheduler_cosine_annealing_lr(fresh(&f), 1, 0.01);
    CHECK_LR(s, f.opt, EDGE_COS_T1);
    scheduler_free(s);

    /* lr: [2][n] (group 1 follows group 0) */
    const struct {
        OneCycleArgs a;
        int n;
        const double *lr, *mom;
    } oc[] = {
        {{.max_lr = 1.0, .total_steps = 1}, 2, EDGE_ONECYCLE_T1[0], EDGE_ONECYCLE_T1_MOM},
        {{.max_lr = 1.0, .total_steps = 2}, 3, EDGE_ONECYCLE_T2[0], EDGE_ONECYCLE_T2_MOM},
        {{.max_lr = 1.0, .total_steps = 3, .pct_start = 0.5, .three_phase = true},
         4,
         EDGE_ONECYCLE3_T3[0],
         EDGE_ONECYCLE3_T3_MOM},
        {{.max_lr = 0.5, .total_steps = 10, .pct_start = 0.05},
         11,
         EDGE_ONECYCLE_PCT[0],
         EDGE_ONECYCLE_PCT_MOM},
    };
    for (int i = 0; i < 4; i++) {
        s = scheduler_one_cycle_lr(fresh(&f), &oc[i].a);
        ck_assert_ptr_nonnull(s);
        check_run(s, f.opt, oc[i].n, oc[i].lr, oc[i].lr + oc[i].n, oc[i].mom, oc[i].mom);
        ck_assert_int_eq(scheduler_step(s), CT_ERR_STATE); /* torch raises too */
        scheduler_free(s);
    }

    Optimizer *o = fresh(&f);
    Scheduler *a = scheduler_linear_lr(o, 0.5, 1.0, 3);
    Scheduler *b = scheduler_step_lr(o, 2, 0.5);
    Scheduler *c = scheduler_exponential_lr(o, 0.5);
    s = scheduler_sequential_lr(o, 3, (Scheduler *[]){a, b, c}, (int64_t[]){1, 2});
    ck_assert_ptr_nonnull(s);
    CHECK_LR(s, f.opt, EDGE_SEQ_M1);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

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

static void put(CtStateDict *d, const char *name, double v);
static void check_bad_state(Scheduler *s, Optimizer *o, CtStateDict *d, CtStatus st,
                            const char *needle);

/* ---- warm restarts, constant, polynomial --------------------------------- */

/* Many restarts: T_mult 1 (60 steps of period 7), 2 (restarts at 3, 9, 21,
 * 45, 93) and 3 (5, 20, 65), and a one-step first period. */
START_TEST(test_warm_restarts)
{
    Fixture f = make_fixture(false);
    Scheduler *s = scheduler_cosine_warm_restarts(fresh(&f), 7, 1, 0.002);
    ck_assert_str_eq(scheduler_name(s), "CosineAnnealingWarmRestarts");
    CHECK_LR(s, f.opt, WARM_RESTARTS_LR);
    scheduler_free(s);
    s = scheduler_cosine_warm_restarts(fresh(&f), 3, 2, 0.0);
    CHECK_LR(s, f.opt, WARM_RESTARTS_MULT2_LR);
    scheduler_free(s);
    s = scheduler_cosine_warm_restarts(fresh(&f), 5, 3, 0.001);
    CHECK_LR(s, f.opt, WARM_RESTARTS_MULT3_LR);
    scheduler_free(s);
    s = scheduler_cosine_warm_restarts(fresh(&f), 1, 2, 0.01);
    CHECK_LR(s, f.opt, WARM_RESTARTS_T1_LR);
    scheduler_free(s);
    /* restarts to the base LR exactly, in torch too */
    ck_assert(WARM_RESTARTS_MULT2_LR[0][45] == 0.1 &&
              WARM_RESTARTS_MULT2_LR[1][93] == 0.03);

    /* after a linear warmup, restarted from its own step 0 at the milestone */
    Scheduler *k[2];
    k[0] = scheduler_linear_lr(fresh(&f), 0.2, 1.0, 4);
    k[1] = scheduler_cosine_warm_restarts(f.opt, 5, 2, 0.001);
    s = scheduler_sequential_lr(f.opt, 2, k, (const int64_t[]){4});
    CHECK_LR(s, f.opt, SEQUENTIAL_RESTARTS_LR);
    scheduler_free(s);

    /* far out, where T_i * T_mult would overflow: one long last period */
    s = scheduler_cosine_warm_restarts(fresh(&f), 1, INT64_MAX / 2, 0.0);
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(s, d), CT_OK);
    ck_assert_int_eq(ct_state_dict_remove(d, "step"), true);
    Tensor *big = tensor_scalar(9.0e15, CT_I64, ct_cpu());
    ck_assert_int_eq(ct_state_dict_add(d, "step", big), CT_OK);
    tensor_free(big);
    ck_assert_int_eq(scheduler_state_load(s, d), CT_OK);
    /* T_cur = 9e15 - 1 of T_i = INT64_MAX / 2: cos(pi * 0.00195...) */
    double x = M_PI * (9.0e15 - 1) / (double)(INT64_MAX / 2);
    assert_close("far", 0, 0, optim_get_lr(f.opt, 0), 0.1 * (1 + cos(x)) / 2);
    ct_state_dict_free(d);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

START_TEST(test_constant_polynomial)
{
    Fixture f = make_fixture(false);
    Scheduler *s = scheduler_constant_lr(fresh(&f), 0.37, 9);
    ck_assert_str_eq(scheduler_name(s), "ConstantLR");
    CHECK_LR(s, f.opt, CONSTANT_LR);
    scheduler_free(s);
    s = scheduler_polynomial_lr(fresh(&f), 17, 2.5);
    ck_assert_str_eq(scheduler_name(s), "PolynomialLR");
    CHECK_LR(s, f.opt, POLY_LR);
    scheduler_free(s);
    s = scheduler_polynomial_lr(fresh(&f), 30, 0.5);
    CHECK_LR(s, f.opt, POLY_LR_SQRT);
    scheduler_free(s);
    s = scheduler_polynomial_lr(fresh(&f), 13, 1.0);
    CHECK_LR(s, f.opt, POLY_LR_LINEAR);
    scheduler_free(s);
    ck_assert(POLY_LR[0][17] == 0 && POLY_LR[1][39] == 0); /* 0 from total_iters on */

    Scheduler *k[2];
    k[0] = scheduler_constant_lr(fresh(&f), 0.5, 6);
    k[1] = scheduler_polynomial_lr(f.opt, 20, 1.7);
    s = scheduler_sequential_lr(f.opt, 2, k, (const int64_t[]){6});
    CHECK_LR(s, f.opt, SEQUENTIAL_CONST_POLY_LR);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

/* ---- ReduceLROnPlateau -------------------------------------------------- */

static PlateauArgs plateau_a(void)
{
    /* torch: factor=0.5, patience=3, threshold=0.01, cooldown=2,
     * min_lr=[0.03, 0.005] */
    static const double min_lrs[2] = {0.03, 0.005};
    PlateauArgs a = scheduler_plateau_args();
    a.factor = 0.5;
    a.patience = 3;
    a.threshold = 0.01;
    a.cooldown = 2;
    a.min_lrs = min_lrs;
    return a;
}

static PlateauArgs plateau_b(void)
{
    /* torch: mode="max", factor=0.3, patience=2, threshold=0.05,
     * threshold_mode="abs", min_lr=0.0005, eps=1e-3 */
    PlateauArgs a = scheduler_plateau_args();
    a.mode_max = true;
    a.factor = 0.3;
    a.patience = 2;
    a.threshold = 0.05;
    a.threshold_abs = true;
    a.min_lr = 0.0005;
    a.eps = 1e-3;
    return a;
}

static PlateauArgs plateau_d(void)
{
    /* torch: mode="max", factor=0.7, patience=0, threshold=0.02, cooldown=4 */
    PlateauArgs a = scheduler_plateau_args();
    a.mode_max = true;
    a.factor = 0.7;
    a.patience = 0;
    a.threshold = 0.02;
    a.cooldown = 4;
    return a;
}

/* Feeds the n metrics to a new ReduceLROnPlateau, with three per-update
 * scheduler_step calls before each (which must change nothing), and
 * compares the LRs after every metric step with torch's, exactly: the
 * operations are the same. lr: [2][n + 1]. */
static void check_plateau(Fixture *f, const PlateauArgs *a, int n, const double *metrics,
                          const double *lr)
{
    Scheduler *s = scheduler_reduce_on_plateau(fresh(f), a);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(scheduler_name(s), "ReduceLROnPlateau");
    for (int t = 0; t <= n; t++) {
        if (t > 0) {
            for (int u = 0; u < 3; u++) {
                ck_assert_int_eq(scheduler_step(s), CT_OK);
                for (int g = 0; g < 2; g++)
                    ck_assert(optim_get_lr(f->opt, g) == lr[g * (n + 1) + t - 1]);
            }
            ck_assert_int_eq(scheduler_step_metric(s, metrics[t - 1]), CT_OK);
        }
        ck_assert_int_eq(scheduler_step_count(s), 3 * t);
        for (int g = 0; g < 2; g++) {
            double want = lr[g * (n + 1) + t];
            ck_assert_msg(optim_get_lr(f->opt, g) == want,
                          "plateau: metric step %d group %d: got %.17g, want %.17g", t, g,
                          optim_get_lr(f->opt, g), want);
            ck_assert(scheduler_get_last_lr(s, g) == want);
        }
    }
    scheduler_free(s);
}

#define CHECK_PLATEAU(f, a, M, FIX)                                                      \
    do {                                                                                 \
        PlateauArgs a_ = (a);                                                            \
        ck_assert_int_eq(sizeof FIX[0] / sizeof FIX[0][0], sizeof M / sizeof M[0] + 1);  \
        check_plateau((f), &a_, (int)(sizeof M / sizeof M[0]), M, FIX[0]);               \
    } while (0)

/* A: min/rel, per-group min_lr reached, cooldown. B: max/abs, a NaN metric,
 * reductions under eps skipped. C: torch's defaults. D: max/rel through
 * negative metrics, patience 0, cooldown 4. */
START_TEST(test_plateau)
{
    TU_MEM_BEGIN;
    Fixture f = make_fixture(false);
    CHECK_PLATEAU(&f, plateau_a(), PLATEAU_METRIC_A, PLATEAU_A_LR);
    CHECK_PLATEAU(&f, plateau_b(), PLATEAU_METRIC_B, PLATEAU_B_LR);
    CHECK_PLATEAU(&f, scheduler_plateau_args(), PLATEAU_METRIC_C, PLATEAU_C_LR);
    CHECK_PLATEAU(&f, plateau_d(), PLATEAU_METRIC_D, PLATEAU_D_LR);
    /* the fixtures do reach min_lr, skip under eps, reduce with defaults */
    ck_assert(PLATEAU_A_LR[0][80] == 0.03 && PLATEAU_A_LR[1][80] == 0.005);
    ck_assert(isnan(PLATEAU_METRIC_B[30]) && PLATEAU_B_LR[0][80] > 0.0005);
    ck_assert(PLATEAU_C_LR[0][70] < 0.1 * 0.1);

    /* torch reduces the optimizer's current LR: one set by hand is kept
     * until the next reduction, which starts from it */
    PlateauArgs a = scheduler_plateau_args();
    a.patience = 0;
    Scheduler *s = scheduler_reduce_on_plateau(fresh(&f), &a);
    ck_assert_int_eq(scheduler_step_metric(s, 1.0), CT_OK);
    optim_set_lr(f.opt, 0, 0.4);
    ck_assert_int_eq(scheduler_step(s), CT_OK);
    ck_assert(optim_get_lr(f.opt, 0) == 0.4);
    ck_assert_int_eq(scheduler_step_metric(s, 1.0), CT_OK); /* no improvement */
    assert_close("hand-set", 2, 0, optim_get_lr(f.opt, 0), 0.04);
    assert_close("hand-set", 2, 1, optim_get_lr(f.opt, 1), 0.003);
    scheduler_free(s);

    /* the other schedulers take no metric */
    s = scheduler_step_lr(fresh(&f), 3, 0.5);
    ck_assert_int_eq(scheduler_step_metric(s, 1.0), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "scheduler_step_metric: StepLR takes no metric (use scheduler_step)");
    ck_assert_int_eq(scheduler_step_count(s), 0);
    scheduler_free(s);
    ck_assert_int_eq(scheduler_step_metric(NULL, 1.0), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "scheduler_step_metric: scheduler is NULL");
    free_fixture(&f);
    TU_MEM_END;
}
END_TEST

/* Saved after k metric steps (in cooldown, with bad epochs counted, after
 * reductions), loaded into a fresh scheduler on a fresh optimizer: both go
 * on with the same LRs and state. */
static void check_plateau_resume(const PlateauArgs *pa, const double *metrics, int n,
                                 int k)
{
    Fixture fa = make_fixture(false), fb = make_fixture(false);
    Scheduler *a = scheduler_reduce_on_plateau(fa.opt, pa);
    Scheduler *b = scheduler_reduce_on_plateau(fb.opt, pa);
    for (int t = 0; t < k; t++) {
        ck_assert_int_eq(scheduler_step(a), CT_OK);
        ck_assert_int_eq(scheduler_step_metric(a, metrics[t]), CT_OK);
    }
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(a, d), CT_OK);
    ck_assert_int_eq(ct_state_dict_size(d), 9);
    ck_assert(tensor_item(ct_state_dict_get(d, "step")) == k);
    ck_assert(tensor_item(ct_state_dict_get(d, "last_epoch")) == k);
    ck_assert_int_eq(tensor_dtype(ct_state_dict_get(d, "num_bad_epochs")), CT_I64);
    ck_assert(tensor_item(ct_state_dict_get(d, "last_lrs.1")) == optim_get_lr(fa.opt, 1));
    ck_assert_int_eq(scheduler_state_load(b, d), CT_OK);
    ct_state_dict_free(d);
    ck_assert_int_eq(scheduler_step_count(b), k);
    for (int t = k; t < n; t++) {
        for (int g = 0; g < 2; g++) {
            ck_assert(optim_get_lr(fa.opt, g) == optim_get_lr(fb.opt, g));
            ck_assert(scheduler_get_last_lr(b, g) == optim_get_lr(fb.opt, g));
        }
        ck_assert_int_eq(scheduler_step(a), CT_OK);
        ck_assert_int_eq(scheduler_step(b), CT_OK);
        ck_assert_int_eq(scheduler_step_metric(a, metrics[t]), CT_OK);
        ck_assert_int_eq(scheduler_step_metric(b, metrics[t]), CT_OK);
    }
    CtStateDict *da = ct_state_dict_create(), *db = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(a, da), CT_OK);
    ck_assert_int_eq(scheduler_state_save(b, db), CT_OK);
    for (int64_t i = 0; i < ct_state_dict_size(da); i++) {
        const char *name = ct_state_dict_name(da, i);
        ck_assert_msg(tensor_item(ct_state_dict_tensor(da, i)) ==
                          tensor_item(ct_state_dict_get(db, name)),
                      "%s differs after the resume", name);
    }
    ct_state_dict_free(da);
    ct_state_dict_free(db);
    scheduler_free(a);
    scheduler_free(b);
    free_fixture(&fa);
    free_fixture(&fb);
}

START_TEST(test_plateau_resume)
{
    TU_MEM_BEGIN;
    PlateauArgs a = plateau_a(), b = plateau_b(), d = plateau_d();
    check_plateau_resume(&a, PLATEAU_METRIC_A, 80, 14); /* in cooldown */
    check_plateau_resume(&a, PLATEAU_METRIC_A, 80, 29); /* bad epochs counted */
    check_plateau_resume(&b, PLATEAU_METRIC_B, 80, 31); /* after the NaN */
    check_plateau_resume(&d, PLATEAU_METRIC_D, 70, 45);
    check_plateau_resume(&d, PLATEAU_METRIC_D, 70, 0); /* best still -inf */
    TU_MEM_END;
}
END_TEST

/* A bad plateau state is refused and changes nothing, the extra entries
 * included. */
START_TEST(test_plateau_state_bad)
{
    TU_MEM_BEGIN;
    Fixture f = make_fixture(false);
    PlateauArgs pa = plateau_a();
    Scheduler *s = scheduler_reduce_on_plateau(fresh(&f), &pa);
    for (int t = 0; t < 20; t++) scheduler_step_metric(s, PLATEAU_METRIC_A[t]);
    CtStateDict *good = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(s, good), CT_OK);
    static const char *const names[] = {
        "step",       "base_lrs.0",     "base_lrs.1",
        "best",       "num_bad_epochs", "cooldown_counter",
        "last_epoch", "last_lrs.0",     "last_lrs.1"};
    const struct {
        const char *name;
        double v;
        CtStatus st;
        const char *msg;
    } cases[] = {
        {"num_bad_epochs", 1.5, CT_ERR_FORMAT, "\"num_bad_epochs\" = 1.5 is not a count"},
        {"last_epoch", -1, CT_ERR_FORMAT, "\"last_epoch\" = -1 is not a count"},
        {"cooldown_counter", 3, CT_ERR_FORMAT, "cooldown_counter 3 is above cooldown=2"},
        {"last_lrs.1", INFINITY, CT_ERR_FORMAT, "\"last_lrs.1\" = inf is not a valid LR"},
        {"best", NAN, CT_ERR_FORMAT, "\"best\" is NaN"},
        {"best_", 1, CT_ERR_FORMAT, "ReduceLROnPlateau state load: missing \"best\""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        CtStateDict *d = ct_state_dict_create();
        bool replaced = false;
        for (int i = 0; i < 9; i++) {
            bool hit = strncmp(names[i], cases[c].name, strlen(names[i])) == 0;
            replaced |= hit;
            if (hit)
                put(d, cases[c].name, cases[c].v);
            else
                ck_assert_int_eq(
                    ct_state_dict_add(d, names[i], ct_state_dict_get(good, names[i])),
                    CT_OK);
        }
        ck_assert(replaced);
        double lr = optim_get_lr(f.opt, 1);
        CtStateDict *now = ct_state_dict_create();
        ck_assert_int_eq(scheduler_state_save(s, now), CT_OK);
        check_bad_state(s, f.opt, d, cases[c].st, cases[c].msg);
        CtStateDict *after = ct_state_dict_create();
        ck_assert_int_eq(scheduler_state_save(s, after), CT_OK);
        for (int i = 0; i < 9; i++)
            ck_assert(tensor_item(ct_state_dict_get(now, names[i])) ==
                      tensor_item(ct_state_dict_get(after, names[i])));
        ck_assert(optim_get_lr(f.opt, 1) == lr);
        ct_state_dict_free(now);
        ct_state_dict_free(after);
    }

    /* a step scheduler's state (no extra entries) is refused by count */
    CtStateDict *d = ct_state_dict_create();
    put(d, "step", 3);
    put(d, "base_lrs.0", 0.1);
    put(d, "base_lrs.1", 0.1);
    check_bad_state(
        s, f.opt, d, CT_ERR_FORMAT,
        "ReduceLROnPlateau state load: 3 entries, expected 9 (step and 2 base "
        "LRs and 6 of ReduceLROnPlateau's own)");
    /* and a plateau's state by a step scheduler */
    Scheduler *e = scheduler_exponential_lr(fresh(&f), 0.9);
    ck_assert_int_eq(scheduler_state_load(e, good), CT_ERR_FORMAT);
    tu_assert_error(CT_ERR_FORMAT, "ExponentialLR state load: 9 entries, expected 3");
    scheduler_free(e);

    /* saving into a dict that has one of its names adds nothing */
    d = ct_state_dict_create();
    put(d, "best", 1);
    ck_assert_int_eq(scheduler_state_save(s, d), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "ReduceLROnPlateau state save: \"best\" already in the dict");
    ck_assert_int_eq(ct_state_dict_size(d), 1);
    ct_state_dict_free(d);
    ct_state_dict_free(good);
    scheduler_free(s);
    free_fixture(&f);
    TU_MEM_END;
}
END_TEST

/* A save that runs out of memory half-way leaves the dict as it was. */
START_TEST(test_state_save_oom)
{
    TU_MEM_BEGIN;
    Fixture f = make_fixture(false);
    PlateauArgs pa = plateau_a();
    Scheduler *s = scheduler_reduce_on_plateau(fresh(&f), &pa);
    CtStateDict *d = ct_state_dict_create();
    ct_alloc_fail_at(INT64_MAX); /* count only */
    ck_assert_int_eq(scheduler_state_save(s, d), CT_OK);
    int64_t total = ct_alloc_counted();
    ct_alloc_fail_at(0);
    ct_state_dict_free(d);
    ck_assert_int_ge(total, 9);
    for (int64_t n = 1; n <= total + 1; n++) {
        d = ct_state_dict_create();
        ct_clear_error();
        ct_alloc_fail_at(n);
        CtStatus st = scheduler_state_save(s, d);
        ct_alloc_fail_at(0);
        if (n <= total) {
            ck_assert_int_eq(st, CT_ERR_OOM);
            ck_assert_int_eq(ct_state_dict_size(d), 0);
        } else {
            ck_assert_int_eq(st, CT_OK);
            ck_assert_int_eq(ct_state_dict_size(d), 9);
        }
        ct_state_dict_free(d);
    }
    ct_clear_error();
    scheduler_free(s);
    free_fixture(&f);
    TU_MEM_END;
}
END_TEST

/* ---- ReduceLROnPlateau in a Trainer ------------------------------------- */

/* Steps the run's ReduceLROnPlateau with each epoch's eval loss (the
 * pattern optim.h documents) and records the LR after each step. */
typedef struct PlateauStepper {
    Callback base;
    int n;
    double lrs[16];
} PlateauStepper;

static CtStatus plateau_on_eval_epoch_end(Callback *cb, Trainer *t, bool is_intermediate)
{
    if (is_intermediate) return CT_OK;
    double loss = run_history_latest(trainer_run_history(t), "eval_loss_epoch");
    CtStatus st = scheduler_step_metric(t->scheduler, loss);
    PlateauStepper *p = (PlateauStepper *)cb;
    if (st == CT_OK && p->n < 16) p->lrs[p->n++] = optim_get_lr(t->optimizer, 0);
    return st;
}

static const CallbackVtable plateau_stepper_vt = {
    .type = "PlateauStepper", .on_eval_epoch_end = plateau_on_eval_epoch_end};

static Scheduler *make_plateau_sched(Trainer *t, Optimizer *o, void *user)
{
    (void)t;
    return scheduler_reduce_on_plateau(o, user);
}

/* Stops the run at the start of the step after update `at`. */
typedef struct StopAt {
    Callback base;
    int64_t at;
} StopAt;

static CtStatus stop_at_step_start(Callback *cb, Trainer *t)
{
    if (trainer_global_step(t) == ((StopAt *)cb)->at) trainer_stop(t, "test stop");
    return CT_OK;
}

static const CallbackVtable stop_at_vt = {.type = "StopAt",
                                          .on_train_step_start = stop_at_step_start};

/* y = 2 x0 - x1 + sin(3 i): the noise cannot be learned, so the eval loss
 * levels off within a few epochs and the plateau reduces the LR. */
static Dataset *plateau_dataset(int64_t n, int seed)
{
    float *x = malloc((size_t)n * 2 * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        x[2 * i] = (float)sin((double)(i + seed));
        x[2 * i + 1] = (float)cos(0.7 * (double)(i + seed));
        y[i] = 2 * x[2 * i] - x[2 * i + 1] + (float)sin(3.0 * (double)(i + seed));
    }
    Tensor *tx = tensor_from_data(x, 2, (const int64_t[]){n, 2}, CT_F32, ct_cpu());
    Tensor *ty = tensor_from_data(y, 2, (const int64_t[]){n, 1}, CT_F32, ct_cpu());
    Dataset *ds = data_tensor_dataset_create(2, (Tensor *[]){tx, ty});
    tensor_free(tx);
    tensor_free(ty);
    free(x);
    free(y);
    return ds;
}

typedef struct PlateauRun {
    Module *model;
    Optimizer *opt;
    NnLoss *loss;
    Trainer *t;
    PlateauStepper *stepper;
} PlateauRun;

/* A Linear(2, 1) with SGD(0.2) trained with a PlateauStepper, then the
 * given callbacks (a checkpoint callback last). */
static void plateau_run_init(PlateauRun *r, Callback *extra1, Callback *extra2)
{
    CtGenerator g = ct_generator(3, 0);
    r->model = nn_linear(2, 1, true, &g);
    r->opt = optim_sgd_create(r->model, &(SgdArgs){.lr = 0.2, .momentum = 0.5});
    r->loss = nn_loss_mse(CT_REDUCTION_MEAN);
    r->stepper = calloc(1, sizeof *r->stepper);
    r->stepper->base.vt = &plateau_stepper_vt;
    Callback *cbs[3] = {&r->stepper->base, extra1, extra2};
    r->t = trainer_create(
        &(TrainerConfig){.model = r->model,
                         .loss = r->loss,
                         .optimizer = r->opt,
                         .callbacks = cbs,
                         .n_callbacks = 1 + (extra1 != NULL) + (extra2 != NULL)});
    ck_assert_msg(r->t != NULL, "%s", ct_last_error());
}

static CtStatus plateau_run_train(PlateauRun *r, PlateauArgs *pa, const char *resume,
                                  const char *dir)
{
    Dataset *train = plateau_dataset(64, 0), *eval = plateau_dataset(32, 100);
    CtStatus st =
        trainer_train(r->t, &(TrainArgs){.train_dataset = train,
                                         .eval_dataset = eval,
                                         .num_epochs = 10,
                                         .per_device_batch_size = 8,
                                         .create_scheduler_fn = make_plateau_sched,
                                         .scheduler_user = pa,
                                         .resume_from = resume,
                                         .checkpoint_dir = dir});
    data_dataset_free(train);
    data_dataset_free(eval);
    return st;
}

static void plateau_run_free(PlateauRun *r)
{
    trainer_free(r->t); /* frees the callbacks */
    nn_loss_free(r->loss);
    optim_free(r->opt);
    nn_module_free(r->model);
}

/* Driven from a callback at the end of each eval epoch, the plateau gives
 * the LRs of a standalone one fed the same eval losses (the trainer's
 * per-update scheduler_step leaves them alone), and a run resumed from a
 * mid-epoch checkpoint continues with the same LRs and losses. */
START_TEST(test_plateau_trainer)
{
    PlateauArgs pa = scheduler_plateau_args();
    pa.patience = 0;
    pa.factor = 0.5;
    pa.threshold = 0.05;
    pa.cooldown = 1;
    PlateauRun a;
    plateau_run_init(&a, NULL, NULL);
    CtStatus st = plateau_run_train(&a, &pa, NULL, NULL);
    ck_assert_msg(st == CT_OK, "%s", ct_last_error());
    ck_assert_int_eq(a.stepper->n, 10);
    ck_assert_int_eq(scheduler_step_count(a.t->scheduler), trainer_global_step(a.t));
    ck_assert_int_eq(trainer_global_step(a.t), 80);

    int64_t n = 0;
    const double *loss =
        run_history_values(trainer_run_history(a.t), "eval_loss_epoch", &n);
    ck_assert_int_eq(n, 10);
    Fixture f = make_fixture(false);
    optim_set_lr(f.opt, 0, 0.2);
    Scheduler *ref = scheduler_reduce_on_plateau(f.opt, &pa);
    for (int e = 0; e < 10; e++) {
        ck_assert_int_eq(scheduler_step_metric(ref, loss[e]), CT_OK);
        ck_assert_msg(a.stepper->lrs[e] == optim_get_lr(f.opt, 0),
                      "epoch %d: trainer lr %g, standalone %g", e, a.stepper->lrs[e],
                      optim_get_lr(f.opt, 0));
    }
    ck_assert(a.stepper->lrs[9] < 0.2 * 0.5 * 0.5); /* it did reduce, more than twice */
    ck_assert(a.stepper->lrs[0] == 0.2);            /* not before there was a plateau */
    scheduler_free(ref);
    free_fixture(&f);

    /* stopped at update 45 (epoch 5, batch 5), with checkpoints every 6
     * updates; resumed from update 42's in a new trainer */
    char dir[64];
    tu_make_temp_dir(dir, sizeof dir, "ctrainer_plateau");
    PlateauRun b1, b2;
    StopAt *stop = calloc(1, sizeof *stop);
    stop->base.vt = &stop_at_vt;
    stop->at = 45;
    plateau_run_init(&b1, &stop->base,
                     callback_checkpoint_create(&(CheckpointArgs){
                         .dir = dir, .every_n_updates = 6, .no_at_end = true}));
    ck_assert_int_eq(plateau_run_train(&b1, &pa, NULL, NULL), CT_OK);
    ck_assert_int_eq(trainer_global_step(b1.t), 45);
    plateau_run_init(&b2, NULL, NULL);
    optim_set_lr(b2.opt, 0, 0.7); /* the checkpoint restores the LR */
    st = plateau_run_train(&b2, &pa, "latest", dir);
    ck_assert_msg(st == CT_OK, "%s", ct_last_error());
    ck_assert_int_eq(trainer_global_step(b2.t), 80);
    /* b2 stepped the plateau at the end of epochs 6..10 */
    ck_assert_int_eq(b2.stepper->n, 5);
    for (int e = 0; e < 5; e++) ck_assert(b2.stepper->lrs[e] == a.stepper->lrs[5 + e]);
    ck_assert(optim_get_lr(b2.opt, 0) == optim_get_lr(a.opt, 0));
    int64_t nb = 0;
    const double *lb =
        run_history_values(trainer_run_history(b2.t), "eval_loss_epoch", &nb);
    ck_assert_int_eq(nb, 10);
    ck_assert_mem_eq(lb, loss, 10 * sizeof *loss);
    CtStateDict *da = ct_state_dict_create(), *db = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(a.t->scheduler, da), CT_OK);
    ck_assert_int_eq(scheduler_state_save(b2.t->scheduler, db), CT_OK);
    for (int64_t i = 0; i < ct_state_dict_size(da); i++)
        ck_assert_msg(tensor_item(ct_state_dict_tensor(da, i)) ==
                          tensor_item(ct_state_dict_get(db, ct_state_dict_name(da, i))),
                      "%s differs", ct_state_dict_name(da, i));
    ct_state_dict_free(da);
    ct_state_dict_free(db);
    plateau_run_free(&a);
    plateau_run_free(&b1);
    plateau_run_free(&b2);
    tu_remove_dir(dir);
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

static Scheduler *make_restarts(Optimizer *o)
{
    return scheduler_cosine_warm_restarts(o, 3, 2, 0.001);
}

static Scheduler *make_constant(Optimizer *o)
{
    return scheduler_constant_lr(o, 0.37, 9);
}

static Scheduler *make_poly(Optimizer *o)
{
    return scheduler_polynomial_lr(o, 17, 2.5);
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
    check_resume(make_restarts, 13, 60); /* mid-period, then two restarts */
    check_resume(make_restarts, 21, 60); /* at a restart */
    check_resume(make_constant, 5, 20);
    check_resume(make_poly, 11, 25);
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

    ck_assert_ptr_null(scheduler_cosine_warm_restarts(o, 0, 1, 0.0));
    tu_assert_error(CT_ERR_INVALID,
                    "CosineAnnealingWarmRestarts: t_0 must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_cosine_warm_restarts(o, 5, 0, 0.0));
    tu_assert_error(CT_ERR_INVALID, "t_mult must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_cosine_warm_restarts(o, 5, 1, INFINITY));
    tu_assert_error(CT_ERR_INVALID, "eta_min must be finite, got inf");
    ck_assert_ptr_null(scheduler_constant_lr(o, 0.0, 5));
    tu_assert_error(CT_ERR_INVALID, "ConstantLR: factor must be in (0, 1], got 0");
    ck_assert_ptr_null(scheduler_constant_lr(o, 1.5, 5));
    tu_assert_error(CT_ERR_INVALID, "ConstantLR: factor must be in (0, 1], got 1.5");
    ck_assert_ptr_null(scheduler_constant_lr(o, 0.5, 0));
    tu_assert_error(CT_ERR_INVALID, "ConstantLR: total_iters must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_polynomial_lr(o, 0, 1.0));
    tu_assert_error(CT_ERR_INVALID, "PolynomialLR: total_iters must be >= 1, got 0");
    ck_assert_ptr_null(scheduler_polynomial_lr(o, 5, -1.0));
    tu_assert_error(CT_ERR_INVALID,
                    "PolynomialLR: power must be finite and >= 0, got -1");

    PlateauArgs pa = scheduler_plateau_args();
    pa.factor = 1.0;
    ck_assert_ptr_null(scheduler_reduce_on_plateau(o, &pa));
    tu_assert_error(CT_ERR_INVALID, "ReduceLROnPlateau: factor must be in [0, 1), got 1");
    pa = scheduler_plateau_args();
    pa.patience = -1;
    ck_assert_ptr_null(scheduler_reduce_on_plateau(o, &pa));
    tu_assert_error(CT_ERR_INVALID, "patience (-1) and cooldown (0) must be >= 0");
    pa = scheduler_plateau_args();
    pa.threshold = NAN;
    ck_assert_ptr_null(scheduler_reduce_on_plateau(o, &pa));
    tu_assert_error(CT_ERR_INVALID, "threshold must be finite and >= 0, got nan");
    pa = scheduler_plateau_args();
    pa.eps = -1;
    ck_assert_ptr_null(scheduler_reduce_on_plateau(o, &pa));
    tu_assert_error(CT_ERR_INVALID, "eps must be finite and >= 0, got -1");
    pa = scheduler_plateau_args();
    pa.min_lrs = (const double[]){0.0, -0.1};
    ck_assert_ptr_null(scheduler_reduce_on_plateau(o, &pa));
    tu_assert_error(CT_ERR_INVALID, "min_lrs[1] must be finite and >= 0, got -0.1");
    ck_assert_ptr_null(scheduler_reduce_on_plateau(o, NULL));
    tu_assert_error(CT_ERR_NULL, "ReduceLROnPlateau: args is NULL");
    ck_assert_ptr_null(scheduler_reduce_on_plateau(NULL, NULL));
    tu_assert_error(CT_ERR_NULL, "ReduceLROnPlateau: optimizer is NULL");

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

    PlateauArgs pa = scheduler_plateau_args();
    Scheduler *k9[] = {scheduler_step_lr(o, 3, 0.5), scheduler_reduce_on_plateau(o, &pa)};
    ck_assert_ptr_null(scheduler_sequential_lr(o, 2, k9, (const int64_t[]){4}));
    tu_assert_error(CT_ERR_INVALID,
                    "scheduler 1 (ReduceLROnPlateau) follows a metric, not "
                    "the step count, and cannot be part of a SequentialLR");

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

/* ---- WSD ------------------------------------------------------------------ */

/* LR of group g after t steps of s (stepping a fresh copy is not needed:
 * the schedule is a function of the step, so step s forward only). */
static double lr_after(Scheduler *s, Optimizer *o, int64_t t, int g)
{
    while (scheduler_step_count(s) < t) ck_assert_int_eq(scheduler_step(s), CT_OK);
    ck_assert(scheduler_get_last_lr(s, g) == optim_get_lr(o, g));
    return optim_get_lr(o, g);
}

/* pytorch-accelerated's WSDLrScheduler is not installed; its formulas
 * (wsd_scheduler.py, get_updated_values) with lr_min = m, base b:
 *   warmup   s0 + (t / W) * (b - s0)
 *   sqrt     b * (m + (1 - m) * (1 - sqrt(r)))
 *   inverse  b / (r * (1 / m) + (1 - r) * 1)
 * r = (steps into the period - (L - D)) / D, D = int(L * decay_phase_ratio).
 * The values below are those formulas evaluated by hand (python3 -c). */
START_TEST(test_wsd)
{
    Fixture f = make_fixture(false);
    /* one period of 20: warmup 4 from 0.01, D = int(20 * 0.25) = 5, pre-decay
     * step 15, sqrt decay to 0.1 * base. Group 0 (b = 0.1):
     *   t=0: 0.01   t=2: 0.01 + 0.5 * 0.09 = 0.055   t=4..14: 0.1
     *   t=15: r=0.2: 0.1 * (0.1 + 0.9 * (1 - sqrt(0.2))) = 0.05975077640500379
     *   t=16: r=0.4: 0.04307900211696917   t=18: r=0.8: 0.019501552810007573
     *   t=19 (the last update of the decay): r=1: 0.1 * 0.1 = 0.01, and after */
    WsdArgs a = {.total_steps = 20,
                 .warmup_steps = 4,
                 .warmup_start_lr = 0.01,
                 .decay_fraction = 0.25,
                 .min_lr_ratio = 0.1};
    Scheduler *s = scheduler_wsd(fresh(&f), &a);
    ck_assert_msg(s != NULL, "%s", ct_last_error());
    ck_assert_str_eq(scheduler_name(s), "WSDLrScheduler");
    const double hand[][2] = {{0, 0.01},
                              {2, 0.055},
                              {4, 0.1},
                              {14, 0.1},
                              {15, 0.05975077640500379},
                              {16, 0.04307900211696917},
                              {18, 0.019501552810007573},
                              {19, 0.01},
                              {20, 0.01},
                              {25, 0.01}};
    for (int i = 0; i < 10; i++)
        assert_close("wsd sqrt", (int)hand[i][0], 0,
                     lr_after(s, f.opt, (int64_t)hand[i][0], 0), hand[i][1]);
    ck_assert_int_eq(scheduler_wsd_num_periods(s), 1);
    WsdPeriod p;
    ck_assert_int_eq(scheduler_wsd_period(s, 0, &p), CT_OK);
    ck_assert_int_eq(p.start, 0);
    ck_assert_int_eq(p.pre_decay_step, 15);
    ck_assert_int_eq(p.end, 20);
    ck_assert_int_eq(p.decay_steps, 5);
    WsdArgs back;
    ck_assert_int_eq(scheduler_wsd_args(s, &back), CT_OK);
    ck_assert_int_eq(back.num_checkpoints, 1);
    ck_assert_double_eq(back.min_lr_ratio, 0.1);
    scheduler_free(s);

    /* three checkpoints over 40 (ends 10, 20, 40, as the reference's code
     * also gives for 40): D = 2, 2, 5, pre-decay steps 8, 18, 35; inverse
     * decay with m = 0.1, group 0:
     *   t=7: b   t=8: r=0.5: 0.1 / (0.5 * 10 + 0.5) = 0.018181818181818184
     *   t=9: r=1: 0.01   t=10: b (next period)   t=18: 0.018181818181818184
     *   t=35: r=0.2: 0.1 / (2 + 0.8) = 0.03571428571428572
     *   t=36: r=0.4: 0.1 / (4 + 0.6) = 0.021739130434782608   t=40: 0.01 */
    a = (WsdArgs){.total_steps = 40,
                  .decay_fraction = 0.25,
                  .min_lr_ratio = 0.1,
                  .decay_shape = WSD_DECAY_INVERSE_PROPORTIONAL,
                  .num_checkpoints = 3};
    s = scheduler_wsd(fresh(&f), &a);
    ck_assert_msg(s != NULL, "%s", ct_last_error());
    const double inv[][2] = {{0, 0.1},
                             {7, 0.1},
                             {8, 0.018181818181818184},
                             {9, 0.01},
                             {10, 0.1},
                             {18, 0.018181818181818184},
                             {19, 0.01},
                             {20, 0.1},
                             {34, 0.1},
                             {35, 0.03571428571428572},
                             {36, 0.021739130434782608},
                             {40, 0.01}};
    for (int i = 0; i < 12; i++)
        assert_close("wsd inverse", (int)inv[i][0], 0,
                     lr_after(s, f.opt, (int64_t)inv[i][0], 0), inv[i][1]);
    ck_assert_int_eq(scheduler_wsd_num_periods(s), 3);
    const int64_t want[3][4] = {{0, 8, 10, 2}, {10, 18, 20, 2}, {20, 35, 40, 5}};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(scheduler_wsd_period(s, i, &p), CT_OK);
        ck_assert_int_eq(p.start, want[i][0]);
        ck_assert_int_eq(p.pre_decay_step, want[i][1]);
        ck_assert_int_eq(p.end, want[i][2]);
        ck_assert_int_eq(p.decay_steps, want[i][3]);
    }
    /* get_phase_info: the first period whose end is >= the step */
    ck_assert_int_eq(scheduler_wsd_phase_info(s, 10, &p), CT_OK);
    ck_assert_int_eq(p.end, 10);
    ck_assert_int_eq(scheduler_wsd_phase_info(s, 11, &p), CT_OK);
    ck_assert_int_eq(p.end, 20);
    ck_assert_int_eq(scheduler_wsd_phase_info(s, 99, &p), CT_OK);
    ck_assert_int_eq(p.end, 40);
    scheduler_free(s);

    /* two checkpoints over 100 end at 50 and 100 (the reference's docstring;
     * its code gives 25 and 50 and then holds the minimum LR) */
    a = (WsdArgs){.total_steps = 100, .num_checkpoints = 2};
    s = scheduler_wsd(fresh(&f), &a);
    ck_assert_int_eq(scheduler_wsd_period(s, 0, &p), CT_OK);
    ck_assert_int_eq(p.end, 50);
    ck_assert_int_eq(p.pre_decay_step, 45);
    ck_assert_int_eq(scheduler_wsd_period(s, 1, &p), CT_OK);
    ck_assert_int_eq(p.end, 100);
    ck_assert_int_eq(p.pre_decay_step, 95);
    assert_close("wsd 2 ckpt", 60, 0, lr_after(s, f.opt, 60, 0), 0.1);
    /* default m = 1e-6: t=98: r=0.8 */
    assert_close("wsd 2 ckpt", 98, 0, lr_after(s, f.opt, 98, 0),
                 0.1 * (1e-6 + (1 - 1e-6) * (1 - sqrt(0.8))));
    scheduler_free(s);

    /* linear and cosine, m = 0.5, one period of 10 with D = 5, group 1
     * (b = 0.03) at t=6 (r=0.4):
     *   linear 0.03 * (0.5 + 0.5 * 0.6) = 0.024
     *   cosine 0.03 * (0.5 + 0.5 * (1 + cos(0.4 pi)) / 2) = 0.024817627457812106 */
    a = (WsdArgs){.total_steps = 10,
                  .decay_fraction = 0.5,
                  .min_lr_ratio = 0.5,
                  .decay_shape = WSD_DECAY_LINEAR};
    s = scheduler_wsd(fresh(&f), &a);
    assert_close("wsd linear", 6, 1, lr_after(s, f.opt, 6, 1), 0.024);
    scheduler_free(s);
    a.decay_shape = WSD_DECAY_COSINE;
    s = scheduler_wsd(fresh(&f), &a);
    assert_close("wsd cosine", 6, 1, lr_after(s, f.opt, 6, 1), 0.024817627457812106);
    assert_close("wsd cosine", 10, 1, lr_after(s, f.opt, 10, 1), 0.015);
    scheduler_free(s);
    /* exactly 0 at the end; continuation skips the warmup */
    a = (WsdArgs){.total_steps = 10,
                  .warmup_steps = 3,
                  .min_lr_ratio = WSD_MIN_LR_RATIO_ZERO,
                  .continuation = true};
    s = scheduler_wsd(fresh(&f), &a);
    ck_assert_msg(s != NULL, "%s", ct_last_error());
    ck_assert(lr_after(s, f.opt, 0, 0) == 0.1);
    ck_assert(lr_after(s, f.opt, 10, 0) == 0.0);
    scheduler_free(s);
    free_fixture(&f);
}
END_TEST

static Scheduler *make_wsd(Optimizer *o)
{
    WsdArgs a = {.total_steps = 40,
                 .warmup_steps = 3,
                 .warmup_start_lr = 0.001,
                 .decay_fraction = 0.3,
                 .min_lr_ratio = 0.05,
                 .num_checkpoints = 3};
    return scheduler_wsd(o, &a);
}

/* Saved mid-decay, loaded into a fresh scheduler: the same LRs to the end
 * and beyond; a state of another configuration is refused. */
START_TEST(test_wsd_resume)
{
    TU_MEM_BEGIN;
    const int ks[] = {2, 8, 9, 19, 37};
    for (int i = 0; i < 5; i++) {
        Fixture fa = make_fixture(false), fb = make_fixture(false);
        Scheduler *a = make_wsd(fa.opt), *b = make_wsd(fb.opt);
        ck_assert_ptr_nonnull(a);
        while (scheduler_step_count(a) < ks[i])
            ck_assert_int_eq(scheduler_step(a), CT_OK);
        CtStateDict *d = ct_state_dict_create();
        ck_assert_int_eq(scheduler_state_save(a, d), CT_OK);
        ck_assert_int_eq(ct_state_dict_size(d), 1 + 2 + 8);
        ck_assert(tensor_item(ct_state_dict_get(d, "total_steps")) == 40);
        ck_assert_int_eq(scheduler_state_load(b, d), CT_OK);
        ct_state_dict_free(d);
        for (int t = ks[i]; t <= 45; t++) {
            if (t > ks[i]) {
                ck_assert_int_eq(scheduler_step(a), CT_OK);
                ck_assert_int_eq(scheduler_step(b), CT_OK);
            }
            for (int g = 0; g < 2; g++)
                ck_assert(optim_get_lr(fa.opt, g) == optim_get_lr(fb.opt, g));
        }
        scheduler_free(a);
        scheduler_free(b);
        free_fixture(&fa);
        free_fixture(&fb);
    }
    /* another total_steps: refused, nothing changed */
    Fixture f = make_fixture(false);
    Scheduler *a = make_wsd(f.opt);
    for (int t = 0; t < 5; t++) scheduler_step(a);
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(scheduler_state_save(a, d), CT_OK);
    scheduler_free(a);
    WsdArgs other = {.total_steps = 80,
                     .warmup_steps = 3,
                     .warmup_start_lr = 0.001,
                     .decay_fraction = 0.3,
                     .min_lr_ratio = 0.05,
                     .num_checkpoints = 3};
    Scheduler *b = scheduler_wsd(fresh(&f), &other);
    check_bad_state(b, f.opt, d, CT_ERR_INVALID, "saved total_steps 40");
    scheduler_free(b);
    free_fixture(&f);
    TU_MEM_END;
}
END_TEST

START_TEST(test_wsd_bad_args)
{
    Fixture f = make_fixture(false);
    Optimizer *o = fresh(&f);
    struct {
        WsdArgs a;
        const char *needle;
    } bad[] = {
        {{.total_steps = 0}, "total_steps must be >= 1"},
        {{.total_steps = 10, .warmup_steps = -1}, "warmup_steps must be >= 0"},
        {{.total_steps = 10, .decay_fraction = 1.5}, "decay_fraction must be in (0, 1]"},
        {{.total_steps = 10, .min_lr_ratio = 2}, "min_lr_ratio must be in [0, 1]"},
        {{.total_steps = 10, .decay_shape = (WsdDecayShape)9}, "unknown decay_shape 9"},
        {{.total_steps = 10,
          .min_lr_ratio = WSD_MIN_LR_RATIO_ZERO,
          .decay_shape = WSD_DECAY_INVERSE_PROPORTIONAL},
         "needs min_lr_ratio > 0"},
        {{.total_steps = 100, .decay_fraction = 0.5, .num_checkpoints = 2},
         "decay_fraction 0.5 is too large with 2 checkpoints"},
        {{.total_steps = 3, .num_checkpoints = 3}, "total_steps 3 is too small for 3"},
        /* the reference divides by zero here: int(5 * 0.1) = 0 */
        {{.total_steps = 5}, "period 0 [0, 5) gets no decay step"},
        {{.total_steps = 20, .warmup_steps = 19}, "warmup_steps 19 run past the first"},
        {{.total_steps = 20, .warmup_steps = 2, .warmup_start_lr = 0.05},
         "warmup_start_lr 0.05 exceeds group 1's base LR 0.03"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_ptr_null(scheduler_wsd(o, &bad[i].a));
        tu_assert_error(CT_ERR_INVALID, bad[i].needle);
    }
    ck_assert_ptr_null(scheduler_wsd(o, NULL));
    tu_assert_error(CT_ERR_NULL, "args is NULL");
    /* queries on another scheduler */
    Scheduler *s = scheduler_exponential_lr(o, 0.9);
    ck_assert_int_eq(scheduler_wsd_num_periods(s), -1);
    tu_assert_error(CT_ERR_INVALID, "is ExponentialLR, not a WSDLrScheduler");
    WsdPeriod p;
    ck_assert_int_eq(scheduler_wsd_period(s, 0, &p), CT_ERR_INVALID);
    scheduler_free(s);
    s = scheduler_wsd(fresh(&f), &(WsdArgs){.total_steps = 20});
    ck_assert_int_eq(scheduler_wsd_period(s, 1, &p), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "period 1 out of [0, 1)");
    ck_assert_int_eq(scheduler_wsd_phase_info(s, -1, &p), CT_ERR_INVALID);
    scheduler_free(s);
    free_fixture(&f);
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
    tcase_add_test(tc, test_edge_cases);
    tcase_add_test(tc, test_warm_restarts);
    tcase_add_test(tc, test_constant_polynomial);
    tcase_add_test(tc, test_plateau);
    tcase_add_test(tc, test_plateau_resume);
    tcase_add_test(tc, test_plateau_state_bad);
    tcase_add_test(tc, test_plateau_trainer);
    tcase_add_test(tc, test_state_save_oom);
    tcase_add_test(tc, test_wsd);
    tcase_add_test(tc, test_wsd_resume);
    tcase_add_test(tc, test_wsd_bad_args);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
