/* Optimizers over packed models: one op per group over the flat blocks,
 * bit for bit the per-parameter result, state kept per parameter (views of
 * one state block), no allocation in a step after the first, and the step
 * that zeroes its gradients in its own pass. */
#include <stdlib.h>

#include "ctrainer/nn.h"
#include "ctrainer/optim.h"
#include "tensor/mem.h"
#include "testutil.h"

#define NP 3
static const int64_t SHAPES[NP][2] = {{4, 5}, {5, 1}, {3, 1}};
static const int NDIMS[NP] = {2, 1, 2};

typedef struct Model {
    Module *m;
    Tensor *p[NP];
} Model;

/* A module with NP f32 parameters, packed or not; unpacked ones get
 * gradients of their own. */
static Model make_model(bool packed)
{
    static const ModuleVtable vt = {.type = "Three"};
    static const char *names[NP] = {"a", "b", "c"};
    Model md;
    md.m = calloc(1, sizeof *md.m);
    ck_assert_int_eq(nn_module_init(md.m, &vt), CT_OK);
    for (int i = 0; i < NP; i++) {
        Tensor *r = tu_rand64(NDIMS[i], SHAPES[i], -1, 1, 40 + i, false);
        Tensor *t = tensor_zeros(NDIMS[i], SHAPES[i], CT_F32, ct_cpu());
        ck_assert_int_eq(tensor_copy_(t, r), CT_OK);
        tensor_free(r);
        ck_assert_int_eq(tensor_set_requires_grad(t, true), CT_OK);
        md.p[i] = nn_module_register_parameter(md.m, names[i], t);
        if (!packed) {
            Tensor *g = tensor_zeros(NDIMS[i], SHAPES[i], CT_F32, ct_cpu());
            ck_assert_int_eq(tensor_set_grad(md.p[i], g), CT_OK);
            tensor_free(g);
        }
    }
    if (packed) ck_assert_int_eq(nn_module_pack(md.m), CT_OK);
    return md;
}

/* Gradients of step s (the same for every model). */
static void set_grads(Model *md, int s)
{
    for (int i = 0; i < NP; i++) {
        Tensor *r = tu_rand64(NDIMS[i], SHAPES[i], -1, 1, 100 * s + i, false);
        ck_assert_int_eq(tensor_copy_(tensor_grad(md->p[i]), r), CT_OK);
        tensor_free(r);
    }
}

static Optimizer *make_optim(int kind, Module *m)
{
    SgdArgs sgd = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
    AdamArgs adam = {.lr = 0.01,
                     .beta1 = 0.9,
                     .beta2 = 0.999,
                     .eps = 1e-8,
                     .weight_decay = 0.1,
                     .amsgrad = true};
    RmspropArgs rms = {
        .lr = 0.01, .alpha = 0.99, .eps = 1e-8, .momentum = 0.5, .centered = true};
    switch (kind) {
    case 0: return optim_sgd_create(m, &sgd);
    case 1: return optim_adamw_create(m, &adam);
    default: return optim_rmsprop_create(m, &rms);
    }
}

static void assert_same_tensors(const Tensor *a, const Tensor *b, const char *what)
{
    ck_assert_int_eq(tensor_numel(a), tensor_numel(b));
    ck_assert_msg(memcmp(tensor_data(a), tensor_data(b), (size_t)tensor_numel(a) * 4) ==
                      0,
                  "%s differs between the packed and the per-parameter path", what);
}

