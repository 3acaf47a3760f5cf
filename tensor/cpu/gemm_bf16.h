/* Private to tensor/cpu: the GEMM behind bf16 autocast.
 *
 * C (m, n) = alpha * op(A) @ op(B) + beta * C, row-major, where the f32
 * operands are rounded to bf16 (to nearest even) and the products are
 * accumulated in f32; C stays f32. beta == 0 never reads C.
 *
 * Three engines with the same numerics up to the order of the f32
 * additions: the AMX one (TDPBF16PS, gemm_bf16_amx.c), used when the CPU
 * has AMX-BF16 and the kernel grants the process the AMX state; the
 * avx512_bf16 one (VDPBF16PS, gemm_bf16_avx512.c), used when the CPU has it
 * (CTRAINER_CPU_ISA=avx512 picks it over AMX); and a portable one that
 * rounds the operands into f32 scratch and runs sgemm
 * (CTRAINER_CPU_ISA=baseline or avx2 forces it). Tests compare them. */
#ifndef CTRAINER_TENSOR_CPU_GEMM_BF16_H
#define CTRAINER_TENSOR_CPU_GEMM_BF16_H

#include <cblas.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct CtGemmBf16 {
    bool trans_a, trans_b; /* op(A) = Aᵀ: A is stored (k, m); likewise B */
    int m, n, k;
    float alpha, beta;
    const float *a;
    int lda;
    const float *b;
    int ldb;
    float *c;
    int ldc;
} CtGemmBf16;

/* The operands of a row-major cblas_sgemm call. */
static inline CtGemmBf16 ct_gemm_from_cblas(enum CBLAS_TRANSPOSE ta,
                                            enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                                            float alpha, const float *a, int lda,
                                            const float *b, int ldb, float beta, float *c,
                                            int ldc)
{
    return (CtGemmBf16){.trans_a = ta == CblasTrans,
                        .trans_b = tb == CblasTrans,
                        .m = m,
                        .n = n,
                        .k = k,
                        .alpha = alpha,
                        .beta = beta,
                        .a = a,
                        .lda = lda,
                        .b = b,
                        .ldb = ldb,
                        .c = c,
                        .ldc = ldc};
}

/* Runs g on up to nt threads of the engine pool (workers.h; 1: inline).
 * The work is split by the shape alone, so C is bitwise the same for any
 * nt. Cannot fail: the packed operands live in per-thread scratch that grows as
 * needed, and when it cannot grow the product is computed unpacked (slowly,
 * same numerics). */
void ct_cpu_gemm_bf16(const CtGemmBf16 *g, int nt);

/* cblas_sgemm's signature (row-major only), single-threaded: for kernels
 * written against it (the conv template). */
void ct_cblas_sgemm_bf16(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta,
                         enum CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc);

typedef enum CtBf16Engine { CT_BF16_PORTABLE, CT_BF16_AVX512, CT_BF16_AMX } CtBf16Engine;

/* The engine ct_cpu_gemm_bf16 runs here and now: the CPU's best, or as
 * CTRAINER_CPU_ISA says ("baseline" or "avx2": portable; "avx512": no
 * AMX). */
CtBf16Engine ct_cpu_bf16_engine(void);

/* Whether every block of C comes out with the same bits as the whole
 * product: true for the native engines and for the portable one on the f32
 * engine; false where OpenBLAS runs it (CTRAINER_CPU_ISA=baseline). */
bool ct_cpu_gemm_bf16_splits(void);

/* Per-thread scratch of at least n bytes (64-byte aligned), or NULL. Kept
 * for the thread's life; grows, never shrinks. */
void *ct_cpu_gemm_scratch(size_t n);

/* The unpacked product (the path of last resort). */
void ct_cpu_gemm_bf16_naive(const CtGemmBf16 *g);

/* The native engines; only called when ct_cpu_bf16_engine() picks them. */
void ct_cpu_gemm_bf16_avx512(const CtGemmBf16 *g, int nt);
void ct_cpu_gemm_bf16_amx(const CtGemmBf16 *g, int nt);

#endif
