/* Layers built from tensor ops, against PyTorch (fixtures from
 * tests/fixtures/nn_more_layers.py): GroupNorm, Dropout2d, LeakyReLU, ELU,
 * Hardsigmoid, Hardswish, Softmax, LogSoftmax; their reprs, state dicts,
 * errors, and their use in Sequential.
 *
 * As in test_layers.c, layers run in f32 on the fixture script's inputs and
 * weights, and outputs and gradients (for an upstream gradient gy) are
 * compared with PyTorch's f64 numbers. Dropout2d draws from our generator,
 * so it is checked by structure and statistics instead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/nn.h"
#include "layer_fixture.h"
#include "testutil.h"

/* ---- PyTorch reference values (generated; do not edit by hand) ---- */
static const double gn_y[24] = {
    -2.4688078007642371,  -0.82261500130108789, 0.53777049003852273,
    1.4051566493705736,   1.7025314083616672,   1.3743925678784188,
    2.3589231187487383,   1.5936420323574274,   0.67556834110731701,
    -0.31107482929274244, -1.1215977637692898,  -1.7271283156236659,
    -1.167844835589031,   -1.1505087804223268,  -0.63726851027752474,
    0.28922334332366895,  1.5172862263494968,   2.8757680057630353,
    -2.4627601265492238,  -0.15594038320318146, 1.3449292754083166,
    1.7058448737350072,   1.1471441592246638,   -0.36523004128444703};
static const double gn_gx[24] = {
    -0.048637696129858465, 0.047174626083472671,   0.095895118181034356,
    0.066380146911376947,  -0.0090095573078294855, -0.15180263773819469,
    -0.016491776635096822, -0.0023025867175823223, 0.022109631151324582,
    0.0099810334575846094, 0.011180528454561856,   -0.02447682971079268,
    0.18327878742484244,   -0.014393860789199131,  -0.10601435523158054,
    -0.10311059432883452,  -0.032019876463047714,  0.072259899387819904,
    0.25602629100660279,   0.34741137159518598,    0.29420162321887267,
    0.173764286822784,     -0.24129051601736418,   -0.83011305662608303};
static const double gn_gw[4] = {-2.8328622391155318, 1.5275998079727571,
                                2.4443705565782157, -2.0465585150417844};
static const double gn_gb[4] = {3.3891520638688779, 2.1413614481109811,
                                0.66248514155562832, -0.88788345637093813};
static const double gnna_y[48] = {
    -1.9364551195900233,  -0.72958442373206966, 0.26775281714489235,
    0.92057168620866725,  1.1405162120432308,   0.89781793488328809,
    0.22532492799335191,  -0.7859440349513368,  2.0493843623101551,
    1.0012495614661852,   0.063378755253261254, -0.63729164245854208,
    -1.0059291803323589,  -0.99264049697383627, -0.59922415333551682,
    0.12107279407065266,  -1.9950480012867764,  -1.1249472750545706,
    -0.28907795511226192, 0.39942896732619959,  0.84738731024075231,
    0.99416801338549599,  0.81990499716919563,  0.34818394333196401,
    1.8939721062824577,   1.1766600145670325,   0.43894837718500562,
    -0.21931699650570843, -0.7090429762385313,  -0.96394744806505639,
    -0.94953028753449575, -0.667742789690703,   -1.786212934715478,
    -1.1954383581741905,  -0.54371077671577139, 0.08076153890167212,
    0.59345919029138805,  0.92499095551118382,  1.030485565424381,
    0.89566481947681498,  1.6811691437239955,   1.1979961410496092,
    0.6220012576301136,   0.031142698822182863, -0.49460960128232284,
    -0.88409753527979396, -1.0846057384741763,  -1.0689963661896085};
static const double gnna_gx[48] = {
    0.12599121190698015,   0.1461817888465633,     0.14053792079503458,
    0.10601904861112299,   0.041007540268715781,   -0.054396342791237284,
    -0.17828286689661588,  -0.3270583007405643,    0.039270674997778143,
    0.14561381234571102,   0.21794299719095134,    0.22968243715400594,
    0.16148899699569508,   0.004084811210707584,   -0.24026328503147809,
    -0.55782044486337101,  -0.026650657545527756,  0.033283241169389299,
    0.090107079089583486,  0.12105350172908558,    0.10756070816623398,
    0.037958445933276797,  -0.090789332751923302,  -0.27252298579011874,
    0.014675298149443017,  -0.0062553435468811758, -0.015148606852294022,
    -0.015315629846699541, -0.0098048688359564373, -0.00095238169501810077,
    0.0099535686594440786, 0.022847963967962515,   0.044721497109814767,
    0.0035261551388441337, -0.036670757476220395,  -0.064206551076954055,
    -0.068038995107534195, -0.039329259220984847,  0.027261220432715061,
    0.13273669020031931,   0.022140401641134573,   0.013998499950415317,
    -0.010258236482063109, -0.036508355563546195,  -0.05024946875354367,
    -0.038693437431764323, 0.0073707128573319014,  0.09219988378203553};
