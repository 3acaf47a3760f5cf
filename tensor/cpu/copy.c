/* FILL and COPY: strided copies with conversion between any two dtypes. */
#include <math.h>
#include <string.h>

#include "cpu.h"

/* Loads give each dtype's own C type (bf16 and f16 widened to float) and
 * stores convert from it, so no value passes through a wider type: i64
 * stays exact, and an integer rounds to a float once. The inner loops are
 * specialised per (src, dst) pair so no per-element dispatch happens. */
#define LD_f32(p)  (*(const float *)(p))
#define LD_f64(p)  (*(const double *)(p))
#define LD_bf16(p) ct_bf16_widen(*(const uint16_t *)(p))
#define LD_f16(p)  ct_f16_to_f32(*(const uint16_t *)(p))
#define LD_i64(p)  (*(const int64_t *)(p))
#define LD_i32(p)  (*(const int32_t *)(p))
#define LD_u8(p)   (*(const uint8_t *)(p))
#define LD_b8(p)   ((uint8_t)(*(const uint8_t *)(p) != 0))

/* Integers convert to integers wrapping around (two's complement), as
 * PyTorch's casts do. Floats truncate; NaN and values out of the range give
 * the minimum of i64, or of i32 for i32 and u8 (whose byte is the low one
 * of that i32): what PyTorch gives on x86, defined here. */
static inline int64_t f_to_i64(double v)
{
    return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}
static inline int32_t f_to_i32(double v)
{
    return v > -0x1p31 - 1 && v < 0x1p31 ? (int32_t)v : INT32_MIN;
}
#define IS_FLOAT(v) _Generic((v), float : 1, double : 1, default : 0)
#define TO_I64(v)   (IS_FLOAT(v) ? f_to_i64((double)(v)) : (int64_t)(v))
#define TO_I32(v)   (IS_FLOAT(v) ? f_to_i32((double)(v)) : (int32_t)(uint32_t)TO_I64(v))

#define ST_f32(p, v)  (*(float *)(p) = (float)(v))
#define ST_f64(p, v)  (*(double *)(p) = (double)(v))
#define ST_bf16(p, v) (*(uint16_t *)(p) = ct_bf16_round((float)(v)))
#define ST_f16(p, v)  (*(uint16_t *)(p) = ct_f32_to_f16((float)(v)))
#define ST_i64(p, v)  (*(int64_t *)(p) = TO_I64(v))
#define ST_i32(p, v)  (*(int32_t *)(p) = TO_I32(v))
#define ST_u8(p, v)   (*(uint8_t *)(p) = (uint8_t)TO_I32(v))
#define ST_b8(p, v)   (*(uint8_t *)(p) = (uint8_t)((v) != 0))

#define SZ_f32  4
#define SZ_f64  8
#define SZ_bf16 2
#define SZ_f16  2
#define SZ_i64  8
#define SZ_i32  4
#define SZ_u8   1
#define SZ_b8   1

typedef void (*ConvertFn)(char *o, int64_t so, const char *i, int64_t si,
                          int64_t n); /* byte strides */

/* Contiguous rows (the common cast, e.g. a u8 image batch to f32) take a
 * loop with constant strides, which the compiler vectorises. */
#define CONVERT(S, D)                                                                    \
    static void convert_##S##_##D(char *o, int64_t so, const char *i, int64_t si,        \
                                  int64_t n)                                             \
    {                                                                                    \
        if (so == SZ_##D && si == SZ_##S) {                                              \
            for (int64_t k = 0; k < n; k++)                                              \
                ST_##D(o + k * SZ_##D, LD_##S(i + k * SZ_##S));                          \
            return;                                                                      \
        }                                                                                \
        for (int64_t k = 0; k < n; k++) ST_##D(o + k * so, LD_##S(i + k * si));          \
    }
/* clang-format does not settle on a layout for this list */
// clang-format off
#define CONVERT_TO_ALL(S)                                                   \
    CONVERT(S, f32) CONVERT(S, f64) CONVERT(S, bf16) CONVERT(S, f16)        \
    CONVERT(S, i64) CONVERT(S, i32) CONVERT(S, u8) CONVERT(S, b8)
// clang-format on
CONVERT_TO_ALL(f32)
CONVERT_TO_ALL(f64)
CONVERT_TO_ALL(bf16)
CONVERT_TO_ALL(f16)
CONVERT_TO_ALL(i64)
CONVERT_TO_ALL(i32)
CONVERT_TO_ALL(u8)
CONVERT_TO_ALL(b8)

