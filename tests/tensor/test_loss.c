/* Softmax, log_softmax and losses: values against PyTorch, gradients, bad
 * input. */
#include <math.h>
#include <stdio.h>

#include "testutil.h"

/* From tests/fixtures/losses.py. */
static const double X2[] = {1.0,  -2.0, 0.5, 3.0, -1.0, 0.25, 0.0, -0.75, 1.5,  2.0,
                            -3.0, 2.5,  1.0, 0.0, 0.5,  2.0,  2.0, -1.5,  -0.5, 1.25};
static const double W[] = {0.5, 2.0, 1.0, 1.5, 0.25};
static const double X3[] = {0.0,
                            1.084846295894886,
                            2.022863734884435,
                            2.6870960570401428,
                            2.98764253361292,
                            2.8838256089259,
                            2.38969641670826,
                            1.5721330250618282,
                            0.5417888036826988,
                            -0.5618839906287095,
                            -1.5895084227254803,
                            -2.402000346527453,
                            -2.889392791719949,
                            -2.9857194773074878,
                            -2.677943038284704,
                            -2.007719571828786,
                            -1.065760679964128,
                            0.020443920224310526,
                            1.103881531717154,
                            2.0379139564344446,
                            2.6961242874348805,
                            2.9894268442218017,
                            2.8781245016785926,
                            2.3772815097255853};
static const double W3[] = {1.0, 0.5, 2.0, 0.75};
static const double CE_mean[] = {1.5543577187967805};
static const double CE_LS_mean[] = {1.6481077187967808};
static const double CE_IGN_mean[] = {1.2924813367293468};
static const double CE_W_mean[] = {1.4230535009198695};
static const double CE_ALL_mean[] = {1.0153937959384236};
static const double CE3_ALL_mean[] = {3.289773564321778};
static const double CE3_mean[] = {3.5587206611467566};
static const double NLL_mean[] = {1.5543577187967805};
static const double NLL_WI_mean[] = {0.524354986761368};
static const double NLL3_WI_mean[] = {3.390289854000957};
static const double CE_sum[] = {6.217430875187122};
static const double CE_LS_sum[] = {6.592430875187123};
static const double CE_IGN_sum[] = {2.5849626734586937};
static const double CE_W_sum[] = {8.18255763028925};
static const double CE_ALL_sum[] = {1.776939142892241};
static const double CE3_ALL_sum[] = {13.159094257287112};
static const double CE3_sum[] = {21.35232396688054};
static const double NLL_sum[] = {6.217430875187122};
static const double NLL_WI_sum[] = {0.917621226832394};
static const double NLL3_WI_sum[] = {13.561159416003829};
static const double CE_none[] = {0.2171044467741764, 2.6828785115838047,
                                 2.3678582266845174, 0.9495896901446235};
static const double CE_LS_none[] = {0.4871044467741764, 2.6228785115838047,
                                    2.397858226684517, 1.0845896901446235};
static const double CE_IGN_none[] = {0.2171044467741764, 0.0, 2.3678582266845174, 0.0};
static const double CE_W_none[] = {0.3256566701612646, 5.3657570231676095,
                                   0.5919645566711293, 1.899179380289247};
static const double CE_ALL_none[] = {0.8861172699515887, 0.0, 0.8908218729406521, 0.0};
static const double CE3_ALL_none[] = {
    3.1192364421315024, 0.0, 5.12143012163464, 2.6667436265509186, 2.25168406697005, 0.0};
static const double CE3_none[] = {3.3020866746429145, 4.915219775527808,
                                  2.7633422799614684, 5.146687840038277,
                                  4.318088522837678,  0.906898873872394};
static const double NLL_none[] = {0.2171044467741764, 2.6828785115838047,
                                  2.3678582266845174, 0.9495896901446235};
static const double NLL_WI_none[] = {0.3256566701612646, 0.0, 0.5919645566711293, 0.0};
static const double NLL3_WI_none[] = {3.3020866746429145, 0.0,
                                      5.526684559922937,  2.5733439200191386,
                                      2.159044261418839,  0.0};
static const double SM3_0[] = {
    0.9473195869512918,   0.9832186895527882,  0.9909939046390576,   0.9909402761684863,
    0.9829331514654018,   0.946006291477263,   0.7834379726851103,   0.38561532545298355,
    0.1039267829712394,   0.02788701592885991, 0.01134427534863411,  0.008332024739820091,
    0.05268041304870829,  0.01678131044721171, 0.009006095360942523, 0.009059723831513693,
    0.017066848534598084, 0.05399370852273699, 0.2165620273148897,   0.6143846745470164,
    0.8960732170287606,   0.97211298407114,    0.988655724651366,    0.9916679752601799};
static const double LSM3_0[] = {
    -0.05411876970584333,  -0.016923712008631246, -0.009046895388463807,
    -0.009101012695792806, -0.0172141657604085,   -0.055506059342159436,
    -0.2440633872821386,   -0.9529149726035242,   -2.264068637664028,
    -3.5795940773710933,   -4.479042036864047,    -4.787648786334328,
    -2.9435115614257925,   -4.087489485211004,    -4.709853668557603,
    -4.703916641564722,    -4.070617379337456,    -2.9188877480437485,
    -1.529878272273245,    -0.48713404123090775,  -0.10973315391184614,
    -0.028283242520581873, -0.0114091124599734,   -0.008366930081289827};