static const double gn2d_y[9] = {
    -1.5924476982712856,  0.40206079824122237, 1.9626820960847966,
    -0.59980412287894369, 2.3793944858993084,  -0.92129168323801336,
    2.0790616437611411,   0.3968705456586249,  -1.5765577189212447};
static const double gn2d_gx[9] = {
    -0.014491743883737307,  0.032034546711863232,  -0.017542802828126369,
    1.4844682841999663,     -0.13840052400863634,  -1.3460677601913336,
    -0.0011541179689296133, 0.0021321797883115945, -0.00097806181938064896};
static const double gn2d_gw[3] = {-0.89217041431329991, 1.4035040865884403,
                                  -0.33568431949680694};
static const double gn2d_gb[3] = {2.736034575025752, 2.6166184307876037,
                                  2.4655731155886915};
static const double kinks[11] = {-4, -3, -2.5, -1, -0.001, 0, 0.001, 1, 2.5, 3, 4};
static const double lrelu_k_y[11] = {-0.040000000000000001,
                                     -0.029999999999999999,
                                     -0.025000000000000001,
                                     -0.01,
                                     -1.0000000000000001e-05,
                                     0,
                                     0.001,
                                     1,
                                     2.5,
                                     3,
                                     4};
static const double lrelu_k_gx[11] = {0.01,
                                      0.0099395609795669675,
                                      0.0097589744933060558,
                                      0.0094604234352838705,
                                      0.0090475166321996332,
                                      0.0085252452205950568,
                                      0.78999223149736508,
                                      0.7179106696109433,
                                      0.63715114419858021,
                                      0.54868986058158753,
                                      0.45359612142557731};
static const double lrelu_y[12] = {
    0.19966683329365631,    0.90577257075813655,   1.4892862399417186,
    1.8712320031067717,     1.9999152929974802,    1.8579194300077384,
    1.4644628880605028,     0.87279816432025259,   0.16300430352053824,
    -0.0056885142507292511, -0.012237157818854386, -0.017129559483300024};
static const double lrelu_gx[12] = {1,
                                    0.99395609795669682,
                                    0.97589744933060552,
                                    0.94604234352838701,
                                    0.90475166321996336,
                                    0.85252452205950568,
                                    0.78999223149736508,
                                    0.7179106696109433,
                                    0.63715114419858021,
                                    0.0054868986058158754,
                                    0.0045359612142557735,
                                    0.003530194012193304};
static const double lrelu2_k_y[11] = {-0.80000000000000004,
                                      -0.60000000000000009,
                                      -0.5,
                                      -0.20000000000000001,
                                      -0.00020000000000000001,
                                      0,
                                      0.001,
                                      1,
                                      2.5,
                                      3,
                                      4};
static const double lrelu2_k_gx[11] = {
    0.20000000000000001, 0.19879121959133939, 0.1951794898661211,  0.18920846870567742,
    0.18095033264399268, 0.17050490441190114, 0.78999223149736508, 0.7179106696109433,
    0.63715114419858021, 0.54868986058158753, 0.45359612142557731};
static const double lrelu2_y[12] = {
    0.19966683329365631, 0.90577257075813655,  1.4892862399417186,   1.8712320031067717,
    1.9999152929974802,  1.8579194300077384,   1.4644628880605028,   0.87279816432025259,
    0.16300430352053824, -0.11377028501458503, -0.24474315637708771, -0.3425911896660005};
static const double lrelu2_gx[12] = {1,
                                     0.99395609795669682,
                                     0.97589744933060552,
                                     0.94604234352838701,
                                     0.90475166321996336,
                                     0.85252452205950568,
                                     0.78999223149736508,
                                     0.7179106696109433,
                                     0.63715114419858021,
                                     0.10973797211631751,
                                     0.090719224285115474,
                                     0.070603880243866088};
