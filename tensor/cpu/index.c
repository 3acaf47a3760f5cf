/* Indexing kernels: INDEX_SELECT / INDEX_ADD, GATHER / SCATTER_ADD, ONE_HOT.
 * Operands are contiguous (see tensor/index.h). The accumulating kernels
 * give each output element to one thread, which adds its terms in index
 * order: no atomics, and results independent of the thread count. */
#include <stdlib.h>
#include <string.h>

#include "../index.h"
#include "cpu.h"

/* Columns per work unit of the accumulating kernels. */
#define COL_BLOCK 256

/* Checks every index against [0, size); reports the first bad one. dim < 0
 * means the range is a number of classes (one_hot). */
static CtStatus check_range(const char *name, const Tensor *index, int dim, int64_t size)
{
    const int64_t *ix = ct_ptr(index);
    int64_t n = tensor_numel(index);
    bool bad = false;
    for (int64_t i = 0; i < n; i++) bad |= (uint64_t)ix[i] >= (uint64_t)size;
    if (!bad) return CT_OK;
    int64_t i = 0;
    while ((uint64_t)ix[i] < (uint64_t)size) i++;
    int64_t pos[CT_MAX_DIMS], rem = i;
    for (int d = index->ndim - 1; d >= 0; d--) {
        pos[d] = rem % index->shape[d];
        rem /= index->shape[d];
    }
    char buf[96];
    if (dim < 0)
        return ct_error(CT_ERR_INVALID,
                        "%s: index %lld at position %s is out of range for %lld classes",
                        name, (long long)ix[i],
                        ct_shape_str(index->ndim, pos, buf, sizeof buf), (long long)size);
    return ct_error(CT_ERR_INVALID,
                    "%s: index %lld at position %s is out of range for dim %d of size "
                    "%lld",
                    name, (long long)ix[i],
                    ct_shape_str(index->ndim, pos, buf, sizeof buf), dim,
                    (long long)size);
}

/* The index's shape around `dim` as (outer, J, inner), with the offsets
 * into the big tensor (contiguous, shape `big`) of each inner position and
 * of each outer position. */
typedef struct GatherGeom {
    int64_t outer, j, inner;
    int64_t dstride; /* big tensor's stride along dim */
    int64_t *inner_off, *outer_off;
} GatherGeom;

static CtStatus geom_init(GatherGeom *g, const Tensor *index, const Tensor *big, int dim)
{
    int nd = index->ndim;
    int64_t bst[CT_MAX_DIMS];
    ct_contiguous_strides(big->ndim, big->shape, bst);
    g->outer = ct_shape_numel(dim, index->shape);
    g->j = index->shape[dim];
    g->inner = ct_shape_numel(nd - dim - 1, index->shape + dim + 1);
    g->dstride = bst[dim];
    g->inner_off = ct_malloc((size_t)(g->inner + g->outer) * sizeof(int64_t) + 1);
    if (!g->inner_off) return ct_error(CT_ERR_OOM, "gather: out of memory");
    g->outer_off = g->inner_off + g->inner;
    for (int64_t q = 0; q < g->inner; q++) {
        int64_t rem = q, off = 0;
        for (int d = nd - 1; d > dim; d--) {
            off += (rem % index->shape[d]) * bst[d];
            rem /= index->shape[d];
        }
        g->inner_off[q] = off;
    }
    for (int64_t q = 0; q < g->outer; q++) {
        int64_t rem = q, off = 0;
        for (int d = dim - 1; d >= 0; d--) {
            off += (rem % index->shape[d]) * bst[d];
            rem /= index->shape[d];
        }
        g->outer_off[q] = off;
    }
    return CT_OK;
}

#define T   uint64_t
#define SFX u64
#include "index_copy_tmpl.h"

#define T   uint32_t
#define SFX u32
#include "index_copy_tmpl.h"

#define T   uint16_t
#define SFX u16
#include "index_copy_tmpl.h"

#define T   uint8_t
#define SFX u8
#include "index_copy_tmpl.h"

#define T   float
#define SFX f32
#include "index_add_tmpl.h"

#define T   double
#define SFX f64
#include "index_add_tmpl.h"

/* ---------------------------------------------------- index_select / add */

static CtStatus cpu_index_select(const CtOpCall *c)
{
    const CtIndexParams *p = c->params;
    CtStatus st = check_range(p->name, c->in[1], p->dim, p->size);
    if (st != CT_OK) return st;
    const int64_t *ix = ct_ptr(c->in[1]);
    const void *src = ct_ptr(c->in[0]);
    void *out = ct_ptr(c->out[0]);
    switch (ct_dtype_size(c->out[0]->dtype)) {
    case 8: select_u64(p, ix, src, out); break;
    case 4: select_u32(p, ix, src, out); break;
    case 2: select_u16(p, ix, src, out); break;
    default: select_u8(p, ix, src, out); break;
    }
    return CT_OK;
}

