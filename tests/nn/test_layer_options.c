/* Layer options beyond the defaults, against PyTorch (fixtures from
 * tests/fixtures/nn_layer_options.py): Embedding's padding_idx, LayerNorm
 * without elementwise_affine, BatchNorm without affine and/or running
 * statistics; their reprs, state dicts and errors.
 *
 * As in test_layers.c, layers run in f32 on the fixture script's inputs and
 * weights, and outputs and gradients (for an upstream gradient gy) are
 * compared with PyTorch's f64 numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/nn.h"
#include "ctrainer/optim.h"
#include "layer_fixture.h"
#include "testutil.h"

/* ---- PyTorch reference values (generated; do not edit by hand) ---- */
static const double embp_y[12] = {0.38562300749855327,  0.30291007832173139,
                                  0.20424372044207859,  -0.23936327207936009,
                                  -0.33313801063991222, -0.40936729963869095,
                                  -0.23936327207936009, -0.33313801063991222,
                                  -0.40936729963869095, 0.5,
                                  0.48683319750268744,  0.44802624876276259};
static const double embp_gw[15] = {0.54868986058158753,
                                   0.45359612142557731,
                                   0.3530194012193304,
                                   1,
                                   0.99395609795669682,
                                   0.97589744933060552,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0};
static const double lnna_y[12] = {
    -1.8458718671761583, -0.74841000086739196, 0.15851366002568165,  0.75215125257240856,
    0.95215671350142839, 0.73146024194402948,  1.4577752798263082,   0.92927582268926379,
    0.29525852360056271, -0.35846535031774462, -0.94341733948814221, -1.3804269363102477};
static const double lnna_gx[12] = {
    -0.029352369638041997,  0.029040980498695301,   0.056991465093347404,
    0.047256577487255536,   -0.0045655269280422406, -0.099371126513215335,
    -0.0096848274808978285, -0.0036561067136201553, 0.0086798337920007684,
    0.016761862588040577,   0.0097566415580545574,  -0.021857403743578252};
static const double bnna_y[24] = {
    0.32890184057247907,  0.80133947565964936, 1.1917538332883415,
    1.4473041616700582,   1.1998098893003837,  1.0226906498217505,
    0.53191069320694495,  -0.2061052157690757, -0.22421142728306445,
    -0.74160858570394972, -1.2045754576270471, -1.5504516488133426,
    -1.123005706130308,   -1.1167975156233572, -0.9330017591921328,
    -0.5964943302447302,  -1.9438117653904792, -1.0288290640481754,
    -0.14984351068379123, 0.57417832356243992, 0.98681835233711879,
    1.0743007810273131,   0.97043868224415564, 0.68928930381881637};
static const double bnna_gx[24] = {
    0.22397789327070419,    0.091888218147548537,  -0.026009266168731098,
    -0.11524695799942755,   0.3340425276047293,    0.34272070882005057,
    0.46927967412097293,    0.68697618073372646,   0.44057974365952352,
    0.18413461246353049,    -0.056600488288420694, -0.25732955321719697,
    0.11446476914528698,    0.040626537300515429,  -0.082478610789935541,
    -0.2472225829059608,    0.28117080258487176,   -0.23326837779055049,
    -0.72825949465062634,   -1.1526620214231735,   0.02794534034270155,
    0.00049885108210150325, -0.092901010797563119, -0.24632749524467626};
static const double bnna_rm[3] = {-0.029191016955880347, 0.10380319811882804,
                                  0.048015026151929756};
static const double bnna_rv[3] = {1.1552939422833517, 0.97345224857906654,
                                  1.1286612910122222};
static const double bnna_eval[24] = {
    1.0504012093395438,   1.3788681133672713,   1.6503075284651159,  1.8279814031794444,
    1.9218263879635928,   1.849867219049766,    1.6504754539229414,  1.3506378326039796,
    0.97279500434220723,  0.62835646271263612,  0.32015292584999694, 0.089898296620496074,
    0.040948233155791394, 0.045264538555669621, 0.17305034265923014, 0.40701043635136253,
    0.64465061464308426,  1.0163854693823586,   1.3734955726864753,  1.6676477473524487,
    1.7789945057763437,   1.83723278495095,     1.7680903297727248,  1.5809252471881212};