static const double SM3_1[] = {
    0.036806284473798086,  0.106366451535898,     0.2774076070618816,
    0.5406459678407504,    0.713146208065516,     0.6561896214502083,
    0.4015632362750933,    0.17315323454029477,   0.06308058266797245,
    0.020984511410358214,  0.007334105858291265,  0.0033221888199376796,
    0.0024094396715844952, 0.0019536666861543267, 0.002574439542684718,
    0.0058186451290355365, 0.013325330278776375,  0.03824522881419525,
    0.13066914822891051,   0.2968839710312975,    0.555405891684646,
    0.8611027669704695,    0.6878370320037719,    0.4037744399584739};
static const double LSM3_1[] = {
    -3.3020866746429145, -2.2408650569074426,  -1.2822673487597318, -0.6149906176027718,
    -0.3380688191894081, -0.4213054747182672,  -0.9123902579346544, -1.7535783277405002,
    -2.7633422799614684, -3.863970665271624,   -4.915219775527808,  -5.70713143017162,
    -6.02836105992944,   -6.238047320181039,   -5.9621234218826835, -5.146687840038277,
    -4.318088522837678,  -3.2637364633736685,  -2.035086736492337,  -1.214413886439106,
    -0.5880560961630987, -0.14954142398768913, -0.3742033411949582, -0.906898873872394};
static const double SM3_m1[] = {
    0.08681362942101349, 0.25688022513816827, 0.6563061454408182,  0.28026816093175166,
    0.378529246371049,   0.3412025926971992,  0.6253624623489652,  0.27610135587855894,
    0.0985361817724759,  0.6593457265207667,  0.23595086584650518, 0.10470340763272797,
    0.31810307061801496, 0.2888908011789178,  0.3930061282030672,  0.08956466887653997,
    0.22973347060380708, 0.680701860519653,   0.11821016741605544, 0.3008153269513684,
    0.5809745056325761,  0.4103650562419091,  0.3671405710413246,  0.22249437271676625};
static const double LSM3_m1[] = {
    -2.443991648662918,  -1.3591453527680322, -0.42112791377848285, -1.2720084165183985,
    -0.9714619399456211, -1.0752788646326414, -0.4694238575874641,  -1.286987249233896,
    -2.3173314706130252, -0.4165072591011176, -1.4441316911978883,  -2.256623614999861,
    -1.1453798272776683, -1.241706512865207,  -0.933930073842423,   -2.4127943573403843,
    -1.470835465475726,  -0.3846308652872876, -2.1352911589611856,  -1.2012587342438952,
    -0.5430484032434592, -0.8907081343600537, -1.002010476903263,   -1.5028534688562702};
static const double A[] = {0.5,  -1.0, 2.0,   0.0, 1.5, 3.0,
                           -2.5, 0.25, -0.75, 4.0, 1.0, -3.0};
static const double B[] = {1.0,  -1.0, 0.5,  2.0,  0.0, 2.5,
                           -2.0, 1.0,  0.25, -4.0, 1.5, -2.0};
static const double Y[] = {1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.25, 0.0, 1.0, 1.0, 0.0, 0.75};
static const double PW[] = {2.0, 0.5, 1.0, 3.0};
static const double MSE_mean[] = {6.338541666666667};
static const double L1_mean[] = {1.4791666666666667};
static const double BCE_mean[] = {0.8878428016794843};
static const double BCE_PW_mean[] = {1.5159056965986288};
static const double MSE_sum[] = {76.0625};
static const double L1_sum[] = {17.75};
static const double BCE_sum[] = {10.654113620153812};
static const double BCE_PW_sum[] = {18.190868359183547};
static const double MSE_none[] = {0.25, 0.0,    2.25, 4.0,  2.25, 0.25,
                                  0.25, 0.5625, 1.0,  64.0, 0.25, 1.0};
static const double L1_none[] = {0.5, 0.0,  1.5, 2.0, 1.5, 0.5,
                                 0.5, 0.75, 1.0, 8.0, 0.5, 1.0};
static const double BCE_none[] = {
    0.4740769841801067, 0.31326168751822286,  1.1269280110429727, 0.6931471805599453,
    1.7014132779827524, 0.048587351573741965, 0.7038897342925495, 0.8259394198788437,
    1.1368710061148999, 0.01814992791780978,  1.3132616875182228, 2.298587351573742};
static const double BCE_PW_none[] = {
    0.9481539683602134, 0.3132616875182228,   1.1269280110429727, 2.0794415416798357,
    1.7014132779827524, 0.024293675786870982, 0.7038897342925496, 0.8259394198788437,
    2.2737420122297998, 0.00907496395890489,  1.3132616875182228, 6.871468378934355};
static const double BCE_BIG[] = {100.0, 100.0, 0.0, 0.0};
static const double L1_GRAD_AT_0[] = {
    -0.08333333333333333, 0.0, 0.0, -0.08333333333333333, 0.0, 0.0,
    -0.08333333333333333, 0.0, 0.0, -0.08333333333333333, 0.0, 0.0};

static const int64_t X2S[] = {4, 5}, X3S[] = {2, 4, 3}, AS[] = {3, 4};
static const CtReduction REDS[] = {CT_REDUCTION_MEAN, CT_REDUCTION_SUM,
                                   CT_REDUCTION_NONE};

/* ---------------------------------------------------------------- softmax */