static const double elu_k_y[11] = {-0.98168436111126578,
                                   -0.95021293163213605,
                                   -0.91791500137610116,
                                   -0.63212055882855767,
                                   -0.00099950016662497809,
                                   0,
                                   0.001,
                                   1,
                                   2.5,
                                   3,
                                   4};
static const double elu_k_gx[11] = {
    0.018315638888734179, 0.049486160203625333, 0.080106540785369107, 0.34802952866174469,
    0.90384736378182073,  0.85252452205950568,  0.78999223149736508,  0.7179106696109433,
    0.63715114419858021,  0.54868986058158753,  0.45359612142557731};
static const double elu_y[12] = {
    0.19966683329365631,  0.90577257075813655,  1.4892862399417186,
    1.8712320031067717,   1.9999152929974802,   1.8579194300077384,
    1.4644628880605028,   0.87279816432025259,  0.16300430352053824,
    -0.43382463979062358, -0.70586480837771814, -0.81966804792927483};
static const double elu_gx[12] = {1,
                                  0.99395609795669682,
                                  0.97589744933060552,
                                  0.94604234352838701,
                                  0.90475166321996336,
                                  0.85252452205950568,
                                  0.78999223149736508,
                                  0.7179106696109433,
                                  0.63715114419858021,
                                  0.31065467945801284,
                                  0.13341858209463597,
                                  0.063660677740720387};
static const double elu2_k_y[11] = {-1.4725265416668987,
                                    -1.4253193974482041,
                                    -1.3768725020641517,
                                    -0.9481808382428365,
                                    -0.0014992502499374671,
                                    0,
                                    0.001,
                                    1,
                                    2.5,
                                    3,
                                    4};
static const double elu2_k_gx[11] = {
    0.027473458333101268, 0.07422924030543801, 0.12015981117805366, 0.52204429299261701,
    1.3557710456727312,   1.2787867830892585,  0.78999223149736508, 0.7179106696109433,
    0.63715114419858021,  0.54868986058158753, 0.45359612142557731};
static const double elu2_y[12] = {
    0.19966683329365631, 0.90577257075813655,  1.4892862399417186,  1.8712320031067717,
    1.9999152929974802,  1.8579194300077384,   1.4644628880605028,  0.87279816432025259,
    0.16300430352053824, -0.65073695968593537, -1.0587972125665772, -1.2295020718939123};
static const double elu2_gx[12] = {1,
                                   0.99395609795669682,
                                   0.97589744933060552,
                                   0.94604234352838701,
                                   0.90475166321996336,
                                   0.85252452205950568,
                                   0.78999223149736508,
                                   0.7179106696109433,
                                   0.63715114419858021,
                                   0.46598201918701926,
                                   0.20012787314195399,
                                   0.095491016611080573};
static const double hsig_k_y[11] = {0,
                                    0,
                                    0.083333333333333329,
                                    0.33333333333333331,
                                    0.49983333333333335,
                                    0.5,
                                    0.50016666666666665,
                                    0.66666666666666663,
                                    0.91666666666666663,
                                    1,
                                    1};
static const double hsig_k_gx[11] = {0,
                                     0,
                                     0.16264957973576932,
                                     0.15767372862044099,
                                     0.15079194836394402,
                                     0.14208742457778606,
                                     0.13166537584016139,
                                     0.11965178183439142,
                                     0.106191860531194,
                                     0,
                                     0};
static const double hsig_y[12] = {
    0.53327780554894277, 0.65096209512635606, 0.74821437332361984, 0.81187200051779529,
    0.83331921549957999, 0.8096532383346231,  0.74407714801008373, 0.64546636072004204,
    0.52716738392008977, 0.40519142915451251, 0.29604736968576023, 0.21450734194499962};
static const double hsig_gx[12] = {
    0.1666666716337204,   0.16565935459648282,  0.16264957973576932,
    0.15767372862044099,  0.15079194836394402,  0.14208742457778606,
    0.13166537584016139,  0.11965178183439142,  0.106191860531194,
    0.091448312822303271, 0.075599355823965861, 0.058836568623354735};
static const double hswish_k_y[11] = {-0,
                                      -0,
                                      -0.20833333333333334,
                                      -0.33333333333333331,
                                      -0.00049983333333333336,
                                      0,
                                      0.00050016666666666666,
                                      0.66666666666666663,
                                      2.2916666666666665,
                                      3,
                                      4};
