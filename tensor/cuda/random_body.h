/* Private to tensor/cuda: the thread body of RNG (random.cu), shared with
 * the host harness (hd.h). The same Philox blocks and lane mapping as the
 * CPU kernel (tensor/philox.h), one thread per Philox block: `per` draws of
 * block b fill elements b*per .. b*per+per-1 (the last block may be cut).
 * Draws are stored as the CPU stores them (copy_body.h's ct_st: through
 * f32 for bf16 and f16), so dropout masks, which are bernoulli draws in the
 * input's dtype, are the CPU's. A dropout (an input x) multiplies x by the
 * draw as stored in the dtype, as the MUL kernel does (dtype_hd.h: bf16 and
 * f16 in f32, rounded once), so its output is the CPU's too. */
#ifndef CTRAINER_TENSOR_CUDA_RANDOM_BODY_H
#define CTRAINER_TENSOR_CUDA_RANDOM_BODY_H

#include "../philox.h"
#include "copy_body.h"
#include "dtype_hd.h"

/* Draws per element: 2 for normals and f64 uniforms, else 4. */
static inline int ct_rng_per_block(CtRngKind kind, bool wide)
{
    return (kind == CT_RNG_NORMAL || wide) ? 2 : 4;
}

/* out: n contiguous elements of dtype DT (f32, f64, bf16, f16); x: NULL,
 * or n contiguous elements of DT that the draw multiplies (dropout). */
template <int DT>
CT_HD void ct_rng_thread(CtThread t, void *out, const void *x, int64_t n, int64_t nblocks,
                         int per, const CtRngParams &p)
{
    typedef CtHdType<DT> H;
    typedef typename H::S S;
    typedef typename H::C C;
    CT_THREAD_FOR(b, t, nblocks)
    {
        uint32_t r[4];
        ct_rng_block(p.seed, p.stream, p.offset, b, r);
        for (int j = 0; j < per && b * per + j < n; j++) {
            const int64_t i = b * per + j;
            const double v = ct_rng_value((int)p.kind, DT == CT_F64, p.a, p.b, r, j);
            if (!x) {
                ct_st<DT>(out, i, v);
                continue;
            }
            const C m = H::load(H::store((C)v));
            ((S *)out)[i] = H::store(H::load(((const S *)x)[i]) * m);
        }
    }
}

#endif
