/* Layers: shapes, values and gradients against PyTorch (fixtures from
 * tests/fixtures/nn_layers.py), reprs, default initialisation, batch norm
 * running statistics, dropout modes, errors.
 *
 * Gradient checks. Layers hold f32 parameters (there is no dtype knob), so
 * a finite-difference check through a layer with parameters would be f32
 * and too coarse. Instead:
 *  - layers with parameters (Linear, Conv2d, BatchNorm, LayerNorm,
 *    Embedding) are run in f32 on fixed inputs and weights, and the output
 *    and the gradients of input, weight and bias (for an upstream gradient
 *    gy) are compared with PyTorch's f64 numbers; their underlying tensor
 *    ops have f64 finite-difference checks in tests/tensor;
 *  - parameter-free layers accept f64 input, so they get a real f64
 *    tu_gradcheck through nn_forward (dropout with a replayed generator). */
#include <math.h>
#include <stdlib.h>

#include "ctrainer/nn.h"
#include "layer_fixture.h"
#include "testutil.h"

/* ---- PyTorch reference values (generated; do not edit by hand) ---- */
static const double lin_y[6] = {2.5296230136599043,   0.93685720458563693,
                                -0.95749356729721191, 3.4971433705661989,
                                1.6938529870238457,   -1.0078073172131936};
static const double lin_gx[8] = {0.67130258556998235, 0.45624848221977904,
                                 0.21716504424922994, -0.03335587070911817,
                                 0.63370920596254943, 0.44129160571700843,
                                 0.22563240780667632, -0.0019102195059901032};
static const double lin_gw[12] = {
    2.0916713839392531, 2.6634430224095822, 2.8747301425728264, 2.6969360239075777,
    2.0078867541504435, 2.5812538644951513, 2.8052603734897228, 2.6495880510037799,
    1.8998311826493715, 2.4678630155689074, 2.7018811665999549, 2.5702123768292355};
static const double lin_gb[3] = {1.9460423435283869, 1.8987077611766603,
                                 1.8284219713901111};
static const double conv_y[27] = {
    2.2747991031109982,   5.1056810040225553,   3.8713843936330212,  0.73563280653202945,
    -1.8774588866687112,  -1.7821029710612666,  1.7765074911368908,  5.1959301626805754,
    4.5170905468986078,   2.4087490567314349,   1.1437559424322097,  -0.56592112994215849,
    -2.378475268943709,   -0.36365054945838204, 2.4004927468309356,  1.7468439748542801,
    -0.16417617118729666, -1.65934083953085,    -3.100424395481304,  -4.5609600222151574,
    -1.4745983059430969,  3.6246634244539195,   4.0551285750608814,  0.96542160366787644,
    -1.8851018743610055,  -3.2343477936325362,  -0.93582083774850855};
static const double conv_gx[50] = {
    0.5903012573968206,   1.1857620076134774,   0.62019198680132603,
    1.2363202527110349,   0.64258595697329424,  1.0188344318418694,
    2.0213613055544464,   1.043439251216322,    2.0563544482466165,
    1.0554311813457966,   0.65721247398856453,  1.2921730586783891,
    0.66389473537498733,  1.2967924817719654,   0.66255196726606791,
    1.0546652661282678,   2.0516477785145475,   1.0411507637968318,
    2.0120048593919302,   1.0150510350079993,   0.65320040077964092,
    1.2591388497392164,   0.63595307581929661,  1.2173209443400519,
    0.61101847467017401,  -0.36645870659741941, -0.75178066872147487,
    -0.40828589184128333, -0.82975995626972998, -0.44517779721324457,
    -0.64002125404989285, -1.3095167810142891,  -0.70338464171071524,
    -1.4268461236069241,  -0.75824565362501095, -0.4766884805887851,
    -0.9548072460269923,  -0.5024370470006263,  -1.0003637010958524,
    -0.52211225282247098, -0.80394114062876632, -1.6085527291058885,
    -0.83991874462743865, -1.6707335581637039,  -0.86574357539238622,
    -0.53547626802098092, -1.0547955005770471,  -0.54236755099862621,
    -1.0630128840611719,  -0.54270280127686776};