static const double hswish_k_gx[11] = {0,
                                       -0.49697804897834841,
                                       -0.32529914977686852,
                                       0.15767372392139786,
                                       0.4520742477222417,
                                       0.42626226102975284,
                                       0.39525944649251499,
                                       0.59825889134245269,
                                       0.84953485893144043,
                                       0.82303479087238129,
                                       0.45359612142557731};
static const double hswish_y[12] = {
    0.10647789069974761,  0.58962361036870214,  1.114305370717483,
    1.519200869795216,    1.6665678430262727,   1.5042704830705826,
    1.0896733691146696,   0.56336185476692668,  0.085930552254638415,
    -0.23049372190187958, -0.36227783847013756, -0.36744162734514491};
static const double hswish_gx[12] = {
    0.56655561109788544, 0.79707743900066952,  0.97241227229273308,
    1.0631094082656762,  1.0555180608228187,   0.95423621906055833,
    0.78063421737668015, 0.56781903966625658,  0.35319503159842464,
    0.17030392725249358, 0.041773816582621116, -0.025059193788517373};
static const double smax_y[24] = {
    0.12476369526849282,  0.26177109060193715,  0.4897592383519096,
    0.71622194285573748,  0.75496392754479102,  0.67831873027029199,
    0.47775142610916077,  0.26389630877409809,  0.12027237718671607,
    0.059910179127770753, 0.032489335538929562, 0.019881748370164366,
    0.019199239274369503, 0.016052292682980484, 0.020424400612283396,
    0.033778804599092882, 0.081851877124558006, 0.14119640562431243,
    0.27616782734163753,  0.49354467461668122,  0.8989488836010725,
    0.84275130169270707,  0.70340777204607907,  0.4726765207842259};
static const double smax_gx[24] = {
    0.014416414155956604,  0.0320961897972371,    0.051809526816563346,
    0.051563281167417201,  0.01532683682923271,   -0.012765896691072311,
    -0.038277211020444762, -0.041204303700686208, -0.029743250985189207,
    -0.019330293106164787, -0.013532315796118518, -0.010358977466730876,
    0.015125881371360467,  0.011998433330930793,  0.013646165605398783,
    0.01876209036086627,   0.028777912345439471,  0.044105268343176282,
    0.066131202367172154,  0.068292622383963539,  -0.043903793716799901,
    -0.056103701674107102, -0.079777367972570901, -0.087054712744829843};
static const double lsmax_y[24] = {
    -2.4830698574291525,  -1.7769641199646724, -1.1934504507810906, -0.81150468761603733,
    -1.0213694436936089,  -1.1633653066833507, -1.5568218486305863, -2.1484865723708366,
    -0.63345922135339938, -1.3653149499468626, -2.0201793067593758, -2.5094194732039399,
    -1.7109756589933292,  -1.7016968915737487, -1.426995579698445,  -0.9240512572476306,
    -2.6962390639583473,  -1.962700693534964,  -1.258021108342029,  -0.67757538443403076,
    -1.3258299923120809,  -1.2020865284252806, -1.3489989548680263, -1.7466833639186392};
static const double lsmax_gx[24] = {
    0.67307540097923713,    0.33157882141902006,   -0.2112979140798292,
    -0.79335630831842774,   -0.27104410495766457,  -0.16762510005831016,
    0.10167622660185641,    0.33699297841411835,   -0.42035039980242062,
    0.04001519802010902,    0.18933326249333829,   0.19100193928897335,
    0.18670895497934889,    0.078292121648965013,  -0.050861032644575026,
    -0.21414004398373887,   -0.09519262553042962,  -0.10133392168712496,
    -0.0065408664359762839, 0.20306741365353062,   0.16354600006330858,
    0.17741126825762815,    -0.015931339046851806, -0.32502592927408502};
/* ---- end of generated values ---- */