START_TEST(test_softmax_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F64, 3, X3S, X3);
    const int dims[] = {0, 1, -1};
    const double *sm[] = {SM3_0, SM3_1, SM3_m1}, *lsm[] = {LSM3_0, LSM3_1, LSM3_m1};
    for (int i = 0; i < 3; i++) {
        tu_assert_values(tensor_softmax(x, dims[i]), sm[i], 24, 1e-12, 1e-12);
        tu_assert_values(tensor_log_softmax(x, dims[i]), lsm[i], 24, 1e-12, 1e-12);
        Tensor *xf = tensor_cast(x, CT_F32);
        tu_assert_values(tensor_softmax(xf, dims[i]), sm[i], 24, 1e-6, 1e-5);
        tu_assert_values(tensor_log_softmax(xf, dims[i]), lsm[i], 24, 1e-5, 1e-5);
    }
    /* stable for large logits; a transposed input gives the transposed result */
    Tensor *big =
        tu_tensor(CT_F32, 2, (const int64_t[]){1, 3}, (double[]){1000, 1000, -1000});
    tu_assert_values(tensor_softmax(big, 1), ((double[]){0.5, 0.5, 0}), 3, 1e-7, 0);
    tu_assert_values(tensor_log_softmax(big, 1),
                     ((double[]){-M_LN2, -M_LN2, -2000 - M_LN2}), 3, 1e-4, 1e-6);
    Tensor *t = tensor_transpose(x, 0, 2); /* (3, 4, 2) */
    Tensor *st = tensor_transpose(tensor_softmax(t, 2), 0, 2);
    tu_assert_values(st, SM3_0, 24, 1e-12, 1e-12);
    tensor_free(big);
    tensor_free(x);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Tensors with no elements, the dims after `dim` empty too: empty results
 * and gradients of the input's shape, as PyTorch gives. */