static const double conv_gw[54] = {
    1.675243651249207,     2.2352247607126521,   1.7808498607701919,
    1.8675483533731365,    2.6140889204168487,   1.9953257004957554,
    1.9264662488581972,    2.5210190647736224,   1.9647162450542111,
    -1.7215728542217978,   -2.273813185299375,   -1.8042942420175934,
    -1.6713132516525111,   -2.3542303980054866,  -1.8165689119940869,
    -1.9035708662103843,   -2.4732751918189826,  -1.9189260662237582,
    0.037828279968048557,  0.17793484849297242,  0.25484988872272824,
    -0.034353634171960391, 0.1084229919997528,   0.21355628658290299,
    0.67706530235721651,   0.99686358570339406,  0.87715545003466611,
    -0.23539751482148463,  -0.41647202079042689, -0.44307398197489223,
    0.26610114459267675,   0.22400417650845098,  0.025861120919014928,
    -0.83991392912166329,  -1.1867565725068421,  -1.0242804855801775,
    -1.6337316639257873,   -2.0399626662882211,  -1.501182760945178,
    -1.9052473348617043,   -2.4951077276884832,  -1.7609733622727664,
    -1.1834685161481737,   -1.4270811810567088,  -1.00214364187841,
    1.4632523950444924,    1.8167852352521119,   1.318073839223328,
    1.9633272515068245,    2.6000480387617175,   1.8449483816571624,
    0.98186635286978596,   1.1709525951928579,   0.7949014325649012};
static const double conv_gb[3] = {7.8182261214020468, 1.2126468191111961,
                                  -6.4874920931763906};
static const double bn2_y[24] = {
    0.79335276085871864,  1.502009213489474,     2.0876307499325124,
    2.4709562425050873,   2.0707503716065223,    1.8074036064332619,
    1.0776956742694406,   -0.019610879481228569, -0.076637783215678212,
    -0.82584244964438547, -1.4962306324966188,   -1.9970684361564621,
    -1.3845085591954622,  -1.375196273435036,    -1.0995026387881994,
    -0.59474149536709542, -2.6032906649761824,   -1.2428640094797583,
    0.064040891387678142, 1.1405405902617629,    1.6769651257077309,
    1.8036419787566489,   1.6532469334670459,    1.2461352536838193};
static const double bn2_gx[24] = {
    0.3359668399060563,     0.1378323272213228,    -0.039013899253096646,
    -0.17287043699914134,   0.49666551942041937,   0.50956852734530322,
    0.69774059839630531,    1.0214189914085106,    0.63797103349215945,
    0.2666317521529511,     -0.081958992734422503, -0.37261994764089545,
    0.17169715371793048,    0.06093980595077314,   -0.12371791618490331,
    -0.37083387435894122,   0.41805408345166178,   -0.34683116802658903,
    -1.0828003930430821,    -1.7138161589525283,   0.040465586346840825,
    0.00072234946110668469, -0.13452310217146424,  -0.35668867890627581};
static const double bn2_gw[3] = {3.2406808849635569, 2.6732006430759165,
                                 -4.2409060059818362};
static const double bn2_gb[3] = {4.2560735185905312, 1.8882751080017217,
                                 -0.83923342942770374};
static const double bn2_rm1[3] = {-0.029191016955880347, 0.10380319811882804,
                                  0.048015026151929756};
static const double bn2_rv1[3] = {1.1552939422833517, 0.97345224857906654,
                                  1.1286612910122222};
static const double bn2_rm2[3] = {0.060637575842944089, 0.19748242961818055,
                                  0.15704020465747226};
static const double bn2_rv2[3] = {1.0860260665620927, 0.93789437778075035,
                                  1.0600702896966669};
static const double bn2_eval[24] = {
    0.5001130163372105,   1.5164526815844388,   2.3563383470582395,  2.9060954280185038,
    3.0540428570325284,   2.8360417699119802,   2.2319822425905023,  1.3236208983197091,
    0.25641412257996243,  -0.77286350087665134, -1.6938609086059651, -2.38192542206597,
    -2.6233283024594258,  -2.609972824840753,   -2.2145790126379952, -1.4906615634565714,
    -0.81517507906286835, 0.31099971807530757,  1.392868671220898,   2.284005892842337,
    2.6655612027590818,   2.8395932878429515,   2.6329765091018085,  2.073675478255141};
