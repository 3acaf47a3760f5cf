/* Module core: registry and naming, modes, traversal, printing, counts,
 * packing, freezing. */
#include <stdlib.h>

#include "ctrainer/nn.h"
#include "ctrainer/optim.h"
#include "testutil.h"

/* A module of our own with a parameter, a buffer and children. */
typedef struct Toy {
    Module base;
    int *freed; /* counts vt->free calls */
} Toy;

static void toy_free(Module *m)
{
    Toy *t = (Toy *)m;
    if (t->freed) (*t->freed)++;
}

static const ModuleVtable toy_vt = {.type = "Toy", .free = toy_free};

static Module *toy(int *freed)
{
    Toy *t = calloc(1, sizeof *t);
    ck_assert_int_eq(nn_module_init(&t->base, &toy_vt), CT_OK);
    t->freed = freed;
    return &t->base;
}

static Tensor *vec(int64_t n, double v)
{
    return tensor_full(1, &n, v, CT_F32, ct_cpu());
}

/* Builds a tree:  root: p0, b0, a(Toy: w, s(Toy: w), rb), c(Toy: w) */
static Module *tree(int *freed)
{
    Module *root = toy(freed);
    ck_assert_ptr_nonnull(nn_module_register_parameter(root, "p0", vec(2, 1)));
    ck_assert_ptr_nonnull(nn_module_register_buffer(root, "b0", vec(1, 5)));
    Module *a = nn_module_register_child(root, "a", toy(freed));
    ck_assert_ptr_nonnull(nn_module_register_parameter(a, "w", vec(3, 2)));
    Module *s = nn_module_register_child(a, "s", toy(freed));
    ck_assert_ptr_nonnull(nn_module_register_parameter(s, "w", vec(4, 3)));
    ck_assert_ptr_nonnull(nn_module_register_buffer(a, "rb", vec(2, 0)));
    Module *c = nn_module_register_child(root, "c", toy(freed));
    ck_assert_ptr_nonnull(nn_module_register_parameter(c, "w", vec(5, 4)));
    return root;
}

static void assert_names(const CtStateDict *d, int n, const char *const *names)
{
    ck_assert_int_eq(ct_state_dict_size(d), n);
    for (int i = 0; i < n; i++) ck_assert_str_eq(ct_state_dict_name(d, i), names[i]);
}

START_TEST(test_registry_names)
{
    TU_MEM_BEGIN;
    int freed = 0;
    Module *root = tree(&freed);
    CtStateDict *p = nn_module_parameters(root);
    assert_names(p, 4, (const char *[]){"p0", "a.w", "a.s.w", "c.w"});
    ck_assert(tensor_requires_grad(ct_state_dict_tensor(p, 2)));
    ct_state_dict_free(p);
    CtStateDict *b = nn_module_buffers(root);
    assert_names(b, 2, (const char *[]){"b0", "a.rb"});
    ct_state_dict_free(b);
    /* state_dict: each module's params then buffers, then its children */
    CtStateDict *sd = nn_module_state_dict(root);
    assert_names(sd, 6, (const char *[]){"p0", "b0", "a.w", "a.rb", "a.s.w", "c.w"});
    ct_state_dict_free(sd);
    /* lookup */
    ck_assert_int_eq(tensor_numel(nn_module_get(root, "a.s.w")), 4);
    ck_assert_int_eq(tensor_numel(nn_module_get(root, "a.rb")), 2);
    ck_assert_ptr_null(nn_module_get(root, "a.x"));
    ck_assert_ptr_null(nn_module_get(root, "zz.w"));
    ck_assert_ptr_eq(nn_module_find(root, "a.s"),
                     nn_module_child_at(nn_module_child_at(root, 0), 0));
    ck_assert_ptr_eq(nn_module_find(root, ""), root);
    ck_assert_ptr_null(nn_module_find(root, "a."));
    ck_assert_ptr_null(nn_module_find(root, "a.t"));
    ck_assert_int_eq(nn_module_num_children(root), 2);
    ck_assert_str_eq(nn_module_child_name(root, 1), "c");
    ck_assert_ptr_null(nn_module_child_at(root, 2));
    ck_assert_int_eq(nn_module_num_parameters(root, false), 2 + 3 + 4 + 5);
    tensor_set_requires_grad(nn_module_get(root, "c.w"), false);
    ck_assert_int_eq(nn_module_num_parameters(root, true), 2 + 3 + 4);
    nn_module_free(root);
    ck_assert_int_eq(freed, 4);
    TU_MEM_END;
}
END_TEST

