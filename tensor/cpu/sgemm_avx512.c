/* The f32 GEMM engine's AVX-512 kernel (sgemm.h): 6 x 32 tiles in zmm
 * registers. Compiled with -mavx512f -mfma; called only on CPUs with
 * AVX-512F (ct_cpu_sgemm_isa). */
#include "sgemm.h"

#ifdef __AVX512F__
#include <immintrin.h>

#define VEC           __m512
#define MR            8
#define VL            16
#define VLOAD(p)      _mm512_loadu_ps(p)
#define VSTORE(p, v)  _mm512_storeu_ps(p, v)
#define VSET1(x)      _mm512_set1_ps(x)
#define VZERO()       _mm512_setzero_ps()
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VMUL(a, b)    _mm512_mul_ps(a, b)
#define VADD(a, b)    _mm512_add_ps(a, b)
#define SGEMM_FN      ct_cpu_sgemm_avx512
#include "sgemm_tmpl.h"
#else
bool ct_cpu_sgemm_avx512(const CtSgemm *g)
{
    (void)g;
    return false;
}
#endif
