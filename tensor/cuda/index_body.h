/* Private to tensor/cuda: the thread bodies of INDEX_SELECT, INDEX_ADD,
 * GATHER, SCATTER_ADD and ONE_HOT (index.cu), shared with the host harness
 * (hd.h). Params and semantics: tensor/index.h; operands are contiguous.
 * The index check (range.cuh) reports a bad index after the op has run, so
 * the bodies guard every index: one out of range gives 0 in a copy and
 * adds nothing.
 *
 * The copies (select, gather, one_hot) take one thread per output element
 * and move elements as unsigned words of the element's size W, so they
 * serve every dtype. The accumulating ops take one thread per (outer,
 * column) pair: it walks the index in order and adds each term to the
 * element it names. Distinct pairs write distinct output elements, so there
 * are no atomics, and each element receives its terms in index order, as
 * on the CPU (tensor/cpu/index.c): the results match it bit for bit. */
#ifndef CTRAINER_TENSOR_CUDA_INDEX_BODY_H
#define CTRAINER_TENSOR_CUDA_INDEX_BODY_H

#include "../index.h"
#include "hd.h"

/* INDEX_SELECT: out (outer, k, inner) <- src (outer, size, inner) rows. */
template <typename W>
CT_HD void ct_index_select_thread(CtThread t, const CtIndexParams &p, const int64_t *ix,
                                  const W *src, W *out)
{
    CT_THREAD_FOR(e, t, p.outer * p.k * p.inner)
    {
        int64_t r = e / p.inner, q = e - r * p.inner, i = ix[r % p.k];
        out[e] = (uint64_t)i < (uint64_t)p.size
                     ? src[(r / p.k * p.size + i) * p.inner + q]
                     : (W)0;
    }
}

/* INDEX_ADD: out (outer, size, inner) += src (outer, k, inner) rows. */
template <typename T>
CT_HD void ct_index_add_thread(CtThread t, const CtIndexParams &p, const int64_t *ix,
                               const T *src, T *out)
{
    CT_THREAD_FOR(u, t, p.outer * p.inner)
    {
        int64_t o = u / p.inner, q = u - o * p.inner;
        for (int64_t j = 0; j < p.k; j++)
            if ((uint64_t)ix[j] < (uint64_t)p.size)
                out[(o * p.size + ix[j]) * p.inner + q] +=
                    src[(o * p.k + j) * p.inner + q];
    }
}

/* Where an index tensor's elements land in the tensor gathered from or
 * scattered into ("big", contiguous), for GATHER and SCATTER_ADD. Passed to
 * kernels by value. */
typedef struct CtGatherGeom {
    int ndim, dim;
    int64_t shape[CT_MAX_DIMS];   /* the index's */
    int64_t bstride[CT_MAX_DIMS]; /* big's, in elements */
    int64_t j, inner;             /* index.shape[dim]; elements after dim */
    int64_t size;                 /* big.shape[dim]: the indices' range */
} CtGatherGeom;

/* Host code. */
static inline void ct_gather_geom_init(CtGatherGeom *g, const Tensor *index,
                                       const Tensor *big, int dim)
{
    g->ndim = index->ndim;
    g->dim = dim;
    int64_t s = 1;
    for (int d = index->ndim - 1; d >= 0; d--) {
        g->shape[d] = index->shape[d];
        g->bstride[d] = s;
        s *= big->shape[d];
    }
    g->j = index->shape[dim];
    g->size = big->shape[dim];
    g->inner = 1;
    for (int d = dim + 1; d < index->ndim; d++) g->inner *= index->shape[d];
}

/* Offset in big of index element e, with its index value v at dim. */
CT_HD int64_t ct_gather_offset(const CtGatherGeom &g, int64_t e, int64_t v)
{
    int64_t off = v * g.bstride[g.dim];
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t q = e / g.shape[d];
        if (d != g.dim) off += (e - q * g.shape[d]) * g.bstride[d];
        e = q;
    }
    return off;
}

/* GATHER: out (index's shape) <- src elements; n = the index's numel. */
template <typename W>
CT_HD void ct_gather_thread(CtThread t, const CtGatherGeom &g, int64_t n,
                            const int64_t *ix, const W *src, W *out)
{
    CT_THREAD_FOR(e, t, n)
    {
        int64_t v = ix[e];
        out[e] = (uint64_t)v < (uint64_t)g.size ? src[ct_gather_offset(g, e, v)] : (W)0;
    }
}

/* SCATTER_ADD: out (big) += src (index's shape); outer = n / (j * inner). */
template <typename T>
CT_HD void ct_scatter_add_thread(CtThread t, const CtGatherGeom &g, int64_t outer,
                                 const int64_t *ix, const T *src, T *out)
{
    CT_THREAD_FOR(u, t, outer * g.inner)
    {
        int64_t o = u / g.inner, q = u - o * g.inner;
        for (int64_t jj = 0; jj < g.j; jj++) {
            int64_t e = (o * g.j + jj) * g.inner + q, v = ix[e];
            if ((uint64_t)v < (uint64_t)g.size) out[ct_gather_offset(g, e, v)] += src[e];
        }
    }
}

/* ONE_HOT: out (n, classes) <- `one` (the dtype's 1 as a word) at each
 * index, zero elsewhere. */
template <typename W>
CT_HD void ct_one_hot_thread(CtThread t, int64_t n, int64_t classes, const int64_t *ix,
                             W one, W *out)
{
    CT_THREAD_FOR(e, t, n * classes)
    {
        int64_t i = e / classes;
        out[e] = ix[i] == e - i * classes ? one : (W)0;
    }
}

#endif
