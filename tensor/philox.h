/* Philox-4x32-10 (Salmon et al., SC'11), shared by the CPU and CUDA backends
 * so both draw the same numbers. Private to tensor/. */
#ifndef CTRAINER_TENSOR_PHILOX_H
#define CTRAINER_TENSOR_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define CT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CT_HOST_DEVICE static inline
#endif

CT_HOST_DEVICE void ct_philox_block(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                    uint32_t k0, uint32_t k1, uint32_t out[4])
{
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u; /* Weyl key schedule */
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Block b of a CtRngParams stream: counter (offset + b, stream), key seed. */
CT_HOST_DEVICE void ct_rng_block(uint64_t seed, uint64_t stream, uint64_t offset,
                                 int64_t b, uint32_t out[4])
{
    uint64_t c = offset + (uint64_t)b;
    ct_philox_block((uint32_t)c, (uint32_t)(c >> 32), (uint32_t)stream,
                    (uint32_t)(stream >> 32), (uint32_t)seed, (uint32_t)(seed >> 32),
                    out);
}

/* x * y rounded on its own: nvcc would otherwise fuse `a + (b - a) * u`
 * into one FMA on the device, while the CPU build (ISO C, no contraction)
 * rounds twice, and uniform draws would differ in the last bit. */
#ifdef __CUDA_ARCH__
#define CT_MUL_RN(x, y) __dmul_rn((x), (y))
#else
#define CT_MUL_RN(x, y) ((x) * (y))
#endif

/* Draw j of a block as double, per CtRngParams (kind 0 uniform, 1 normal,
 * 2 bernoulli; wide = f64 uniform). */
CT_HOST_DEVICE double ct_rng_value(int kind, int wide, double a, double b,
                                   const uint32_t *r, int j)
{
    if (kind == 0) {
        if (wide) {
            uint64_t bits = ((uint64_t)(r[2 * j] >> 5) << 26) | (r[2 * j + 1] >> 6);
            return a + CT_MUL_RN(b - a, (double)bits * 0x1p-53);
        }
        return a + CT_MUL_RN(b - a, (double)(r[j] >> 8) * 0x1p-24);
    }
    if (kind == 1) { /* Box-Muller on lanes (2j, 2j+1) */
        double u1 = ((double)r[2 * j] + 1.0) * 0x1p-32; /* (0, 1] */
        double u2 = (double)r[2 * j + 1] * 0x1p-32;
        return a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    }
    return (double)(r[j] >> 8) * 0x1p-24 < a ? b : 0.0;
}

#endif
