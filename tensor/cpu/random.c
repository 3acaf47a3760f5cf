/* CT_OP_RNG: Philox draws, the same numbers for any thread count; with an
 * input (dropout), the Bernoulli draw multiplies it instead of being
 * stored. */
#include <math.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

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
    const void *x; /* dropout: o = x * draw; NULL: o = draw */
    int64_t n, nblocks;
    int per;
    bool f64;
} RngJob;

/* Blocks [b0, b1) of a draw, one at a time. */
#define RNG_BLOCKS(NAME, T, CONV)                                                        \
    static void NAME##_blocks(const RngJob *j, int64_t b0, int64_t b1)                   \
    {                                                                                    \
        const CtRngParams *p = j->p;                                                     \
        T *o = j->o;                                                                     \
        for (int64_t b = b0; b < b1; b++) {                                              \
            uint32_t r[4];                                                               \
            ct_rng_block(p->seed, p->stream, p->offset, b, r);                           \
            for (int k = 0; k < j->per && b * j->per + k < j->n; k++)                    \
                o[b * j->per + k] =                                                      \
                    CONV(ct_rng_value(p->kind, j->f64, p->a, p->b, r, k));               \
        }                                                                                \
    }

/* Pool item: RNG_ITEM_BLOCKS blocks. */
#define RNG_ITEM(NAME, T, CONV)                                                          \
    RNG_BLOCKS(NAME, T, CONV)                                                            \
    static void NAME(void *ctx, int64_t item, int slot)                                  \
    {                                                                                    \
        (void)slot;                                                                      \
        const RngJob *j = ctx;                                                           \
        int64_t b0 = item * RNG_ITEM_BLOCKS, b1 = b0 + RNG_ITEM_BLOCKS;                  \
        NAME##_blocks(j, b0, b1 < j->nblocks ? b1 : j->nblocks);                         \
    }
RNG_ITEM(rng_f32, float, TO_F32)
RNG_ITEM(rng_f64, double, TO_F64)
RNG_ITEM(rng_bf16, uint16_t, TO_BF16)
RNG_ITEM(rng_f16, uint16_t, TO_F16)
RNG_ITEM(rng_i64, int64_t, TO_I64)
RNG_ITEM(rng_i32, int32_t, TO_I32)
RNG_ITEM(rng_u8, uint8_t, TO_U8)

/* Blocks [b0, b1) of a Bernoulli draw applied to x: o = x * m with m the
 * draw as a tensor of T holds it, multiplied as the BINARY kernel's MUL
 * does (bf16 and f16 widened to f32, the product rounded once). */
#define DROP_BLOCKS(NAME, T, CONV, LOAD, STORE)                                          \
    static void NAME##_blocks(const RngJob *j, int64_t b0, int64_t b1)                   \
    {                                                                                    \
        const CtRngParams *p = j->p;                                                     \
        const T *x = j->x;                                                               \
        T *o = j->o;                                                                     \
        for (int64_t b = b0; b < b1; b++) {                                              \
            uint32_t r[4];                                                               \
            ct_rng_block(p->seed, p->stream, p->offset, b, r);                           \
            for (int k = 0; k < j->per && b * j->per + k < j->n; k++) {                  \
                const int64_t i = b * j->per + k;                                        \
                const T m = CONV(ct_rng_value(p->kind, j->f64, p->a, p->b, r, k));       \
                o[i] = STORE(LOAD(x[i]) * LOAD(m));                                      \
            }                                                                            \
        }                                                                                \
    }

#define SAME(v) (v)
DROP_BLOCKS(drop_f32, float, TO_F32, SAME, SAME)
DROP_BLOCKS(drop_f64, double, TO_F64, SAME, SAME)
DROP_BLOCKS(drop_bf16, uint16_t, TO_BF16, ct_bf16_widen, ct_bf16_round)
DROP_BLOCKS(drop_f16, uint16_t, TO_F16, ct_f16_to_f32, ct_f32_to_f16)
#undef SAME

/* Pool items of the dropouts other than f32's (which bernoulli_f32 runs). */
#define DROP_ITEM(NAME)                                                                  \
    static void NAME(void *ctx, int64_t item, int slot)                                  \
    {                                                                                    \
        (void)slot;                                                                      \
        const RngJob *j = ctx;                                                           \
        int64_t b0 = item * RNG_ITEM_BLOCKS, b1 = b0 + RNG_ITEM_BLOCKS;                  \
        NAME##_blocks(j, b0, b1 < j->nblocks ? b1 : j->nblocks);                         \
    }
DROP_ITEM(drop_f64)
DROP_ITEM(drop_bf16)
DROP_ITEM(drop_f16)

#ifdef __AVX2__
/* The high and low halves of the eight 32 x 32-bit products a[i] * m. */
static inline void mul_hilo(__m256i a, __m256i m, __m256i *hi, __m256i *lo)
{
    __m256i even = _mm256_mul_epu32(a, m),
            odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xaa);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xaa);
}

/* Blocks b .. b + 7 of a Bernoulli f32 draw into o[0, 32): ct_rng_block in
 * eight lanes, then ct_rng_value's comparison as x < bound. */
