/* Pinned (page-locked) host memory with a small cache.
 *
 * cudaHostAlloc is slow and cudaFreeHost synchronises the device, so freed
 * blocks are kept for reuse, as the caching allocator does for device
 * memory. The cache belongs to the context of the instance that provides
 * pinned memory (ct_pinned_backend: the process's first CUDA instance), and
 * every call here makes that instance's device current first, so a loader
 * thread never starts a context on another GPU. A block may still be read by an
 * asynchronous copy when the host frees it (the loader frees a pinned batch
 * right after queueing its copy), so a freed block carries one event per
 * instance that has had asynchronous copies, recorded on that instance's
 * stream at the time of the free; the block is handed out again only once
 * those events have completed. Its events then go to a spare list per
 * device, and the next free records those instead of creating new ones: a
 * batch tensor's round trip through the cache costs two event records and
 * queries, not a create and a destroy each as well. A block that leaves the
 * cache for good is first waited for (its events, or every stream with
 * asynchronous copies), not left to cudaFreeHost's synchronisation; when
 * the cache is full, its oldest idle block makes room for the freed one.
 *
 * Each block starts with a header that records its size, so host_free needs
 * only the pointer it handed out.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"

#define HEADER      64   /* keeps the payload 64-byte aligned */
#define PAGE        4096 /* sizes are rounded to pages for reuse */
#define MAX_CACHED  64   /* cached blocks; beyond, freed at once */
#define MAX_REUSE_X 2    /* a cached block serves requests >= size/2 */

struct CtPinnedBlock {
    void *base;
    size_t size;
    int n_ev;
    cudaEvent_t ev[CT_MAX_CUDA_DEVICES];
    int ev_dev[CT_MAX_CUDA_DEVICES]; /* the device of ev[i] */
    CtPinnedBlock *next;
};

void ct_cuda_pinned_init(CtPinnedCache *pc)
{
    pthread_mutex_init(&pc->mu, NULL);
    pc->head = NULL;
    pc->n = 0;
    memset(pc->n_spare, 0, sizeof pc->n_spare);
}

/* Whether every event of b has completed (an event that reports an error
 * counts as complete: the copy it guards is not running). */
static bool block_idle(CtPinnedBlock *b)
{
    for (int i = 0; i < b->n_ev; i++) {
        cudaError_t e = cudaEventQuery(b->ev[i]);
        /* clears "not ready" too: the runtime keeps it as the thread's
         * last error, which the next launch check would report */
        if (e != cudaSuccess) (void)cudaGetLastError();
        if (e == cudaErrorNotReady) return false;
    }
    return true;
}

/* Waits until no copy reads b: its events, or where they could not all be
 * recorded (!complete), every stream that has had asynchronous copies. */
static void block_wait(CtPinnedBlock *b, bool complete)
{
    for (int i = 0; complete && i < b->n_ev; i++)
        if (cudaEventSynchronize(b->ev[i]) != cudaSuccess) (void)cudaGetLastError();
    int n = complete ? 0 : ct_cuda_device_count();
    for (int d = 0; d < n; d++) {
        const CtBackend *be = ct_backend_peek(ct_cuda(d));
        CtCudaCtx *c = be ? (CtCudaCtx *)be->context : NULL;
        if (c && __atomic_load_n(&c->async_copies, __ATOMIC_RELAXED) &&
            cudaStreamSynchronize(c->stream) != cudaSuccess)
            (void)cudaGetLastError();
    }
}

/* Gives b's events to the spare lists (destroying those that find their
 * list full). Under pc->mu. */
static void block_drop_events(CtPinnedCache *pc, CtPinnedBlock *b)
{
    for (int i = 0; i < b->n_ev; i++) {
        int d = b->ev_dev[i];
        if (pc->n_spare[d] < CT_PINNED_SPARE_EVENTS)
            pc->spare[d][pc->n_spare[d]++] = b->ev[i];
        else
            (void)cudaEventDestroy(b->ev[i]);
    }
    b->n_ev = 0;
}

/* A spare event of device d (current), or a new one; false on failure. */
static bool take_event(CtPinnedCache *pc, int d, cudaEvent_t *ev)
{
    pthread_mutex_lock(&pc->mu);
    bool spare = pc->n_spare[d] > 0;
    if (spare) *ev = pc->spare[d][--pc->n_spare[d]];
    pthread_mutex_unlock(&pc->mu);
    if (spare) return true;
    if (cudaEventCreateWithFlags(ev, cudaEventDisableTiming) == cudaSuccess) return true;
    (void)cudaGetLastError();
    return false;
}

/* Takes an idle cached block of at least `size` bytes (and not much more). */
static void *take_cached(CtPinnedCache *pc, size_t size)
{
    void *base = NULL;
    pthread_mutex_lock(&pc->mu);
    for (CtPinnedBlock **pp = &pc->head; *pp; pp = &(*pp)->next) {
        CtPinnedBlock *b = *pp;
        if (b->size < size || b->size > MAX_REUSE_X * size || !block_idle(b)) continue;
        *pp = b->next;
        pc->n--;
        base = b->base;
        block_drop_events(pc, b);
        free(b);
        break;
    }
    pthread_mutex_unlock(&pc->mu);
    return base;
}