START_TEST(test_softmax_empty)
{
    TU_MEM_BEGIN;
    const struct {
        int nd;
        int64_t shape[3];
        int dim;
    } cases[] = {{3, {2, 3, 0}, 1},
                 {2, {0, 4}, 0},
                 {2, {0, 4}, 1},
                 {2, {3, 0}, 0},
                 {2, {3, 0}, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int lg = 0; lg < 2; lg++) {
            Tensor *x = tensor_zeros(cases[k].nd, cases[k].shape, CT_F32, ct_cpu());
            ck_assert_int_eq(tensor_set_requires_grad(x, true), CT_OK);
            CtScope *s = ct_scope_open();
            Tensor *y = lg ? tensor_log_softmax(x, cases[k].dim)
                           : tensor_softmax(x, cases[k].dim);
            ck_assert_msg(y, "case %zu: %s", k, ct_last_error());
            tu_assert_shape_at(__FILE__, __LINE__, y, cases[k].nd, cases[k].shape);
            ck_assert_int_eq(tensor_backward(y, tensor_zeros_like(y)), CT_OK);
            ct_scope_close(s);
            tu_assert_shape_at(__FILE__, __LINE__, tensor_grad(x), cases[k].nd,
                               cases[k].shape);
            tensor_free(x);
        }
    TU_MEM_END;
}
END_TEST

typedef struct SmCtx {
    int dim;
    bool log;
    bool transpose;
} SmCtx;

static Tensor *softmax_fn(Tensor **in, void *vctx)
{
    SmCtx *c = vctx;
    Tensor *x = c->transpose ? tensor_transpose(in[0], 0, 2) : in[0];
    return c->log ? tensor_log_softmax(x, c->dim) : tensor_softmax(x, c->dim);
}

START_TEST(test_softmax_gradcheck)
{
    const int dims[] = {0, 1, -1};
    for (int i = 0; i < 3; i++)
        for (int lg = 0; lg < 2; lg++)
            for (int tr = 0; tr < 2; tr++) {
                Tensor *x = tu_rand64(3, X3S, -3, 3, 7 + (unsigned)i, true);
                SmCtx c = {dims[i], lg, tr};
                char name[64];
                snprintf(name, sizeof name, "%s dim %d transposed %d",
                         lg ? "log_softmax" : "softmax", dims[i], tr);
                tu_gradcheck(name, softmax_fn, &c, 1, &x);
                tensor_free(x);
            }
    /* a larger row (inner == 1) and a wide outer-dim case (inner > 64) */
    Tensor *x = tu_rand64(2, (const int64_t[]){3, 70}, -3, 3, 9, true);
    SmCtx c = {0, false, false};
    tu_gradcheck("softmax wide", softmax_fn, &c, 1, &x);
    c.log = true;
    tu_gradcheck("log_softmax wide", softmax_fn, &c, 1, &x);
    tensor_free(x);
}
END_TEST

/* ---------------------------------------------------------- cross-entropy */

static Tensor *i64(int ndim, const int64_t *shape, const double *v)
{
    return tu_tensor(CT_I64, ndim, shape, v);
}

static const double T2V[] = {3, 1, 4, 1}, T3V[] = {0, 3, 2, 1, 1, 3};

typedef struct CeCase {
    const char *name;
    double ls;
    bool ign;
    int64_t ignore;
    bool weighted;
    const double *expect[3]; /* mean, sum, none */
} CeCase;

static const CeCase ce2[] = {
    {"plain", 0, false, 0, false, {CE_mean, CE_sum, CE_none}},
    {"smoothing", 0.1, false, 0, false, {CE_LS_mean, CE_LS_sum, CE_LS_none}},
    {"ignore", 0, true, 1, false, {CE_IGN_mean, CE_IGN_sum, CE_IGN_none}},
    {"weights", 0, false, 0, true, {CE_W_mean, CE_W_sum, CE_W_none}},
    {"all three", 0.2, true, 1, true, {CE_ALL_mean, CE_ALL_sum, CE_ALL_none}},
};

START_TEST(test_cross_entropy_values)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *t2 = i64(1, (const int64_t[]){4}, T2V);
    for (int dt = 0; dt < 2; dt++) {
        CtDType d = dt ? CT_F32 : CT_F64;
        double tol = dt ? 1e-5 : 1e-12;
        Tensor *x = tu_tensor(d, 2, X2S, X2),
               *w = tu_tensor(d, 1, (const int64_t[]){5}, W);
        for (size_t i = 0; i < sizeof ce2 / sizeof *ce2; i++)
            for (int r = 0; r < 3; r++) {
                CtCrossEntropyArgs a = {REDS[r], ce2[i].ls, ce2[i].ignore, ce2[i].ign,
                                        ce2[i].weighted ? w : NULL};
                Tensor *y = tensor_cross_entropy(x, t2, &a);
                ck_assert_msg(y != NULL, "%s: %s", ce2[i].name, ct_last_error());
                ck_assert_int_eq(tensor_ndim(y), r == 2 ? 1 : 0);
                tu_assert_values(y, ce2[i].expect[r], r == 2 ? 4 : 1, tol, tol);
            }
        /* NULL args: mean with ignore_index -100 */
        tu_assert_values(tensor_cross_entropy(x, t2, NULL), CE_mean, 1, tol, tol);
        tensor_free(x);
        tensor_free(w);
    }
    /* 3-d input (N, C, d) */
    Tensor *x3 = tu_tensor(CT_F64, 3, X3S, X3),
           *t3 = i64(2, (const int64_t[]){2, 3}, T3V);
    Tensor *w3 = tu_tensor(CT_F64, 1, (const int64_t[]){4}, W3);
    const double *e3[] = {CE3_mean, CE3_sum, CE3_none};
    const double *e3a[] = {CE3_ALL_mean, CE3_ALL_sum, CE3_ALL_none};
    for (int r = 0; r < 3; r++) {
        CtCrossEntropyArgs a = {.reduction = REDS[r]};
        Tensor *y = tensor_cross_entropy(x3, t3, &a);
        tu_assert_values(y, e3[r], r == 2 ? 6 : 1, 1e-12, 1e-12);
        if (r == 2) tu_assert_shape(y, 2, 2, 3);
        CtCrossEntropyArgs b = {REDS[r], 0.15, 3, true, w3};
        tu_assert_values(tensor_cross_entropy(x3, t3, &b), e3a[r], r == 2 ? 6 : 1, 1e-12,
                         1e-12);
    }
    /* every target ignored: mean is 0/0 = nan, as in PyTorch */
    Tensor *tall = i64(1, (const int64_t[]){4}, (double[]){-100, -100, -100, -100});
    Tensor *x = tu_tensor(CT_F64, 2, X2S, X2);
    ck_assert(isnan(tensor_item(tensor_cross_entropy(x, tall, NULL))));
    tensor_free(x);
    tensor_free(tall);
    tensor_free(x3);
    tensor_free(t3);
    tensor_free(w3);
    tensor_free(t2);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_nll_values)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F64, 2, X2S, X2),
           *w = tu_tensor(CT_F64, 1, (const int64_t[]){5}, W);
    Tensor *t2 = i64(1, (const int64_t[]){4}, T2V);
    Tensor *lp = tensor_log_softmax(x, 1);
    Tensor *x3 = tu_tensor(CT_F64, 3, X3S, X3),
           *t3 = i64(2, (const int64_t[]){2, 3}, T3V);
    Tensor *w3 = tu_tensor(CT_F64, 1, (const int64_t[]){4}, W3);
    Tensor *lp3 = tensor_log_softmax(x3, 1);
    const double *e[] = {NLL_mean, NLL_sum, NLL_none},
                 *ew[] = {NLL_WI_mean, NLL_WI_sum, NLL_WI_none};
    const double *e3[] = {NLL3_WI_mean, NLL3_WI_sum, NLL3_WI_none};
    for (int r = 0; r < 3; r++) {
        int n = r == 2 ? 4 : 1;
        CtCrossEntropyArgs a = {.reduction = REDS[r],
                                .label_smoothing = 0.3}; /* ignored */
        tu_assert_values(tensor_nll_loss(lp, t2, &a), e[r], n, 1e-12, 1e-12);
        CtCrossEntropyArgs b = {REDS[r], 0, 1, true, w};
        tu_assert_values(tensor_nll_loss(lp, t2, &b), ew[r], n, 1e-12, 1e-12);
        CtCrossEntropyArgs c = {REDS[r], 0, 3, true, w3};
        tu_assert_values(tensor_nll_loss(lp3, t3, &c), e3[r], r == 2 ? 6 : 1, 1e-12,
                         1e-12);
    }
    tensor_free(x);
    tensor_free(w);
    tensor_free(t2);
    tensor_free(x3);
    tensor_free(t3);
    tensor_free(w3);
    ct_scope_close(s);
}
END_TEST

typedef struct CeCtx {
    Tensor *target, *weight;
    CtCrossEntropyArgs args;
    bool nll, transpose;
} CeCtx;