static void bernoulli8(const CtRngParams *p, int64_t b, __m256i bound, __m256 hit,
                       float *o)
{
    uint32_t lo[8], hi[8];
    for (int i = 0; i < 8; i++) {
        uint64_t c = p->offset + (uint64_t)(b + i);
        lo[i] = (uint32_t)c;
        hi[i] = (uint32_t)(c >> 32);
    }
    __m256i c0 = _mm256_loadu_si256((const __m256i *)lo),
            c1 = _mm256_loadu_si256((const __m256i *)hi);
    __m256i c2 = _mm256_set1_epi32((int)(uint32_t)p->stream),
            c3 = _mm256_set1_epi32((int)(uint32_t)(p->stream >> 32));
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u),
                  m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    uint32_t k0 = (uint32_t)p->seed, k1 = (uint32_t)(p->seed >> 32);
    for (int r = 0; r < 10; r++) {
        __m256i hi0, lo0, hi1, lo1;
        mul_hilo(c0, m0, &hi0, &lo0);
        mul_hilo(c2, m1, &hi1, &lo1);
        c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c1 = lo1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    /* v[w] lane i: value w of block b + i */
    const __m256i w[4] = {c0, c1, c2, c3};
    __m256 v[4];
    for (int k = 0; k < 4; k++) {
        __m256i in = _mm256_cmpgt_epi32(bound, _mm256_srli_epi32(w[k], 8));
        v[k] = _mm256_and_ps(hit, _mm256_castsi256_ps(in));
    }
    /* to block order: o[4i + k] = v[k] lane i */
    __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u1, 0x20));
    _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
    _mm256_storeu_ps(o + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
    _mm256_storeu_ps(o + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
}

/* ct_rng_value's Bernoulli test x * 2^-24 < a, as x < bound in integers
 * (x < 2^24; scaling by 2^24 is exact). */
static uint32_t bernoulli_bound(double a)
{
    double t = a * 0x1p24;
    if (!(t > 0)) return 0;
    return t >= 0x1p24 ? 1u << 24 : (uint32_t)ceil(t);
}
#endif

/* Pool item of a Bernoulli f32 draw (dropout's masks), or of an f32
 * dropout (j->x): eight blocks at a time in vector registers where the
 * build has AVX2, the same bits as rng_f32 and drop_f32 (ct_rng_block and
 * ct_rng_value one block at a time: five times slower). */
static void bernoulli_f32(void *ctx, int64_t item, int slot)
{
    (void)slot;
    const RngJob *j = ctx;
    int64_t b = item * RNG_ITEM_BLOCKS, b1 = b + RNG_ITEM_BLOCKS;
    b1 = b1 < j->nblocks ? b1 : j->nblocks;
#ifdef __AVX2__
    const __m256i bound = _mm256_set1_epi32((int)bernoulli_bound(j->p->a));
    const __m256 hit = _mm256_set1_ps((float)j->p->b);
    for (; b + 8 <= b1 && (b + 8) * 4 <= j->n; b += 8) {
        float *o = (float *)j->o + 4 * b;
        if (!j->x) {
            bernoulli8(j->p, b, bound, hit, o);
            continue;
        }
        float m[32];
        const float *x = (const float *)j->x + 4 * b;
        bernoulli8(j->p, b, bound, hit, m);
        for (int k = 0; k < 32; k++) o[k] = x[k] * m[k];
    }
#endif
    if (j->x)
        drop_f32_blocks(j, b, b1);
    else
        rng_f32_blocks(j, b, b1);
}

static CtStatus cpu_rng(const CtOpCall *c)
{
    Tensor *out = c->out[0];
    CtDType dt = out->dtype;
    RngJob j = {.p = c->params,
                .o = ct_ptr(out),
                .x = c->in[0] ? ct_ptr(c->in[0]) : NULL,
                .n = tensor_numel(out),
                .f64 = dt == CT_F64};
    j.per = (j.p->kind == CT_RNG_NORMAL || dt == CT_F64) ? 2 : 4;
    j.nblocks = (j.n + j.per - 1) / j.per;
    void (*fn)(void *, int64_t, int) = NULL;
    switch (dt) {
    case CT_F32: fn = j.p->kind == CT_RNG_BERNOULLI ? bernoulli_f32 : rng_f32; break;
    case CT_F64: fn = j.x ? drop_f64 : rng_f64; break;
    case CT_BF16: fn = j.x ? drop_bf16 : rng_bf16; break;
    case CT_F16: fn = j.x ? drop_f16 : rng_f16; break;
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

/* A contiguous output; an input only to a Bernoulli draw of a float dtype,
 * contiguous, of the output's dtype and size. */
static bool cpu_rng_supports(const CtOpCall *c)
{
    const CtRngParams *p = c->params;
    const Tensor *x = c->in[0], *out = c->out[0];
    if (x && (p->kind != CT_RNG_BERNOULLI || !ct_dtype_is_float(out->dtype) ||
              x->dtype != out->dtype || !tensor_is_contiguous(x) ||
              tensor_numel(x) != tensor_numel(out)))
        return false;
    return tensor_is_contiguous(out);
}

void ct_cpu_register_random(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_RNG] = cpu_rng;
    s[CT_OP_RNG] = cpu_rng_supports;
}
