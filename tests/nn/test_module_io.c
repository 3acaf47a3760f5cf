/* Loading state dicts into modules; saving and loading modules as
 * safetensors (including a PyTorch model's file). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrainer/nn.h"
#include "testutil.h"

/* From tests/fixtures/mlp_fixture.py. */
static const double MLP_X[] = {0.5, -1.0, 2.0, 0.25, -0.75, 0.0, 1.5, -2.0};
static const double MLP_Y[] = {0.39918699860572815,  0.17332729697227478,
                               -0.17905406653881073, 0.6157674193382263,
                               0.40348342061042786,  -0.3823893964290619};

static Module *mlp(CtGenerator *g)
{
    Module *mods[] = {nn_linear(4, 8, true, g), nn_relu(), nn_linear(8, 3, true, g)};
    Module *m = nn_sequential(3, mods);
    ck_assert_msg(m != NULL, "%s", ct_last_error());
    return m;
}

/* Net: a parameter "scale", an i64 buffer "steps" and the MLP as "body". */
typedef struct Net {
    Module base;
    Module *body;
    Tensor *scale;
} Net;

static Tensor *net_forward(Module *m, Tensor *x)
{
    Net *n = (Net *)m;
    return tensor_mul(nn_forward(n->body, x), n->scale);
}

static const ModuleVtable net_vt = {.type = "Net", .forward = net_forward};

static Module *net(uint64_t seed)
{
    CtGenerator g = ct_generator(seed, 0);
    Net *n = calloc(1, sizeof *n);
    ck_assert_int_eq(nn_module_init(&n->base, &net_vt), CT_OK);
    n->scale = nn_module_register_parameter(
        &n->base, "scale",
        tensor_uniform(&g, 1, (const int64_t[]){3}, 1, 2, CT_F32, ct_cpu()));
    ck_assert_ptr_nonnull(nn_module_register_buffer(
        &n->base, "steps", tensor_scalar((double)seed, CT_I64, ct_cpu())));
    n->body = nn_module_register_child(&n->base, "body", mlp(&g));
    ck_assert_ptr_nonnull(n->body);
    return &n->base;
}

static const char *const NET_KEYS[] = {"scale",       "steps",         "body.0.weight",
                                       "body.0.bias", "body.2.weight", "body.2.bias"};

/* Bytes of every state-dict entry, concatenated (for "unchanged" checks). */
static unsigned char *snapshot(const Module *m, size_t *n)
{
    CtStateDict *sd = nn_module_state_dict(m);
    size_t total = 0;
    for (int64_t i = 0; i < ct_state_dict_size(sd); i++) {
        const Tensor *t = ct_state_dict_tensor(sd, i);
        total += (size_t)tensor_numel(t) * ct_dtype_size(tensor_dtype(t));
    }
    unsigned char *buf = malloc(total), *p = buf;
    for (int64_t i = 0; i < ct_state_dict_size(sd); i++) {
        const Tensor *t = ct_state_dict_tensor(sd, i);
        ck_assert_int_eq(tensor_copy_to_host(t, p, tensor_dtype(t)), CT_OK);
        p += (size_t)tensor_numel(t) * ct_dtype_size(tensor_dtype(t));
    }
    ct_state_dict_free(sd);
    *n = total;
    return buf;
}