START_TEST(test_reprs_and_keys)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(0, 0);
    assert_repr_keys(nn_group_norm(2, 4, 1e-5, true),
                     "GroupNorm(2, 4, eps=1e-05, affine=True)", "weight, bias");
    assert_repr_keys(nn_group_norm(3, 6, 1e-3, false),
                     "GroupNorm(3, 6, eps=0.001, affine=False)", "");
    assert_repr_keys(nn_dropout2d(0.5, &g), "Dropout2d(p=0.5, inplace=False)", "");
    assert_repr_keys(nn_dropout2d(0.25, &g), "Dropout2d(p=0.25, inplace=False)", "");
    assert_repr_keys(nn_leaky_relu(0.01), "LeakyReLU(negative_slope=0.01)", "");
    assert_repr_keys(nn_leaky_relu(0.2), "LeakyReLU(negative_slope=0.2)", "");
    assert_repr_keys(nn_elu(1.0), "ELU(alpha=1.0)", "");
    assert_repr_keys(nn_elu(0.5), "ELU(alpha=0.5)", "");
    assert_repr_keys(nn_hardsigmoid(), "Hardsigmoid()", "");
    assert_repr_keys(nn_hardswish(), "Hardswish()", "");
    assert_repr_keys(nn_softmax(1), "Softmax(dim=1)", "");
    assert_repr_keys(nn_log_softmax(-1), "LogSoftmax(dim=-1)", "");
    TU_MEM_END;
}
END_TEST

/* Runs m on fx(shape), compares y and the gradients of x, weight and bias
 * (refs NULL: no such parameter) for the upstream gradient gy. */
static void check_layer(Module *m, int ndim, const int64_t *shape, const double *y_ref,
                        const double *gx_ref, const double *gw_ref, const double *gb_ref,
                        int64_t n, int64_t c)
{
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, ndim, shape, true);
    Tensor *y = nn_forward(m, x);
    ck_assert_ptr_nonnull(y);
    tu_assert_shape_at(__FILE__, __LINE__, y, ndim, shape);
    tu_assert_values(y, y_ref, n, 2e-5, 2e-5);
    backward_gy(y);
    tu_assert_values(tensor_grad(x), gx_ref, n, 2e-5, 2e-5);
    if (gw_ref)
        tu_assert_values(tensor_grad(nn_module_get(m, "weight")), gw_ref, c, 2e-5, 2e-5);
    if (gb_ref)
        tu_assert_values(tensor_grad(nn_module_get(m, "bias")), gb_ref, c, 2e-5, 2e-5);
    tensor_free(x);
    ct_scope_close(s);
}

