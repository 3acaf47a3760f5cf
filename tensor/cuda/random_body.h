/* Private to tensor/cuda: the thread body of RNG (random.cu), shared with
 * the host harness (hd.h). The same Philox blocks and lane mapping as the
 * CPU kernel (tensor/philox.h), one thread per Philox block: `per` draws of
 * block b fill elements b*per .. b*per+per-1 (the last block may be cut). */
#ifndef CTRAINER_TENSOR_CUDA_RANDOM_BODY_H
#define CTRAINER_TENSOR_CUDA_RANDOM_BODY_H

#include "../philox.h"
#include "hd.h"

/* Draws per element: 2 for normals and f64 uniforms, else 4. */
static inline int ct_rng_per_block(CtRngKind kind, bool wide)
{
    return (kind == CT_RNG_NORMAL || wide) ? 2 : 4;
}

/* out: n contiguous T (float or double); wide: T is double. */
template <typename T>
CT_HD void ct_rng_thread(CtThread t, T *out, int64_t n, int64_t nblocks, int per,
                         const CtRngParams &p, int wide)
{
    CT_THREAD_FOR(b, t, nblocks)
    {
        uint32_t r[4];
        ct_rng_block(p.seed, p.stream, p.offset, b, r);
        for (int j = 0; j < per && b * per + j < n; j++)
            out[b * per + j] = (T)ct_rng_value((int)p.kind, wide, p.a, p.b, r, j);
    }
}

#endif
