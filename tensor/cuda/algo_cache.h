/* Private to tensor/cuda: the convolution algorithms an instance has chosen,
 * by call. Asking cuDNN's heuristics costs one to several milliseconds of
 * host time per call (cuDNN 9 builds an engine list each time), more than the
 * convolution itself for most layers, and a training step repeats the same
 * few shapes: each is asked once per instance and then found here.
 *
 * A fixed table of CT_ALGO_CACHE_SLOTS entries (key_table.h: linear
 * probing, filled to three quarters at most; a call that finds the table
 * full asks cuDNN again every time). The key is every input of the
 * choice: the call kind, the whole CtDnnConv (shapes, strides, padding,
 * dtypes, math) and the settings that make or filter the list
 * (deterministic, TF32, cuDNN benchmark mode). Pure C, no CUDA: unit-tested
 * on the CPU (tests/tensor/test_dnn_desc.c). Not locked: the caller
 * serialises (CtCudaCtx.mu). */
#ifndef CTRAINER_TENSOR_CUDA_ALGO_CACHE_H
#define CTRAINER_TENSOR_CUDA_ALGO_CACHE_H

#include <stdint.h>
#include <string.h>

#include "dnn_desc.h"
#include "key_table.h"

#define CT_ALGO_CACHE_SLOTS 256

typedef enum CtDnnCallKind {
    CT_DNN_CALL_FORWARD,
    CT_DNN_CALL_BACKWARD_DATA,
    CT_DNN_CALL_BACKWARD_FILTER,
} CtDnnCallKind;

/* Compared bytewise: always built by ct_dnn_algo_key (padding zeroed). */
typedef struct CtDnnAlgoKey {
    int kind; /* CtDnnCallKind */
    CtDnnConv conv;
    bool deterministic, allow_tf32, benchmark;
} CtDnnAlgoKey;

typedef struct CtDnnChoice {
    int algo;         /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    int math;         /* cudnnMathType_t */
    size_t workspace; /* bytes */
    void *objects;    /* conv.cu's descriptors for the key, math type set;
                         owned by the cache, only read once stored */
} CtDnnChoice;

typedef struct CtAlgoCache {
    bool used[CT_ALGO_CACHE_SLOTS];
    CtDnnAlgoKey key[CT_ALGO_CACHE_SLOTS];
    CtDnnChoice choice[CT_ALGO_CACHE_SLOTS];
    int n; /* used slots */
} CtAlgoCache;

static inline void ct_dnn_algo_key(CtDnnAlgoKey *k, CtDnnCallKind kind,
                                   const CtDnnConv *d, bool deterministic,
                                   bool allow_tf32, bool benchmark)
{
    memset(k, 0, sizeof *k);
    k->kind = (int)kind;
    memcpy(&k->conv, d, sizeof *d);
    k->deterministic = deterministic;
    k->allow_tf32 = allow_tf32;
    k->benchmark = benchmark;
}

/* True with *out set when k was chosen before. */
static inline bool ct_algo_cache_get(const CtAlgoCache *c, const CtDnnAlgoKey *k,
                                     CtDnnChoice *out)
{
    int i = ct_key_find(c->used, c->key, sizeof *k, CT_ALGO_CACHE_SLOTS, k);
    if (i < 0) return false;
    *out = c->choice[i];
    return true;
}

/* Records the choice for k; false (nothing stored) when the table is full. */
static inline bool ct_algo_cache_put(CtAlgoCache *c, const CtDnnAlgoKey *k, CtDnnChoice v)
{
    int i = ct_key_claim(c->used, c->key, sizeof *k, CT_ALGO_CACHE_SLOTS, &c->n, k);
    if (i < 0) return false;
    c->choice[i] = v;
    return true;
}

#endif
