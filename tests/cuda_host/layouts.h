/* Tensor layouts the host harness runs every body over: contiguous,
 * transposed, strided (every other element of the last dim) and, for
 * inputs, broadcast (a size-1 first dim expanded). Shapes include a scalar,
 * an empty tensor, tails smaller than a block and sizes past one block. */
#ifndef CTRAINER_TESTS_CUDA_HOST_LAYOUTS_H
#define CTRAINER_TESTS_CUDA_HOST_LAYOUTS_H

#include "harness.h"

enum { CH_CONTIGUOUS, CH_TRANSPOSED, CH_STRIDED, CH_BROADCAST, CH_LAYOUTS };
static const char *const ch_layout_names[CH_LAYOUTS] = {"contiguous", "transposed",
                                                        "strided", "broadcast"};

typedef struct ChShapeCase {
    int ndim;
    int64_t shape[3];
} ChShapeCase;

static const ChShapeCase ch_cases[] = {
    {1, {1}},        /* one element */
    {2, {0, 4}},     /* empty */
    {1, {257}},      /* one block and a 1-element tail */
    {3, {3, 5, 7}},  /* less than a block */
    {2, {2, 300}},   /* two blocks and a tail of 88 */
    {3, {3, 9, 70}}, /* 8 blocks; wraps the small grid 20 times */
};
#define CH_NCASES ((int)(sizeof ch_cases / sizeof *ch_cases))

static inline int64_t ch_numel(const ChShapeCase &c)
{
    int64_t n = 1;
    for (int d = 0; d < c.ndim; d++) n *= c.shape[d];
    return n;
}

/* Elements a buffer needs to hold any layout of c. */
static inline int64_t ch_buffer_size(const ChShapeCase &c)
{
    return 2 * ch_numel(c) + 8;
}

/* A view of `shape` over buffer `base` (1-D, ch_buffer_size elements) in the
 * given layout; NULL when the layout does not apply (transposing one dim,
 * broadcasting a first dim that is not > 1). Scope-owned. */
static inline Tensor *ch_view(Tensor *base, int layout, const ChShapeCase &c)
{
    int nd = c.ndim;
    int64_t shape[3] = {c.shape[0], nd > 1 ? c.shape[1] : 0, nd > 2 ? c.shape[2] : 0};
    int64_t n = ch_numel(c);
    switch (layout) {
    case CH_CONTIGUOUS: return tensor_view(tensor_slice(base, 0, 0, n, 1), nd, shape);
    case CH_TRANSPOSED: {
        if (nd < 2) return NULL;
        int64_t sw[3] = {shape[0], shape[1], shape[2]};
        sw[0] = shape[nd - 1];
        sw[nd - 1] = shape[0];
        return tensor_transpose(tensor_view(tensor_slice(base, 0, 0, n, 1), nd, sw), 0,
                                nd - 1);
    }
    case CH_STRIDED: {
        int64_t wide[3] = {shape[0], shape[1], shape[2]};
        wide[nd - 1] *= 2;
        Tensor *w = tensor_view(tensor_slice(base, 0, 0, 2 * n, 1), nd, wide);
        return tensor_slice(w, nd - 1, 0, wide[nd - 1], 2);
    }
    default: { /* CH_BROADCAST */
        if (shape[0] <= 1) return NULL;
        int64_t one[3] = {1, shape[1], shape[2]};
        return tensor_expand(
            tensor_view(tensor_slice(base, 0, 0, n / shape[0], 1), nd, one), nd, shape);
    }
    }
}

#endif