static const double bn1_y[12] = {
    -0.55504954574934307, 0.22877481805681293, 0.74344974342862813, 1.1568853179014211,
    1.1659932304284417,   1.0069761241734547,  0.74029238926201235, 0.20052967213347322,
    -0.20467508084375766, -1.342128161414091,  -1.5952977206187278, -1.5457507867583253};
static const double bn1_rm[3] = {0.22248827245410047, 0.19160776846428229,
                                 0.13479405188549948};
static const double bn1_rv[3] = {1.0809573708988727, 1.2447629326874314,
                                 1.4823096089044898};
static const double ln_y[12] = {
    -2.5688078007642372, -0.92592763712996595, 0.37755818926740631, 1.1278210881817379,
    1.2434846564844397,  0.78510012355621961,  2.3866629197394622,  1.5685113403137059,
    0.57556834110731703, -0.41107482929274247, -1.2262778813608435, -1.7581267491386343};
static const double ln_gx[12] = {
    -0.095411375050888481, 0.095175600928981918,   0.18053328013776859,
    0.14330169005244242,   -0.020925163793211077,  -0.30267403227509204,
    -0.020431401853323261, -0.0015464049764511989, 0.017757270195061126,
    0.026020480688903835,  0.011953692991244269,   -0.033753637045435547};
static const double ln_gw[6] = {-0.6942407208444773, -0.076749656013811424,
                                0.34281738264960354, 0.51488063058223987,
                                0.43353492410901306, 0.13627030268558576};
static const double ln_gb[6] = {1.7899922314973651, 1.7118667675676402,
                                1.6130485935291858, 1.4947322041099746,
                                1.3583477846455407, 1.2055439232788361};
static const double emb_y[12] = {0.38562300749855327,  0.30291007832173139,
                                 0.20424372044207859,  -0.23936327207936009,
                                 -0.33313801063991222, -0.40936729963869095,
                                 -0.23936327207936009, -0.33313801063991222,
                                 -0.40936729963869095, 0.5,
                                 0.48683319750268744,  0.44802624876276259};
static const double emb_gw[15] = {0.54868986058158753,
                                  0.45359612142557731,
                                  0.3530194012193304,
                                  1,
                                  0.99395609795669682,
                                  0.97589744933060552,
                                  0,
                                  0,
                                  0,
                                  1.736034575025752,
                                  1.6226623328309067,
                                  1.4896756662580859,
                                  0,
                                  0,
                                  0};
static const double maxpool_y[4] = {1.8579194300077384, 1.8712320031067717,
                                    -0.5203149828609378, 0.91790297275538058};
static const double avgpool_y[9] = {
    0.49198019134667043,  0.75183957441199123,  0.38503335272798506,
    -0.14644839514112862, -0.28147906372974191, -0.18189419238162224,
    0.24133302520697755,  0.65761470753662421,  0.52576812897657998};
static const double adapool_y[6] = {0.24852499865076549,   0.12468531808689585,
                                    -0.030358684124851171, -0.12744575055877375,
                                    0.030460451211528836,  0.18074348024804113};
static const double relu_y[6] = {0.19966683329365631, 0.90577257075813655,
                                 1.4892862399417186,  1.8712320031067717,
                                 1.9999152929974802,  1.8579194300077384};
static const double gelu_y[6] = {0.11563293789658403, 0.74044360536347809,
                                 1.3877079755287935,  1.8138666440272015,
                                 1.954407808983333,   1.7992273309290785};
static const double gelut_y[6] = {0.11563242914737072, 0.7403241866994601,
                                  1.3874878726925881,  1.8138558122139685,
                                  1.9545056934882914,  1.7992058339809396};
static const double silu_y[6] = {0.10976714742544158, 0.64503173521972434,
                                 1.2152145566381256,  1.6216110875206708,
                                 1.7615017590712758,  1.6072011108196709};
static const double sigmoid_y[6] = {0.54975153166276536, 0.71213432162096635,
                                    0.81597111693295543, 0.86660076614141912,
                                    0.88078818399909864, 0.8650542563156125};
static const double tanh_y[6] = {0.19705511165490355, 0.71909702983835322,
                                 0.90319332285067999, 0.9537056838302278,
                                 0.96402159496748907, 0.95248621119502852};
/* ---- end of generated values ---- */

/* m prints as expect (assert_printed); frees m. */
static void assert_repr(Module *m, const char *expect)
{
    assert_printed(m, expect);
    nn_module_free(m);
}

