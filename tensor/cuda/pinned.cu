/* Pinned (page-locked) host memory with a small cache.
 *
 * cudaHostAlloc is slow and cudaFreeHost synchronises the device, so freed
 * blocks are kept for reuse, as the caching allocator does for device
 * memory. A block may still be read by an asynchronous copy when the host
 * frees it (the loader frees a pinned batch right after queueing its copy),
 * so a freed block carries one event per device that has had asynchronous
 * copies, recorded on that device's stream at the time of the free; the
 * block is handed out again only once those events have completed.
 *
 * Each block starts with a header that records its size, so host_free needs
 * only the pointer it handed out.
 */
#include <pthread.h>
#include <stdlib.h>

#include "common.cuh"

#define HEADER      64   /* keeps the payload 64-byte aligned */
#define PAGE        4096 /* sizes are rounded to pages for reuse */
#define MAX_CACHED  64   /* cached blocks; beyond, freed at once */
#define MAX_REUSE_X 2    /* a cached block serves requests >= size/2 */

typedef struct CachedBlock {
    void *base;
    size_t size;
    int n_ev;
    cudaEvent_t ev[CT_CUDA_MAX_DEVICES];
    struct CachedBlock *next;
} CachedBlock;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static CachedBlock *cache;
static int n_cached;
static unsigned async_devices; /* bit d: device d has had asynchronous copies */

void ct_cuda_note_async(int device)
{
    __atomic_or_fetch(&async_devices, 1u << device, __ATOMIC_RELAXED);
}

/* Whether every event of b has completed (an event that reports an error
 * counts as complete: the copy it guards is not running). */
static bool block_idle(CachedBlock *b)
{
    for (int i = 0; i < b->n_ev; i++) {
        cudaError_t e = cudaEventQuery(b->ev[i]);
        if (e == cudaErrorNotReady) return false;
        if (e != cudaSuccess) (void)cudaGetLastError();
    }
    return true;
}

static void block_drop_events(CachedBlock *b)
{
    for (int i = 0; i < b->n_ev; i++) (void)cudaEventDestroy(b->ev[i]);
    b->n_ev = 0;
}

/* Takes an idle cached block of at least `size` bytes (and not much more). */
static void *take_cached(size_t size)
{
    void *base = NULL;
    pthread_mutex_lock(&mu);
    for (CachedBlock **pp = &cache; *pp; pp = &(*pp)->next) {
        CachedBlock *b = *pp;
        if (b->size < size || b->size > MAX_REUSE_X * size || !block_idle(b)) continue;
        *pp = b->next;
        n_cached--;
        base = b->base;
        block_drop_events(b);
        free(b);
        break;
    }
    pthread_mutex_unlock(&mu);
    return base;
}

void *ct_cuda_host_alloc(size_t nbytes)
{
    size_t size = (nbytes + HEADER + PAGE - 1) / PAGE * PAGE;
    void *base = take_cached(size);
    if (!base) {
        cudaError_t e = cudaHostAlloc(&base, size, cudaHostAllocPortable);
        if (e != cudaSuccess) { /* give the cache back and retry once */
            (void)cudaGetLastError();
            ct_cuda_host_empty_cache();
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

/* Records an event on the stream of every device with asynchronous copies;
 * false if that fails (the block must then not be cached). */
static bool record_events(CachedBlock *b)
{
    unsigned devs = __atomic_load_n(&async_devices, __ATOMIC_RELAXED);
    for (int d = 0; d < CT_CUDA_MAX_DEVICES; d++) {
        if (!(devs & (1u << d))) continue;
        CtCudaCtx *c;
        cudaEvent_t ev;
        if (ct_cuda_ctx(d, &c) != CT_OK) return false;
        if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
        b->ev[b->n_ev++] = ev;
        if (cudaEventRecord(ev, c->stream) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
    }
    return true;
}

void ct_cuda_host_free(void *p)
{
    if (!p) return;
    void *base = (char *)p - HEADER;
    CachedBlock *b = (CachedBlock *)calloc(1, sizeof *b);
    if (b) {
        b->base = base;
        b->size = *(size_t *)base;
        bool ok = record_events(b);
        pthread_mutex_lock(&mu);
        if (ok && n_cached < MAX_CACHED) {
            b->next = cache;
            cache = b;
            n_cached++;
            base = NULL; /* kept */
        }
        pthread_mutex_unlock(&mu);
        if (base) {
            block_drop_events(b);
            free(b);
        }
    }
    /* not cached: cudaFreeHost synchronises with the device, so a copy that
     * still reads the block finishes first */
    if (base) (void)CT_CUDA_STATUS(cudaFreeHost(base));
}

void ct_cuda_host_empty_cache(void)
{
    pthread_mutex_lock(&mu);
    CachedBlock *b = cache;
    cache = NULL;
    n_cached = 0;
    pthread_mutex_unlock(&mu);
    while (b) {
        CachedBlock *next = b->next;
        block_drop_events(b);
        (void)CT_CUDA_STATUS(cudaFreeHost(b->base));
        free(b);
        b = next;
    }
}