static void assert_same_state(const Module *a, const Module *b, bool same)
{
    size_t na, nb;
    unsigned char *x = snapshot(a, &na), *y = snapshot(b, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_msg((memcmp(x, y, na) == 0) == same, "states %s",
                  same ? "differ" : "agree");
    free(x);
    free(y);
}

static void tensor_equal(const Tensor *a, const Tensor *b, bool same)
{
    int64_t n = tensor_numel(a);
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    tensor_copy_to_host(a, x, CT_F64);
    tensor_copy_to_host(b, y, CT_F64);
    ck_assert((memcmp(x, y, (size_t)n * sizeof *x) == 0) == same);
    free(x);
    free(y);
}

START_TEST(test_pytorch_mlp)
{
    /* a model saved by PyTorch loads by name and computes PyTorch's output */
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(5, 0);
    Module *m = mlp(&g);
    NnLoadReport rep;
    ck_assert_int_eq(
        nn_module_load(m, CTRAINER_FIXTURES_DIR "/mlp.safetensors", true, &rep), CT_OK);
    ck_assert(rep.n_missing == 0 && rep.n_unexpected == 0 && rep.n_mismatched == 0);
    ck_assert_str_eq(rep.message, "");
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_from_data(
        (const float[]){0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 0.0f, 1.5f, -2.0f}, 2,
        (const int64_t[]){2, 4}, CT_F32, ct_cpu());
    tu_assert_values(x, MLP_X, 8, 0, 0);
    tu_assert_values(nn_forward(m, x), MLP_Y, 6, 1e-6, 1e-6);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_save_load_round_trip)
{
    TU_MEM_BEGIN;
    char path[] = "/tmp/ct_module_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    Module *a = net(1), *b = net(2);
    assert_same_state(a, b, false);
    ck_assert_int_eq(nn_module_save(a, path), CT_OK);

    /* PyTorch's names and order: own parameters, own buffers, children */
    CtStateDict *d = nn_safetensors_load(path, ct_cpu());
    ck_assert_int_eq(ct_state_dict_size(d), 6);
    for (int i = 0; i < 6; i++) ck_assert_str_eq(ct_state_dict_name(d, i), NET_KEYS[i]);
    ck_assert_int_eq(tensor_dtype(ct_state_dict_get(d, "steps")), CT_I64);
    ct_state_dict_free(d);

    /* into a packed model: values land in the block, identities stay */
    ck_assert_int_eq(nn_module_pack(b), CT_OK);
    Tensor *w = nn_module_get(b, "body.0.weight");
    ck_assert_int_eq(nn_module_load(b, path, true, NULL), CT_OK);
    ck_assert_ptr_eq(nn_module_get(b, "body.0.weight"), w);
    ck_assert(tensor_shares_storage(w, nn_module_param_block(b)));
    assert_same_state(a, b, true);
    ck_assert_int_eq(tensor_item(nn_module_get(b, "steps")), 1);

    CtScope *s = ct_scope_open();
    Tensor *x = tensor_from_data((const float[]){0.5f, -1.0f, 2.0f, 0.25f}, 2,
                                 (const int64_t[]){1, 4}, CT_F32, ct_cpu());
    tensor_equal(nn_forward(a, x), nn_forward(b, x), true);
    ct_scope_close(s);
    nn_module_free(a);
    nn_module_free(b);
    unlink(path);
    TU_MEM_END;
}
END_TEST

/* A's state dict with "scale" dropped, "body.0.bias" mis-shaped and an
 * extra key. Tensors created with no scope open; the dict owns them. */
static CtStateDict *broken_dict(const Module *a)
{
    CtStateDict *src = nn_module_state_dict(a), *d = ct_state_dict_create();
    for (int64_t i = 0; i < ct_state_dict_size(src); i++) {
        const char *name = ct_state_dict_name(src, i);
        if (!strcmp(name, "scale")) continue;
        if (!strcmp(name, "body.0.bias")) {
            Tensor *t = tensor_zeros(1, (const int64_t[]){7}, CT_F32, ct_cpu());
            ct_state_dict_add(d, name, t);
            tensor_free(t);
        } else {
            ct_state_dict_add(d, name, ct_state_dict_tensor(src, i));
        }
    }
    Tensor *e = tensor_ones(2, (const int64_t[]){2, 2}, CT_F32, ct_cpu());
    ct_state_dict_add(d, "extra.weight", e);
    tensor_free(e);
    ct_state_dict_free(src);
    return d;
}

START_TEST(test_strict_failure_changes_nothing)
{
    TU_MEM_BEGIN;
    Module *a = net(1), *b = net(2), *b0 = net(2);
    CtStateDict *d = broken_dict(a);
    NnLoadReport rep;
    ck_assert_int_eq(nn_module_load_state_dict(b, d, true, &rep), CT_ERR_INVALID);
    ck_assert_int_eq(rep.n_missing, 1);
    ck_assert_int_eq(rep.n_unexpected, 1);
    ck_assert_int_eq(rep.n_mismatched, 1);
    ck_assert_str_eq(rep.message,
                     "1 missing key: scale; 1 unexpected key: extra.weight; "
                     "1 mis-shaped key: body.0.bias (checkpoint [7], model [8])");
    tu_assert_error(CT_ERR_INVALID,
                    "load_state_dict (Net): 1 missing key: scale; 1 unexpected key: "
                    "extra.weight; 1 mis-shaped key: body.0.bias (checkpoint [7], model "
                    "[8]); nothing was loaded");
    assert_same_state(b, b0, true);

    /* only a shape problem: a shape error; the report may be NULL */
    CtStateDict *full = nn_module_state_dict(a), *d2 = ct_state_dict_create();
    for (int64_t i = 0; i < ct_state_dict_size(full); i++) {
        const char *name = ct_state_dict_name(full, i);
        Tensor *t = ct_state_dict_tensor(full, i);
        if (!strcmp(name, "scale"))
            t = tensor_zeros(2, (const int64_t[]){3, 1}, CT_F32, ct_cpu());
        else
            tensor_retain(t);
        ct_state_dict_add(d2, name, t);
        tensor_free(t);
    }
    ck_assert_int_eq(nn_module_load_state_dict(b, d2, true, NULL), CT_ERR_SHAPE);
    tu_assert_error(CT_ERR_SHAPE, "scale (checkpoint [3, 1], model [3])");
    assert_same_state(b, b0, true);
    ct_state_dict_free(full);
    ct_state_dict_free(d2);
    ct_state_dict_free(d);
    nn_module_free(a);
    nn_module_free(b);
    nn_module_free(b0);
    TU_MEM_END;
}
END_TEST

START_TEST(test_non_strict_report)
{
    TU_MEM_BEGIN;
    Module *a = net(1), *b = net(2), *b0 = net(2);
    CtStateDict *d = broken_dict(a);
    NnLoadReport rep;
    ck_assert_int_eq(nn_module_load_state_dict(b, d, false, &rep), CT_OK);
    ck_assert(rep.n_missing == 1 && rep.n_unexpected == 1 && rep.n_mismatched == 1);
    ck_assert_str_eq(rep.message,
                     "1 missing key: scale; 1 unexpected key: extra.weight; "
                     "1 mis-shaped key: body.0.bias (checkpoint [7], model [8])");
    /* matching keys loaded; missing and mis-shaped ones kept */
    const char *loaded[] = {"steps", "body.0.weight", "body.2.weight", "body.2.bias"};
    for (int i = 0; i < 4; i++)
        tensor_equal(nn_module_get(b, loaded[i]), nn_module_get(a, loaded[i]), true);
    const char *kept[] = {"scale", "body.0.bias"};
    for (int i = 0; i < 2; i++) {
        tensor_equal(nn_module_get(b, kept[i]), nn_module_get(b0, kept[i]), true);
        tensor_equal(nn_module_get(b, kept[i]), nn_module_get(a, kept[i]), false);
    }

    /* more names than the report shows */
    CtStateDict *empty = ct_state_dict_create();
    ck_assert_int_eq(nn_module_load_state_dict(b, empty, false, &rep), CT_OK);
    ck_assert(rep.n_missing == 6 && rep.n_unexpected == 0 && rep.n_mismatched == 0);
    ck_assert_str_eq(rep.message, "6 missing keys: scale, steps, body.0.weight, ...");
    ct_state_dict_free(empty);
    ct_state_dict_free(d);
    nn_module_free(a);
    nn_module_free(b);
    nn_module_free(b0);
    TU_MEM_END;
}
END_TEST

START_TEST(test_dtype_conversion_and_errors)
{
    TU_MEM_BEGIN;
    /* an f64 checkpoint loads into the f32 model, converted (as PyTorch's copy_) */
    Module *a = net(1), *b = net(2);
    CtStateDict *sa = nn_module_state_dict(a), *d = ct_state_dict_create();
    CtScope *s = ct_scope_open();
    for (int64_t i = 0; i < ct_state_dict_size(sa); i++) {
        Tensor *t = ct_state_dict_tensor(sa, i);
        bool f = ct_dtype_is_float(tensor_dtype(t));
        ct_state_dict_add(d, ct_state_dict_name(sa, i), f ? tensor_cast(t, CT_F64) : t);
    }
    ct_scope_close(s);
    ck_assert_int_eq(nn_module_load_state_dict(b, d, true, NULL), CT_OK);
    assert_same_state(a, b, true);
    ck_assert_int_eq(tensor_dtype(nn_module_get(b, "scale")), CT_F32);
    ct_state_dict_free(d);
    ct_state_dict_free(sa);

    ck_assert_int_eq(nn_module_load(b, "/nonexistent-ctrainer/m.safetensors", true, NULL),
                     CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "/nonexistent-ctrainer/m.safetensors: cannot open");
    /* a strict failure from a file names the file */
    Module *other = mlp(&(CtGenerator){0});
    ck_assert_int_eq(
        nn_module_load(other, CTRAINER_FIXTURES_DIR "/mlp.safetensors", true, NULL),
        CT_OK);
    ck_assert_int_eq(
        nn_module_load(b, CTRAINER_FIXTURES_DIR "/mlp.safetensors", true, NULL),
        CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "mlp.safetensors: load_state_dict (Net): 6 missing keys");
    ck_assert_int_eq(nn_module_save(NULL, "x"), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "nn_module_save: NULL argument");
    ck_assert_int_eq(nn_module_load_state_dict(b, NULL, true, NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "nn_module_load_state_dict: NULL argument");
    ck_assert_int_eq(nn_module_save(b, "/nonexistent-ctrainer/m.safetensors"), CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "cannot create");
    nn_module_free(other);
    nn_module_free(a);
    nn_module_free(b);
    TU_MEM_END;
}
END_TEST

/* A dict without a BatchNorm's num_batches_tracked (a torchvision checkpoint
 * saved before PyTorch 0.4.1, or one a tool stripped) loads strictly, the
 * counter set to 0, as PyTorch's load_state_dict does for a dict without
 * version metadata (every safetensors file). Other missing keys, and a
 * num_batches_tracked of another module type, are still missing. */
START_TEST(test_missing_num_batches_tracked)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(3, 0);
    Module *mods[] = {nn_linear(4, 3, true, &g), nn_batch_norm1d(3, 1e-5, 0.1)};
    Module *a = nn_sequential(2, mods);
    Module *mods_b[] = {nn_linear(4, 3, true, &g), nn_batch_norm1d(3, 1e-5, 0.1)};
    Module *b = nn_sequential(2, mods_b);
    CtScope *s = ct_scope_open();
    Tensor *x = tensor_uniform(&g, 2, (const int64_t[]){5, 4}, -1, 1, CT_F32, ct_cpu());
    ck_assert_ptr_nonnull(nn_forward(a, x)); /* a's running stats move, nbt 1 */
    for (int i = 0; i < 3; i++) ck_assert_ptr_nonnull(nn_forward(b, x)); /* nbt 3 */
    ct_scope_close(s);
    CtStateDict *d = nn_module_state_dict(a);
    ck_assert(ct_state_dict_remove(d, "1.num_batches_tracked"));
    NnLoadReport rep;
    ck_assert_msg(nn_module_load_state_dict(b, d, true, &rep) == CT_OK, "%s",
                  ct_last_error());
    ck_assert(rep.n_missing == 0 && rep.n_unexpected == 0 && rep.n_mismatched == 0);
    ck_assert_str_eq(rep.message, "");
    ck_assert_int_eq((int)tensor_item(nn_module_get(b, "1.num_batches_tracked")), 0);
    tensor_equal(nn_module_get(b, "1.running_var"), nn_module_get(a, "1.running_var"),
                 true);
    tensor_equal(nn_module_get(b, "0.weight"), nn_module_get(a, "0.weight"), true);
    /* non-strict too */
    ck_assert_int_eq(nn_module_load_state_dict(a, d, false, &rep), CT_OK);
    ck_assert_int_eq(rep.n_missing, 0);
    ck_assert_int_eq((int)tensor_item(nn_module_get(a, "1.num_batches_tracked")), 0);
    /* another missing key still fails, and nothing changes */
    ck_assert(ct_state_dict_remove(d, "1.running_mean"));
    ck_assert_int_eq(nn_module_load_state_dict(b, d, true, &rep), CT_ERR_INVALID);
    ck_assert_str_eq(rep.message, "1 missing key: 1.running_mean");
    ct_state_dict_free(d);

    /* a buffer of that name on a module that is no BatchNorm is required */
    Module *n = net(4);
    ck_assert_ptr_nonnull(nn_module_register_buffer(n, "num_batches_tracked",
                                                    tensor_scalar(2, CT_I64, ct_cpu())));
    CtStateDict *dn = nn_module_state_dict(n);
    ck_assert(ct_state_dict_remove(dn, "num_batches_tracked"));
    ck_assert_int_eq(nn_module_load_state_dict(n, dn, true, &rep), CT_ERR_INVALID);
    ck_assert_str_eq(rep.message, "1 missing key: num_batches_tracked");
    ct_state_dict_free(dn);
    nn_module_free(n);
    nn_module_free(a);
    nn_module_free(b);
    TU_MEM_END;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nn_module_io");
    TCase *tc = tcase_create("module_io");
    tcase_add_test(tc, test_pytorch_mlp);
    tcase_add_test(tc, test_save_load_round_trip);
    tcase_add_test(tc, test_strict_failure_changes_nothing);
    tcase_add_test(tc, test_non_strict_report);
    tcase_add_test(tc, test_dtype_conversion_and_errors);
    tcase_add_test(tc, test_missing_num_batches_tracked);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