static const double bnnt_y[24] = {
    0.79335276085871864,  1.502009213489474,     2.0876307499325124,
    2.4709562425050873,   2.0707503716065223,    1.8074036064332619,
    1.0776956742694406,   -0.019610879481228569, -0.076637783215678212,
    -0.82584244964438547, -1.4962306324966188,   -1.9970684361564621,
    -1.3845085591954622,  -1.375196273435036,    -1.0995026387881994,
    -0.59474149536709542, -2.6032906649761824,   -1.2428640094797583,
    0.064040891387678142, 1.1405405902617629,    1.6769651257077309,
    1.8036419787566489,   1.6532469334670459,    1.2461352536838193};
static const double bnnt_gx[24] = {
    0.3359668399060563,     0.1378323272213228,    -0.039013899253096646,
    -0.17287043699914134,   0.49666551942041937,   0.50956852734530322,
    0.69774059839630531,    1.0214189914085106,    0.63797103349215945,
    0.2666317521529511,     -0.081958992734422503, -0.37261994764089545,
    0.17169715371793048,    0.06093980595077314,   -0.12371791618490331,
    -0.37083387435894122,   0.41805408345166178,   -0.34683116802658903,
    -1.0828003930430821,    -1.7138161589525283,   0.040465586346840825,
    0.00072234946110668469, -0.13452310217146424,  -0.35668867890627581};
static const double bnnt_gw[3] = {3.2406808849635569, 2.6732006430759165,
                                  -4.2409060059818362};
static const double bnnt_gb[3] = {4.2560735185905312, 1.8882751080017217,
                                  -0.83923342942770374};
static const double bnnt_eval[24] = {
    0.79334944806845853,  1.5020011421767525,    2.0876187462584546,
    2.4709416648574773,   2.0707087392650734,    1.8073681199726905,
    1.0776772174390725,   -0.019603727812623803, -0.076635349231906583,
    -0.82583439892509702, -1.4962175559235342,   -1.9970516048370364,
    -1.3844972479715461,  -1.375185024741731,    -1.0994932413365617,
    -0.59473548731130632, -2.6032232164279989,   -1.2428283100216446,
    0.064046090824902327, 1.140520666782024,     1.6769544130518956,
    1.8036303164132159,   1.6532363986248559,    1.2461277709297085};
static const double bn1n_y[30] = {
    -0.54138738519962326, 0.16719732202948207,  0.75275956930328869,
    1.136046253449968,    1.2651813198493862,   0.8351265331645028,
    0.34801674920315262,  -0.38448009614683532, -1.2632239911653809,
    -2.1692810720356897,  0.25314208823764411,  -0.48541721118710335,
    -0.87398890281683173, -0.85998163106166803, -0.44529121444258984,
    -1.9293411087603194,  -1.2638968867398879,  -0.52778323708424479,
    0.17937031099095599,  0.76185384216099505,  0.85751070772349602,
    1.0107084450446657,   0.82882690877233078,  0.33648291159609506,
    -0.39968709615633957, 2.3260292821836472,   1.2220233520870301,
    0.2369109595120511,   -0.49597755457740339, -0.87744916793477445};
static const double bn1n_gx[30] = {
    0.81121730549796023,  0.61491350195077421,  0.43958146950764154,
    0.30671789779161962,  0.23061246296334661,  1.3874742829944362,
    1.1281101327231855,   0.76526562115238972,  0.33705068502840657,
    -0.11090138205445949, 1.3335506262825247,   0.89254453542266665,
    0.58213051812417893,  0.42481332916711245,  0.42181859477304595,
    0.10094150431707183,  -0.1870534198475596,  -0.49174004109824415,
    -0.78507603957846317, -1.0401146415041473,  -0.38819318583054518,
    -0.43644811845687087, -0.59978147319792441, -0.86784513501802951,
    -1.2147314273405903,  0.065085252263853074, -0.42199277791263595,
    -0.84499021515213946, -1.1512522702984898,  -1.3017075926701178};
/* ---- end of generated values ---- */

/* t == relu(ref) (the fused BatchNorm + ReLU against plain references). */
static void assert_relu_ref(const Tensor *t, const double *ref, int64_t n)
{
    double *r = malloc((size_t)n * sizeof *r);
    for (int64_t i = 0; i < n; i++) r[i] = fmax(ref[i], 0);
    tu_assert_values(t, r, n, 2e-5, 2e-5);
    free(r);
}

