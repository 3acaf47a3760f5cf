/* Private to tensor/cuda: the cuBLASLt algorithms an instance has chosen,
 * by descriptor. cublasLtMatmulAlgoGetHeuristic costs tens of microseconds
 * of host time per call, as much as a small product itself, and a training
 * step repeats the same few products: each descriptor asks once per
 * instance and then finds its algorithm here (an algorithm is plain data,
 * valid for any descriptors of the same configuration).
 *
 * The key is every input of the heuristic, which lt_desc.h gathers in one
 * CtLtDesc: operations, sizes, leading dimensions, batch strides, dtype,
 * compute and scale types, the three layouts, the epilogue, the reduction
 * restriction (the deterministic switch), the workspace offered and the
 * alignments of the operands and of the epilogue's pointers. It is
 * built field by field into an array of words, so no padding byte can make
 * equal descriptors differ. A table of CT_LT_CACHE_SLOTS entries
 * (key_table.h). Pure C, no CUDA: unit-tested on the CPU
 * (tests/tensor/test_lt_desc.c). Not locked: the caller serialises
 * (CtCudaCtx.mu). */
#ifndef CTRAINER_TENSOR_CUDA_LT_CACHE_H
#define CTRAINER_TENSOR_CUDA_LT_CACHE_H

#include "key_table.h"
#include "lt_desc.h"

#define CT_LT_CACHE_SLOTS 256
#define CT_LT_KEY_WORDS   38
#define CT_LT_ALGO_BYTES  64 /* sizeof(cublasLtMatmulAlgo_t), asserted in matmul.cu */

typedef struct CtLtKey {
    int64_t w[CT_LT_KEY_WORDS];
} CtLtKey;

/* What the heuristic answered for one descriptor. */
typedef struct CtLtChoice {
    bool found; /* false: cuBLASLt has no algorithm (cuBLAS runs the product) */
    unsigned char algo[CT_LT_ALGO_BYTES]; /* a cublasLtMatmulAlgo_t */
    size_t workspace;                     /* bytes the algorithm uses */
} CtLtChoice;

typedef struct CtLtCache {
    bool used[CT_LT_CACHE_SLOTS];
    CtLtKey key[CT_LT_CACHE_SLOTS];
    CtLtChoice choice[CT_LT_CACHE_SLOTS];
    int n; /* used slots */
} CtLtCache;

static inline void ct_lt_key_layout(int64_t *w, const CtLtLayout *l)
{
    w[0] = (int64_t)l->rows;
    w[1] = (int64_t)l->cols;
    w[2] = l->ld;
    w[3] = l->batch;
    w[4] = l->stride;
}

static inline void ct_lt_key(CtLtKey *k, const CtLtDesc *d)
{
    const CtGemmDesc *g = &d->gemm;
    const int64_t gemm[] = {g->op_a,     g->op_b,  g->m,     g->n,        g->k,
                            g->lda,      g->ldb,   g->ldc,   g->stride_a, g->stride_b,
                            g->stride_c, g->batch, g->dtype, g->compute,  g->scale_f64};
    int64_t *w = k->w;
    memcpy(w, gemm, sizeof gemm);
    w += sizeof gemm / sizeof *gemm;
    ct_lt_key_layout(w, &d->a);
    ct_lt_key_layout(w + 5, &d->b);
    ct_lt_key_layout(w + 10, &d->c);
    w[15] = d->epilogue;
    w[16] = d->reduction_free;
    w[17] = (int64_t)d->workspace;
    w[18] = d->aux_ld;
    w[19] = d->align_a;
    w[20] = d->align_b;
    w[21] = d->align_c;
    w[22] = d->align_e;
}

/* True with *out set when d's key was chosen before. */
static inline bool ct_lt_cache_get(const CtLtCache *c, const CtLtKey *k, CtLtChoice *out)
{
    int i = ct_key_find(c->used, c->key, sizeof *k, CT_LT_CACHE_SLOTS, k);
    if (i < 0) return false;
    *out = c->choice[i];
    return true;
}

/* Records the choice for k; false (nothing stored) when the table is full. */
static inline bool ct_lt_cache_put(CtLtCache *c, const CtLtKey *k, const CtLtChoice *v)
{
    int i = ct_key_claim(c->used, c->key, sizeof *k, CT_LT_CACHE_SLOTS, &c->n, k);
    if (i < 0) return false;
    c->choice[i] = *v;
    return true;
}

#endif