static Tensor *ce_fn(Tensor **in, void *vctx)
{
    CeCtx *c = vctx;
    Tensor *x = in[0];
    if (c->transpose) x = tensor_transpose(x, 0, 1); /* stored as (C, N) */
    if (c->nll) return tensor_nll_loss(tensor_log_softmax(x, 1), c->target, &c->args);
    return tensor_cross_entropy(x, c->target, &c->args);
}

START_TEST(test_cross_entropy_gradcheck)
{
    Tensor *t2 = i64(1, (const int64_t[]){4}, T2V),
           *t3 = i64(2, (const int64_t[]){2, 3}, T3V);
    Tensor *w = tu_tensor(CT_F64, 1, (const int64_t[]){5}, W);
    Tensor *w3 = tu_tensor(CT_F64, 1, (const int64_t[]){4}, W3);
    for (int nll = 0; nll < 2; nll++)
        for (size_t i = 0; i < sizeof ce2 / sizeof *ce2; i++)
            for (int r = 0; r < 3; r++)
                for (int tr = 0; tr < 2; tr++) {
                    CeCtx c = {t2,
                               w,
                               {REDS[r], ce2[i].ls, ce2[i].ignore, ce2[i].ign,
                                ce2[i].weighted ? w : NULL},
                               nll,
                               tr};
                    Tensor *x = tu_rand64(2, tr ? (const int64_t[]){5, 4} : X2S, -2, 2,
                                          3 + (unsigned)i, true);
                    char name[80];
                    snprintf(name, sizeof name, "%s %s red %d transposed %d",
                             nll ? "nll" : "ce", ce2[i].name, r, tr);
                    tu_gradcheck(name, ce_fn, &c, 1, &x);
                    tensor_free(x);
                }
    /* 3-d with everything */
    for (int r = 0; r < 3; r++) {
        CeCtx c = {t3, w3, {REDS[r], 0.15, 3, true, w3}, false, false};
        Tensor *x = tu_rand64(3, X3S, -2, 2, 17, true);
        tu_gradcheck("ce 3-d all", ce_fn, &c, 1, &x);
        c.nll = true;
        tu_gradcheck("nll 3-d weighted, ignore", ce_fn, &c, 1, &x);
        tensor_free(x);
    }
    tensor_free(t2);
    tensor_free(t3);
    tensor_free(w);
    tensor_free(w3);
}
END_TEST

START_TEST(test_cross_entropy_backward_leaks_nothing)
{
    TU_MEM_BEGIN;
    Tensor *x = tu_tensor(CT_F32, 2, X2S, X2), *t = i64(1, (const int64_t[]){4}, T2V);
    tensor_set_requires_grad(x, true);
    /* no scope open: the loss is the caller's */
    Tensor *y = tensor_cross_entropy(x, t, NULL);
    ck_assert_int_eq(tensor_backward(y, NULL), CT_OK);
    tensor_free(y);
    /* grad of the mean: (softmax - onehot) / N; rows sum to 0 */
    double g[20];
    tensor_copy_to_host(tensor_grad(x), g, CT_F64);
    for (int i = 0; i < 4; i++) {
        double rs = 0;
        for (int k = 0; k < 5; k++) rs += g[i * 5 + k];
        ck_assert(fabs(rs) < 1e-6);
    }
    ck_assert(g[3] < 0 && g[6] < 0 && g[14] < 0);
    tensor_free(x);
    tensor_free(t);
    TU_MEM_END;
}
END_TEST

/* x's gradient from backward of loss, with x's gradient zeroed first; the
 * ops the backward ran into *ops. */
static Tensor *ce_grad(Tensor *x, Tensor *loss, uint64_t *ops)
{
    ck_assert_int_eq(tensor_zero_(tensor_grad(x)), CT_OK);
    uint64_t before = ct_op_count();
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    *ops = ct_op_count() - before;
    return tensor_clone(tensor_grad(x));
}

/* A summed or mean cross-entropy has one node, which gives its gradient
 * (over the mean's divisor) straight to the kernel: the bits of summing
 * and dividing the unreduced loss as ops of their own, in two ops (the
 * seed and the kernel; x's zeroed gradient is written in place). */
START_TEST(test_cross_entropy_reduced_backward)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F32, 2, X2S, X2), *t = i64(1, (const int64_t[]){4}, T2V);
    Tensor *w = tu_tensor(CT_F32, 1, (const int64_t[]){5}, W);
    tensor_set_requires_grad(x, true);
    tensor_set_grad(x, tensor_zeros(2, X2S, CT_F32, ct_cpu()));
    /* targets 3, 1, 4, 1; the second ignored */
    const CtCrossEntropyArgs args[] = {
        {.reduction = CT_REDUCTION_MEAN},
        {.reduction = CT_REDUCTION_SUM, .label_smoothing = 0.1},
        {.reduction = CT_REDUCTION_MEAN,
         .weight = w,
         .ignore_index = 1,
         .use_ignore_index = true,
         .label_smoothing = 0.2},
    };
    const double den[] = {4, 1, 1.5 + 0.25};
    for (int i = 0; i < 3; i++) {
        uint64_t ops, ops_none;
        Tensor *got = ce_grad(x, tensor_cross_entropy(x, t, &args[i]), &ops);
        CtCrossEntropyArgs none = args[i];
        none.reduction = CT_REDUCTION_NONE;
        Tensor *l = tensor_sum_all(tensor_cross_entropy(x, t, &none));
        if (args[i].reduction == CT_REDUCTION_MEAN)
            l = tensor_div(l, tensor_full(0, NULL, den[i], CT_F32, ct_cpu()));
        Tensor *want = ce_grad(x, l, &ops_none);
        tu_assert_same_bits("reduced in the node", got, want);
        ck_assert_uint_eq(ops, 2);
        ck_assert_uint_gt(ops_none, ops);
    }
    tensor_free(x);
    tensor_free(t);
    tensor_free(w);
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* Logits (n, c) in [-3, 3), targets in [0, c) with every seventh ignored
 * (-100), and the sum of the weights of the kept targets as the old path
 * summed them: a REDUCE of each position's weight. */
