/* CPU feature detection for the vector kernels (isa.h). */
#include "isa.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <stdint.h>
#endif
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

bool ct_cpu_avx512_native(void)
{
    const char *isa = getenv("CTRAINER_CPU_ISA");
    if (isa && (strcmp(isa, "baseline") == 0 || strcmp(isa, "avx2") == 0)) return false;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
}

bool ct_cpu_avx2_native(void)
{
    const char *isa = getenv("CTRAINER_CPU_ISA");
    if (isa && strcmp(isa, "baseline") == 0) return false;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

/* CPUID says AMX-TILE and AMX-BF16, XCR0 has the tile state enabled, and
 * the kernel grants it (arch_prctl). */
static bool amx_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return false; /* AMX-BF16, AMX-TILE */
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false; /* OSXSAVE */
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const uint32_t tiles = (1u << 17) | (1u << 18); /* XTILECFG, XTILEDATA */
    if ((lo & tiles) != tiles) return false;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

bool ct_cpu_amx_bf16(void)
{
    static int known; /* 0: not asked yet, 1: yes, -1: no */
    int k = __atomic_load_n(&known, __ATOMIC_ACQUIRE);
    if (!k) {
        k = amx_probe() ? 1 : -1;
        __atomic_store_n(&known, k, __ATOMIC_RELEASE);
    }
    return k > 0;
}
#else
bool ct_cpu_amx_bf16(void)
{
    return false;
}
#endif