START_TEST(test_packed_matches_per_parameter)
{
    TU_MEM_BEGIN;
    Model pk = make_model(true), un = make_model(false);
    Optimizer *op = make_optim(_i, pk.m), *ou = make_optim(_i, un.m);
    ck_assert_ptr_nonnull(op);
    ck_assert_ptr_nonnull(ou);
    for (int s = 0; s < 4; s++) {
        set_grads(&pk, s);
        set_grads(&un, s);
        ck_assert_int_eq(optim_step(op), CT_OK);
        ck_assert_int_eq(optim_step(ou), CT_OK);
    }
    for (int i = 0; i < NP; i++) assert_same_tensors(pk.p[i], un.p[i], "a parameter");
    CtStateDict *sp = ct_state_dict_create(), *su = ct_state_dict_create();
    ck_assert_int_eq(optim_state_save(op, sp), CT_OK);
    ck_assert_int_eq(optim_state_save(ou, su), CT_OK);
    ck_assert_int_eq(ct_state_dict_size(sp), ct_state_dict_size(su));
    for (int64_t k = 0; k < ct_state_dict_size(sp); k++) {
        const char *name = ct_state_dict_name(sp, k);
        ck_assert_str_eq(name, ct_state_dict_name(su, k));
        const Tensor *a = ct_state_dict_tensor(sp, k), *b = ct_state_dict_tensor(su, k);
        if (tensor_dtype(a) == CT_F32) assert_same_tensors(a, b, name);
    }
    /* the group's buffers are views of one block (also when the parameters
     * are not packed: the per-parameter path runs over the views then) */
    const char *buf0 = _i == 0 ? "momentum_buffer" : _i == 1 ? "exp_avg" : "square_avg";
    char n0[64], n2[64];
    snprintf(n0, sizeof n0, "state.0.%s", buf0);
    snprintf(n2, sizeof n2, "state.2.%s", buf0);
    ck_assert(
        tensor_shares_storage(ct_state_dict_get(sp, n0), ct_state_dict_get(sp, n2)));
    ck_assert(
        tensor_shares_storage(ct_state_dict_get(su, n0), ct_state_dict_get(su, n2)));
    ct_state_dict_free(sp);
    ct_state_dict_free(su);
    optim_free(op);
    optim_free(ou);
    nn_module_free(pk.m);
    nn_module_free(un.m);
    TU_MEM_END;
}
END_TEST

/* After the first step, a step and a zero_grad allocate nothing in the
 * tensor layer (every tensor, storage, scope and scratch allocation of the
 * layer is counted by the hook of tensor/mem.h). */
START_TEST(test_step_allocates_nothing_after_the_first)
{
    TU_MEM_BEGIN;
    Model pk = make_model(true);
    Optimizer *o = make_optim(_i, pk.m);
    set_grads(&pk, 0);
    ck_assert_int_eq(optim_step(o), CT_OK);
    for (int s = 1; s < 3; s++) {
        set_grads(&pk, s);
        ct_alloc_fail_at(INT64_MAX);
        ck_assert_int_eq(optim_step(o), CT_OK);
        ck_assert_int_eq(optim_zero_grad(o), CT_OK);
        ck_assert_int_eq(ct_alloc_counted(), 0);
        ct_alloc_fail_at(0);
    }
    optim_free(o);
    nn_module_free(pk.m);
    TU_MEM_END;
}
END_TEST

/* Resuming a packed model: the loaded state is laid out as one block again
 * and the next steps match the uninterrupted run bit for bit. */
START_TEST(test_resume_keeps_blocks)
{
    TU_MEM_BEGIN;
    Model a = make_model(true), b = make_model(true);
    Optimizer *oa = make_optim(_i, a.m);
    for (int s = 0; s < 2; s++) {
        set_grads(&a, s);
        ck_assert_int_eq(optim_step(oa), CT_OK);
    }
    for (int i = 0; i < NP; i++) ck_assert_int_eq(tensor_copy_(b.p[i], a.p[i]), CT_OK);
    CtStateDict *d = ct_state_dict_create();
    ck_assert_int_eq(optim_state_save(oa, d), CT_OK);
    Optimizer *ob = make_optim(_i, b.m);
    ck_assert_int_eq(optim_state_load(ob, d), CT_OK);
    ct_state_dict_free(d);
    for (int s = 2; s < 4; s++) {
        set_grads(&a, s);
        set_grads(&b, s);
        ck_assert_int_eq(optim_step(oa), CT_OK);
        ck_assert_int_eq(optim_step(ob), CT_OK);
    }
    for (int i = 0; i < NP; i++)
        assert_same_tensors(a.p[i], b.p[i], "a resumed parameter");
    set_grads(&b, 5);
    ct_alloc_fail_at(INT64_MAX);
    ck_assert_int_eq(optim_step(ob), CT_OK);
    ck_assert_int_eq(ct_alloc_counted(), 0);
    ct_alloc_fail_at(0);
    optim_free(oa);
    optim_free(ob);
    nn_module_free(a.m);
    nn_module_free(b.m);
    TU_MEM_END;
}
END_TEST