START_TEST(test_registry_errors)
{
    TU_MEM_BEGIN;
    Module *m = toy(NULL);
    ck_assert_ptr_nonnull(nn_module_register_parameter(m, "w", vec(2, 0)));
    ck_assert_ptr_null(nn_module_register_parameter(m, "w", vec(2, 0)));
    tu_assert_error(CT_ERR_INVALID,
                    "Toy: register_parameter: name \"w\" is already registered");
    ck_assert_ptr_null(nn_module_register_buffer(m, "w", vec(2, 0)));
    tu_assert_error(CT_ERR_INVALID, "name \"w\" is already registered");
    ck_assert_ptr_null(nn_module_register_child(m, "w", toy(NULL)));
    tu_assert_error(CT_ERR_INVALID, "name \"w\" is already registered");
    ck_assert_ptr_null(nn_module_register_parameter(m, "a.b", vec(2, 0)));
    tu_assert_error(CT_ERR_INVALID, "name \"a.b\" contains '.'");
    ck_assert_ptr_null(nn_module_register_child(m, "", toy(NULL)));
    tu_assert_error(CT_ERR_INVALID, "empty or NULL name");
    /* integer parameters cannot require grad */
    ck_assert_ptr_null(nn_module_register_parameter(
        m, "i", tensor_zeros(1, (const int64_t[]){2}, CT_I64, ct_cpu())));
    tu_assert_error(CT_ERR_DTYPE, "only floating-point tensors");
    /* NULL keeps the first error (sticky), or records one */
    ct_error(CT_ERR_SHAPE, "first");
    ck_assert_ptr_null(nn_module_register_parameter(m, "q", NULL));
    tu_assert_error(CT_ERR_SHAPE, "first");
    ck_assert_ptr_null(nn_module_register_child(m, "q", NULL));
    tu_assert_error(CT_ERR_NULL, "NULL child");
    ck_assert_ptr_null(nn_module_register_child(m, "self", m));
    tu_assert_error(CT_ERR_INVALID, "cannot be its own child");
    /* no forward */
    Tensor *x = vec(2, 1);
    ck_assert_ptr_null(nn_forward(m, x));
    tu_assert_error(CT_ERR_UNSUPPORTED, "Toy: module has no forward");
    ct_error(CT_ERR_SHAPE, "upstream");
    ck_assert_ptr_null(nn_forward(m, NULL));
    tu_assert_error(CT_ERR_SHAPE, "upstream");
    tensor_free(x);
    ck_assert_int_eq(nn_module_num_parameters(m, false), 2);
    nn_module_free(m);
    nn_module_free(NULL);
    TU_MEM_END;
}
END_TEST

START_TEST(test_train_eval)
{
    Module *root = tree(NULL);
    ck_assert(root->training);
    nn_module_eval(root);
    ck_assert(!root->training);
    ck_assert(!nn_module_find(root, "a.s")->training);
    ck_assert(!nn_module_find(root, "c")->training);
    nn_module_train(nn_module_find(root, "a"));
    ck_assert(nn_module_find(root, "a.s")->training);
    ck_assert(!nn_module_find(root, "c")->training);
    nn_module_train(root);
    ck_assert(nn_module_find(root, "c")->training);
    nn_module_free(root);
}
END_TEST

static char *print_to_string(const Module *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    nn_module_print(m, f);
    fclose(f);
    return buf;
}