static void reduced_case(int64_t n, int64_t c, CtDType dt, Tensor *w, Tensor **x,
                         Tensor **t, Tensor **den)
{
    CtGenerator g = ct_generator(7, (uint64_t)n);
    *x = tensor_uniform(&g, 2, (const int64_t[]){n, c}, -3, 3, dt, ct_cpu());
    *t = tensor_zeros(1, &n, CT_I64, ct_cpu());
    Tensor *wt = tensor_zeros(1, &n, dt, ct_cpu());
    int64_t *tv = tensor_data(*t);
    void *wv = w ? tensor_data(w) : NULL, *wtv = tensor_data(wt);
    for (int64_t i = 0; i < n; i++) {
        tv[i] = i % 7 == 3 ? -100 : (i * 5 + 3) % c;
        if (tv[i] < 0) continue;
        if (dt == CT_F32)
            ((float *)wtv)[i] = wv ? ((float *)wv)[tv[i]] : 1;
        else
            ((double *)wtv)[i] = wv ? ((double *)wv)[tv[i]] : 1;
    }
    *den = tensor_sum_all(wt);
}

/* A summed or mean cross-entropy/NLL is one op, the kernel's fold: the
 * bits of the unreduced loss summed (and divided by the summed weights) as
 * ops of their own, for short batches and for runs long enough that the
 * sum is cut into chunks (f32 and f64). */
START_TEST(test_cross_entropy_reduced_forward)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t sizes[][2] = {{1, 3}, {5, 4}, {300, 10}, {70001, 3}};
    for (int dt = CT_F32; dt <= CT_F64; dt++)
        for (int k = 0; k < 4; k++) {
            int64_t n = sizes[k][0], c = sizes[k][1];
            CtGenerator gw = ct_generator(3, 0);
            Tensor *w = tensor_uniform(&gw, 1, &c, 0.5, 2, (CtDType)dt, ct_cpu());
            const CtCrossEntropyArgs args[] = {
                {.reduction = CT_REDUCTION_MEAN,
                 .ignore_index = -100,
                 .use_ignore_index = true},
                {.reduction = CT_REDUCTION_SUM,
                 .ignore_index = -100,
                 .use_ignore_index = true,
                 .label_smoothing = 0.1},
                {.reduction = CT_REDUCTION_MEAN,
                 .weight = w,
                 .ignore_index = -100,
                 .use_ignore_index = true,
                 .label_smoothing = 0.2},
            };
            for (int a = 0; a < 3; a++) {
                Tensor *x, *t, *den;
                reduced_case(n, c, (CtDType)dt, a == 2 ? w : NULL, &x, &t, &den);
                for (int nll = 0; nll < 2; nll++) {
                    Tensor *in = nll ? tensor_log_softmax(x, 1) : x;
                    uint64_t before = ct_op_count();
                    Tensor *got = nll ? tensor_nll_loss(in, t, &args[a])
                                      : tensor_cross_entropy(in, t, &args[a]);
                    ck_assert_uint_eq(ct_op_count() - before, 1);
                    CtCrossEntropyArgs none = args[a];
                    none.reduction = CT_REDUCTION_NONE;
                    Tensor *want =
                        tensor_sum_all(nll ? tensor_nll_loss(in, t, &none)
                                           : tensor_cross_entropy(in, t, &none));
                    if (args[a].reduction == CT_REDUCTION_MEAN)
                        want = tensor_div(want, den);
                    char what[64];
                    snprintf(what, sizeof what, "%s n %lld args %d nll %d",
                             ct_dtype_name((CtDType)dt), (long long)n, a, nll);
                    tu_assert_same_bits(what, got, want);
                }
            }
        }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------ elementwise losses */

