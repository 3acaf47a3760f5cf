/* Private to tensor/cpu: the AVX-512 max-pool kernel (pool_avx512.c). */
#ifndef CTRAINER_TENSOR_CPU_POOL_AVX512_H
#define CTRAINER_TENSOR_CPU_POOL_AVX512_H

#include <stdint.h>

/* 2x2, stride-2, unpadded max pooling of one f32 plane x (rows of w
 * elements; 2 * oh <= rows, 2 * ow <= w) into y (oh x ow) and, when idx is
 * not NULL, the flat input index of each maximum. The rules of the scalar
 * kernel: NaN wins (the first NaN of the window), ties go to the first
 * element in row-major window order. Only called when
 * ct_cpu_avx512_native() (isa.h). */
void ct_cpu_max_pool_2x2_f32_avx512(const float *x, int64_t w, int64_t oh, int64_t ow,
                                    float *y, int64_t *idx);

#endif