static CtStatus cpu_index_add(const CtOpCall *c)
{
    const CtIndexParams *p = c->params;
    CtStatus st = check_range(p->name, c->in[1], p->dim, p->size);
    if (st != CT_OK) return st;
    if (c->out[0]->dtype == CT_F32)
        index_add_f32(p, ct_ptr(c->in[1]), ct_ptr(c->in[0]), ct_ptr(c->out[0]));
    else
        index_add_f64(p, ct_ptr(c->in[1]), ct_ptr(c->in[0]), ct_ptr(c->out[0]));
    return CT_OK;
}

/* ------------------------------------------------------ gather / scatter */

static CtStatus cpu_gather(const CtOpCall *c)
{
    const CtGatherParams *p = c->params;
    const Tensor *src = c->in[0], *index = c->in[1];
    CtStatus st = check_range(p->name, index, p->dim, src->shape[p->dim]);
    GatherGeom g;
    if (st != CT_OK || (st = geom_init(&g, index, src, p->dim)) != CT_OK) return st;
    const int64_t *ix = ct_ptr(index);
    const void *sp = ct_ptr(src);
    void *op = ct_ptr(c->out[0]);
    switch (ct_dtype_size(src->dtype)) {
    case 8: gather_u64(&g, ix, sp, op); break;
    case 4: gather_u32(&g, ix, sp, op); break;
    case 2: gather_u16(&g, ix, sp, op); break;
    default: gather_u8(&g, ix, sp, op); break;
    }
    free(g.inner_off);
    return CT_OK;
}

static CtStatus cpu_scatter_add(const CtOpCall *c)
{
    const CtGatherParams *p = c->params;
    Tensor *out = c->out[0];
    const Tensor *index = c->in[1];
    CtStatus st = check_range(p->name, index, p->dim, out->shape[p->dim]);
    GatherGeom g;
    if (st != CT_OK || (st = geom_init(&g, index, out, p->dim)) != CT_OK) return st;
    if (out->dtype == CT_F32)
        scatter_add_f32(&g, ct_ptr(index), ct_ptr(c->in[0]), ct_ptr(out));
    else
        scatter_add_f64(&g, ct_ptr(index), ct_ptr(c->in[0]), ct_ptr(out));
    free(g.inner_off);
    return CT_OK;
}

/* --------------------------------------------------------------- one_hot */

static CtStatus cpu_one_hot(const CtOpCall *c)
{
    const CtOneHotParams *p = c->params;
    const Tensor *index = c->in[0];
    Tensor *out = c->out[0];
    CtStatus st = check_range("one_hot", index, -1, p->classes);
    if (st != CT_OK) return st;
    /* zero is all-bits-zero in every dtype; one is dtype-specific */
    union {
        float f32;
        double f64;
        uint16_t h;
        int64_t i64;
        int32_t i32;
        uint8_t u8;
    } one;
    switch (out->dtype) {
    case CT_F32: one.f32 = 1.0f; break;
    case CT_F64: one.f64 = 1.0; break;
    case CT_BF16: one.h = ct_f32_to_bf16(1.0f); break;
    case CT_F16: one.h = ct_f32_to_f16(1.0f); break;
    case CT_I64: one.i64 = 1; break;
    case CT_I32: one.i32 = 1; break;
    default: one.u8 = 1; break;
    }
    size_t es = ct_dtype_size(out->dtype);
    size_t row = (size_t)p->classes * es;
    char *o = ct_ptr(out);
    const int64_t *ix = ct_ptr(index);
    int64_t n = tensor_numel(index);
#pragma omp parallel for if (n * p->classes >= CT_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        memset(o + (size_t)i * row, 0, row);
        memcpy(o + (size_t)i * row + (size_t)ix[i] * es, &one, es);
    }
    return CT_OK;
}

/* The accumulating kernels take f32 and f64. */
static bool float_out(const CtOpCall *c)
{
    return c->out[0]->dtype == CT_F32 || c->out[0]->dtype == CT_F64;
}

void ct_cpu_register_index(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_INDEX_SELECT] = cpu_index_select;
    k[CT_OP_INDEX_ADD] = cpu_index_add;
    k[CT_OP_GATHER] = cpu_gather;
    k[CT_OP_SCATTER_ADD] = cpu_scatter_add;
    k[CT_OP_ONE_HOT] = cpu_one_hot;
    s[CT_OP_INDEX_ADD] = float_out;
    s[CT_OP_SCATTER_ADD] = float_out;
}