START_TEST(test_print)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(1, 0);
    Module *inner = nn_sequential(
        2, (Module *[]){nn_linear(128, 10, false, &g), nn_gelu(CT_GELU_TANH)});
    Module *m =
        nn_sequential(3, (Module *[]){nn_linear(784, 128, true, &g), nn_relu(), inner});
    char *s = print_to_string(m);
    ck_assert_str_eq(s, "Sequential(\n"
                        "  (0): Linear(in_features=784, out_features=128, bias=True)\n"
                        "  (1): ReLU()\n"
                        "  (2): Sequential(\n"
                        "    (0): Linear(in_features=128, out_features=10, bias=False)\n"
                        "    (1): GELU(approximate='tanh')\n"
                        "  )\n"
                        ")\n"
                        "Total params: 101760\n"
                        "Trainable params: 101760\n");
    free(s);
    ck_assert_int_eq(nn_module_set_requires_grad(m, "0.*", false), 2);
    s = print_to_string(m);
    ck_assert_ptr_nonnull(strstr(s, "Total params: 101760\nTrainable params: 1280\n"));
    free(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_sequential)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(2, 0);
    Module *m = nn_sequential(0, NULL);
    ck_assert_int_eq(nn_sequential_append(m, nn_linear(3, 2, true, &g)), CT_OK);
    ck_assert_int_eq(nn_sequential_append(m, nn_relu()), CT_OK);
    ck_assert_str_eq(nn_module_child_name(m, 1), "1");
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_ones(2, (const int64_t[]){4, 3}, CT_F32, ct_cpu());
    Tensor *y = nn_forward(m, x);
    Tensor *ref = tensor_relu(
        tensor_linear(x, nn_module_get(m, "0.weight"), nn_module_get(m, "0.bias")));
    tu_assert_shape(y, 2, 4, 2);
    double r[8];
    tensor_copy_to_host(ref, r, CT_F64);
    tu_assert_values(y, r, 8, 0, 0);
    /* a NULL entry: every module passed is released, the error kept */
    ct_clear_error();
    ck_assert_ptr_null(nn_sequential(2, (Module *[]){nn_relu(), NULL}));
    tu_assert_error(CT_ERR_NULL, "Sequential: module 1 is NULL");
    Module *relu = nn_relu();
    ck_assert_int_eq(nn_sequential_append(relu, nn_relu()), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "ReLU is not a Sequential");
    nn_module_free(relu);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* Every parameter sits in the block in order, every grad in the grad block. */
static void assert_packed(Module *m)
{
    Tensor *pb = nn_module_param_block(m), *gb = nn_module_grad_block(m);
    ck_assert_ptr_nonnull(pb);
    ck_assert_ptr_nonnull(gb);
    CtStateDict *ps = nn_module_parameters(m);
    int64_t off = 0;
    for (int64_t i = 0; i < ct_state_dict_size(ps); i++) {
        Tensor *p = ct_state_dict_tensor(ps, i);
        ck_assert(tensor_shares_storage(p, pb));
        ck_assert_ptr_eq(tensor_data(p), (float *)tensor_data(pb) + off);
        ck_assert(tensor_shares_storage(tensor_grad(p), gb));
        ck_assert_ptr_eq(tensor_data(tensor_grad(p)), (float *)tensor_data(gb) + off);
        off += tensor_numel(p);
    }
    ck_assert_int_eq(off, tensor_numel(pb));
    ct_state_dict_free(ps);
}

