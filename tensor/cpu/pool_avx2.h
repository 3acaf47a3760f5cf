/* Private to tensor/cpu: the AVX2 max-pool kernel (pool_avx2.c). */
#ifndef CTRAINER_TENSOR_CPU_POOL_AVX2_H
#define CTRAINER_TENSOR_CPU_POOL_AVX2_H

#include <stdint.h>

/* ct_cpu_max_pool_2x2_f32_avx512's contract (pool_avx512.h) on AVX2: the
 * same outputs and indices, bit for bit. Only called when
 * ct_cpu_avx2_native() (isa.h). */
void ct_cpu_max_pool_2x2_f32_avx2(const float *x, int64_t w, int64_t oh, int64_t ow,
                                  float *y, int64_t *idx);

#endif
