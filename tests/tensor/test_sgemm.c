/* The f32 GEMM engine (tensor/cpu/sgemm.h): every transpose combination and
 * odd sizes against a double-precision reference, alpha/beta and leading
 * dimensions, both ISA kernels bitwise equal, tensor_matmul bitwise equal on
 * 1 and 2 threads, packed and in-place A bitwise equal, the CTRAINER_CPU_ISA
 * switch. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/sgemm.h"
#include "testutil.h"

static const int SIZES[] = {1, 7, 17, 33, 129};
#define NSIZES ((int)(sizeof SIZES / sizeof *SIZES))
/* Rows of C: every edge panel of the 6-row AVX2 kernel (1..5 rows) and
 * several of the 8-row AVX-512 one, each inlined for its row count. */
static const int M_SIZES[] = {1, 7, 8, 17, 28, 33, 129};
#define NM_SIZES ((int)(sizeof M_SIZES / sizeof *M_SIZES))

static float *rnd_buf(size_t n, unsigned seed)
{
    float *v = malloc(n * sizeof *v + 4);
    unsigned x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)((x >> 8) / 16777216.0 * 2 - 1);
    }
    return v;
}

/* The GEMM g with leading dimensions pad wider than needed; operands and C
 * freshly filled. */
static CtSgemm make(bool ta, bool tb, int m, int n, int k, int pad, float alpha,
                    float beta, unsigned seed)
{
    CtSgemm g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k};
    g.alpha = alpha;
    g.beta = beta;
    g.lda = (ta ? m : k) + pad;
    g.ldb = (tb ? k : n) + pad;
    g.ldc = n + pad;
    g.a = rnd_buf((size_t)(ta ? k : m) * (size_t)g.lda, seed);
    g.b = rnd_buf((size_t)(tb ? n : k) * (size_t)g.ldb, seed + 1);
    g.c = rnd_buf((size_t)m * (size_t)g.ldc, seed + 2);
    return g;
}

static void release(CtSgemm *g)
{
    free((void *)g->a);
    free((void *)g->b);
    free(g->c);
}

/* alpha * op(A) op(B) + beta * C0 in double, element (i, j). */
static double ref(const CtSgemm *g, const float *c0, int i, int j)
{
    double s = 0;
    for (int p = 0; p < g->k; p++) {
        double a = g->trans_a ? g->a[p * g->lda + i] : g->a[i * g->lda + p];
        double b = g->trans_b ? g->b[j * g->ldb + p] : g->b[p * g->ldb + j];
        s += a * b;
    }
    return g->alpha * s + (g->beta == 0 ? 0 : g->beta * (double)c0[i * g->ldc + j]);
}

/* A copy of C's whole rows (padding included); *n: its floats. */
static float *copy_of_c(const CtSgemm *g, size_t *n)
{
    *n = (size_t)g->m * (size_t)g->ldc;
    float *c = malloc(*n * sizeof *c);
    memcpy(c, g->c, *n * sizeof *c);
    return c;
}

/* Runs g with isa and checks every element of C (and that C's padding is
 * untouched). */
static void check_run(CtSgemm *g, CtSgemmIsa isa)
{
    size_t nc;
    float *c0 = copy_of_c(g, &nc);
    if (g->beta == 0) /* never read */
        for (int i = 0; i < g->m; i++) g->c[i * g->ldc] = NAN;
    ck_assert(ct_cpu_sgemm_run(g, isa));
    for (int i = 0; i < g->m; i++) {
        for (int j = 0; j < g->n; j++) {
            double r = ref(g, c0, i, j), got = g->c[i * g->ldc + j];
            ck_assert_msg(fabs(got - r) <= 1e-5 * g->k + 1e-5 * fabs(r),
                          "isa %d ta %d tb %d %dx%dx%d (%d,%d): %g vs %g", (int)isa,
                          g->trans_a, g->trans_b, g->m, g->n, g->k, i, j, got, r);
        }
        for (int j = g->n; j < g->ldc; j++)
            ck_assert_float_eq(g->c[i * g->ldc + j], c0[i * g->ldc + j]);
    }
    free(c0);
}

/* f32 tensor of values in [-1, 1), owned by the open scope. */
static Tensor *rand_f32(int64_t rows, int64_t cols, unsigned seed)
{
    Tensor *r = tu_rand64(2, (const int64_t[]){rows, cols}, -1, 1, seed, false);
    Tensor *t = tensor_cast(r, CT_F32);
    tensor_free(r);
    return t;
}