START_TEST(test_reprs)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(0, 0);
    assert_repr(nn_linear(784, 128, true, &g),
                "Linear(in_features=784, out_features=128, bias=True)");
    assert_repr(nn_conv2d(1, 32, 3, NULL, true, &g),
                "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))");
    CtConv2dArgs ca = {
        .stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}, .groups = 2};
    assert_repr(nn_conv2d(64, 128, 3, &ca, false, &g),
                "Conv2d(64, 128, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
                "dilation=(2, 2), groups=2, bias=False)");
    assert_repr(nn_batch_norm2d(32, 1e-5, 0.1),
                "BatchNorm2d(32, eps=1e-05, momentum=0.1, affine=True, "
                "track_running_stats=True)");
    assert_repr(nn_batch_norm1d(8, 1e-3, 0.01),
                "BatchNorm1d(8, eps=0.001, momentum=0.01, affine=True, "
                "track_running_stats=True)");
    assert_repr(nn_layer_norm(1, (const int64_t[]){10}, 1e-5),
                "LayerNorm((10,), eps=1e-05, elementwise_affine=True)");
    assert_repr(nn_layer_norm(2, (const int64_t[]){4, 5}, 1e-5),
                "LayerNorm((4, 5), eps=1e-05, elementwise_affine=True)");
    assert_repr(nn_embedding(10, 3, &g), "Embedding(10, 3)");
    assert_repr(nn_dropout(0.25, &g), "Dropout(p=0.25, inplace=False)");
    assert_repr(nn_relu(), "ReLU()");
    assert_repr(nn_gelu(CT_GELU_ERF), "GELU(approximate='none')");
    assert_repr(nn_silu(), "SiLU()");
    assert_repr(nn_sigmoid(), "Sigmoid()");
    assert_repr(nn_tanh(), "Tanh()");
    assert_repr(nn_identity(), "Identity()");
    assert_repr(nn_flatten(1, -1), "Flatten(start_dim=1, end_dim=-1)");
    assert_repr(
        nn_max_pool2d(&(CtPool2dArgs){.kernel = {2, 2}}),
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
    assert_repr(nn_avg_pool2d(&(CtPool2dArgs){.kernel = {3, 3},
                                              .stride = {2, 2},
                                              .padding = {1, 1},
                                              .count_include_pad = true}),
                "AvgPool2d(kernel_size=3, stride=2, padding=1)");
    assert_repr(nn_adaptive_avg_pool2d(1, 1), "AdaptiveAvgPool2d(output_size=(1, 1))");
    TU_MEM_END;
}
END_TEST

START_TEST(test_linear)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(1, 0);
    Module *m = nn_linear(4, 3, true, &g);
    Tensor *w = nn_module_get(m, "weight"), *b = nn_module_get(m, "bias");
    tu_assert_shape(w, 2, 3, 4);
    set_fw(w, 0);
    set_fw(b, 0.1);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 2, (const int64_t[]){2, 4}, true);
    Tensor *y = nn_forward(m, x);
    tu_assert_shape(y, 2, 2, 3);
    ASSERT_REF(y, lin_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), lin_gx);
    ASSERT_REF(tensor_grad(w), lin_gw);
    ASSERT_REF(tensor_grad(b), lin_gb);
    /* wrong feature count: the layer names itself */
    Tensor *bad = tensor_ones(2, (const int64_t[]){2, 5}, CT_F32, ct_cpu());
    ck_assert_ptr_null(nn_forward(m, bad));
    tu_assert_error(CT_ERR_SHAPE,
                    "Linear(in_features=4, out_features=3, bias=True): input "
                    "f32[2, 5] cpu has 5 features, expected 4");
    /* no bias */
    Module *nb = nn_linear(4, 3, false, &g);
    ck_assert_ptr_null(nn_module_get(nb, "bias"));
    ck_assert_int_eq(nn_module_num_parameters(nb, false), 12);
    nn_module_free(nb);
    ck_assert_ptr_null(nn_linear(0, 3, true, &g));
    tu_assert_error(CT_ERR_INVALID, "Linear: features must be positive, got in=0, out=3");
    ck_assert_ptr_null(nn_linear(2, 3, true, NULL));
    tu_assert_error(CT_ERR_NULL, "Linear: NULL generator");
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_conv2d)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(2, 0);
    CtConv2dArgs a = {.stride = {2, 2}, .padding = {1, 1}};
    Module *m = nn_conv2d(2, 3, 3, &a, true, &g);
    Tensor *w = nn_module_get(m, "weight"), *b = nn_module_get(m, "bias");
    tu_assert_shape(w, 4, 3, 2, 3, 3);
    set_fw(w, 0);
    set_fw(b, 0.1);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, (const int64_t[]){1, 2, 5, 5}, true);
    Tensor *y = nn_forward(m, x);
    tu_assert_shape(y, 4, 1, 3, 3, 3);
    ASSERT_REF(y, conv_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), conv_gx);
    ASSERT_REF(tensor_grad(w), conv_gw);
    ASSERT_REF(tensor_grad(b), conv_gb);
    Tensor *bad = tensor_ones(4, (const int64_t[]){1, 3, 5, 5}, CT_F32, ct_cpu());
    ck_assert_ptr_null(nn_forward(m, bad));
    tu_assert_error(CT_ERR_SHAPE, "Conv2d(2, 3, kernel_size=(3, 3), stride=(2, 2), "
                                  "padding=(1, 1)): expected input (N, 2, H, W), got "
                                  "f32[1, 3, 5, 5] cpu");
    ck_assert_ptr_null(nn_conv2d(3, 4, 3, &(CtConv2dArgs){.groups = 2}, true, &g));
    tu_assert_error(CT_ERR_INVALID, "groups=2 must divide in=3 and out=4");
    ck_assert_ptr_null(nn_conv2d(3, 4, 3, &(CtConv2dArgs){.relu = true}, true, &g));
    tu_assert_error(CT_ERR_INVALID,
                    "follow the layer with nn_relu() or call nn_forward_relu");
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

