/* Private to tensor/cuda: integer division by a divisor that is fixed for a
 * launch, as a multiply-high, an add and a shift. A 64-bit division is a
 * ~70-instruction subroutine on NVIDIA GPUs, and a kernel that splits every
 * linear index into coordinates pays several per element; with all
 * dividends and the divisor below 2^31 this form gives the same quotient.
 * The multiplier is m = floor(2^32 (2^s - d) / d) + 1 with s = ceil(log2 d),
 * so n / d = (umulhi(n, m) + n) >> s (Granlund and Montgomery's round-up
 * method). C++ only (hd.h). */
#ifndef CTRAINER_TENSOR_CUDA_FASTDIV_H
#define CTRAINER_TENSOR_CUDA_FASTDIV_H

#include <stdint.h>

#include "hd.h"

typedef struct CtFastDiv {
    int64_t d;           /* the divisor, >= 1 */
    uint32_t mul, shift; /* valid when d < 2^31 */
} CtFastDiv;

/* The divisor d (1 <= d); the multiply-shift fields only for d < 2^31. */
static inline CtFastDiv ct_fastdiv_make(int64_t d)
{
    CtFastDiv f = {d, 0, 0};
    if (d < 1 || d >= ((int64_t)1 << 31)) return f;
    uint32_t s = 0;
    while (((int64_t)1 << s) < d) s++;
    f.shift = s;
    f.mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - (uint64_t)d)) /
                           (uint64_t)d +
                       1);
    return f;
}

/* n / f.d for 0 <= n < 2^31 and f.d < 2^31. */
CT_HD uint32_t ct_fastdiv_u31(uint32_t n, const CtFastDiv &f)
{
#ifdef __CUDA_ARCH__
    uint32_t hi = __umulhi(n, f.mul);
#else
    uint32_t hi = (uint32_t)(((uint64_t)n * f.mul) >> 32);
#endif
    return (hi + n) >> f.shift;
}

/* n / f.d for n >= 0: the multiply-shift form when `fast` (the caller has
 * checked that every dividend and f.d are below 2^31), else a division. */
CT_HD int64_t ct_fastdiv(int64_t n, const CtFastDiv &f, bool fast)
{
    return fast ? (int64_t)ct_fastdiv_u31((uint32_t)n, f) : n / f.d;
}

#endif