START_TEST(test_pair_losses_values)
{
    CtScope *s = ct_scope_open();
    Tensor *a = tu_tensor(CT_F64, 2, AS, A), *b = tu_tensor(CT_F64, 2, AS, B);
    Tensor *y = tu_tensor(CT_F64, 2, AS, Y),
           *pw = tu_tensor(CT_F64, 1, (const int64_t[]){4}, PW);
    const double *mse[] = {MSE_mean, MSE_sum, MSE_none},
                 *l1[] = {L1_mean, L1_sum, L1_none};
    const double *bce[] = {BCE_mean, BCE_sum, BCE_none};
    const double *bcep[] = {BCE_PW_mean, BCE_PW_sum, BCE_PW_none};
    for (int r = 0; r < 3; r++) {
        int n = r == 2 ? 12 : 1;
        tu_assert_values(tensor_mse_loss(a, b, REDS[r]), mse[r], n, 1e-12, 1e-12);
        tu_assert_values(tensor_l1_loss(a, b, REDS[r]), l1[r], n, 1e-12, 1e-12);
        tu_assert_values(tensor_bce_with_logits(a, y, NULL, REDS[r]), bce[r], n, 1e-12,
                         1e-12);
        tu_assert_values(tensor_bce_with_logits(a, y, pw, REDS[r]), bcep[r], n, 1e-12,
                         1e-12);
        Tensor *af = tensor_cast(a, CT_F32), *yf = tensor_cast(y, CT_F32);
        tu_assert_values(tensor_bce_with_logits(af, yf, tensor_cast(pw, CT_F32), REDS[r]),
                         bcep[r], n, 1e-5, 1e-5);
    }
    tu_assert_shape(tensor_mse_loss(a, b, CT_REDUCTION_NONE), 2, 3, 4);
    /* large logits stay finite */
    Tensor *big =
        tu_tensor(CT_F32, 2, (const int64_t[]){1, 4}, (double[]){100, -100, 40, -40});
    Tensor *bigy = tu_tensor(CT_F32, 2, (const int64_t[]){1, 4}, (double[]){0, 1, 1, 0});
    tu_assert_values(tensor_bce_with_logits(big, bigy, NULL, CT_REDUCTION_NONE), BCE_BIG,
                     4, 1e-5, 1e-6);
    tensor_free(big);
    tensor_free(bigy);
    tensor_free(a);
    tensor_free(b);
    tensor_free(y);
    tensor_free(pw);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_l1_gradient_at_zero)
{
    Tensor *a = tu_tensor(CT_F64, 2, AS, A);
    double tv[12];
    for (int i = 0; i < 12; i++) tv[i] = i % 3 == 0 ? 7.0 : A[i];
    Tensor *t = tu_tensor(CT_F64, 2, AS, tv);
    tensor_set_requires_grad(a, true);
    CtScope *s = ct_scope_open();
    ck_assert_int_eq(tensor_backward(tensor_l1_loss(a, t, CT_REDUCTION_MEAN), NULL),
                     CT_OK);
    ct_scope_close(s);
    tu_assert_values(tensor_grad(a), L1_GRAD_AT_0, 12, 1e-15, 0);
    tensor_free(a);
    tensor_free(t);
}
END_TEST

typedef struct PairCtx {
    int which; /* 0 mse, 1 l1, 2 bce, 3 bce + pos_weight */
    CtReduction r;
} PairCtx;

static Tensor *pair_fn(Tensor **in, void *vctx)
{
    PairCtx *c = vctx;
    switch (c->which) {
    case 0: return tensor_mse_loss(in[0], in[1], c->r);
    case 1: return tensor_l1_loss(in[0], in[1], c->r);
    case 2: return tensor_bce_with_logits(in[0], in[1], NULL, c->r);
    default: return tensor_bce_with_logits(in[0], in[1], in[2], c->r);
    }
}

START_TEST(test_pair_losses_gradcheck)
{
    static const char *names[] = {"mse", "l1", "bce", "bce pos_weight"};
    for (int k = 0; k < 4; k++)
        for (int r = 0; r < 3; r++) {
            Tensor *in[3] = {tu_rand64(2, AS, -3, 3, 21, true),
                             tu_rand64(2, AS, k >= 2 ? 0 : -3, k >= 2 ? 1 : 3, 22, true),
                             tu_rand64(1, (const int64_t[]){4}, 0.5, 2, 23, true)};
            PairCtx c = {k, REDS[r]};
            char name[64];
            snprintf(name, sizeof name, "%s reduction %d", names[k], r);
            tu_gradcheck(name, pair_fn, &c, k == 3 ? 3 : 2, in);
            for (int i = 0; i < 3; i++) tensor_free(in[i]);
        }
}
END_TEST

/* -------------------------------------------------------------- bad input */