static int64_t nbt(Module *m)
{
    return (int64_t)tensor_item(nn_module_get(m, "num_batches_tracked"));
}

START_TEST(test_batch_norm2d)
{
    TU_MEM_BEGIN;
    Module *m = nn_batch_norm2d(3, 1e-5, 0.1);
    CtStateDict *sd = nn_module_state_dict(m);
    ck_assert_int_eq(ct_state_dict_size(sd), 5);
    ck_assert_str_eq(ct_state_dict_name(sd, 4), "num_batches_tracked");
    ck_assert_int_eq(tensor_dtype(ct_state_dict_tensor(sd, 4)), CT_I64);
    ck_assert_int_eq(tensor_ndim(ct_state_dict_tensor(sd, 4)), 0);
    ct_state_dict_free(sd);
    Tensor *w = nn_module_get(m, "weight"), *b = nn_module_get(m, "bias");
    tu_assert_values(w, ((double[]){1, 1, 1}), 3, 0, 0);
    tu_assert_values(b, ((double[]){0, 0, 0}), 3, 0, 0);
    tu_assert_values(nn_module_get(m, "running_var"), ((double[]){1, 1, 1}), 3, 0, 0);
    ck_assert_int_eq(nbt(m), 0);
    set_fw(w, 1);
    set_fw(b, -0.2);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, (const int64_t[]){2, 3, 2, 2}, true);
    Tensor *y = nn_forward(m, x);
    ASSERT_REF(y, bn2_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), bn2_gx);
    ASSERT_REF(tensor_grad(w), bn2_gw);
    ASSERT_REF(tensor_grad(b), bn2_gb);
    ASSERT_REF(nn_module_get(m, "running_mean"), bn2_rm1);
    ASSERT_REF(nn_module_get(m, "running_var"), bn2_rv1);
    ck_assert_int_eq(nbt(m), 1);
    /* a second step: 0.5 * x + 1 over (3, 3, 2, 2) */
    Tensor *x2 = fx(CT_F32, 4, (const int64_t[]){3, 3, 2, 2}, false);
    ck_assert_ptr_nonnull(
        nn_forward(m, tensor_add_scalar(tensor_mul_scalar(x2, 0.5), 1)));
    ASSERT_REF(nn_module_get(m, "running_mean"), bn2_rm2);
    ASSERT_REF(nn_module_get(m, "running_var"), bn2_rv2);
    ck_assert_int_eq(nbt(m), 2);
    /* eval: running statistics, nothing updated */
    nn_module_eval(m);
    ASSERT_REF(nn_forward(m, x), bn2_eval);
    ASSERT_REF(nn_module_get(m, "running_mean"), bn2_rm2);
    ck_assert_int_eq(nbt(m), 2);
    Tensor *bad = tensor_ones(3, (const int64_t[]){2, 3, 4}, CT_F32, ct_cpu());
    ck_assert_ptr_null(nn_forward(m, bad));
    tu_assert_error(CT_ERR_SHAPE, "BatchNorm2d(3): expected 4-d (N, C, H, W) input, got "
                                  "f32[2, 3, 4] cpu");
    tensor_free(x);
    tensor_free(x2);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_batch_norm1d)
{
    TU_MEM_BEGIN;
    Module *m = nn_batch_norm1d(3, 1e-3, 0.3);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 2, (const int64_t[]){4, 3}, false);
    ASSERT_REF(nn_forward(m, x), bn1_y);
    ASSERT_REF(nn_module_get(m, "running_mean"), bn1_rm);
    ASSERT_REF(nn_module_get(m, "running_var"), bn1_rv);
    ck_assert_int_eq(nbt(m), 1);
    /* (N, C, L) is accepted too; 4-d is not */
    tu_assert_shape(
        nn_forward(m, tensor_ones(3, (const int64_t[]){2, 3, 5}, CT_F32, ct_cpu())), 3, 2,
        3, 5);
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(4, (const int64_t[]){2, 3, 1, 1}, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE,
                    "BatchNorm1d(3): expected 2-d or 3-d (N, C[, L]) input");
    ck_assert_ptr_null(nn_batch_norm1d(3, 0, 0.1));
    tu_assert_error(CT_ERR_INVALID, "BatchNorm1d: need num_features > 0, eps > 0");
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_layer_norm)
{
    TU_MEM_BEGIN;
    Module *m = nn_layer_norm(2, (const int64_t[]){2, 3}, 1e-5);
    Tensor *w = nn_module_get(m, "weight"), *b = nn_module_get(m, "bias");
    tu_assert_values(w, ((double[]){1, 1, 1, 1, 1, 1}), 6, 0, 0);
    tu_assert_values(b, ((double[]){0, 0, 0, 0, 0, 0}), 6, 0, 0);
    set_fw(w, 1);
    set_fw(b, -0.3);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 3, (const int64_t[]){2, 2, 3}, true);
    Tensor *y = nn_forward(m, x);
    ASSERT_REF(y, ln_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), ln_gx);
    ASSERT_REF(tensor_grad(w), ln_gw);
    ASSERT_REF(tensor_grad(b), ln_gb);
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(2, (const int64_t[]){3, 2}, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE,
                    "LayerNorm((2, 3)): input f32[3, 2] cpu does not end in dims "
                    "(2, 3)");
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_embedding)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(3, 0);
    Module *m = nn_embedding(5, 3, &g);
    Tensor *w = nn_module_get(m, "weight");
    set_fw(w, 0);
    CtScope *s = ct_scope_open();
    Tensor *idx = tu_tensor(CT_I64, 2, (const int64_t[]){2, 2}, (double[]){1, 3, 3, 0});
    Tensor *y = nn_forward(m, idx);
    tu_assert_shape(y, 3, 2, 2, 3);
    ASSERT_REF(y, emb_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(w), emb_gw); /* row 3 accumulates two lookups */
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

