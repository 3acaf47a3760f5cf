/* CT_OP_RNG: Philox draws, the same numbers for any thread count. */
#include <math.h>

#include "../philox.h"
#include "cpu.h"

#define STORE_LOOP(T, CONV)                                                              \
    do {                                                                                 \
        T *o = (T *)ct_ptr(out);                                                         \
        CT_CPU_FOR(n >= CT_CPU_PAR_MIN, b, nblocks, uint32_t r[4];                       \
                   ct_rng_block(p->seed, p->stream, p->offset, b, r);                    \
                   for (int j = 0; j < per && b * per + j < n; j++) o[b * per + j] =     \
                       CONV(ct_rng_value(p->kind, dt == CT_F64, p->a, p->b, r, j));)     \
    } while (0)

#define TO_F32(v)  ((float)(v))
#define TO_F64(v)  (v)
#define TO_BF16(v) ct_bf16_round((float)(v))
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