START_TEST(test_reprs_and_keys)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(0, 0);
    NnEmbeddingArgs last2 = {.padding_idx = -2, .use_padding_idx = true};
    assert_repr_keys(nn_embedding_ex(10, 3, &last2, &g),
                     "Embedding(10, 3, padding_idx=8)", "weight");
    assert_repr_keys(
        nn_embedding_ex(10, 3, &(NnEmbeddingArgs){.use_padding_idx = true}, &g),
        "Embedding(10, 3, padding_idx=0)", "weight");
    assert_repr_keys(nn_embedding_ex(10, 3, &(NnEmbeddingArgs){.padding_idx = 2}, &g),
                     "Embedding(10, 3)", "weight"); /* use_padding_idx unset */
    assert_repr_keys(nn_embedding_ex(10, 3, NULL, &g), "Embedding(10, 3)", "weight");
    assert_repr_keys(nn_layer_norm_ex(1, (const int64_t[]){4}, 1e-5, false),
                     "LayerNorm((4,), eps=1e-05, elementwise_affine=False)", "");
    assert_repr_keys(nn_layer_norm_ex(2, (const int64_t[]){2, 3}, 1e-3, false),
                     "LayerNorm((2, 3), eps=0.001, elementwise_affine=False)", "");
    assert_repr_keys(nn_layer_norm_ex(1, (const int64_t[]){4}, 1e-5, true),
                     "LayerNorm((4,), eps=1e-05, elementwise_affine=True)",
                     "weight, bias");
    assert_repr_keys(nn_batch_norm2d_ex(8, 1e-5, 0.1, false, false),
                     "BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=False, "
                     "track_running_stats=False)",
                     "");
    assert_repr_keys(nn_batch_norm1d_ex(3, 1e-5, 0.1, false, true),
                     "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=False, "
                     "track_running_stats=True)",
                     "running_mean, running_var, num_batches_tracked");
    assert_repr_keys(nn_batch_norm1d_ex(3, 1e-5, 0.1, true, false),
                     "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, "
                     "track_running_stats=False)",
                     "weight, bias");
    assert_repr_keys(nn_batch_norm2d_ex(3, 1e-5, 0.1, true, true),
                     "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, "
                     "track_running_stats=True)",
                     "weight, bias, running_mean, running_var, num_batches_tracked");
    TU_MEM_END;
}
END_TEST

START_TEST(test_embedding_padding_idx)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(3, 0);
    NnEmbeddingArgs args = {.padding_idx = -2, .use_padding_idx = true}; /* row 3 */
    Module *m = nn_embedding_ex(5, 3, &args, &g);
    Tensor *w = nn_module_get(m, "weight");
    set_fw(w, 0); /* a non-zero padding row is looked up as it is */
    CtScope *s = ct_scope_open();
    Tensor *idx = tu_tensor(CT_I64, 2, (const int64_t[]){2, 2}, (double[]){1, 3, 3, 0});
    Tensor *y = nn_forward(m, idx);
    tu_assert_shape(y, 3, 2, 2, 3);
    ASSERT_REF(y, embp_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(w), embp_gw); /* row 3: zeros, though looked up twice */
    /* without a graph the lookup is the same */
    bool prev = ct_set_grad_enabled(false);
    ASSERT_REF(nn_forward(m, idx), embp_y);
    ct_set_grad_enabled(prev);
    Tensor *bad = tu_tensor(CT_I64, 1, (const int64_t[]){2}, (double[]){0, 5});
    ck_assert_ptr_null(nn_forward(m, bad));
    tu_assert_error(CT_ERR_INVALID, "index 5 at position [1] is out of range");
    tensor_free(idx);
    tensor_free(bad);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* The padding row starts at zero and stays there under SGD with momentum;
 * the rest of the weight is nn_embedding's draw from the same generator. */
