/* Allocation failures during a whole training step (forward, loss, backward,
 * optimizer update), swept over every allocation the step makes: each either
 * fails with a clear error or gives exactly the parameters and gradients of
 * an undisturbed step. Never a crash, a leak or a silently skipped node. */
#include <stdlib.h>

#include "ctrainer/nn.h"
#include "ctrainer/optim.h"
#include "tensor/mem.h"
#include "testutil.h"

enum { N_STEPS = 2 };

typedef enum Algo { ALGO_SGD_MOMENTUM, ALGO_ADAMW } Algo;

typedef struct Run {
    Module *model;
    Optimizer *opt;
    CtStateDict *params;
} Run;

static Run run_create(Algo algo)
{
    CtGenerator g = ct_generator(11, 0);
    Run r = {.model = nn_model_mlp(6, 2, (const int64_t[]){8, 5}, 3, &g)};
    ck_assert_ptr_nonnull(r.model);
    if (algo == ALGO_SGD_MOMENTUM)
        r.opt = optim_sgd_create(r.model, &(SgdArgs){.lr = 0.1, .momentum = 0.9});
    else
        r.opt = optim_adamw_create(r.model, &(AdamArgs){.lr = 0.01,
                                                        .beta1 = 0.9,
                                                        .beta2 = 0.999,
                                                        .eps = 1e-8,
                                                        .weight_decay = 0.01});
    ck_assert_ptr_nonnull(r.opt);
    r.params = nn_module_parameters(r.model);
    ck_assert_ptr_nonnull(r.params);
    return r;
}

static void run_free(Run *r)
{
    ct_state_dict_free(r->params);
    optim_free(r->opt);
    nn_module_free(r->model);
}

/* One step on a fixed batch of 4 samples, everything in one scope. */
static CtStatus train_step(Run *r, int step)
{
    CtScope *s = ct_scope_open();
    if (!s) return ct_last_status();
    CtGenerator g = ct_generator(5, (uint64_t)step);
    Tensor *x = tensor_normal(&g, 2, (const int64_t[]){4, 6}, 0.0, 1.0, CT_F32, ct_cpu());
    int64_t labels[4] = {0, 2, 1, 2};
    Tensor *y = tensor_from_data(labels, 1, (const int64_t[]){4}, CT_I64, ct_cpu());
    CtStatus st = optim_zero_grad(r->opt);
    Tensor *loss =
        st == CT_OK ? tensor_cross_entropy(nn_forward(r->model, x), y, NULL) : NULL;
    if (st == CT_OK) st = loss ? tensor_backward(loss, NULL) : ct_last_status();
    if (st == CT_OK) st = optim_step(r->opt);
    ct_scope_close(s);
    return st;
}

static CtStatus train(Run *r)
{
    CtStatus st = CT_OK;
    for (int k = 0; k < N_STEPS && st == CT_OK; k++) st = train_step(r, k);
    return st;
}

static void assert_same_bits(const Tensor *a, const Tensor *b, const char *what,
                             int64_t i, int64_t n)
{
    ck_assert_msg(a && b, "fail at %lld: %s %lld missing", (long long)n, what,
                  (long long)i);
    size_t bytes = (size_t)tensor_numel(a) * ct_dtype_size(tensor_dtype(a));
    ck_assert_int_eq(tensor_numel(a), tensor_numel(b));
    ck_assert_msg(memcmp(tensor_data(a), tensor_data(b), bytes) == 0,
                  "fail at %lld: %s %lld differs from the undisturbed run", (long long)n,
                  what, (long long)i);
}

static void assert_same_state(const Run *r, const Run *ref, int64_t n)
{
    int64_t np = ct_state_dict_size(ref->params);
    ck_assert_int_eq(ct_state_dict_size(r->params), np);
    for (int64_t i = 0; i < np; i++) {
        Tensor *p = ct_state_dict_tensor(r->params, i);
        Tensor *q = ct_state_dict_tensor(ref->params, i);
        assert_same_bits(p, q, "parameter", i, n);
        assert_same_bits(tensor_grad(p), tensor_grad(q), "gradient", i, n);
    }
}

