/* CT_OP_RNG: Philox draws, the same numbers for any thread count. */
#include <math.h>

#include "../philox.h"
#include "cpu.h"

#define TO_F32(v)  ((float)(v))
#define TO_F64(v)  (v)
#define TO_BF16(v) ct_bf16_round((float)(v))
#define TO_F16(v)  ct_f32_to_f16((float)(v))
#define TO_I64(v)  ((int64_t)(v))
#define TO_I32(v)  ((int32_t)(v))
#define TO_U8(v)   ((uint8_t)(v))

/* Philox blocks per pool item: 4096 blocks are 8k-16k values. */
#define RNG_ITEM_BLOCKS 4096

/* One draw: per values from each Philox block, n values in all. Block b
 * gives the same values wherever it runs, so the bits do not depend on the
 * thread count. */
typedef struct RngJob {
    const CtRngParams *p;
    void *o;
    int64_t n, nblocks;
    int per;
    bool f64;
} RngJob;

#define RNG_ITEM(NAME, T, CONV)                                                          \
    static void NAME(void *ctx, int64_t item, int slot)                                  \
    {                                                                                    \
        (void)slot;                                                                      \
        const RngJob *j = ctx;                                                           \
        const CtRngParams *p = j->p;                                                     \
        T *o = j->o;                                                                     \
        int64_t b0 = item * RNG_ITEM_BLOCKS, b1 = b0 + RNG_ITEM_BLOCKS;                  \
        for (int64_t b = b0; b < b1 && b < j->nblocks; b++) {                            \
            uint32_t r[4];                                                               \
            ct_rng_block(p->seed, p->stream, p->offset, b, r);                           \
            for (int k = 0; k < j->per && b * j->per + k < j->n; k++)                    \
                o[b * j->per + k] =                                                      \
                    CONV(ct_rng_value(p->kind, j->f64, p->a, p->b, r, k));               \
        }                                                                                \
    }
RNG_ITEM(rng_f32, float, TO_F32)
RNG_ITEM(rng_f64, double, TO_F64)
RNG_ITEM(rng_bf16, uint16_t, TO_BF16)
RNG_ITEM(rng_f16, uint16_t, TO_F16)
RNG_ITEM(rng_i64, int64_t, TO_I64)
RNG_ITEM(rng_i32, int32_t, TO_I32)
RNG_ITEM(rng_u8, uint8_t, TO_U8)

static CtStatus cpu_rng(const CtOpCall *c)
{
    Tensor *out = c->out[0];
    CtDType dt = out->dtype;
    RngJob j = {
        .p = c->params, .o = ct_ptr(out), .n = tensor_numel(out), .f64 = dt == CT_F64};
    j.per = (j.p->kind == CT_RNG_NORMAL || dt == CT_F64) ? 2 : 4;
    j.nblocks = (j.n + j.per - 1) / j.per;
    void (*fn)(void *, int64_t, int) = NULL;
    switch (dt) {
    case CT_F32: fn = rng_f32; break;
    case CT_F64: fn = rng_f64; break;
    case CT_BF16: fn = rng_bf16; break;
    case CT_F16: fn = rng_f16; break;
    case CT_I64: fn = rng_i64; break;
    case CT_I32: fn = rng_i32; break;
    case CT_U8:
    case CT_BOOL: fn = rng_u8; break;
    default: break;
    }
    if (fn)
        ct_cpu_items((j.nblocks + RNG_ITEM_BLOCKS - 1) / RNG_ITEM_BLOCKS, j.n, fn, &j);
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
