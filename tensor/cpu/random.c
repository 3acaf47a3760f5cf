/* CT_OP_RNG: Philox draws, the same numbers for any thread count. */
#include <math.h>

#include "cpu.h"

static inline double u32_to_unit(uint32_t x)
{
    return (double)x * 0x1p-32;
}

/* Block b of the stream: counter (offset + b, stream), key = seed. */
static inline void block(const CtRngParams *p, int64_t b, uint32_t out[4])
{
    uint64_t c = p->offset + (uint64_t)b;
    uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), (uint32_t)p->stream,
                       (uint32_t)(p->stream >> 32)};
    uint32_t key[2] = {(uint32_t)p->seed, (uint32_t)(p->seed >> 32)};
    ct_philox4x32_10(ctr, key, out);
}

/* Value of draw j (0..per-1) of a block, as double. */
static inline double value(const CtRngParams *p, CtDType dt, const uint32_t *r, int j)
{
    switch (p->kind) {
    case CT_RNG_UNIFORM:
        if (dt == CT_F64) {
            uint64_t bits = ((uint64_t)(r[2 * j] >> 5) << 26) | (r[2 * j + 1] >> 6);
            return p->a + (p->b - p->a) * ((double)bits * 0x1p-53);
        }
        return p->a + (p->b - p->a) * ((double)(r[j] >> 8) * 0x1p-24);
    case CT_RNG_NORMAL: { /* Box-Muller on lanes (2j, 2j+1) */
        double u1 = ((double)r[2 * j] + 1.0) * 0x1p-32; /* (0, 1] */
        double u2 = u32_to_unit(r[2 * j + 1]);
        return p->a + p->b * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    }
    case CT_RNG_BERNOULLI: return (double)(r[j] >> 8) * 0x1p-24 < p->a ? p->b : 0.0;
    }
    return 0;
}

#define STORE_LOOP(T, CONV)                                                              \
    do {                                                                                 \
        T *o = (T *)ct_ptr(out);                                                         \
        _Pragma("omp parallel for if (n >= CT_CPU_PAR_MIN)") for (int64_t b = 0;         \
                                                                  b < nblocks; b++)      \
        {                                                                                \
            uint32_t r[4];                                                               \
            block(p, b, r);                                                              \
            for (int j = 0; j < per && b * per + j < n; j++)                             \
                o[b * per + j] = CONV(value(p, dt, r, j));                               \
        }                                                                                \
    } while (0)

#define TO_F32(v)  ((float)(v))
#define TO_F64(v)  (v)
#define TO_BF16(v) ct_f32_to_bf16((float)(v))
#define TO_F16(v)  ct_f32_to_f16((float)(v))
#define TO_I64(v)  ((int64_t)(v))
#define TO_I32(v)  ((int32_t)(v))
#define TO_U8(v)   ((uint8_t)(v))

static CtStatus cpu_rng(const CtOpCall *c)
{
    const CtRngParams *p = c->params;
    Tensor *out = c->out[0];
    CtDType dt = out->dtype;
    int64_t n = tensor_numel(out);
    int per = (p->kind == CT_RNG_NORMAL || dt == CT_F64) ? 2 : 4;
    int64_t nblocks = (n + per - 1) / per;
    switch (dt) {
    case CT_F32: STORE_LOOP(float, TO_F32); break;
    case CT_F64: STORE_LOOP(double, TO_F64); break;
    case CT_BF16: STORE_LOOP(uint16_t, TO_BF16); break;
    case CT_F16: STORE_LOOP(uint16_t, TO_F16); break;
    case CT_I64: STORE_LOOP(int64_t, TO_I64); break;
    case CT_I32: STORE_LOOP(int32_t, TO_I32); break;
    case CT_U8:
    case CT_BOOL: STORE_LOOP(uint8_t, TO_U8); break;
    default: break;
    }
    return CT_OK;
}

static bool cpu_rng_supports(const CtOpCall *c)
{
    return tensor_is_contiguous(c->out[0]);
}

void ct_cpu_register_random(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_RNG] = cpu_rng;
    s[CT_OP_RNG] = cpu_rng_supports;
}