void *ct_cuda_host_alloc(const CtBackend *be, size_t nbytes)
{
    CtCudaCtx *c;
    if (ct_cuda_enter(be, &c) != CT_OK) return NULL;
    size_t size = (nbytes + HEADER + PAGE - 1) / PAGE * PAGE;
    void *base = take_cached(&c->pinned, size);
    if (!base) {
        ct_cuda_mark_used(); /* page-locking makes a context */
        cudaError_t e = cudaHostAlloc(&base, size, cudaHostAllocPortable);
        if (e != cudaSuccess) { /* give the cache back and retry once */
            (void)cudaGetLastError();
            ct_cuda_host_empty_cache(c);
            e = cudaHostAlloc(&base, size, cudaHostAllocPortable);
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        *(size_t *)base = size;
    }
    return (char *)base + HEADER;
}

/* Records an event on the stream of every instance that has had
 * asynchronous copies; false if that fails (the block must then not be
 * cached). */
static bool record_events(CtPinnedCache *pc, CtPinnedBlock *b)
{
    int n = ct_cuda_device_count();
    for (int d = 0; d < n; d++) {
        const CtBackend *be = ct_backend_peek(ct_cuda(d));
        CtCudaCtx *c = be ? (CtCudaCtx *)be->context : NULL;
        if (!c || !__atomic_load_n(&c->async_copies, __ATOMIC_RELAXED)) continue;
        cudaEvent_t ev;
        if (ct_cuda_enter(be, &c) != CT_OK || !take_event(pc, d, &ev)) return false;
        b->ev_dev[b->n_ev] = d;
        b->ev[b->n_ev++] = ev;
        if (cudaEventRecord(ev, c->stream) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
    }
    return true;
}

/* Unlinks the oldest idle cached block, or returns NULL. Under pc->mu. */
static CtPinnedBlock *unlink_oldest_idle(CtPinnedCache *pc)
{
    CtPinnedBlock **oldest = NULL;
    for (CtPinnedBlock **pp = &pc->head; *pp; pp = &(*pp)->next)
        if (block_idle(*pp)) oldest = pp;
    if (!oldest) return NULL;
    CtPinnedBlock *b = *oldest;
    *oldest = b->next;
    pc->n--;
    return b;
}

/* Waits for b (complete: its events cover every copy), gives its events
 * back and frees it. */
static void block_release(CtPinnedCache *pc, CtPinnedBlock *b, bool complete)
{
    block_wait(b, complete);
    pthread_mutex_lock(&pc->mu);
    block_drop_events(pc, b);
    pthread_mutex_unlock(&pc->mu);
    (void)CT_CUDA_STATUS(cudaFreeHost(b->base));
    free(b);
}

void ct_cuda_host_free(const CtBackend *be, void *p)
{
    if (!p) return;
    CtCudaCtx *c;
    (void)ct_cuda_enter(be, &c); /* the provider's device current; a free goes on */
    CtPinnedCache *pc = &((CtCudaCtx *)be->context)->pinned;
    void *base = (char *)p - HEADER;
    CtPinnedBlock *b = (CtPinnedBlock *)calloc(1, sizeof *b);
    if (!b) {
        CtPinnedBlock none = {};
        block_wait(&none, false);
        (void)CT_CUDA_STATUS(cudaFreeHost(base));
        return;
    }
    b->base = base;
    b->size = *(size_t *)base;
    bool ok = record_events(pc, b);
    CtPinnedBlock *evicted = NULL;
    pthread_mutex_lock(&pc->mu);
    if (ok && pc->n >= MAX_CACHED) evicted = unlink_oldest_idle(pc);
    if (ok && pc->n < MAX_CACHED) {
        b->next = pc->head;
        pc->head = b;
        pc->n++;
        b = NULL; /* kept */
    }
    pthread_mutex_unlock(&pc->mu);
    if (evicted) block_release(pc, evicted, true);
    if (b) block_release(pc, b, ok);
}

void ct_cuda_host_empty_cache(CtCudaCtx *ctx)
{
    CtPinnedCache *pc = &ctx->pinned;
    (void)ct_cuda_select_device(ctx->device);
    pthread_mutex_lock(&pc->mu);
    CtPinnedBlock *b = pc->head;
    pc->head = NULL;
    pc->n = 0;
    cudaEvent_t ev[CT_MAX_CUDA_DEVICES * CT_PINNED_SPARE_EVENTS];
    int n_ev = 0;
    for (int d = 0; d < CT_MAX_CUDA_DEVICES; d++)
        for (; pc->n_spare[d] > 0; pc->n_spare[d]--)
            ev[n_ev++] = pc->spare[d][pc->n_spare[d] - 1];
    pthread_mutex_unlock(&pc->mu);
    for (int i = 0; i < n_ev; i++) (void)cudaEventDestroy(ev[i]);
    while (b) {
        CtPinnedBlock *next = b->next;
        block_wait(b, true);
        for (int i = 0; i < b->n_ev; i++) (void)cudaEventDestroy(b->ev[i]);
        (void)CT_CUDA_STATUS(cudaFreeHost(b->base));
        free(b);
        b = next;
    }
}
