/* Private to tensor/cpu: the f32 GEMM engine for the small shapes of
 * training steps (a linear layer at batch 32-64, a conv's im2col GEMMs).
 *
 * C (m, n) = alpha * op(A) @ op(B) + beta * C, row-major; op(X) = Xᵀ when
 * the trans flag is set (A then stored (k, m), B stored (n, k)). beta == 0
 * never reads C. Single-threaded: callers split C into blocks (matmul.c).
 *
 * Two micro-kernels from one template (sgemm_tmpl.h): AVX-512 (8 x 32, 16
 * zmm accumulators) and AVX2/FMA (6 x 16, 12 ymm accumulators), chosen at
 * run time by CPUID. Both compute every element of C the same way: its
 * products summed in k order with fused multiply-adds, restarting at each
 * block of k (SGEMM_KC), each block's sum then scaled by alpha and added
 * to C. So the two ISA paths, any split of C into blocks and any
 * thread count give bitwise identical results; OpenBLAS sums in another
 * order (rounding differs from it in the last bits).
 *
 * CTRAINER_CPU_ISA (read on every call): "avx2" forces the AVX2 kernel,
 * "baseline" turns the engine off (OpenBLAS for every shape). */
#ifndef CTRAINER_TENSOR_CPU_SGEMM_H
#define CTRAINER_TENSOR_CPU_SGEMM_H

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>

#include "gemm_bf16.h"

/* Blocking: k in near-equal blocks of at most SGEMM_KC (the one blocking
 * that shapes the results), columns in blocks of SGEMM_NC, rows in blocks
 * of SGEMM_MC (a packed A block of SGEMM_MC x SGEMM_KC floats stays in L2). */
#define SGEMM_KC 256
#define SGEMM_NC 512
#define SGEMM_MC 144
/* A is packed (and the tiles visited column panel by column panel) when
 * m >= SGEMM_PACK_A_MIN_M and n >= SGEMM_PACK_A_MIN_N; smaller products
 * read it in place (docs/benchmarks.md, "f32 engine: packed A"). */
#define SGEMM_PACK_A_MIN_M 256
#define SGEMM_PACK_A_MIN_N 512
/* A row-major B is read in place (not packed) when m is at most
 * SGEMM_B_IN_PLACE_MAX_M and its rows are less than SGEMM_B_IN_PLACE_MAX_LD
 * floats apart: a k block's rows 4 KiB or more apart fall in a few L1
 * sets and evict each other. */
#define SGEMM_B_IN_PLACE_MAX_M  128
#define SGEMM_B_IN_PLACE_MAX_LD 1024

/* The GEMM's operands: the same block as the bf16-autocast GEMM's. */
typedef CtGemmBf16 CtSgemm;

typedef enum CtSgemmIsa { CT_SGEMM_NONE, CT_SGEMM_AVX2, CT_SGEMM_AVX512 } CtSgemmIsa;

/* The kernel the engine runs here: the best the CPU has, lowered by
 * CTRAINER_CPU_ISA; CT_SGEMM_NONE when there is none (not x86-64-v3). */
CtSgemmIsa ct_cpu_sgemm_isa(void);

/* Whether the engine, rather than OpenBLAS, runs a GEMM of this whole shape
 * (decided by measurement, docs/benchmarks.md "f32 GEMM engine"). Depends
 * on the shape and the ISA only, never on threads or on a block of C. */
bool ct_cpu_sgemm_picks(int64_t m, int64_t n, int64_t k);

/* Runs g with kernel isa (not CT_SGEMM_NONE, and supported by the CPU).
 * Returns false, having done nothing, when its packing scratch cannot be
 * allocated. */
bool ct_cpu_sgemm_run(const CtSgemm *g, CtSgemmIsa isa);

/* Row-major cblas_sgemm with kernel isa, or OpenBLAS when isa is
 * CT_SGEMM_NONE or the engine's scratch cannot be allocated. */
void ct_cpu_sgemm_cblas(CtSgemmIsa isa, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc);

/* Row-major cblas_sgemm of n of the n_all columns of a product (a block a
 * team of threads took, for the conv template): the engine when it picks
 * the whole shape (m, n_all, k), else OpenBLAS. Choosing on the whole
 * shape keeps C's bits independent of how its columns were split. */
void ct_cpu_sgemm_block(int64_t n_all, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc);

/* The two kernels; only called when the CPU has their ISA. */
bool ct_cpu_sgemm_avx512(const CtSgemm *g);
bool ct_cpu_sgemm_avx2(const CtSgemm *g);

#endif
