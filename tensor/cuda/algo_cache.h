/* Private to tensor/cuda: the convolution algorithms an instance has chosen,
 * by call. Asking cuDNN's heuristics costs one to several milliseconds of
 * host time per call (cuDNN 9 builds an engine list each time), more than the
 * convolution itself for most layers, and a training step repeats the same
 * few shapes: each is asked once per instance and then found here.
 *
 * A fixed table of CT_ALGO_CACHE_SLOTS entries with linear probing, filled
 * to three quarters at most; a call that finds the table full asks cuDNN
 * again every time (correct, only slower). The key is every input of the
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
} CtDnnChoice;

typedef struct CtAlgoCache {
    struct {
        bool used;
        CtDnnAlgoKey key;
        CtDnnChoice choice;
    } slot[CT_ALGO_CACHE_SLOTS];
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

/* FNV-1a over the key's bytes. */
static inline uint64_t ct_dnn_algo_hash(const CtDnnAlgoKey *k)
{
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* The slot holding k, or the empty slot where it would go; -1 when the
 * table has neither (it never fills past three quarters, so only a
 * corrupted table). */
static inline int ct_algo_cache_slot(const CtAlgoCache *c, const CtDnnAlgoKey *k)
{
    int i = (int)(ct_dnn_algo_hash(k) % CT_ALGO_CACHE_SLOTS);
    for (int probe = 0; probe < CT_ALGO_CACHE_SLOTS; probe++) {
        if (!c->slot[i].used || !memcmp(&c->slot[i].key, k, sizeof *k)) return i;
        i = (i + 1) % CT_ALGO_CACHE_SLOTS;
    }
    return -1;
}

/* True with *out set when k was chosen before. */
static inline bool ct_algo_cache_get(const CtAlgoCache *c, const CtDnnAlgoKey *k,
                                     CtDnnChoice *out)
{
    int i = ct_algo_cache_slot(c, k);
    if (i < 0 || !c->slot[i].used) return false;
    *out = c->slot[i].choice;
    return true;
}

/* Records the choice for k; false (nothing stored) when the table is full. */
static inline bool ct_algo_cache_put(CtAlgoCache *c, const CtDnnAlgoKey *k, CtDnnChoice v)
{
    int i = ct_algo_cache_slot(c, k);
    if (i < 0) return false;
    if (!c->slot[i].used) {
        if (c->n >= CT_ALGO_CACHE_SLOTS / 4 * 3) return false;
        c->slot[i].used = true;
        memcpy(&c->slot[i].key, k, sizeof *k);
        c->n++;
    }
    c->slot[i].choice = v;
    return true;
}

#endif
