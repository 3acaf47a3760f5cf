/* Elementwise kernels: BINARY (arithmetic and comparisons; bf16 and f16
 * computed in f32) and WHERE; the
 * UNARY kernels live in unary.c and are registered from here. */
#include <math.h>

#include "cpu.h"
#include "workers.h"

/* Inner loops are instantiated per dtype with the kind switched outside the
 * loop; the unit-stride case is separate so it vectorises. */
#define ROW_LOOP(EXPR)                                                                   \
    do {                                                                                 \
        if (so == 1 && sa == 1 && sb == 1)                                               \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pa[i], y = pb[i];                                                  \
                po[i] = (EXPR);                                                          \
            }                                                                            \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pa[i * sa], y = pb[i * sb];                                        \
                po[i * so] = (EXPR);                                                     \
            }                                                                            \
    } while (0)

#define ARITH_ROW(NAME, T_, POW, ISNAN)                                                  \
    static void NAME(CtBinaryKind kind, T_ *po, int64_t so, const T_ *pa, int64_t sa,    \
                     const T_ *pb, int64_t sb, int64_t n)                                \
    {                                                                                    \
        typedef T_ T;                                                                    \
        switch (kind) {                                                                  \
        case CT_BIN_ADD: ROW_LOOP(x + y); break;                                         \
        case CT_BIN_SUB: ROW_LOOP(x - y); break;                                         \
        case CT_BIN_MUL: ROW_LOOP(x *y); break;                                          \
        case CT_BIN_DIV: ROW_LOOP(x / y); break;                                         \
        case CT_BIN_POW: ROW_LOOP(POW(x, y)); break;                                     \
        case CT_BIN_MAX: ROW_LOOP((ISNAN(x) || x >= y) ? x : y); break;                  \
        case CT_BIN_MIN: ROW_LOOP((ISNAN(x) || x <= y) ? x : y); break;                  \
        case CT_BIN_ADD_RELU: ROW_LOOP(x + y < 0 ? (T)0 : x + y); break;                 \
        default: break;                                                                  \
        }                                                                                \
    }

#define FNAN(x) ((x) != (x))

ARITH_ROW(arith_f32, float, powf, FNAN)
ARITH_ROW(arith_f64, double, pow, FNAN)

/* Integers wrap around on overflow, as PyTorch's do: the arithmetic is
 * unsigned (U), converted back to two's complement. DIV never gets here
 * (the front end divides integers as f32); a negative power is 0. */
