/* Private to tensor/cuda: sums in the CPU kernels' order, for thread bodies
 * that must match them bit for bit (hd.h). The CPU's row kernels add a
 * unit-stride run in L interleaved partial sums so the loop vectorises:
 * lane j takes terms j, j + L, ... of the whole L-term groups, the tail
 * past the last group is summed first, then the lanes are added to it in
 * order. */
#ifndef CTRAINER_TENSOR_CUDA_LANES_H
#define CTRAINER_TENSOR_CUDA_LANES_H

#include "hd.h"

/* sum_{i < n} f(i) in A, in L lanes as above. */
template <typename A, int L, typename F> CT_HD A ct_lane_sum(int64_t n, F f)
{
    A lane[L], s = 0;
    int64_t i = 0;
    for (int j = 0; j < L; j++) lane[j] = 0;
    for (; i + L <= n; i += L)
        for (int j = 0; j < L; j++) lane[j] += f(i + j);
    for (int64_t k = i; k < n; k++) s += f(k);
    for (int j = 0; j < L; j++) s += lane[j];
    return s;
}

#endif