START_TEST(test_pack)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(3, 0);
    Module *m = nn_sequential(
        3, (Module *[]){nn_linear(4, 3, true, &g), nn_relu(), nn_linear(3, 2, true, &g)});
    Tensor *w0 = nn_module_get(m, "0.weight");
    double before[12];
    tensor_copy_to_host(w0, before, CT_F64);
    ck_assert_ptr_null(nn_module_param_block(m));
    ck_assert_int_eq(nn_module_pack(m), CT_OK);
    assert_packed(m);
    ck_assert_ptr_eq(nn_module_get(m, "0.weight"), w0); /* identity kept */
    tu_assert_values(w0, before, 12, 0, 0);             /* values kept */
    ck_assert_int_eq(tensor_numel(nn_module_param_block(m)), 4 * 3 + 3 + 3 * 2 + 2);
    /* idempotent: same blocks */
    Tensor *pb = nn_module_param_block(m);
    ck_assert_int_eq(nn_module_pack(m), CT_OK);
    ck_assert_ptr_eq(nn_module_param_block(m), pb);
    /* backward accumulates into the block */
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_ones(2, (const int64_t[]){5, 4}, CT_F32, ct_cpu());
    Tensor *loss = tensor_sum_all(nn_forward(m, x));
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    /* d loss / d bias of the last layer = batch size */
    tu_assert_values(nn_module_get(m, "2.bias") ? tensor_grad(nn_module_get(m, "2.bias"))
                                                : NULL,
                     ((double[]){5, 5}), 2, 1e-6, 0);
    float *gd = tensor_data(nn_module_grad_block(m));
    ck_assert_float_eq_tol(gd[tensor_numel(pb) - 1], 5, 1e-6);
    ck_assert_int_eq(nn_module_zero_grad(m), CT_OK);
    for (int64_t i = 0; i < tensor_numel(pb); i++) ck_assert(gd[i] == 0);
    /* moving to the CPU keeps the packing; a missing device is an error */
    ck_assert_int_eq(nn_module_to(m, ct_cpu()), CT_OK);
    ck_assert_ptr_eq(nn_module_param_block(m), pb);
    if (ct_cuda_device_count() == 0) {
        ck_assert_int_ne(nn_module_to(m, ct_cuda(0)), CT_OK);
        ct_clear_error();
        assert_packed(m);
    }
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_pack_repack)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(4, 0);
    Module *a = nn_linear(3, 2, true, &g);
    /* a child packed on its own gives up its blocks when adopted; grads
     * computed before packing survive packing */
    ck_assert_int_eq(nn_module_pack(a), CT_OK);
    ck_assert_int_eq(tensor_fill_(tensor_grad(nn_module_get(a, "bias")), 7), CT_OK);
    Module *m = nn_sequential(2, (Module *[]){a, nn_linear(2, 2, false, &g)});
    ck_assert_ptr_null(nn_module_param_block(a));
    ck_assert_int_eq(nn_module_pack(m), CT_OK);
    assert_packed(m);
    tu_assert_values(tensor_grad(nn_module_get(m, "0.bias")), ((double[]){7, 7}), 2, 0,
                     0);
    /* packing a child again takes its params out of the root's block: the
     * root notices, zero_grad still zeroes everything, pack re-packs */
    ck_assert_int_eq(nn_module_pack(nn_module_child_at(m, 1)), CT_OK);
    ck_assert_ptr_null(nn_module_grad_block(m)); /* no longer m's gradients */
    ck_assert_ptr_null(nn_module_param_block(m));
    ck_assert_int_eq(nn_module_zero_grad(m), CT_OK);
    tu_assert_values(tensor_grad(nn_module_get(m, "0.bias")), ((double[]){0, 0}), 2, 0,
                     0);
    ck_assert_int_eq(nn_module_pack(m), CT_OK);
    assert_packed(m);
    ck_assert_ptr_null(nn_module_param_block(nn_module_child_at(m, 1)));
    /* a layer appended after packing: the blocks no longer cover the model */
    ck_assert_int_eq(nn_sequential_append(m, nn_linear(2, 3, true, &g)), CT_OK);
    ck_assert_ptr_null(nn_module_grad_block(m));
    ck_assert_int_eq(nn_module_pack(m), CT_OK);
    assert_packed(m);
    /* mixed dtypes cannot be packed */
    Module *t = toy(NULL);
    nn_module_register_parameter(t, "a", vec(2, 1));
    nn_module_register_parameter(t, "b",
                                 tensor_zeros(1, (const int64_t[]){2}, CT_F64, ct_cpu()));
    ck_assert_int_eq(nn_module_pack(t), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "\"b\" is f64[2] cpu");
    nn_module_free(t);
    /* a tensor registered twice (tied weights) is listed and packed once */
    Module *tied = toy(NULL);
    Tensor *shared = nn_module_register_parameter(tied, "w", vec(3, 2));
    Module *tc = nn_module_register_child(tied, "c", toy(NULL));
    nn_module_register_parameter(tc, "b", vec(2, 1));
    ck_assert_ptr_eq(nn_module_register_parameter(tc, "w", tensor_retain(shared)),
                     shared);
    CtStateDict *tp = nn_module_parameters(tied);
    assert_names(tp, 2, (const char *[]){"w", "c.b"});
    ct_state_dict_free(tp);
    CtStateDict *tsd = nn_module_state_dict(tied);
    assert_names(tsd, 3, (const char *[]){"w", "c.b", "c.w"});
    ct_state_dict_free(tsd);
    ck_assert_int_eq(nn_module_num_parameters(tied, false), 5);
    ck_assert_int_eq(nn_module_pack(tied), CT_OK);
    Tensor *tb = nn_module_param_block(tied);
    ck_assert_int_eq(tensor_numel(tb), 5);
    ck_assert_int_eq(nn_module_pack(tied), CT_OK);
    ck_assert_ptr_eq(nn_module_param_block(tied), tb); /* still counts as packed */
    assert_packed(tied);
    nn_module_free(tied);
    /* no parameters: nothing to pack */
    Module *r = nn_relu();
    ck_assert_int_eq(nn_module_pack(r), CT_OK);
    ck_assert_ptr_null(nn_module_param_block(r));
    ck_assert_int_eq(nn_module_zero_grad(r), CT_OK);
    nn_module_free(r);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