#define INT_ARITH_ROW(NAME, T_, U)                                                       \
    static T_ NAME##_pow(T_ b, T_ e)                                                     \
    {                                                                                    \
        U r = 1, ub = (U)b;                                                              \
        if (e < 0) return 0;                                                             \
        for (; e > 0; e >>= 1, ub *= ub)                                                 \
            if (e & 1) r *= ub;                                                          \
        return (T_)r;                                                                    \
    }                                                                                    \
    static void NAME(CtBinaryKind kind, T_ *po, int64_t so, const T_ *pa, int64_t sa,    \
                     const T_ *pb, int64_t sb, int64_t n)                                \
    {                                                                                    \
        typedef T_ T;                                                                    \
        switch (kind) {                                                                  \
        case CT_BIN_ADD: ROW_LOOP((T)((U)x + (U)y)); break;                              \
        case CT_BIN_SUB: ROW_LOOP((T)((U)x - (U)y)); break;                              \
        case CT_BIN_MUL: ROW_LOOP((T)((U)x * (U)y)); break;                              \
        case CT_BIN_POW: ROW_LOOP(NAME##_pow(x, y)); break;                              \
        case CT_BIN_MAX: ROW_LOOP(x >= y ? x : y); break;                                \
        case CT_BIN_MIN: ROW_LOOP(x <= y ? x : y); break;                                \
        case CT_BIN_ADD_RELU:                                                            \
            ROW_LOOP((T)((U)x + (U)y) < 0 ? (T)0 : (T)((U)x + (U)y));                    \
            break;                                                                       \
        default: break;                                                                  \
        }                                                                                \
    }

INT_ARITH_ROW(arith_i64, int64_t, uint64_t)
INT_ARITH_ROW(arith_i32, int32_t, uint32_t)

#define CMP_ROW(NAME, T_)                                                                \
    static void NAME(CtBinaryKind kind, uint8_t *po, int64_t so, const T_ *pa,           \
                     int64_t sa, const T_ *pb, int64_t sb, int64_t n)                    \
    {                                                                                    \
        typedef T_ T;                                                                    \
        switch (kind) {                                                                  \
        case CT_BIN_EQ: ROW_LOOP(x == y); break;                                         \
        case CT_BIN_NE: ROW_LOOP(x != y); break;                                         \
        case CT_BIN_LT: ROW_LOOP(x < y); break;                                          \
        case CT_BIN_LE: ROW_LOOP(x <= y); break;                                         \
        case CT_BIN_GT: ROW_LOOP(x > y); break;                                          \
        case CT_BIN_GE: ROW_LOOP(x >= y); break;                                         \
        default: break;                                                                  \
        }                                                                                \
    }

CMP_ROW(cmp_f32, float)
CMP_ROW(cmp_f64, double)
CMP_ROW(cmp_i64, int64_t)
CMP_ROW(cmp_i32, int32_t)
CMP_ROW(cmp_u8, uint8_t)

/* bf16 and f16 compute in f32 (as on CUDA): blocks of a row are widened
 * into stack buffers, run through the f32 loop and rounded back once
 * (nearest even); comparisons compare the widened values. */
#define HALF_BLOCK 256
#define HALF_BINARY(SUF, LOAD, STORE)                                                    \
    static void widen_##SUF(float *x, float *y, const uint16_t *pa, int64_t sa,          \
                            const uint16_t *pb, int64_t sb, int64_t m)                   \
    {                                                                                    \
        for (int64_t j = 0; j < m; j++) {                                                \
            x[j] = LOAD(pa[j * sa]);                                                     \
            y[j] = LOAD(pb[j * sb]);                                                     \
        }                                                                                \
    }                                                                                    \
    static void arith_##SUF(CtBinaryKind kind, uint16_t *po, int64_t so,                 \
                            const uint16_t *pa, int64_t sa, const uint16_t *pb,          \
                            int64_t sb, int64_t n)                                       \
    {                                                                                    \
        float x[HALF_BLOCK], y[HALF_BLOCK], r[HALF_BLOCK];                               \
        for (int64_t s = 0; s < n; s += HALF_BLOCK) {                                    \
            int64_t m = n - s < HALF_BLOCK ? n - s : HALF_BLOCK;                         \
            widen_##SUF(x, y, pa + s * sa, sa, pb + s * sb, sb, m);                      \
            arith_f32(kind, r, 1, x, 1, y, 1, m);                                        \
            for (int64_t j = 0; j < m; j++) po[(s + j) * so] = STORE(r[j]);              \
        }                                                                                \
    }                                                                                    \
    static void cmp_##SUF(CtBinaryKind kind, uint8_t *po, int64_t so,                    \
                          const uint16_t *pa, int64_t sa, const uint16_t *pb,            \
                          int64_t sb, int64_t n)                                         \
    {                                                                                    \
        float x[HALF_BLOCK], y[HALF_BLOCK];                                              \
        for (int64_t s = 0; s < n; s += HALF_BLOCK) {                                    \
            int64_t m = n - s < HALF_BLOCK ? n - s : HALF_BLOCK;                         \
            widen_##SUF(x, y, pa + s * sa, sa, pb + s * sb, sb, m);                      \
            cmp_f32(kind, po + s * so, so, x, 1, y, 1, m);                               \
        }                                                                                \
    }

HALF_BINARY(bf16, ct_bf16_widen, ct_bf16_round)
HALF_BINARY(f16, ct_f16_to_f32, ct_f32_to_f16)

/* One BINARY or WHERE call over strided rows: up to four operands. */
typedef struct RowsJob {
    CtIter it;
    int kind; /* CtBinaryKind (BINARY) */
    void *po;
    const void *pi[3];
} RowsJob;

#define BIN_ITEM(FN, TO, TI)                                                             \
    CT_ROW_ITEM(FN##_item, RowsJob,                                                      \
                FN((CtBinaryKind)j->kind, (TO *)j->po + off[0], j->it.istride[0],        \
                   (const TI *)j->pi[0] + off[1], j->it.istride[1],                      \
                   (const TI *)j->pi[1] + off[2], j->it.istride[2], len);)
BIN_ITEM(cmp_f32, uint8_t, float)
BIN_ITEM(cmp_f64, uint8_t, double)
BIN_ITEM(cmp_i64, uint8_t, int64_t)
BIN_ITEM(cmp_i32, uint8_t, int32_t)
BIN_ITEM(cmp_u8, uint8_t, uint8_t)
BIN_ITEM(arith_f32, float, float)
BIN_ITEM(arith_f64, double, double)
BIN_ITEM(arith_i64, int64_t, int64_t)
BIN_ITEM(arith_i32, int32_t, int32_t)
BIN_ITEM(arith_bf16, uint16_t, uint16_t)
BIN_ITEM(arith_f16, uint16_t, uint16_t)
BIN_ITEM(cmp_bf16, uint8_t, uint16_t)
BIN_ITEM(cmp_f16, uint8_t, uint16_t)

/* The row function of a BINARY call (NULL: unsupported dtype). */
static CtWorkFn binary_item(CtDType dt, bool cmp)
{
    switch (dt) {
    case CT_F32: return cmp ? cmp_f32_item : arith_f32_item;
    case CT_F64: return cmp ? cmp_f64_item : arith_f64_item;
    case CT_I64: return cmp ? cmp_i64_item : arith_i64_item;
    case CT_I32: return cmp ? cmp_i32_item : arith_i32_item;
    case CT_BF16: return cmp ? cmp_bf16_item : arith_bf16_item;
    case CT_F16: return cmp ? cmp_f16_item : arith_f16_item;
    case CT_U8:
    case CT_BOOL: return cmp_u8_item;
    default: return NULL;
    }
}