static bool has_isa(CtSgemmIsa isa)
{
    unsetenv("CTRAINER_CPU_ISA");
    return ct_cpu_sgemm_isa() >= isa;
}

START_TEST(test_sgemm_values)
{
    for (CtSgemmIsa isa = CT_SGEMM_AVX2; isa <= CT_SGEMM_AVX512; isa++) {
        if (!has_isa(isa)) continue;
        unsigned seed = 1;
        for (int t = 0; t < 4; t++)
            for (int im = 0; im < NM_SIZES; im++)
                for (int in = 0; in < NSIZES; in++)
                    for (int ik = 0; ik < NSIZES; ik++) {
                        CtSgemm g = make(t & 1, t & 2, M_SIZES[im], SIZES[in], SIZES[ik],
                                         (int)(seed % 3), 1, 0, seed);
                        check_run(&g, isa);
                        release(&g);
                        seed += 3;
                    }
    }
}
END_TEST

/* k over one block of SGEMM_KC, n over SGEMM_NC, m over many row panels; alpha and
 * beta other than 0 and 1 */
START_TEST(test_sgemm_blocks_alpha_beta)
{
    const struct {
        int m, n, k;
        float alpha, beta;
    } cases[] = {
        {101, 40, SGEMM_KC * 2 + 3, 1, 1},
        {13, SGEMM_NC + 37, 300, 0.5f, -2},
        {32, 128, 784, 2, 0.25f},
        {3, 5, 9216, 1, 0},
    };
    for (CtSgemmIsa isa = CT_SGEMM_AVX2; isa <= CT_SGEMM_AVX512; isa++) {
        if (!has_isa(isa)) continue;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            for (int t = 0; t < 4; t++) {
                CtSgemm g = make(t & 1, t & 2, cases[i].m, cases[i].n, cases[i].k, 1,
                                 cases[i].alpha, cases[i].beta, (unsigned)(100 + i));
                check_run(&g, isa);
                release(&g);
            }
    }
}
END_TEST

/* Products large enough for packed A (sgemm.h, SGEMM_PACK_A_MIN_*): several
 * row blocks with an edge panel, two column blocks, two k blocks, every
 * transpose. Then the same product in blocks of rows and of columns small
 * enough to read A in place gives the same bits, as splitting C between
 * threads does. */
START_TEST(test_sgemm_packed_a)
{
    const int m = 2 * SGEMM_MC + 5, n = SGEMM_NC + 19, k = SGEMM_KC + 37;
    ck_assert_int_ge(m, SGEMM_PACK_A_MIN_M);
    ck_assert_int_ge(n, SGEMM_PACK_A_MIN_N);
    for (CtSgemmIsa isa = CT_SGEMM_AVX2; isa <= CT_SGEMM_AVX512; isa++) {
        if (!has_isa(isa)) continue;
        for (int t = 0; t < 4; t++) {
            CtSgemm g = make(t & 1, t & 2, m, n, k, 3, 0.75f, 0.5f, 300 + (unsigned)t);
            size_t nc;
            float *c0 = copy_of_c(&g, &nc);
            check_run(&g, isa);
            float *whole = g.c;
            g.c = c0;
            const int rows = SGEMM_PACK_A_MIN_M / 2, cols = SGEMM_PACK_A_MIN_N / 2;
            for (int i0 = 0; i0 < m; i0 += rows)
                for (int j0 = 0; j0 < n; j0 += cols) {
                    CtSgemm b = g;
                    b.m = m - i0 < rows ? m - i0 : rows;
                    b.n = n - j0 < cols ? n - j0 : cols;
                    b.a = g.trans_a ? g.a + i0 : g.a + (size_t)i0 * (size_t)g.lda;
                    b.b = g.trans_b ? g.b + (size_t)j0 * (size_t)g.ldb : g.b + j0;
                    b.c = g.c + (size_t)i0 * (size_t)g.ldc + j0;
                    ck_assert(ct_cpu_sgemm_run(&b, isa));
                }
            ck_assert_int_eq(memcmp(whole, c0, nc * sizeof *c0), 0);
            g.c = whole;
            free(c0);
            release(&g);
        }
    }
}
END_TEST