static bool rg(Module *m, const char *name)
{
    Tensor *t = nn_module_get(m, name);
    ck_assert_ptr_nonnull(t);
    return tensor_requires_grad(t);
}

START_TEST(test_freeze)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(5, 0);
    /* groups: 0 = conv+bn block, 1 = linear, 2 = head */
    Module *m = nn_sequential(
        3, (Module *[]){nn_sequential(2, (Module *[]){nn_conv2d(1, 2, 3, NULL, true, &g),
                                                      nn_batch_norm2d(2, 1e-5, 0.1)}),
                        nn_linear(4, 4, true, &g), nn_linear(4, 2, true, &g)});
    ck_assert_int_eq(nn_module_set_requires_grad(m, "*.bias", false), 4);
    ck_assert(!rg(m, "0.0.bias") && !rg(m, "0.1.bias") && rg(m, "0.1.weight"));
    ck_assert_int_eq(nn_module_set_requires_grad(m, "nothing", false), 0);
    ck_assert_int_eq(nn_module_unfreeze(m), CT_OK);
    ck_assert_int_eq(nn_module_num_parameters(m, true),
                     nn_module_num_parameters(m, false));
    /* all but the last group, batch norm trainable */
    ck_assert_int_eq(nn_module_freeze_groups(m, 1, true), CT_OK);
    ck_assert(!rg(m, "0.0.weight") && !rg(m, "0.0.bias") && rg(m, "0.1.weight") &&
              rg(m, "0.1.bias") && !rg(m, "1.weight") && rg(m, "2.weight") &&
              rg(m, "2.bias"));
    /* batch norm frozen too */
    ck_assert_int_eq(nn_module_freeze_groups(m, 1, false), CT_OK);
    ck_assert(!rg(m, "0.1.weight") && !rg(m, "0.1.bias") && rg(m, "2.weight"));
    /* two trainable groups: the second is unfrozen again */
    ck_assert_int_eq(nn_module_freeze_groups(m, 2, false), CT_OK);
    ck_assert(!rg(m, "0.0.weight") && rg(m, "1.weight") && rg(m, "2.bias"));
    ck_assert_int_eq(nn_module_freeze_groups(m, 0, false), CT_OK);
    ck_assert_int_eq(nn_module_num_parameters(m, true), 0);
    ck_assert_int_eq(nn_module_freeze_groups(m, 10, false), CT_OK);
    ck_assert_int_eq(nn_module_num_parameters(m, true),
                     nn_module_num_parameters(m, false));
    ck_assert_ptr_eq(nn_module_classifier(m), nn_module_child_at(m, 2));
    Module *r = nn_relu();
    ck_assert_ptr_null(nn_module_classifier(r));
    tu_assert_error(CT_ERR_INVALID, "ReLU has no children");
    ck_assert_int_eq(nn_module_freeze_groups(r, 1, false), CT_ERR_INVALID);
    ct_clear_error();
    nn_module_free(r);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* Moving to a GPU and back (runs only where one is present). */