/* Sweeps n over every counted allocation of N_STEPS training steps. */
static void sweep(Algo algo)
{
    size_t mem0 = ct_alloc_stats(ct_cpu()).in_use;
    Run ref = run_create(algo);
    ct_alloc_fail_at(INT64_MAX); /* count only */
    ck_assert_int_eq(train(&ref), CT_OK);
    int64_t total = ct_alloc_counted();
    ct_alloc_fail_at(0);
    ck_assert_int_gt(total, 100); /* the hook sees the step's allocations */
    int64_t failed = 0;
    for (int64_t n = 1; n <= total + 1; n++) {
        Run r = run_create(algo);
        ct_clear_error();
        ct_alloc_fail_at(n);
        CtStatus st = train(&r);
        ct_alloc_fail_at(0);
        if (st != CT_OK) {
            failed++;
            ck_assert_msg(ct_last_status() == st, "fail at %lld: status %s, recorded %s",
                          (long long)n, ct_status_str(st),
                          ct_status_str(ct_last_status()));
            ck_assert_msg(ct_last_error()[0] != '\0', "fail at %lld: no message",
                          (long long)n);
            ck_assert_msg(n <= total, "fail at %lld: failed with no injected failure",
                          (long long)n);
        } else {
            assert_same_state(&r, &ref, n);
        }
        run_free(&r);
    }
    /* nearly every allocation is essential: most failures must surface */
    ck_assert_int_gt(failed, total / 2);
    run_free(&ref);
    ct_clear_error();
    ck_assert_msg(ct_alloc_stats(ct_cpu()).in_use == mem0,
                  "tensor memory leaked: %zu bytes in use, %zu before",
                  ct_alloc_stats(ct_cpu()).in_use, mem0);
}

START_TEST(test_sweep_sgd_momentum)
{
    sweep(ALGO_SGD_MOMENTUM);
}
END_TEST

START_TEST(test_sweep_adamw)
{
    sweep(ALGO_ADAMW);
}
END_TEST

/* The hook fails exactly the nth counted allocation, once, and counts. */
START_TEST(test_hook_fails_the_nth_allocation_once)
{
    ct_alloc_fail_at(2);
    void *a = ct_malloc(8);
    void *b = ct_malloc(8);
    void *c = ct_calloc(1, 8);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ct_alloc_counted(), 3);
    ct_alloc_fail_at(0);
    void *d = ct_realloc(c, 16);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(ct_alloc_counted(), 0);
    free(a);
    free(d);
}
END_TEST

/* A failed autograd node fails the op: no output without its graph. */
START_TEST(test_node_failure_fails_the_op)
{
    TU_MEM_BEGIN;
    Tensor *a = tu_rand64(1, (const int64_t[]){3}, -1, 1, 1, true);
    for (int64_t n = 1;; n++) {
        ct_clear_error();
        ct_alloc_fail_at(n);
        Tensor *y = tensor_relu(a); /* no scope open */
        int64_t counted = ct_alloc_counted();
        ct_alloc_fail_at(0);
        if (y) {
            ck_assert_msg(n > counted, "allocation %lld failed, yet relu succeeded",
                          (long long)n);
            ck_assert(tensor_requires_grad(y)); /* it has its node */
            tensor_free(y);
            break;
        }
        ck_assert_int_eq(ct_last_status(), CT_ERR_OOM);
        ck_assert_msg(strstr(ct_last_error(), "relu") ||
                          strstr(ct_last_error(), "allocating"),
                      "message: %s", ct_last_error());
    }
    tensor_free(a);
    ct_clear_error();
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim_alloc_failure");
    TCase *tc = tcase_create("alloc_failure");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_hook_fails_the_nth_allocation_once);
    tcase_add_test(tc, test_node_failure_fails_the_op);
    tcase_add_test(tc, test_sweep_sgd_momentum);
    tcase_add_test(tc, test_sweep_adamw);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
