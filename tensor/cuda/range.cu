/* Index range checks for the indexing and cross-entropy kernels, queued
 * without a wait and reported later (range.cuh). The first bad position of
 * a check is the minimum over threads, so it does not depend on the
 * launch; the first check (in queue order) with a bad index is reported. */
#include <stdlib.h>

#include "range.cuh"

__global__ void range_kernel(const int64_t *ix, int64_t n, CtRangeCheck rc,
                             unsigned long long *first_bad)
{
    ct_range_thread(ct_cuda_thread(), ix, n, rc, first_bad);
}

typedef struct CtRangeEntry {
    Tensor *index; /* a reference, until reported */
    CtRangeMsg msg;
} CtRangeEntry;

struct CtRangeLog {
    unsigned long long *dev;  /* CT_RANGE_SLOTS words, ~0 until a check lowers one */
    unsigned long long *host; /* pinned, for reading them back */
    int n;                    /* checks queued, in slots [0, n) */
    CtRangeEntry entry[CT_RANGE_SLOTS];
};

static CtStatus log_new(CtCudaCtx *c, CtRangeLog **out)
{
    size_t bytes = CT_RANGE_SLOTS * sizeof(unsigned long long);
    CtRangeLog *g = (CtRangeLog *)calloc(1, sizeof *g);
    if (!g)
        return ct_error(CT_ERR_OOM, "cuda:%d: out of memory for index checks", c->device);
    CtStatus st = CT_CUDA_STATUS(cudaMalloc((void **)&g->dev, bytes));
    if (st == CT_OK) st = CT_CUDA_STATUS(cudaMallocHost((void **)&g->host, bytes));
    if (st == CT_OK) st = CT_CUDA_STATUS(cudaMemsetAsync(g->dev, 0xFF, bytes, c->stream));
    if (st != CT_OK) {
        if (g->dev) (void)cudaFree(g->dev);
        if (g->host) (void)cudaFreeHost(g->host);
        free(g);
        return st;
    }
    *out = g;
    return CT_OK;
}

/* The error of entry e, whose first bad position is pos. */
static CtStatus entry_error(CtCudaCtx *c, const CtRangeEntry *e, int64_t pos)
{
    int64_t value = 0;
    CT_CUDA_CHECK(cudaMemcpy(&value, (const int64_t *)ct_ptr(e->index) + pos,
                             sizeof value, cudaMemcpyDeviceToHost));
    const CtRangeMsg *m = &e->msg;
    char at[96], range[64];
    if (m->dim < 0)
        snprintf(range, sizeof range, "%lld classes", (long long)m->size);
    else
        snprintf(range, sizeof range, "dim %d of size %lld", m->dim, (long long)m->size);
    return ct_error(CT_ERR_INVALID,
                    "%s: %s %lld at %s %s is out of range for %s (found on cuda:%d "
                    "after the op had returned)",
                    m->op, m->what, (long long)value, m->where,
                    ct_position_str(e->index, pos, at, sizeof at), range, c->device);
}

/* Reads the log back (waiting for the device) and empties it. Under mu. */
static CtStatus drain(CtCudaCtx *c, CtRangeLog *g)
{
    int n = g->n;
    if (n == 0) return CT_OK;
    size_t bytes = (size_t)n * sizeof *g->host;
    CtStatus st = CT_CUDA_STATUS(
        cudaMemcpyAsync(g->host, g->dev, bytes, cudaMemcpyDeviceToHost, c->stream));
    if (st == CT_OK) st = CT_CUDA_STATUS(cudaStreamSynchronize(c->stream));
    for (int k = 0; st == CT_OK && k < n; k++)
        if (g->host[k] != ~0ull) st = entry_error(c, &g->entry[k], (int64_t)g->host[k]);
    for (int k = 0; k < n; k++) tensor_free(g->entry[k].index);
    g->n = 0;
    CtStatus reset = CT_CUDA_STATUS(cudaMemsetAsync(g->dev, 0xFF, bytes, c->stream));
    return st != CT_OK ? st : reset;
}

CtStatus ct_cuda_range_begin(CtCudaCtx *c, unsigned long long **slot)
{
    pthread_mutex_lock(&c->mu);
    CtRangeLog *g = c->ranges;
    CtStatus st = g ? CT_OK : log_new(c, &g);
    if (st == CT_OK) __atomic_store_n(&c->ranges, g, __ATOMIC_RELEASE);
    if (st == CT_OK && g->n == CT_RANGE_SLOTS) st = drain(c, g);
    if (st != CT_OK) {
        pthread_mutex_unlock(&c->mu);
        return st;
    }
    *slot = g->dev + g->n;
    return CT_OK;
}

CtStatus ct_cuda_range_end(CtCudaCtx *c, const Tensor *index, const CtRangeMsg *msg,
                           CtStatus launched)
{
    CtRangeLog *g = c->ranges;
    if (launched == CT_OK) {
        g->entry[g->n].index = tensor_retain((Tensor *)index);
        g->entry[g->n].msg = *msg;
        g->n++;
    }
    pthread_mutex_unlock(&c->mu);
    return launched;
}

CtStatus ct_cuda_check_range(CtCudaCtx *c, const Tensor *index, CtRangeCheck rc,
                             const CtRangeMsg *msg)
{
    int64_t n = tensor_numel(index);
    if (n == 0) return CT_OK;
    unsigned long long *slot;
    CT_RETURN_IF_ERROR(ct_cuda_range_begin(c, &slot));
    range_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        (const int64_t *)ct_ptr(index), n, rc, slot);
    return ct_cuda_range_end(c, index, msg, CT_CUDA_STATUS(cudaGetLastError()));
}

CtStatus ct_cuda_range_report(CtCudaCtx *c)
{
    if (!__atomic_load_n(&c->ranges, __ATOMIC_ACQUIRE)) return CT_OK;
    pthread_mutex_lock(&c->mu);
    CtStatus st = drain(c, c->ranges);
    pthread_mutex_unlock(&c->mu);
    return st;
}

void ct_cuda_range_free(CtCudaCtx *c)
{
    CtRangeLog *g = c->ranges;
    if (!g) return;
    /* the index tensors' references are left: at teardown the instance's
     * allocator may be gone, and the process is ending */
    (void)cudaFree(g->dev);
    (void)cudaFreeHost(g->host);
    free(g);
    c->ranges = NULL;
}
