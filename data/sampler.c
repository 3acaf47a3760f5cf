/* Samplers: the order of dataset indices in an epoch. */
#include <stdlib.h>

#include "data_internal.h"

typedef struct BasicSampler {
    Sampler base;
    int64_t n;
    uint64_t seed;
} BasicSampler;

static int64_t basic_len(const Sampler *s)
{
    return ((const BasicSampler *)s)->n;
}

static CtStatus seq_fill(const Sampler *s, int64_t epoch, int64_t *out)
{
    for (int64_t i = 0; i < ((const BasicSampler *)s)->n; i++) out[i] = i;
    return CT_OK;
}

static CtStatus rand_fill(const Sampler *s, int64_t epoch, int64_t *out)
{
    const BasicSampler *b = (const BasicSampler *)s;
    CtGenerator g =
        data_ctx_generator(&(DataCtx){b->seed, epoch, 0}, DATA_PURPOSE_SHUFFLE);
    return ct_randperm(&g, b->n, out);
}

static void basic_free(Sampler *s)
{
    free(s);
}

static const SamplerVtable seq_vt = {"sequential", basic_len, seq_fill, basic_free, NULL};
static const SamplerVtable rand_vt = {"random", basic_len, rand_fill, basic_free, NULL};

static Sampler *basic_create(const SamplerVtable *vt, int64_t n, uint64_t seed)
{
    if (n < 0) {
        ct_error(CT_ERR_INVALID, "%s sampler: negative length %lld", vt->type,
                 (long long)n);
        return NULL;
    }
    BasicSampler *b = malloc(sizeof *b);
    if (!b) {
        ct_error(CT_ERR_OOM, "%s sampler: out of memory", vt->type);
        return NULL;
    }
    *b = (BasicSampler){{vt}, n, seed};
    return &b->base;
}

Sampler *data_sampler_sequential_create(int64_t n)
{
    return basic_create(&seq_vt, n, 0);
}

Sampler *data_sampler_random_create(int64_t n, uint64_t seed)
{
    return basic_create(&rand_vt, n, seed);
}

int64_t data_sampler_len(const Sampler *s)
{
    if (!s || !s->vt) {
        ct_error(CT_ERR_NULL, "data_sampler_len: NULL sampler");
        return -1;
    }
    return s->vt->len(s);
}

CtStatus data_sampler_fill(const Sampler *s, int64_t epoch, int64_t *out)
{
    if (!s || !s->vt || !out)
        return ct_error(CT_ERR_NULL, "data_sampler_fill: NULL %s",
                        out ? "sampler" : "output");
    return s->vt->fill(s, epoch, out);
}

void data_sampler_free(Sampler *s)
{
    if (s && s->vt && s->vt->free) s->vt->free(s);
}

int64_t data_sampler_num_real(const Sampler *s)
{
    if (!s || !s->vt) {
        ct_error(CT_ERR_NULL, "data_sampler_num_real: NULL sampler");
        return -1;
    }
    return s->vt->num_real ? s->vt->num_real(s) : s->vt->len(s);
}