#define ROW(S)                                                                           \
    {                                                                                    \
        convert_##S##_f32, convert_##S##_f64, convert_##S##_bf16, convert_##S##_f16,     \
            convert_##S##_i64, convert_##S##_i32, convert_##S##_u8, convert_##S##_b8     \
    }
static const ConvertFn convert[CT_DTYPE_COUNT][CT_DTYPE_COUNT] = {
    ROW(f32), ROW(f64), ROW(bf16), ROW(f16), ROW(i64), ROW(i32), ROW(u8), ROW(b8)};

/* Copies within one dtype move bits, one loop per element size: exact for
 * every value (i64 beyond 2^53, NaN payloads). */
#define BITCOPY(B, U)                                                                    \
    static void copy_##B(char *o, int64_t so, const char *i, int64_t si, int64_t n)      \
    {                                                                                    \
        for (int64_t k = 0; k < n; k++) *(U *)(o + k * so) = *(const U *)(i + k * si);   \
    }
BITCOPY(1, uint8_t)
BITCOPY(2, uint16_t)
BITCOPY(4, uint32_t)
BITCOPY(8, uint64_t)

static ConvertFn bitcopy(size_t size)
{
    return size == 1 ? copy_1 : size == 2 ? copy_2 : size == 4 ? copy_4 : copy_8;
}

/* One conversion over strided rows (strided_convert). */
typedef struct ConvertRows {
    CtIter it;
    ConvertFn fn;
    char *po;
    const char *pi; /* the input, or the fill's scalar */
    int64_t so, si; /* element sizes (si 0 for a fill) */
    bool fill, same, zero;
} ConvertRows;

static void convert_row(const ConvertRows *c, int64_t r)
{
    int64_t off[CT_ITER_MAX_OPS];
    int64_t n = ct_iter_row(&c->it, r, off);
    char *o = c->po + off[0] * c->so;
    if (c->zero)
        memset(o, 0, (size_t)(n * c->so));
    else if (c->fill)
        c->fn(o, c->it.istride[0] * c->so, c->pi, 0, n);
    else if (c->same)
        memmove(o, c->pi + off[1] * c->si, (size_t)(n * c->so));
    else
        c->fn(o, c->it.istride[0] * c->so, c->pi + off[1] * c->si,
              c->it.istride[1] * c->si, n);
}

static void convert_item(void *ctx, int64_t r, int slot)
{
    (void)slot;
    convert_row(ctx, r);
}

/* out <- in (converted), both strided over out's shape; `in` may be NULL
 * with `scalar` given for a fill. */
static CtStatus strided_convert(Tensor *out, const Tensor *in, const double *scalar)
{
    ConvertRows c = {.fill = !in};
    const Tensor *ops[2] = {out, in ? in : out};
    ct_iter_init(&c.it, out->ndim, out->shape, 2, ops);
    c.so = (int64_t)ct_dtype_size(out->dtype);
    c.si = in ? (int64_t)ct_dtype_size(in->dtype) : 0;
    c.fn = in && in->dtype == out->dtype ? bitcopy((size_t)c.so)
                                         : convert[in ? in->dtype : CT_F64][out->dtype];
    c.same = in && in->dtype == out->dtype && ct_iter_unit_rows(&c.it);
    /* +0.0 is all-zero bytes in every dtype: zeroing (gradients, every
     * optimizer step) is a memset per row, not a per-element conversion */
    c.zero = !in && *scalar == 0.0 && !signbit(*scalar) && ct_iter_unit_rows(&c.it);
    c.po = ct_ptr(out);
    c.pi = in ? (const char *)ct_ptr(in) : (const char *)scalar;
    ct_cpu_rows(&c.it, convert_item, &c);
    return CT_OK;
}

static CtStatus cpu_fill(const CtOpCall *c)
{
    const CtFillParams *p = c->params;
    return strided_convert(c->out[0], NULL, &p->value);
}

static CtStatus cpu_copy(const CtOpCall *c)
{
    return strided_convert(c->out[0], c->in[0], NULL);
}

void ct_cpu_register_copy(CtKernelFn *k, CtSupportsFn *s)
{
    (void)s;
    k[CT_OP_FILL] = cpu_fill;
    k[CT_OP_COPY] = cpu_copy;
}