START_TEST(test_group_norm)
{
    TU_MEM_BEGIN;
    Module *m = nn_group_norm(2, 4, 1e-5, true);
    /* PyTorch's init: weight ones, bias zeros */
    tu_assert_values(nn_module_get(m, "weight"), ((const double[]){1, 1, 1, 1}), 4, 0, 0);
    tu_assert_values(nn_module_get(m, "bias"), ((const double[]){0, 0, 0, 0}), 4, 0, 0);
    set_fw(nn_module_get(m, "weight"), 1);
    set_fw(nn_module_get(m, "bias"), -0.2);
    check_layer(m, 3, (const int64_t[]){2, 4, 3}, gn_y, gn_gx, gn_gw, gn_gb, 24, 4);
    nn_module_free(m);

    m = nn_group_norm(3, 6, 1e-3, false);
    ck_assert_int_eq(nn_module_num_parameters(m, false), 0);
    check_layer(m, 4, (const int64_t[]){2, 6, 2, 2}, gnna_y, gnna_gx, NULL, NULL, 48, 0);
    nn_module_free(m);

    m = nn_group_norm(1, 3, 1e-5, true);
    set_fw(nn_module_get(m, "weight"), 1);
    set_fw(nn_module_get(m, "bias"), -0.2);
    check_layer(m, 2, (const int64_t[]){3, 3}, gn2d_y, gn2d_gx, gn2d_gw, gn2d_gb, 9, 3);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_group_norm_channels_last)
{
    TU_MEM_BEGIN;
    Module *m = nn_group_norm(3, 6, 1e-3, false);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, (const int64_t[]){2, 6, 2, 2}, true);
    Tensor *y = nn_forward(m, tensor_channels_last(x));
    ASSERT_REF(y, gnna_y);
    backward_gy(y);
    ASSERT_REF(tensor_grad(x), gnna_gx);
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_group_norm_errors)
{
    TU_MEM_BEGIN;
    ck_assert_ptr_null(nn_group_norm(3, 4, 1e-5, true));
    tu_assert_error(CT_ERR_INVALID,
                    "GroupNorm: num_channels must be divisible by num_groups "
                    "(num_groups = 3, num_channels = 4)");
    ck_assert_ptr_null(nn_group_norm(0, 4, 1e-5, true));
    tu_assert_error(CT_ERR_INVALID, "GroupNorm: need num_groups > 0");
    ck_assert_ptr_null(nn_group_norm(2, 4, 0, true));
    tu_assert_error(CT_ERR_INVALID, "eps = 0");
    Module *m = nn_group_norm(2, 4, 1e-5, true);
    CtScope *s = ct_scope_open();
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(3, (const int64_t[]){2, 3, 5}, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE,
                    "GroupNorm(2, 4): input f32[2, 3, 5] cpu is not (N, 4, *) with at "
                    "least 2 dims");
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(1, (const int64_t[]){4}, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE, "GroupNorm(2, 4): input f32[4] cpu");
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* One activation: its values and gradients at the kinks and on fx(3, 4). */
typedef struct ActCase {
    const char *name;
    Module *(*make)(double v);
    double v;
    const double *ky, *kgx, *y, *gx;
} ActCase;

static Module *make_leaky(double v)
{
    return nn_leaky_relu(v);
}
static Module *make_elu(double v)
{
    return nn_elu(v);
}
static Module *make_hsig(double v)
{
    (void)v;
    return nn_hardsigmoid();
}
static Module *make_hswish(double v)
{
    (void)v;
    return nn_hardswish();
}

START_TEST(test_activations)
{
    TU_MEM_BEGIN;
    const ActCase cases[] = {
        {"LeakyReLU", make_leaky, 0.01, lrelu_k_y, lrelu_k_gx, lrelu_y, lrelu_gx},
        {"LeakyReLU(0.2)", make_leaky, 0.2, lrelu2_k_y, lrelu2_k_gx, lrelu2_y, lrelu2_gx},
        {"ELU", make_elu, 1.0, elu_k_y, elu_k_gx, elu_y, elu_gx},
        {"ELU(1.5)", make_elu, 1.5, elu2_k_y, elu2_k_gx, elu2_y, elu2_gx},
        {"Hardsigmoid", make_hsig, 0, hsig_k_y, hsig_k_gx, hsig_y, hsig_gx},
        {"Hardswish", make_hswish, 0, hswish_k_y, hswish_k_gx, hswish_y, hswish_gx},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ActCase *c = &cases[i];
        Module *m = c->make(c->v);
        ck_assert_msg(m != NULL, "%s", c->name);
        CtScope *s = ct_scope_open();
        Tensor *x = tu_tensor(CT_F32, 1, (const int64_t[]){N_OF(kinks)}, kinks);
        tensor_set_requires_grad(x, true);
        Tensor *y = nn_forward(m, x);
        tu_assert_values(y, c->ky, N_OF(kinks), 2e-6, 2e-6);
        backward_gy(y);
        tu_assert_values(tensor_grad(x), c->kgx, N_OF(kinks), 2e-6, 2e-6);
        tensor_free(x);
        ct_scope_close(s);
        check_layer(m, 2, (const int64_t[]){3, 4}, c->y, c->gx, NULL, NULL, 12, 0);
        nn_module_free(m);
    }
    ck_assert_ptr_null(nn_leaky_relu(NAN));
    tu_assert_error(CT_ERR_INVALID, "LeakyReLU: negative_slope must be finite");
    ck_assert_ptr_null(nn_elu(INFINITY));
    tu_assert_error(CT_ERR_INVALID, "ELU: alpha must be finite");
    TU_MEM_END;
}
END_TEST

/* ELU's exponent is clamped, so large inputs give finite gradients. */
START_TEST(test_elu_large_input)
{
    TU_MEM_BEGIN;
    Module *m = nn_elu(1.0);
    CtScope *s = ct_scope_open();
    Tensor *x =
        tu_tensor(CT_F32, 1, (const int64_t[]){3}, (const double[]){100, 200, -200});
    tensor_set_requires_grad(x, true);
    Tensor *y = nn_forward(m, x);
    tu_assert_values(y, ((const double[]){100, 200, -1}), 3, 0, 0);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(y), NULL), CT_OK);
    tu_assert_values(tensor_grad(x), ((const double[]){1, 1, 0}), 3, 0, 0);
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_softmax)
{
    TU_MEM_BEGIN;
    const int64_t shape[3] = {2, 3, 4};
    Module *m = nn_softmax(1);
    check_layer(m, 3, shape, smax_y, smax_gx, NULL, NULL, 24, 0);
    nn_module_free(m);
    m = nn_log_softmax(-1);
    check_layer(m, 3, shape, lsmax_y, lsmax_gx, NULL, NULL, 24, 0);
    CtScope *s = ct_scope_open();
    ck_assert_ptr_null(nn_forward(m, NULL));
    ct_scope_close(s);
    nn_module_free(m);
    m = nn_softmax(3);
    s = ct_scope_open();
    ck_assert_ptr_null(nn_forward(m, tensor_ones(3, shape, CT_F32, ct_cpu())));
    ck_assert_int_ne(ct_last_status(), CT_OK);
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* Dropout2d(p) on x = fx (n, c, 2, 3): each (sample, channel) plane is
 * either all zero or x / (1 - p), and so is the gradient of sum(y); returns
 * the number of zeroed planes. */
static int64_t check_dropout2d_planes(Module *m, double p, int64_t n, int64_t c)
{
    const int64_t shape[4] = {n, c, 2, 3};
    const int64_t len = n * c * 6;
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, shape, true);
    Tensor *y = nn_forward(m, x);
    ck_assert_ptr_nonnull(y);
    tu_assert_shape(y, 4, n, c, 2, 3);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(y), NULL), CT_OK);
    float *xv = malloc((size_t)len * sizeof *xv), *yv = malloc((size_t)len * sizeof *yv),
          *gv = malloc((size_t)len * sizeof *gv);
    ck_assert_int_eq(tensor_copy_to_host(x, xv, CT_F32), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(y, yv, CT_F32), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(tensor_grad(x), gv, CT_F32), CT_OK);
    const float scale = (float)(1.0 / (1.0 - p));
    int64_t zeroed = 0;
    for (int64_t plane = 0; plane < n * c; plane++) {
        bool kept = gv[plane * 6] != 0;
        zeroed += !kept;
        for (int64_t k = plane * 6; k < plane * 6 + 6; k++) {
            ck_assert_float_eq(gv[k], kept ? scale : 0.0f);
            ck_assert_float_eq_tol(yv[k], kept ? xv[k] * scale : 0.0f, 1e-6);
        }
    }
    free(xv);
    free(yv);
    free(gv);
    tensor_free(x);
    ct_scope_close(s);
    return zeroed;
}

