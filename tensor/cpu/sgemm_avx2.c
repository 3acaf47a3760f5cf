/* The f32 GEMM engine's AVX2/FMA kernel (sgemm.h): 6 x 16 tiles in ymm
 * registers, for x86-64-v3 CPUs without AVX-512. Compiled with -mavx2
 * -mfma; called only on CPUs with both (ct_cpu_sgemm_isa). */
#include "sgemm.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define VEC           __m256
#define MR            6
#define VL            8
#define VLOAD(p)      _mm256_loadu_ps(p)
#define VSTORE(p, v)  _mm256_storeu_ps(p, v)
#define VSET1(x)      _mm256_set1_ps(x)
#define VZERO()       _mm256_setzero_ps()
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VMUL(a, b)    _mm256_mul_ps(a, b)
#define VADD(a, b)    _mm256_add_ps(a, b)
#define SGEMM_FN      ct_cpu_sgemm_avx2
#include "sgemm_tmpl.h"
#else
bool ct_cpu_sgemm_avx2(const CtSgemm *g)
{
    (void)g;
    return false;
}
#endif