START_TEST(test_embedding_padding_init_and_step)
{
    TU_MEM_BEGIN;
    CtGenerator g1 = ct_generator(7, 0), g2 = ct_generator(7, 0);
    Module *plain = nn_embedding(6, 4, &g1);
    Module *m = nn_embedding_ex(6, 4, &(NnEmbeddingArgs){.use_padding_idx = true}, &g2);
    double wp[24], w0[24], w1[24];
    tensor_copy_to_host(nn_module_get(plain, "weight"), wp, CT_F64);
    tensor_copy_to_host(nn_module_get(m, "weight"), w0, CT_F64);
    for (int i = 0; i < 24; i++) ck_assert_double_eq(w0[i], i < 4 ? 0.0 : wp[i]);
    Optimizer *o = optim_sgd_create(m, &(SgdArgs){.lr = 0.5, .momentum = 0.9});
    ck_assert_ptr_nonnull(o);
    Tensor *idx = tu_tensor(CT_I64, 1, (const int64_t[]){4}, (double[]){0, 2, 0, 5});
    for (int step = 0; step < 2; step++) {
        CtScope *s = ct_scope_open();
        Tensor *y = nn_forward(m, idx);
        /* d/dy (y² + y) = 2y + 1: non-zero on the zero padding row too */
        Tensor *loss = tensor_sum_all(tensor_add(tensor_mul(y, y), y));
        ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
        ck_assert_int_eq(optim_step_zero_grad(o), CT_OK);
        ct_scope_close(s);
    }
    tensor_copy_to_host(nn_module_get(m, "weight"), w1, CT_F64);
    for (int i = 0; i < 4; i++) ck_assert_double_eq(w1[i], 0.0);
    ck_assert_double_ne(w1[8], w0[8]);   /* row 2 trained */
    ck_assert_double_eq(w1[4], w0[4]);   /* row 1 not looked up */
    ck_assert_double_ne(w1[20], w0[20]); /* row 5 trained */
    tensor_free(idx);
    optim_free(o);
    nn_module_free(plain);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_embedding_padding_errors)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(0, 0);
    ck_assert_ptr_null(nn_embedding_ex(
        5, 3, &(NnEmbeddingArgs){.padding_idx = 5, .use_padding_idx = true}, &g));
    tu_assert_error(CT_ERR_INVALID,
                    "Embedding: padding_idx 5 is out of range for 5 embeddings (need -5 "
                    "<= padding_idx < 5)");
    ck_assert_ptr_null(nn_embedding_ex(
        5, 3, &(NnEmbeddingArgs){.padding_idx = -6, .use_padding_idx = true}, &g));
    tu_assert_error(CT_ERR_INVALID, "padding_idx -6 is out of range");
    Module *m = nn_embedding_ex(
        5, 3, &(NnEmbeddingArgs){.padding_idx = -5, .use_padding_idx = true}, &g);
    ck_assert_ptr_nonnull(m); /* -5 is row 0 */
    double w[15];
    tensor_copy_to_host(nn_module_get(m, "weight"), w, CT_F64);
    for (int i = 0; i < 15; i++) ck_assert(i < 3 ? w[i] == 0 : w[i] != 0);
    nn_module_free(m);
    ck_assert_ptr_null(nn_embedding_ex(5, 3, NULL, NULL));
    tu_assert_error(CT_ERR_NULL, "Embedding: need positive sizes and a generator");
    TU_MEM_END;
}
END_TEST

START_TEST(test_layer_norm_no_affine)
{
    TU_MEM_BEGIN;
    Module *m = nn_layer_norm_ex(2, (const int64_t[]){2, 3}, 1e-5, false);
    ck_assert_ptr_null(nn_module_get(m, "weight"));
    ck_assert_int_eq(nn_module_num_parameters(m, false), 0);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 3, (const int64_t[]){2, 2, 3}, true);
    Tensor *y = nn_forward(m, x);
    ASSERT_REF(y, lnna_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), lnna_gx);
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(2, (const int64_t[]){3, 2}, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE,
                    "LayerNorm((2, 3)): input f32[3, 2] cpu does not end in dims (2, 3)");
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    ck_assert_ptr_null(nn_layer_norm_ex(0, NULL, 1e-5, false));
    tu_assert_error(CT_ERR_INVALID, "LayerNorm: need 1..");
    TU_MEM_END;
}
END_TEST

static int64_t nbt(Module *m)
{
    return (int64_t)tensor_item(nn_module_get(m, "num_batches_tracked"));
}

