/* Private to tensor/cuda: the thread body that checks index tensors
 * (range.cu), shared with the host harness (hd.h). The indexing ops and
 * cross-entropy's targets report their first bad index with the CPU
 * kernels' message (tensor/index.h, tensor/softmax.h), once the check has
 * been read back (range.cuh). */
#ifndef CTRAINER_TENSOR_CUDA_RANGE_BODY_H
#define CTRAINER_TENSOR_CUDA_RANGE_BODY_H

#include <stdio.h>

#include "hd.h"

/* *p = min(*p, v), atomically on the device. The host harness runs one
 * thread at a time. */
CT_HD void ct_atomic_min_u64(unsigned long long *p, unsigned long long v)
{
#ifdef __CUDA_ARCH__
    atomicMin(p, v);
#else
    if (v < *p) *p = v;
#endif
}

/* What a range check accepts: [0, size), and `ignore` when use_ignore. */
typedef struct CtRangeCheck {
    int64_t size;
    bool use_ignore;
    int64_t ignore;
} CtRangeCheck;

/* Lowers *first_bad (which starts at ~0) to the position of every index of
 * ix[0..n) outside the accepted values, so it ends at the first one. */
CT_HD void ct_range_thread(CtThread t, const int64_t *ix, int64_t n, CtRangeCheck rc,
                           unsigned long long *first_bad)
{
    CT_THREAD_FOR(i, t, n)
    {
        int64_t v = ix[i];
        if ((rc.use_ignore && v == rc.ignore) || (uint64_t)v < (uint64_t)rc.size)
            continue;
        ct_atomic_min_u64(first_bad, (unsigned long long)i);
    }
}

/* "[1, 2]": linear position pos of a tensor of index's shape, as the CPU
 * kernels write it, into buf. Host code. */
static inline const char *ct_position_str(const Tensor *index, int64_t pos, char *buf,
                                          size_t n)
{
    int64_t idx[CT_MAX_DIMS];
    for (int d = index->ndim - 1; d >= 0; d--) {
        idx[d] = pos % index->shape[d];
        pos /= index->shape[d];
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < index->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)idx[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

#endif
