/* The distributed sampler: one process's rank::world share of another
 * sampler's order, by PyTorch's DistributedSampler rule (see data.h). */
#include <stdlib.h>

#include "data_internal.h"

typedef struct DistSampler {
    Sampler base;
    Sampler *inner; /* freed with the sampler when own */
    bool own;
    int rank, world;
    int64_t n;     /* len(inner) at creation */
    int64_t total; /* positions of the padded (or cut) order */
} DistSampler;

static int64_t dist_len(const Sampler *s)
{
    const DistSampler *d = (const DistSampler *)s;
    return d->total / d->world;
}

/* Positions rank + j * world below n are real; the shard's positions grow
 * with j, so they are its first entries. */
static int64_t dist_num_real(const Sampler *s)
{
    const DistSampler *d = (const DistSampler *)s;
    int64_t real = d->rank < d->n ? (d->n - d->rank + d->world - 1) / d->world : 0;
    int64_t len = dist_len(s);
    return real < len ? real : len;
}

static CtStatus dist_fill(const Sampler *s, int64_t epoch, int64_t *out)
{
    const DistSampler *d = (const DistSampler *)s;
    int64_t n = data_sampler_len(d->inner);
    if (n != d->n)
        return ct_error(CT_ERR_STATE,
                        "distributed sampler: the %s sampler's length changed from "
                        "%lld to %lld",
                        d->inner->vt->type, (long long)d->n, (long long)n);
    if (n == 0) return CT_OK;
    int64_t *order = malloc((size_t)n * sizeof *order);
    if (!order) return ct_error(CT_ERR_OOM, "distributed sampler: out of memory");
    CtStatus st = data_sampler_fill(d->inner, epoch, order);
    int64_t len = dist_len(s);
    for (int64_t j = 0; st == CT_OK && j < len; j++)
        out[j] = order[(d->rank + j * d->world) % n];
    free(order);
    return st;
}

static void dist_free(Sampler *s)
{
    DistSampler *d = (DistSampler *)s;
    if (d->own) data_sampler_free(d->inner);
    free(d);
}

static const SamplerVtable dist_vt = {
    .type = "distributed",
    .len = dist_len,
    .fill = dist_fill,
    .free = dist_free,
    .num_real = dist_num_real,
};

static CtStatus check_args(Sampler *base, int rank, int world_size)
{
    if (!base)
        return ct_last_status() != CT_OK
                   ? ct_last_status()
                   : ct_error(CT_ERR_NULL, "distributed sampler: NULL base sampler");
    if (world_size < 1)
        return ct_error(CT_ERR_INVALID,
                        "distributed sampler: world_size must be >= 1, got %d",
                        world_size);
    if (rank < 0 || rank >= world_size)
        return ct_error(CT_ERR_INVALID, "distributed sampler: rank %d outside [0, %d)",
                        rank, world_size);
    int64_t n = data_sampler_len(base);
    if (n < 0)
        return ct_error(CT_ERR_INVALID,
                        "distributed sampler: the %s sampler has length %lld",
                        base->vt->type, (long long)n);
    return CT_OK;
}

Sampler *data_sampler_distributed_wrap(Sampler *base, bool own, int rank, int world_size,
                                       bool drop_last)
{
    DistSampler *d = NULL;
    if (check_args(base, rank, world_size) == CT_OK && !(d = malloc(sizeof *d)))
        ct_error(CT_ERR_OOM, "distributed sampler: out of memory");
    if (!d) {
        if (own) data_sampler_free(base);
        return NULL;
    }
    int64_t n = data_sampler_len(base), w = world_size;
    int64_t total = drop_last ? n / w * w : (n + w - 1) / w * w;
    *d = (DistSampler){{&dist_vt}, base, own, rank, world_size, n, total};
    return &d->base;
}

Sampler *data_sampler_distributed_create(Sampler *base, int rank, int world_size,
                                         bool drop_last)
{
    return data_sampler_distributed_wrap(base, true, rank, world_size, drop_last);
}
