/* Pooling kernels (POOL2D, POOL2D_BWD), f32 and f64, parallel over the
 * N*C planes: windows overlap inside a plane, never across planes, so the
 * backward scatter needs no atomics. The common 2x2 stride-2 max pool of
 * f32 has AVX-512 and AVX2 kernels (pool_avx512.c, pool_avx2.c), and the
 * other f32 max windows an AVX2 one, with the same results. */
#include <math.h>

#include "../conv.h"
#include "cpu.h"
#include "isa.h"
#include "pool_avx2.h"
#include "pool_avx512.h"

void ct_cpu_register_pool(CtKernelFn *k, CtSupportsFn *s);

typedef void (*Max2x2F32)(const float *x, int64_t w, int64_t oh, int64_t ow, float *y,
                          int64_t *idx);

/* The f32 2x2 max kernel for this CPU and CTRAINER_CPU_ISA (isa.h):
 * AVX-512, else AVX2, else NULL (the scalar loop). */
static Max2x2F32 max_2x2_f32(void)
{
    if (ct_cpu_avx512_native()) return ct_cpu_max_pool_2x2_f32_avx512;
    return ct_cpu_avx2_native() ? ct_cpu_max_pool_2x2_f32_avx2 : NULL;
}

typedef void (*MaxAnyF32)(const CtPool2dParams *p, const float *x, float *y,
                          int64_t *idx);

/* The f32 kernel for the other max windows of p: AVX2 where its column
 * stride is 1 or 2 and its planes index in 32 bits, else NULL. */
static MaxAnyF32 max_any_f32(const CtPool2dParams *p)
{
    const bool fits =
        p->h * p->w + 2 * p->w < INT32_MAX && p->w + p->kw + p->pw < INT32_MAX / 4;
    if ((p->sw != 1 && p->sw != 2) || !fits) return NULL;
    return ct_cpu_avx2_native() ? ct_cpu_max_pool_f32_avx2 : NULL;
}

#define T                float
#define SFX              f32
#define MAX_2X2_KERNEL() max_2x2_f32()
#define MAX_ANY_KERNEL   max_any_f32
#include "pool_tmpl.h"

#define T                 double
#define SFX               f64
#define MAX_2X2_KERNEL()  NULL /* none for f64 */
#define MAX_ANY_KERNEL(p) NULL
#include "pool_tmpl.h"

static CtStatus cpu_pool(const CtOpCall *c)
{
    if (c->in[0]->dtype == CT_F32)
        pool_f32(c);
    else
        pool_f64(c);
    return CT_OK;
}

static CtStatus cpu_pool_bwd(const CtOpCall *c)
{
    const CtPool2dParams *p = c->params;
    if (p->kind == CT_POOL_MAX && !c->in[1])
        return ct_error(CT_ERR_STATE, "pool2d_backward: max pooling needs the argmax");
    if (c->out[0]->dtype == CT_F32)
        pool_bwd_f32(c);
    else
        pool_bwd_f64(c);
    return CT_OK;
}

/* f32 and f64, NCHW (the kernels' layout; not channels last). */
static bool float_only(const CtOpCall *c)
{
    if (((const CtPool2dParams *)c->params)->nhwc) return false;
    return c->out[0]->dtype == CT_F32 || c->out[0]->dtype == CT_F64;
}

void ct_cpu_register_pool(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_POOL2D] = cpu_pool;
    k[CT_OP_POOL2D_BWD] = cpu_pool_bwd;
    s[CT_OP_POOL2D] = s[CT_OP_POOL2D_BWD] = float_only;
}
