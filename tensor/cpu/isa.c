/* CPU feature detection for the vector kernels (isa.h). */
#include "isa.h"

#include <stdlib.h>
#include <string.h>

bool ct_cpu_avx512_native(void)
{
    const char *isa = getenv("CTRAINER_CPU_ISA");
    if (isa && strcmp(isa, "baseline") == 0) return false;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
}