START_TEST(test_to_cuda)
{
    if (ct_cuda_device_count() == 0) {
        fprintf(stderr, "nn_module: skipped 1 CUDA test: no device\n");
        return;
    }
    CtGenerator g = ct_generator(7, 0);
    Module *m = nn_sequential(
        2, (Module *[]){nn_linear(3, 2, true, &g), nn_batch_norm1d(2, 1e-5, 0.1)});
    double w[6];
    tensor_copy_to_host(nn_module_get(m, "0.weight"), w, CT_F64);
    ck_assert_int_eq(nn_module_to(m, ct_cuda(0)), CT_OK);
    assert_packed(m);
    CtStateDict *sd = nn_module_state_dict(m);
    for (int64_t i = 0; i < ct_state_dict_size(sd); i++)
        ck_assert(ct_device_eq(tensor_device(ct_state_dict_tensor(sd, i)), ct_cuda(0)));
    ct_state_dict_free(sd);
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_ones(2, (const int64_t[]){4, 3}, CT_F32, ct_cuda(0));
    Tensor *y = nn_forward(m, x);
    ck_assert_msg(y != NULL, "%s", ct_last_error());
    ck_assert_int_eq(tensor_backward(tensor_sum_all(y), NULL), CT_OK);
    ck_assert_int_eq(nn_module_zero_grad(m), CT_OK);
    ct_scope_close(s);
    ck_assert_int_eq(tensor_item(nn_module_get(m, "1.num_batches_tracked")), 1);
    ck_assert_int_eq(nn_module_to(m, ct_cpu()), CT_OK);
    assert_packed(m);
    tu_assert_values(nn_module_get(m, "0.weight"), w, 6, 0, 0);
    nn_module_free(m);
}
END_TEST

/* One optimizer step of m on x (ones), with its loss sum(y^2). */
static void adam_step(Module *m, Optimizer *o, CtDevice dev)
{
    CtScope *s = ct_scope_open();
    Tensor *y = nn_forward(m, tensor_ones(2, (const int64_t[]){4, 3}, CT_F32, dev));
    ck_assert_msg(y != NULL, "%s", ct_last_error());
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_mul(y, y)), NULL), CT_OK);
    ck_assert_msg(optim_step_zero_grad(o) == CT_OK, "%s", ct_last_error());
    ct_scope_close(s);
}

/* Optimizer state made (or loaded) while the model was on the CPU follows
 * the model to a GPU at the next step, and the run continues as it does on
 * the CPU (runs only where a GPU is). Loop 1: SGD with dampening, one
 * parameter frozen in the CPU step, so without state when the model moves:
 * its first update on the GPU starts its momentum afresh (buf = g). */
START_TEST(test_optimizer_state_follows_to_cuda)
{
    if (ct_cuda_device_count() == 0) {
        fprintf(stderr, "nn_module: skipped 1 CUDA test: no device\n");
        return;
    }
    Module *m[2];
    Optimizer *o[2];
    for (int i = 0; i < 2; i++) {
        CtGenerator g = ct_generator(7, 0);
        m[i] = nn_sequential(
            2, (Module *[]){nn_linear(3, 8, true, &g), nn_linear(8, 2, true, &g)});
        o[i] = _i == 0
                   ? optim_adam_create(m[i], &(AdamArgs){.lr = 1e-2})
                   : optim_sgd_create(
                         m[i], &(SgdArgs){.lr = 1e-2, .momentum = 0.9, .dampening = 0.5});
        Tensor *frozen = nn_module_get(m[i], "1.bias");
        ck_assert_int_eq(tensor_set_requires_grad(frozen, _i == 0), CT_OK);
        adam_step(m[i], o[i], ct_cpu()); /* the state on the CPU */
        ck_assert_int_eq(tensor_set_requires_grad(frozen, true), CT_OK);
    }
    ck_assert_int_eq(nn_module_to(m[1], ct_cuda(0)), CT_OK);
    adam_step(m[0], o[0], ct_cpu());
    adam_step(m[1], o[1], ct_cuda(0));
    ck_assert_int_eq(nn_module_to(m[1], ct_cpu()), CT_OK);
    static const char *const names[] = {"0.weight", "0.bias", "1.weight", "1.bias"};
    for (int k = 0; k < 4; k++) {
        double u[24], v[24];
        Tensor *a = nn_module_get(m[0], names[k]), *b = nn_module_get(m[1], names[k]);
        tensor_copy_to_host(a, u, CT_F64);
        tensor_copy_to_host(b, v, CT_F64);
        for (int64_t i = 0; i < tensor_numel(a); i++)
            ck_assert_double_eq_tol(u[i], v[i], 1e-5);
    }
    for (int i = 0; i < 2; i++) {
        optim_free(o[i]);
        nn_module_free(m[i]);
    }
}
END_TEST