START_TEST(test_dropout2d)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(7, 0);
    Module *m = nn_dropout2d(0.5, &g);
    ck_assert_ptr_eq(nn_module_generator(m), &g);
    /* 2048 planes: the zeroed count is Binomial(2048, 0.5), sd 22.6 */
    int64_t zeroed = check_dropout2d_planes(m, 0.5, 32, 64);
    ck_assert_int_gt(zeroed, 1024 - 120);
    ck_assert_int_lt(zeroed, 1024 + 120);
    nn_module_free(m);

    m = nn_dropout2d(0.2, &g);
    zeroed = check_dropout2d_planes(m, 0.2, 32, 64); /* mean 409.6, sd 18.1 */
    ck_assert_int_gt(zeroed, 410 - 100);
    ck_assert_int_lt(zeroed, 410 + 100);
    /* the same generator state draws the same mask */
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 3, (const int64_t[]){4, 8, 5}, false);
    CtGenerator saved = g;
    Tensor *y1 = nn_forward(m, x);
    ck_assert_uint_gt(g.offset, saved.offset);
    g = saved;
    Tensor *y2 = nn_forward(m, x);
    tu_assert_same_bits("Dropout2d replay", y1, y2);
    /* eval: the identity */
    nn_module_eval(m);
    saved = g;
    tu_assert_same_bits("Dropout2d eval", nn_forward(m, x), x);
    ck_assert_uint_eq(g.offset, saved.offset);
    tensor_free(x);
    ct_scope_close(s);
    nn_module_free(m);

    m = nn_dropout2d(1.0, &g); /* everything zeroed, no NaN */
    ck_assert_int_eq(check_dropout2d_planes(m, 1.0, 2, 3), 6);
    nn_module_free(m);
    m = nn_dropout2d(0.0, NULL); /* the identity */
    ck_assert_int_eq(check_dropout2d_planes(m, 0.0, 2, 3), 0);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

