/* Private to tensor/cpu: the AVX2 max-pool kernel (pool_avx2.c). */
#ifndef CTRAINER_TENSOR_CPU_POOL_AVX2_H
#define CTRAINER_TENSOR_CPU_POOL_AVX2_H

#include <stdint.h>

#include "../conv.h"

/* ct_cpu_max_pool_2x2_f32_avx512's contract (pool_avx512.h) on AVX2: the
 * same outputs and indices, bit for bit. Only called when
 * ct_cpu_avx2_native() (isa.h). */
void ct_cpu_max_pool_2x2_f32_avx2(const float *x, int64_t w, int64_t oh, int64_t ow,
                                  float *y, int64_t *idx);

/* Max pooling of one (H, W) plane into (OH, OW) for any window, padding and
 * row stride with a column stride (p->sw) of 1 or 2: the scalar loop's
 * outputs and indices (NaN wins, ties to the first element in row-major
 * order), bit for bit. The plane must have fewer than 2^31 elements. Only
 * called when ct_cpu_avx2_native() (isa.h). */
void ct_cpu_max_pool_f32_avx2(const CtPool2dParams *p, const float *x, float *y,
                              int64_t *idx);

#endif