START_TEST(test_pools_and_activations)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, (const int64_t[]){1, 1, 5, 5}, false);
    struct {
        Module *m;
        const double *ref;
        int64_t n;
    } cases[] = {
        {nn_max_pool2d(&(CtPool2dArgs){.kernel = {2, 2}}), maxpool_y, N_OF(maxpool_y)},
        {nn_avg_pool2d(&(CtPool2dArgs){.kernel = {3, 3},
                                       .stride = {2, 2},
                                       .padding = {1, 1},
                                       .count_include_pad = true}),
         avgpool_y, N_OF(avgpool_y)},
        {nn_adaptive_avg_pool2d(2, 3), adapool_y, N_OF(adapool_y)},
    };
    for (int i = 0; i < 3; i++) {
        tu_assert_values(nn_forward(cases[i].m, x), cases[i].ref, cases[i].n, 2e-6, 2e-6);
        nn_module_free(cases[i].m);
    }
    tu_assert_shape(nn_forward(cases[0].m = nn_flatten(1, -1), x), 2, 1, 25);
    nn_module_free(cases[0].m);
    Tensor *v = fx(CT_F32, 1, (const int64_t[]){6}, false);
    struct {
        Module *m;
        const double *ref;
    } acts[] = {{nn_relu(), relu_y},
                {nn_gelu(CT_GELU_ERF), gelu_y},
                {nn_gelu(CT_GELU_TANH), gelut_y},
                {nn_silu(), silu_y},
                {nn_sigmoid(), sigmoid_y},
                {nn_tanh(), tanh_y}};
    for (int i = 0; i < 6; i++) {
        tu_assert_values(nn_forward(acts[i].m, v), acts[i].ref, 6, 2e-6, 2e-6);
        nn_module_free(acts[i].m);
    }
    Module *id = nn_identity();
    double vv[6];
    tensor_copy_to_host(v, vv, CT_F64);
    tu_assert_values(nn_forward(id, v), vv, 6, 0, 0);
    nn_module_free(id);
    ck_assert_ptr_null(nn_max_pool2d(NULL));
    tu_assert_error(CT_ERR_NULL, "MaxPool2d: NULL args");
    ck_assert_ptr_null(
        nn_avg_pool2d(&(CtPool2dArgs){.kernel = {2, 2}, .padding = {2, 2}}));
    tu_assert_error(CT_ERR_INVALID, "AvgPool2d: need kernel > 0");
    ck_assert_ptr_null(nn_adaptive_avg_pool2d(0, 1));
    tu_assert_error(CT_ERR_INVALID, "output size must be positive");
    tensor_free(x);
    tensor_free(v);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* f64 finite differences through parameter-free layers. The generator is
 * replayed so dropout draws the same mask on every evaluation. */