START_TEST(test_dropout2d_errors)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(1, 0);
    ck_assert_ptr_null(nn_dropout2d(1.5, &g));
    tu_assert_error(CT_ERR_INVALID, "Dropout2d: p must be in [0, 1], got 1.5");
    ck_assert_ptr_null(nn_dropout2d(0.5, NULL));
    tu_assert_error(CT_ERR_NULL, "Dropout2d(p=0.5): NULL generator");
    Module *m = nn_dropout2d(0.5, &g);
    CtScope *s = ct_scope_open();
    ck_assert_ptr_null(
        nn_forward(m, tensor_ones(1, (const int64_t[]){4}, CT_F32, ct_cpu())));
    tu_assert_error(CT_ERR_SHAPE, "Dropout2d: input f32[4] cpu has fewer than 2 dims");
    ct_scope_close(s);
    nn_module_free(m);
    TU_MEM_END;
}
END_TEST

/* The new layers in a Sequential: repr, state dict, nn_module_to, forward
 * and backward, and a state dict round trip. */
START_TEST(test_sequential)
{
    TU_MEM_BEGIN;
    CtGenerator g = ct_generator(5, 0);
    Module *mk[2];
    for (int i = 0; i < 2; i++) {
        Module *mods[5] = {nn_group_norm(2, 4, 1e-5, true), nn_leaky_relu(0.01),
                           nn_dropout2d(0.5, &g), nn_hardswish(), nn_softmax(1)};
        mk[i] = nn_sequential(5, mods);
        ck_assert_ptr_nonnull(mk[i]);
    }
    Module *m = mk[0];
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    nn_module_print(m, f);
    fclose(f);
    const char *repr = "Sequential(\n"
                       "  (0): GroupNorm(2, 4, eps=1e-05, affine=True)\n"
                       "  (1): LeakyReLU(negative_slope=0.01)\n"
                       "  (2): Dropout2d(p=0.5, inplace=False)\n"
                       "  (3): Hardswish()\n"
                       "  (4): Softmax(dim=1)\n"
                       ")\n";
    ck_assert_msg(strncmp(buf, repr, strlen(repr)) == 0, "repr:\n%s", buf);
    free(buf);
    ck_assert_int_eq(nn_module_num_parameters(m, false), 8);
    ck_assert_int_eq(nn_module_to(m, ct_cpu()), CT_OK);
    set_fw(nn_module_get(m, "0.weight"), 1);
    set_fw(nn_module_get(m, "0.bias"), -0.2);
    CtScope *s = ct_scope_open();
    Tensor *x = fx(CT_F32, 4, (const int64_t[]){2, 4, 3, 3}, true);
    Tensor *y = nn_forward(m, x);
    tu_assert_shape(y, 4, 2, 4, 3, 3);
    ck_assert_int_eq(tensor_backward(tensor_sum_all(tensor_mul(y, y)), NULL), CT_OK);
    ck_assert_ptr_nonnull(tensor_grad(nn_module_get(m, "0.weight")));
    /* the softmax over channels sums to 1 at every position */
    Tensor *sums = tensor_sum(y, 1, (const int[]){1}, false);
    double ones[18];
    for (int i = 0; i < 18; i++) ones[i] = 1;
    tu_assert_values(sums, ones, 18, 1e-6, 1e-6);
    tensor_free(x);
    ct_scope_close(s);

    CtStateDict *sd = nn_module_state_dict(m);
    ck_assert_int_eq(ct_state_dict_size(sd), 2);
    ck_assert_str_eq(ct_state_dict_name(sd, 0), "0.weight");
    ck_assert_str_eq(ct_state_dict_name(sd, 1), "0.bias");
    ck_assert_int_eq(nn_module_load_state_dict(mk[1], sd, true, NULL), CT_OK);
    s = ct_scope_open();
    tu_assert_same_bits("loaded weight", nn_module_get(mk[1], "0.weight"),
                        nn_module_get(m, "0.weight"));
    ct_scope_close(s);
    ct_state_dict_free(sd);
    nn_module_free(mk[0]);
    nn_module_free(mk[1]);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nn_more_layers");
    TCase *tc = tcase_create("layers");
    tcase_add_test(tc, test_reprs_and_keys);
    tcase_add_test(tc, test_group_norm);
    tcase_add_test(tc, test_group_norm_channels_last);
    tcase_add_test(tc, test_group_norm_errors);
    tcase_add_test(tc, test_activations);
    tcase_add_test(tc, test_elu_large_input);
    tcase_add_test(tc, test_softmax);
    tcase_add_test(tc, test_dropout2d);
    tcase_add_test(tc, test_dropout2d_errors);
    tcase_add_test(tc, test_sequential);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
