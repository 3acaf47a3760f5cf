/* bf16-autocast GEMM: engine choice, per-thread scratch and the portable
 * engine (see gemm_bf16.h for the contract). */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm_bf16.h"
#include "isa.h"
#include "sgemm.h"

CtBf16Engine ct_cpu_bf16_engine(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!ct_cpu_avx512_native() || !__builtin_cpu_supports("avx512bf16"))
        return CT_BF16_PORTABLE;
    const char *isa = getenv("CTRAINER_CPU_ISA");
    if (isa && strcmp(isa, "avx512") == 0) return CT_BF16_AVX512;
    return ct_cpu_amx_bf16() ? CT_BF16_AMX : CT_BF16_AVX512;
#else
    return CT_BF16_PORTABLE;
#endif
}

bool ct_cpu_gemm_bf16_splits(void)
{
    return ct_cpu_bf16_engine() != CT_BF16_PORTABLE ||
           ct_cpu_sgemm_isa() != CT_SGEMM_NONE;
}

typedef struct Scratch {
    void *data;
    size_t size;
} Scratch;

/* s grown to at least n bytes (64-byte aligned), or NULL. */
static void *scratch_grow(Scratch *s, size_t n)
{
    if (n <= s->size) return s->data;
    size_t size = (n + 63) / 64 * 64;
    void *p = aligned_alloc(64, size);
    if (!p) return NULL;
    free(s->data);
    s->data = p;
    s->size = size;
    return p;
}

/* The engines' packing scratch, and the portable engine's rounded operands
 * (apart: the f32 engine it calls packs into the first). */
static _Thread_local Scratch packing, operands;

void *ct_cpu_gemm_scratch(size_t n)
{
    return scratch_grow(&packing, n);
}

static inline float round_bf16(float x)
{
    return ct_bf16_widen(ct_bf16_round(x));
}

/* Element (i, l) of op(A) and (l, j) of op(B). */
static inline float at_a(const CtGemmBf16 *g, int64_t i, int64_t l)
{
    return g->trans_a ? g->a[l * g->lda + i] : g->a[i * g->lda + l];
}

static inline float at_b(const CtGemmBf16 *g, int64_t l, int64_t j)
{
    return g->trans_b ? g->b[j * g->ldb + l] : g->b[l * g->ldb + j];
}

static inline void store_c(const CtGemmBf16 *g, int64_t i, int64_t j, float acc)
{
    float *c = g->c + i * g->ldc + j;
    *c = g->alpha * acc + (g->beta == 0 ? 0.0f : g->beta * *c);
}

void ct_cpu_gemm_bf16_naive(const CtGemmBf16 *g)
{
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
            float acc = 0;
            for (int64_t l = 0; l < g->k; l++)
                acc += round_bf16(at_a(g, i, l)) * round_bf16(at_b(g, l, j));
            store_c(g, i, j, acc);
        }
}

/* dst (rows, cols) packed <- src rounded to bf16 values, row stride ld. */
static void round_copy(float *dst, const float *src, int rows, int cols, int ld)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[r * cols + c] = round_bf16(src[r * ld + c]);
}

/* The portable engine: operands rounded into scratch, then sgemm on the f32
 * engine (sgemm.h) where the CPU has one, whatever the shape, since its
 * bits do not depend on the block of C a thread computes; OpenBLAS
 * elsewhere. Products of two bf16 values are exact in f32, so only the
 * summation order differs from the native engine. */
static void gemm_rounded(const CtGemmBf16 *g)
{
    int ar = g->trans_a ? g->k : g->m, ac = g->trans_a ? g->m : g->k;
    int br = g->trans_b ? g->n : g->k, bc = g->trans_b ? g->k : g->n;
    size_t na = (size_t)ar * (size_t)ac, nb = (size_t)br * (size_t)bc;
    float *fa = scratch_grow(&operands, (na + nb) * sizeof *fa);
    if (!fa) {
        ct_cpu_gemm_bf16_naive(g);
        return;
    }
    float *fb = fa + na;
    round_copy(fa, g->a, ar, ac, g->lda);
    round_copy(fb, g->b, br, bc, g->ldb);
    ct_cpu_sgemm_cblas(ct_cpu_sgemm_isa(), g->trans_a ? CblasTrans : CblasNoTrans,
                       g->trans_b ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, g->alpha,
                       fa, ac > 0 ? ac : 1, fb, bc > 0 ? bc : 1, g->beta, g->c, g->ldc);
}

void ct_cpu_gemm_bf16(const CtGemmBf16 *g, int nt)
{
    if (g->m == 0 || g->n == 0) return;
    if (g->k == 0) {
        ct_cpu_gemm_bf16_naive(g); /* C = beta * C */
        return;
    }
    switch (ct_cpu_bf16_engine()) {
    case CT_BF16_AMX: ct_cpu_gemm_bf16_amx(g, nt); break;
    case CT_BF16_AVX512: ct_cpu_gemm_bf16_avx512(g, nt); break;
    case CT_BF16_PORTABLE: gemm_rounded(g); break;
    }
}

void ct_cblas_sgemm_bf16(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta,
                         enum CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc)
{
    (void)order; /* row-major: the only order the library uses */
    CtGemmBf16 g =
        ct_gemm_from_cblas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    ct_cpu_gemm_bf16(&g, 1);
}