typedef struct GradCtx {
    Module *m;
    CtGenerator *g, saved;
} GradCtx;

static Tensor *module_fn(Tensor **in, void *ctx)
{
    GradCtx *c = ctx;
    if (c->g) *c->g = c->saved;
    return nn_forward(c->m, in[0]);
}

START_TEST(test_gradcheck_parameter_free)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(9, 0);
    Module *mods[] = {nn_relu(),
                      nn_gelu(CT_GELU_ERF),
                      nn_gelu(CT_GELU_TANH),
                      nn_silu(),
                      nn_sigmoid(),
                      nn_tanh(),
                      nn_identity(),
                      nn_flatten(1, 2),
                      nn_max_pool2d(&(CtPool2dArgs){.kernel = {2, 2}}),
                      nn_avg_pool2d(&(CtPool2dArgs){.kernel = {3, 3},
                                                    .stride = {2, 2},
                                                    .padding = {1, 1},
                                                    .count_include_pad = true}),
                      nn_adaptive_avg_pool2d(2, 3),
                      nn_dropout(0.4, &g)};
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++) {
        /* distinct values away from relu's kink and max-pool ties */
        Tensor *x =
            tu_rand64(4, (const int64_t[]){2, 2, 5, 5}, -2, 2, 17 + (unsigned)i, true);
        GradCtx ctx = {mods[i], NULL, g};
        if (!strcmp(mods[i]->vt->type, "Dropout")) ctx.g = &g;
        tu_gradcheck(mods[i]->vt->type, module_fn, &ctx, 1, &x);
        tensor_free(x);
        nn_module_free(mods[i]);
    }
    TU_MEM_END;
}
END_TEST