START_TEST(test_bad_input)
{
    CtScope *s = ct_scope_open();
    Tensor *x = tu_tensor(CT_F32, 2, X2S, X2);
    Tensor *t = i64(1, (const int64_t[]){4}, T2V);
    Tensor *tf = tu_tensor(CT_F32, 1, (const int64_t[]){4}, T2V);
    ck_assert_ptr_null(tensor_cross_entropy(x, tf, NULL));
    tu_assert_error(
        CT_ERR_SHAPE,
        "cross_entropy: a floating-point target holds class probabilities and "
        "must have the input's shape and dtype (f32[4, 5] cpu), got f32[4] "
        "cpu; class indices must be i64");
    Tensor *t3 = i64(1, (const int64_t[]){3}, T2V);
    ck_assert_ptr_null(tensor_cross_entropy(x, t3, NULL));
    tu_assert_error(CT_ERR_SHAPE,
                    "cross_entropy: target i64[3] cpu does not fit input f32[4, 5] cpu");
    Tensor *t41 = i64(2, (const int64_t[]){4, 1}, T2V);
    ck_assert_ptr_null(tensor_nll_loss(x, t41, NULL));
    tu_assert_error(CT_ERR_SHAPE, "nll_loss: target i64[4, 1] cpu does not fit");
    tensor_free(t41);
    Tensor *bad = i64(1, (const int64_t[]){4}, (double[]){0, 1, 7, 2});
    ck_assert_ptr_null(tensor_cross_entropy(x, bad, NULL));
    tu_assert_error(CT_ERR_INVALID,
                    "cross_entropy: target 7 at index [2] is out of range for 5 classes");
    Tensor *neg = i64(1, (const int64_t[]){4}, (double[]){0, -100, 1, -1});
    ck_assert_ptr_null(tensor_nll_loss(x, neg, NULL)); /* -100 ignored, -1 is not */
    tu_assert_error(CT_ERR_INVALID, "nll_loss: target -1 at index [3] is out of range");
    CtCrossEntropyArgs noign = {.reduction = CT_REDUCTION_SUM};
    ck_assert_ptr_null(tensor_cross_entropy(x, neg, &noign));
    tu_assert_error(CT_ERR_INVALID, "target -100 at index [1]");
    Tensor *x3 = tu_tensor(CT_F64, 3, X3S, X3);
    Tensor *b3 = i64(2, (const int64_t[]){2, 3}, (double[]){0, 1, 2, 3, 4, 0});
    ck_assert_ptr_null(tensor_cross_entropy(x3, b3, NULL));
    tu_assert_error(CT_ERR_INVALID,
                    "target 4 at index [1, 1] is out of range for 4 classes");
    Tensor *w4 = tu_tensor(CT_F32, 1, (const int64_t[]){4}, W);
    CtCrossEntropyArgs aw = {.weight = w4};
    ck_assert_ptr_null(tensor_cross_entropy(x, t, &aw));
    tu_assert_error(CT_ERR_SHAPE,
                    "cross_entropy: weight f32[4] cpu must be a (5) tensor");
    CtCrossEntropyArgs als = {.label_smoothing = 1.5};
    ck_assert_ptr_null(tensor_cross_entropy(x, t, &als));
    tu_assert_error(CT_ERR_INVALID, "label_smoothing 1.5 is not in [0, 1]");
    CtCrossEntropyArgs ared = {.reduction = (CtReduction)7};
    ck_assert_ptr_null(tensor_cross_entropy(x, t, &ared));
    tu_assert_error(CT_ERR_INVALID, "cross_entropy: unknown reduction 7");
    ck_assert_ptr_null(tensor_cross_entropy(tensor_select(x, 0, 0), t, NULL));
    tu_assert_error(CT_ERR_SHAPE, "cross_entropy: expected a 2-d to 8-d tensor");
    /* softmax dims, pair losses */
    ck_assert_ptr_null(tensor_softmax(x, 2));
    tu_assert_error(CT_ERR_SHAPE, "softmax: dim 2 out of range for a 2-d tensor");
    ck_assert_ptr_null(tensor_log_softmax(x, -3));
    tu_assert_error(CT_ERR_SHAPE, "log_softmax: dim -3 out of range");
    ck_assert_ptr_null(tensor_mse_loss(x, tf, CT_REDUCTION_MEAN));
    tu_assert_error(CT_ERR_SHAPE,
                    "mse_loss: shapes differ: f32[4, 5] cpu and f32[4] cpu");
    ck_assert_ptr_null(tensor_l1_loss(x, tensor_cast(x, CT_F64), CT_REDUCTION_MEAN));
    tu_assert_error(CT_ERR_DTYPE, "l1_loss: dtypes differ");
    ck_assert_ptr_null(tensor_bce_with_logits(x, x, tf, CT_REDUCTION_MEAN));
    tu_assert_error(CT_ERR_SHAPE,
                    "bce_with_logits: pos_weight f32[4] cpu does not broadcast");
    ck_assert_ptr_null(tensor_softmax(t, 0));
    tu_assert_error(CT_ERR_DTYPE,
                    "softmax: expected a floating-point tensor, got i64[4] cpu");
    /* NULL in: NULL out, first error kept */
    ct_error(CT_ERR_INVALID, "first");
    ck_assert_ptr_null(tensor_cross_entropy(NULL, t, NULL));
    ck_assert_ptr_null(tensor_cross_entropy(x, NULL, NULL));
    ck_assert_ptr_null(tensor_nll_loss(NULL, t, NULL));
    ck_assert_ptr_null(tensor_softmax(NULL, 0));
    ck_assert_ptr_null(tensor_log_softmax(NULL, 0));
    ck_assert_ptr_null(tensor_mse_loss(NULL, x, CT_REDUCTION_MEAN));
    ck_assert_ptr_null(tensor_l1_loss(x, NULL, CT_REDUCTION_MEAN));
    ck_assert_ptr_null(tensor_bce_with_logits(NULL, x, NULL, CT_REDUCTION_MEAN));
    tu_assert_error(CT_ERR_INVALID, "first");
    tensor_free(x);
    tensor_free(t);
    tensor_free(tf);
    tensor_free(t3);
    tensor_free(bad);
    tensor_free(neg);
    tensor_free(x3);
    tensor_free(b3);
    tensor_free(w4);
    ct_scope_close(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tensor_loss");
    TCase *tc = tcase_create("softmax_loss");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_softmax_values);
    tcase_add_test(tc, test_softmax_empty);
    tcase_add_test(tc, test_softmax_gradcheck);
    tcase_add_test(tc, test_cross_entropy_values);
    tcase_add_test(tc, test_nll_values);
    tcase_add_test(tc, test_cross_entropy_gradcheck);
    tcase_add_test(tc, test_cross_entropy_backward_leaks_nothing);
    tcase_add_test(tc, test_cross_entropy_reduced_backward);
    tcase_add_test(tc, test_cross_entropy_reduced_forward);
    tcase_add_test(tc, test_pair_losses_values);
    tcase_add_test(tc, test_l1_gradient_at_zero);
    tcase_add_test(tc, test_pair_losses_gradcheck);
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