/* A packed model whose parameters sit at odd offsets of the parameter
 * block on a GPU (a 3 -> 5 -> 3 MLP: the first bias starts 60 bytes in)
 * gives the CPU's outputs and gradients: cuBLASLt is told how its operands
 * are aligned, and a bias aligned to less than 16 bytes takes the unfused
 * path, in the forward and for its gradient (runs only where a GPU is). */
START_TEST(test_cuda_odd_offsets_match_cpu)
{
    if (ct_cuda_device_count() == 0) {
        fprintf(stderr, "nn_module: skipped 1 CUDA test: no device\n");
        return;
    }
    Module *m[2];
    for (int i = 0; i < 2; i++) {
        CtGenerator g = ct_generator(7, 0);
        m[i] = nn_sequential(3, (Module *[]){nn_linear(3, 5, true, &g), nn_relu(),
                                             nn_linear(5, 3, true, &g)});
        ck_assert_int_eq(nn_module_to(m[i], i ? ct_cuda(0) : ct_cpu()), CT_OK);
    }
    ck_assert_uint_ne((uintptr_t)tensor_data(nn_module_get(m[1], "0.bias")) % 16, 0);
    CtScope *s = ct_scope_open();
    Tensor *x = tu_rand64(2, (const int64_t[]){4, 3}, -1, 1, 91, false);
    Tensor *xc = tensor_cast(x, CT_F32);
    tensor_free(x);
    Tensor *y = nn_forward(m[0], xc),
           *Y = nn_forward(m[1], tensor_to_device(xc, ct_cuda(0)));
    ck_assert_msg(Y != NULL, "%s", ct_last_error());
    double a[12], b[12];
    tensor_copy_to_host(y, a, CT_F64);
    tensor_copy_to_host(Y, b, CT_F64);
    for (int i = 0; i < 12; i++) ck_assert_double_eq_tol(a[i], b[i], 1e-5);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_mul(y, y)), NULL), CT_OK);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_mul(Y, Y)), NULL), CT_OK);
    static const char *const names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    for (int k = 0; k < 4; k++) {
        Tensor *gc = tensor_grad(nn_module_get(m[0], names[k]));
        Tensor *gg = tensor_grad(nn_module_get(m[1], names[k]));
        int64_t n = tensor_numel(gc);
        double u[15], v[15];
        tensor_copy_to_host(gc, u, CT_F64);
        tensor_copy_to_host(gg, v, CT_F64);
        for (int64_t i = 0; i < n; i++) ck_assert_double_eq_tol(u[i], v[i], 1e-5);
    }
    ct_scope_close(s);
    nn_module_free(m[0]);
    nn_module_free(m[1]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nn_module");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_registry_names);
    tcase_add_test(tc, test_registry_errors);
    tcase_add_test(tc, test_train_eval);
    tcase_add_test(tc, test_print);
    tcase_add_test(tc, test_sequential);
    tcase_add_test(tc, test_pack);
    tcase_add_test(tc, test_pack_repack);
    tcase_add_test(tc, test_freeze);
    tcase_add_test(tc, test_to_cuda);
    tcase_add_loop_test(tc, test_optimizer_state_follows_to_cuda, 0, 2);
    tcase_add_test(tc, test_cuda_odd_offsets_match_cpu);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