START_TEST(test_batch_norm_no_affine)
{
    TU_MEM_BEGIN;
    Module *m = nn_batch_norm2d_ex(3, 1e-5, 0.1, false, true);
    ck_assert_int_eq(nn_module_num_parameters(m, false), 0);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, (const int64_t[]){2, 3, 2, 2}, true);
    Tensor *y = nn_forward(m, x);
    ASSERT_REF(y, bnna_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), bnna_gx);
    ASSERT_REF(nn_module_get(m, "running_mean"), bnna_rm);
    ASSERT_REF(nn_module_get(m, "running_var"), bnna_rv);
    ck_assert_int_eq(nbt(m), 1);
    nn_module_eval(m);
    Tensor *x2 = tensor_add_scalar(tensor_mul_scalar(x, 0.5), 1);
    ASSERT_REF(nn_forward(m, x2), bnna_eval);
    assert_relu_ref(nn_forward_relu(m, x2), bnna_eval, N_OF(bnna_eval));
    ck_assert_int_eq(nbt(m), 1);
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_batch_norm_no_running_stats)
{
    TU_MEM_BEGIN;
    Module *m = nn_batch_norm2d_ex(3, 1e-5, 0.1, true, false);
    CtStateDict *bufs = nn_module_buffers(m);
    ck_assert_int_eq(ct_state_dict_size(bufs), 0);
    ct_state_dict_free(bufs);
    Tensor *w = nn_module_get(m, "weight"), *b = nn_module_get(m, "bias");
    set_fw(w, 1);
    set_fw(b, -0.2);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, (const int64_t[]){2, 3, 2, 2}, true);
    Tensor *y = nn_forward(m, x);
    ASSERT_REF(y, bnnt_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), bnnt_gx);
    ASSERT_REF(tensor_grad(w), bnnt_gw);
    ASSERT_REF(tensor_grad(b), bnnt_gb);
    /* eval: batch statistics of this batch, as in training */
    nn_module_eval(m);
    Tensor *x2 = tensor_add_scalar(tensor_mul_scalar(x, 0.5), 1);
    ASSERT_REF(nn_forward(m, x2), bnnt_eval);
    assert_relu_ref(nn_forward_relu(m, x2), bnnt_eval, N_OF(bnnt_eval));
    /* one value per channel: no statistics to use, in eval mode too */
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(4, (const int64_t[]){1, 3, 1, 1}, CT_F32, ct_cpu())));
    ck_assert_int_ne(ct_last_status(), CT_OK);
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_batch_norm1d_bare)
{
    TU_MEM_BEGIN;
    Module *m = nn_batch_norm1d_ex(3, 1e-3, 0.1, false, false);
    nn_module_eval(m);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 3, (const int64_t[]){2, 3, 5}, true);
    Tensor *y = nn_forward(m, x);
    ASSERT_REF(y, bn1n_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), bn1n_gx);
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(4, (const int64_t[]){2, 3, 1, 1}, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE,
                    "BatchNorm1d(3): expected 2-d or 3-d (N, C[, L]) input");
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    ck_assert_ptr_null(nn_batch_norm2d_ex(0, 1e-5, 0.1, false, false));
    tu_assert_error(CT_ERR_INVALID, "BatchNorm2d: need num_features > 0");
    TU_MEM_END;
}
END_TEST

/* State dicts of the bare layers round-trip through load, strictly, inside
 * a Sequential (names "0.weight", "1.running_mean", ...). */
START_TEST(test_state_dict_load)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(9, 0);
    Module *mk[2];
    for (int k = 0; k < 2; k++)
        mk[k] = nn_sequential(
            4, (Module *[]){
                   nn_embedding_ex(6, 2, &(NnEmbeddingArgs){.use_padding_idx = true}, &g),
                   nn_batch_norm1d_ex(2, 1e-5, 0.1, false, true),
                   nn_layer_norm_ex(1, (const int64_t[]){2}, 1e-5, false),
                   nn_batch_norm1d_ex(2, 1e-5, 0.1, true, false)});
    CtStateDict *sd = nn_module_state_dict(mk[0]);
    ck_assert_int_eq(ct_state_dict_size(sd), 6);
    const char *want[6] = {"0.weight",      "1.running_mean",
                           "1.running_var", "1.num_batches_tracked",
                           "3.weight",      "3.bias"};
    for (int i = 0; i < 6; i++) ck_assert_str_eq(ct_state_dict_name(sd, i), want[i]);
    NnLoadReport rep;
    ck_assert_int_eq(nn_module_load_state_dict(mk[1], sd, true, &rep), CT_OK);
    ck_assert_int_eq(rep.n_missing + rep.n_unexpected + rep.n_mismatched, 0);
    double a[12], b[12];
    tensor_copy_to_host(nn_module_get(mk[0], "0.weight"), a, CT_F64);
    tensor_copy_to_host(nn_module_get(mk[1], "0.weight"), b, CT_F64);
    for (int i = 0; i < 12; i++) ck_assert_double_eq(a[i], b[i]);
    ct_state_dict_free(sd);
    nn_module_free(mk[0]);
    nn_module_free(mk[1]);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nn_layer_options");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, test_reprs_and_keys);
    tcase_add_test(tc, test_embedding_padding_idx);
    tcase_add_test(tc, test_embedding_padding_init_and_step);
    tcase_add_test(tc, test_embedding_padding_errors);
    tcase_add_test(tc, test_layer_norm_no_affine);
    tcase_add_test(tc, test_batch_norm_no_affine);
    tcase_add_test(tc, test_batch_norm_no_running_stats);
    tcase_add_test(tc, test_batch_norm1d_bare);
    tcase_add_test(tc, test_state_dict_load);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