START_TEST(test_dropout_modes)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(4, 0);
    Module *m = nn_dropout(0.25, &g);
    CtScope *s = ct_scope_open();
    int64_t n = 20000;
    Tensor *x = tensor_ones(1, &n, CT_F32, ct_cpu());
    uint64_t off0 = g.offset;
    Tensor *y = nn_forward(m, x);
    ck_assert(g.offset > off0); /* the borrowed generator advanced */
    float *v = tensor_data(y);
    int64_t zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert(v[i] == 0 || fabsf(v[i] - 1 / 0.75f) < 1e-6f);
        zeros += v[i] == 0;
    }
    ck_assert_msg(fabs((double)zeros / (double)n - 0.25) < 0.02, "zero fraction %g",
                  (double)zeros / (double)n);
    /* eval: identity, no draw */
    nn_module_eval(m);
    off0 = g.offset;
    Tensor *e = nn_forward(m, x);
    ck_assert_uint_eq(g.offset, off0);
    ck_assert(tensor_item(tensor_sum_all(e)) == (double)n);
    ck_assert_ptr_null(nn_dropout(1.5, &g));
    tu_assert_error(CT_ERR_INVALID, "Dropout: p must be in [0, 1], got 1.5");
    ck_assert_ptr_null(nn_dropout(0.5, NULL));
    tu_assert_error(CT_ERR_NULL, "Dropout(p=0.5): NULL generator");
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* All values within [-bound, bound], and spread to near both ends. */
static void assert_uniform(Tensor *t, double bound)
{
    int64_t n = tensor_numel(t);
    double *v = malloc((size_t)n * sizeof *v);
    tensor_copy_to_host(t, v, CT_F64);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
    }
    free(v);
    ck_assert_msg(lo >= -bound && hi <= bound, "[%g, %g] outside +-%g", lo, hi, bound);
    ck_assert_msg(lo < -0.9 * bound && hi > 0.9 * bound, "[%g, %g] not spread over +-%g",
                  lo, hi, bound);
}

START_TEST(test_default_init)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(5, 0);
    Module *lin = nn_linear(784, 128, true, &g);
    assert_uniform(nn_module_get(lin, "weight"), 1 / sqrt(784.0));
    assert_uniform(nn_module_get(lin, "bias"), 1 / sqrt(784.0));
    Module *conv = nn_conv2d(6, 16, 5, &(CtConv2dArgs){.groups = 2}, true, &g);
    tu_assert_shape(nn_module_get(conv, "weight"), 4, 16, 3, 5, 5);
    assert_uniform(nn_module_get(conv, "weight"), 1 / sqrt(3 * 25.0));
    assert_uniform(nn_module_get(conv, "bias"), 1 / sqrt(3 * 25.0));
    /* the same generator state gives the same weights */
    CtGenerator g1 = ct_generator(5, 0), g2 = ct_generator(5, 0);
    Module *a = nn_linear(3, 2, true, &g1), *b = nn_linear(3, 2, true, &g2);
    double wa[6];
    tensor_copy_to_host(nn_module_get(a, "weight"), wa, CT_F64);
    tu_assert_values(nn_module_get(b, "weight"), wa, 6, 0, 0);
    /* embedding ~ N(0, 1) */
    Module *emb = nn_embedding(1000, 20, &g);
    CtScope *s = ct_scope_open();
    Tensor *w = nn_module_get(emb, "weight");
    double mean = tensor_item(tensor_mean_all(w));
    double var = tensor_item(tensor_var(w, 0, NULL, 1, false));
    ck_assert_msg(fabs(mean) < 0.02 && fabs(var - 1) < 0.03, "mean %g var %g", mean, var);
    ct_scope_close(s);
    nn_module_free(lin);
    nn_module_free(conv);
    nn_module_free(a);
    nn_module_free(b);
    nn_module_free(emb);
    TU_MEM_END;
}
END_TEST

/* Layers built while the caller has a scope open keep their parameters
 * after it closes. */
START_TEST(test_construct_inside_scope)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(6, 0);
    CtScope *s = ct_scope_open();
    Module *m = nn_sequential(
        2, (Module *[]){nn_linear(3, 2, true, &g), nn_batch_norm1d(2, 1e-5, 0.1)});
    ct_scope_close(s);
    s = ct_scope_open();
    Tensor *y = nn_forward(m, tensor_ones(2, (const int64_t[]){4, 3}, CT_F32, ct_cpu()));
    tu_assert_shape(y, 2, 4, 2);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(y), NULL), CT_OK);
    ck_assert_ptr_nonnull(tensor_grad(nn_module_get(m, "0.weight")));
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nn_layers");
    TCase *tc = tcase_create("layers");
    tcase_add_test(tc, test_reprs);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_conv2d);
    tcase_add_test(tc, test_batch_norm2d);
    tcase_add_test(tc, test_batch_norm1d);
    tcase_add_test(tc, test_layer_norm);
    tcase_add_test(tc, test_embedding);
    tcase_add_test(tc, test_pools_and_activations);
    tcase_add_test(tc, test_gradcheck_parameter_free);
    tcase_add_test(tc, test_dropout_modes);
    tcase_add_test(tc, test_default_init);
    tcase_add_test(tc, test_construct_inside_scope);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
