/* The f32 GEMM engine: kernel choice by CPUID and CTRAINER_CPU_ISA, the
 * shape classes it runs (sgemm.h). */
#include <stdlib.h>
#include <string.h>

#include "sgemm.h"

static CtSgemmIsa cpu_isa(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return CT_SGEMM_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return CT_SGEMM_AVX2;
#endif
    return CT_SGEMM_NONE;
}

CtSgemmIsa ct_cpu_sgemm_isa(void)
{
    CtSgemmIsa best = cpu_isa();
    const char *env = getenv("CTRAINER_CPU_ISA");
    if (!env) return best;
    if (strcmp(env, "baseline") == 0) return CT_SGEMM_NONE;
    if (strcmp(env, "avx2") == 0 && best > CT_SGEMM_AVX2) return CT_SGEMM_AVX2;
    return best;
}

/* OpenBLAS keeps the thin shapes: a narrow C (n below two AVX2 panels)
 * wastes most of the engine's 16- or 32-wide tiles, and a few rows or a
 * short k do not pay for its per-tile epilogue and packing. How short
 * depends on the CPU, not on CTRAINER_CPU_ISA (which only picks our
 * kernel): on AVX-512 CPUs OpenBLAS 0.3.21 has unpacked small-matrix
 * kernels that win k < 64 inside a training step, the weight gradients at
 * batch 32, although the engine wins them alone (bench_engines: 128x784x32
 * Aᵀ 88 vs 86 GFLOP/s; in the step, MLP epoch CPU time +10%). On AVX2-only
 * CPUs (Zen 3) it has none, and its general kernel, after a pass that
 * scales C by beta, loses to the engine down to k = 16 (MLP step CPU time
 * -11%); docs/benchmarks.md. */
bool ct_cpu_sgemm_picks(int64_t m, int64_t n, int64_t k)
{
    const int64_t min_k = cpu_isa() == CT_SGEMM_AVX512 ? 64 : 16;
    return m >= 16 && n >= 32 && k >= min_k && ct_cpu_sgemm_isa() != CT_SGEMM_NONE;
}

bool ct_cpu_sgemm_run(const CtSgemm *g, CtSgemmIsa isa)
{
    return isa == CT_SGEMM_AVX512 ? ct_cpu_sgemm_avx512(g) : ct_cpu_sgemm_avx2(g);
}

void ct_cpu_sgemm_cblas(CtSgemmIsa isa, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
    CtSgemm g = ct_gemm_from_cblas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (isa != CT_SGEMM_NONE && m > 0 && n > 0 && k > 0 && ct_cpu_sgemm_run(&g, isa))
        return;
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void ct_cpu_sgemm_block(int64_t n_all, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
    CtSgemmIsa isa = ct_cpu_sgemm_picks(m, n_all, k) ? ct_cpu_sgemm_isa() : CT_SGEMM_NONE;
    ct_cpu_sgemm_cblas(isa, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