/* the AVX2 and AVX-512 kernels give the same bits */
START_TEST(test_sgemm_isa_bitwise)
{
    if (!has_isa(CT_SGEMM_AVX512)) return;
    for (int t = 0; t < 4; t++) {
        CtSgemm g = make(t & 1, t & 2, 37, 71, SGEMM_KC + 29, 2, 1.5f, 0.5f, 7);
        size_t nc;
        float *c2 = copy_of_c(&g, &nc);
        ck_assert(ct_cpu_sgemm_run(&g, CT_SGEMM_AVX512));
        float *c512 = g.c;
        g.c = c2;
        ck_assert(ct_cpu_sgemm_run(&g, CT_SGEMM_AVX2));
        ck_assert_int_eq(memcmp(c512, c2, nc * sizeof *c2), 0);
        g.c = c512;
        free(c2);
        release(&g);
    }
}
END_TEST

/* tensor_matmul on the engine: bitwise the same on 1 and 2 threads and on
 * either ISA, for shapes the pool splits into blocks */
START_TEST(test_sgemm_threads_bitwise)
{
    if (!has_isa(CT_SGEMM_AVX2)) return;
    CtScope *s = ct_scope_open();
    const int64_t shapes[][3] = {
        {32, 784, 128}, {784, 96, 128}, {131, 97, 83}, {64, 9216, 128}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        Tensor *a = rand_f32(shapes[i][0], shapes[i][1], 40 + (unsigned)i);
        Tensor *b = rand_f32(shapes[i][1], shapes[i][2], 50);
        int64_t n = shapes[i][0] * shapes[i][2];
        float *out[3];
        for (int r = 0; r < 3; r++) {
            omp_set_num_threads(r == 1 ? 2 : 1);
            if (r == 2) setenv("CTRAINER_CPU_ISA", "avx2", 1);
            Tensor *c = tensor_matmul(a, b);
            ck_assert_ptr_nonnull(c);
            out[r] = malloc((size_t)n * sizeof(float));
            ck_assert_int_eq(tensor_copy_to_host(c, out[r], CT_F32), CT_OK);
            unsetenv("CTRAINER_CPU_ISA");
        }
        ck_assert_int_eq(memcmp(out[0], out[1], (size_t)n * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(out[0], out[2], (size_t)n * sizeof(float)), 0);
        for (int r = 0; r < 3; r++) free(out[r]);
    }
    omp_set_num_threads(2);
    ct_scope_close(s);
}
END_TEST

START_TEST(test_sgemm_isa_switch)
{
    CtSgemmIsa best = (unsetenv("CTRAINER_CPU_ISA"), ct_cpu_sgemm_isa());
    setenv("CTRAINER_CPU_ISA", "baseline", 1);
    ck_assert_int_eq(ct_cpu_sgemm_isa(), CT_SGEMM_NONE);
    setenv("CTRAINER_CPU_ISA", "avx2", 1);
    ck_assert_int_eq(ct_cpu_sgemm_isa(), best < CT_SGEMM_AVX2 ? best : CT_SGEMM_AVX2);
    setenv("CTRAINER_CPU_ISA", "no-such-isa", 1); /* unknown: the CPU's best */
    ck_assert_int_eq(ct_cpu_sgemm_isa(), best);
    /* baseline: OpenBLAS through the cblas entry point, same values */
    setenv("CTRAINER_CPU_ISA", "baseline", 1);
    CtSgemm g = make(true, false, 17, 33, 7, 0, 1, 0, 9);
    float *c0 = malloc((size_t)(17 * 33) * sizeof *c0);
    memcpy(c0, g.c, (size_t)(17 * 33) * sizeof *c0);
    ct_cpu_sgemm_block(33, CblasTrans, CblasNoTrans, 17, 33, 7, 1, g.a, g.lda, g.b, g.ldb,
                       0, g.c, g.ldc);
    for (int i = 0; i < 17; i++)
        for (int j = 0; j < 33; j++)
            ck_assert_double_eq_tol(g.c[i * 33 + j], ref(&g, c0, i, j), 1e-5);
    unsetenv("CTRAINER_CPU_ISA");
    free(c0);
    release(&g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sgemm");
    TCase *tc = tcase_create("sgemm");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sgemm_values);
    tcase_add_test(tc, test_sgemm_blocks_alpha_beta);
    tcase_add_test(tc, test_sgemm_packed_a);
    tcase_add_test(tc, test_sgemm_isa_bitwise);
    tcase_add_test(tc, test_sgemm_threads_bitwise);
    tcase_add_test(tc, test_sgemm_isa_switch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
