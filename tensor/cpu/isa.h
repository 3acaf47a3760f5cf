/* Private to tensor/cpu: which vector extensions the kernels may use. */
#ifndef CTRAINER_TENSOR_CPU_ISA_H
#define CTRAINER_TENSOR_CPU_ISA_H

#include <stdbool.h>

/* Whether the CPU has AVX-512 F/BW/VL/DQ and CTRAINER_CPU_ISA says neither
 * "baseline" (which forces the portable kernels, for tests) nor "avx2"
 * (which caps the kernels at AVX2). Checked at each call (once per op). */
bool ct_cpu_avx512_native(void);

/* Whether the CPU has AVX2 and FMA and CTRAINER_CPU_ISA does not say
 * "baseline". Checked at each call (once per op). */
bool ct_cpu_avx2_native(void);

/* Whether the CPU has AMX-TILE and AMX-BF16 and the kernel grants this
 * process the AMX register state (asked for once, on the first call; Linux
 * 5.16 and later). Ignores CTRAINER_CPU_ISA. */
bool ct_cpu_amx_bf16(void);

#endif