/* Ops of a backward into p[0] (a linear weight): 3 when its zeroed
 * gradient is written in place (the seed, the sum's and the linear's
 * backward), 4 with an addition into it. */
static uint64_t backward_ops(Model *md)
{
    CtScope *sc = ct_scope_open();
    Tensor *x = tensor_ones(2, (const int64_t[]){2, 5}, CT_F32, ct_cpu());
    Tensor *loss = tensor_sum(tensor_linear(x, md->p[0], NULL), 0, NULL, false);
    uint64_t before = ct_op_count();
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    uint64_t ops = ct_op_count() - before;
    ct_scope_close(sc);
    return ops;
}

static void assert_zero_grads(const Model *md)
{
    for (int i = 0; i < NP; i++) {
        const float *g = tensor_data(tensor_grad(md->p[i]));
        for (int64_t k = 0; k < tensor_numel(md->p[i]); k++) ck_assert(g[k] == 0);
    }
}

/* optim_step_zero_grad against optim_step then optim_zero_grad, packed
 * (_i < 3) and not (_i >= 3), for each optimizer: the same parameters,
 * state and gradients (zeros) bit for bit, one op fewer per group where
 * packed, and from the 4th step with parameter "b" frozen (its gradient
 * zeroed, itself left as it is). */
START_TEST(test_step_zero_grad_is_step_then_zero)
{
    TU_MEM_BEGIN;
    bool packed = _i < 3;
    Model a = make_model(packed), b = make_model(packed);
    Optimizer *oa = make_optim(_i % 3, a.m), *ob = make_optim(_i % 3, b.m);
    for (int s = 0; s < 5; s++) {
        if (s == 3) {
            ck_assert_int_eq(tensor_set_requires_grad(a.p[1], false), CT_OK);
            ck_assert_int_eq(tensor_set_requires_grad(b.p[1], false), CT_OK);
        }
        set_grads(&a, s);
        set_grads(&b, s);
        uint64_t c0 = ct_op_count();
        ck_assert_int_eq(optim_step(oa), CT_OK);
        ck_assert_int_eq(optim_zero_grad(oa), CT_OK);
        uint64_t c1 = ct_op_count();
        ck_assert_int_eq(optim_step_zero_grad(ob), CT_OK);
        uint64_t c2 = ct_op_count();
        if (s > 0 && packed && s < 3) { /* (step 0 makes the state too) */
            ck_assert_uint_eq(c1 - c0, 2);
            ck_assert_uint_eq(c2 - c1, 1);
        } else if (s > 0) {
            ck_assert_uint_eq(c2 - c1, NP); /* one op per parameter */
        }
        /* (before a data pointer is taken: that counts as a write) */
        if (s == 1) {
            ck_assert_uint_eq(backward_ops(&a), 3);
            ck_assert_uint_eq(backward_ops(&b), 3);
        } else {
            assert_zero_grads(&b);
        }
        for (int i = 0; i < NP; i++) {
            assert_same_tensors(a.p[i], b.p[i], "a parameter");
            assert_same_tensors(tensor_grad(a.p[i]), tensor_grad(b.p[i]), "a gradient");
        }
    }
    ck_assert_int_eq(optim_step_count(oa), optim_step_count(ob));
    ck_assert_int_eq(optim_step_zero_grad(NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "optim_step_zero_grad: NULL optimizer");
    optim_free(oa);
    optim_free(ob);
    nn_module_free(a.m);
    nn_module_free(b.m);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim_blocks");
    TCase *tc = tcase_create("blocks");
    tcase_add_loop_test(tc, test_packed_matches_per_parameter, 0, 3);
    tcase_add_loop_test(tc, test_step_allocates_nothing_after_the_first, 0, 3);
    tcase_add_loop_test(tc, test_resume_keeps_blocks, 0, 3);
    tcase_add_loop_test(tc, test_step_zero_grad_is_step_then_zero, 0, 6);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