static CtStatus cpu_binary(const CtOpCall *c)
{
    const CtBinaryParams *p = c->params;
    Tensor *out = c->out[0];
    RowsJob j = {
        .kind = p->kind, .po = ct_ptr(out), .pi = {ct_ptr(c->in[0]), ct_ptr(c->in[1])}};
    ct_iter_init(&j.it, out->ndim, out->shape, 3,
                 (const Tensor *[]){out, c->in[0], c->in[1]});
    CtWorkFn fn = binary_item(c->in[0]->dtype, p->kind >= CT_BIN_EQ);
    if (fn) ct_cpu_rows(&j.it, fn, &j);
    return CT_OK;
}

static bool cpu_binary_supports(const CtOpCall *c)
{
    const CtBinaryParams *p = c->params;
    switch (c->in[0]->dtype) {
    case CT_F32:
    case CT_F64:
    case CT_BF16:
    case CT_F16: return true;
    case CT_I64:
    case CT_I32: return p->kind != CT_BIN_DIV; /* tensor_div divides them as f32 */
    case CT_U8:
    case CT_BOOL: return p->kind >= CT_BIN_EQ;
    default: return false;
    }
}

/* WHERE moves elements as bits, so one loop per element size serves every
 * dtype. Both sides are loaded unconditionally so the select vectorises. */
#define WHERE_ROW(NAME, T)                                                               \
    static void NAME(T *po, int64_t so, const uint8_t *pc, int64_t sc, const T *pa,      \
                     int64_t sa, const T *pb, int64_t sb, int64_t n)                     \
    {                                                                                    \
        if (so == 1 && sc == 1 && sa == 1 && sb == 1)                                    \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pa[i], y = pb[i];                                                  \
                po[i] = pc[i] ? x : y;                                                   \
            }                                                                            \
        else                                                                             \
            for (int64_t i = 0; i < n; i++) {                                            \
                T x = pa[i * sa], y = pb[i * sb];                                        \
                po[i * so] = pc[i * sc] ? x : y;                                         \
            }                                                                            \
    }

WHERE_ROW(where_8, uint8_t)
WHERE_ROW(where_16, uint16_t)
WHERE_ROW(where_32, uint32_t)
WHERE_ROW(where_64, uint64_t)

#define WHERE_ITEM(FN, T)                                                                \
    CT_ROW_ITEM(FN##_item, RowsJob,                                                      \
                FN((T *)j->po + off[0], j->it.istride[0],                                \
                   (const uint8_t *)j->pi[0] + off[1], j->it.istride[1],                 \
                   (const T *)j->pi[1] + off[2], j->it.istride[2],                       \
                   (const T *)j->pi[2] + off[3], j->it.istride[3], len);)
WHERE_ITEM(where_8, uint8_t)
WHERE_ITEM(where_16, uint16_t)
WHERE_ITEM(where_32, uint32_t)
WHERE_ITEM(where_64, uint64_t)

// out <- in0 ? in1 : in2; in0 bool, all of out's shape (stride 0 broadcasts)
static CtStatus cpu_where(const CtOpCall *c)
{
    Tensor *out = c->out[0];
    RowsJob j = {.po = ct_ptr(out),
                 .pi = {ct_ptr(c->in[0]), ct_ptr(c->in[1]), ct_ptr(c->in[2])}};
    ct_iter_init(&j.it, out->ndim, out->shape, 4,
                 (const Tensor *[]){out, c->in[0], c->in[1], c->in[2]});
    switch (ct_dtype_size(out->dtype)) {
    case 1: ct_cpu_rows(&j.it, where_8_item, &j); break;
    case 2: ct_cpu_rows(&j.it, where_16_item, &j); break;
    case 4: ct_cpu_rows(&j.it, where_32_item, &j); break;
    case 8: ct_cpu_rows(&j.it, where_64_item, &j); break;
    default: break;
    }
    return CT_OK;
}

static bool cpu_where_supports(const CtOpCall *c)
{
    size_t sz = ct_dtype_size(c->out[0]->dtype);
    return c->in[0]->dtype == CT_BOOL && (sz == 1 || sz == 2 || sz == 4 || sz == 8);
}

void ct_cpu_register_unary(CtKernelFn *k, CtSupportsFn *s); /* unary.c */

void ct_cpu_register_elementwise(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_BINARY] = cpu_binary;
    s[CT_OP_BINARY] = cpu_binary_supports;
    k[CT_OP_WHERE] = cpu_where;
    s[CT_OP_WHERE] = cpu_where_supports;
    ct_cpu_register_unary(k, s);
}
