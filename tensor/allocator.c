/* Caching allocator: one cache per backend instance (so per device), free
 * lists by size class.
 *
 * Sizes are rounded up to one of four classes per power of two (at most 25%
 * waste), and freed blocks go back to their class's list instead of to the
 * system, so a training step that repeats the same shapes allocates from the
 * system only in its first iteration. On a failed system allocation the
 * instance's cache is emptied and the allocation retried once.
 */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

#define NBINS 256

typedef struct FreeBlock {
    void *p;
    struct FreeBlock *next;
} FreeBlock;

struct CtAllocCache {
    pthread_mutex_t mu;
    FreeBlock *bins[NBINS];
    CtAllocStats st;
};

CtAllocCache *ct_alloc_cache_new(void)
{
    CtAllocCache *c = calloc(1, sizeof *c);
    if (c && pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void ct_alloc_cache_free(const CtBackend *be)
{
    ct_backend_empty_cache(be);
    pthread_mutex_destroy(&be->cache->mu);
    free(be->cache);
}

/* Rounds n up to its size class; *bin receives the class index. */
static size_t size_class(size_t n, int *bin)
{
    if (n < 64) n = 64;
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^e < n <= 2^(e+1) */
    size_t step = (size_t)1 << (e - 2);
    size_t size = (n + step - 1) / step * step; /* 5..8 steps */
    *bin = e * 4 + (int)(size / step) - 5;
    return size;
}

/* A block of `size` bytes from the system, emptying the cache and retrying
 * once on failure; NULL + CT_ERR_OOM. */
static void *system_alloc(const CtBackend *be, size_t size)
{
    void *p = be->iface->alloc(be, size);
    if (!p) {
        ct_backend_empty_cache(be);
        p = be->iface->alloc(be, size);
    }
    CtAllocCache *c = be->cache;
    if (!p) {
        char d[16];
        pthread_mutex_lock(&c->mu);
        size_t in_use = c->st.in_use;
        pthread_mutex_unlock(&c->mu);
        ct_error(CT_ERR_OOM, "allocating %zu bytes on %s failed (%zu bytes in use there)",
                 size, ct_device_str(be->device, d), in_use);
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    c->st.n_allocs++;
    pthread_mutex_unlock(&c->mu);
    return p;
}

void *ct_backend_alloc(const CtBackend *be, size_t nbytes)
{
    CtAllocCache *c = be->cache;
    int bin;
    size_t size = size_class(nbytes, &bin);
    if (ct_alloc_injected()) { /* the test hook of mem.h */
        char d[16];
        ct_error(CT_ERR_OOM, "allocating %zu bytes on %s failed (injected)", size,
                 ct_device_str(be->device, d));
        return NULL;
    }
    void *p = NULL;
    pthread_mutex_lock(&c->mu);
    FreeBlock *fb = c->bins[bin];
    if (fb) {
        c->bins[bin] = fb->next;
        c->st.cached -= size;
        p = fb->p;
    }
    pthread_mutex_unlock(&c->mu);
    free(fb);
    if (!p && !(p = system_alloc(be, size))) return NULL;
    pthread_mutex_lock(&c->mu);
    c->st.in_use += size;
    if (c->st.in_use > c->st.peak) c->st.peak = c->st.in_use;
    pthread_mutex_unlock(&c->mu);
    return p;
}

void ct_backend_free(const CtBackend *be, void *p, size_t nbytes)
{
    if (!p) return;
    CtAllocCache *c = be->cache;
    int bin;
    size_t size = size_class(nbytes, &bin);
    FreeBlock *fb = malloc(sizeof *fb);
    if (!fb) { /* cannot cache it: give it back */
        be->iface->free(be, p);
        pthread_mutex_lock(&c->mu);
        c->st.in_use -= size;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    fb->p = p;
    pthread_mutex_lock(&c->mu);
    fb->next = c->bins[bin];
    c->bins[bin] = fb;
    c->st.in_use -= size;
    c->st.cached += size;
    pthread_mutex_unlock(&c->mu);
}

void ct_backend_empty_cache(const CtBackend *be)
{
    CtAllocCache *c = be->cache;
    pthread_mutex_lock(&c->mu);
    for (int b = 0; b < NBINS; b++) {
        FreeBlock *fb = c->bins[b];
        while (fb) {
            FreeBlock *next = fb->next;
            be->iface->free(be, fb->p);
            free(fb);
            fb = next;
        }
        c->bins[b] = NULL;
    }
    c->st.cached = 0;
    pthread_mutex_unlock(&c->mu);
}

CtAllocStats ct_backend_alloc_stats(const CtBackend *be)
{
    CtAllocCache *c = be->cache;
    pthread_mutex_lock(&c->mu);
    CtAllocStats st = c->st;
    pthread_mutex_unlock(&c->mu);
    return st;
}

/* ------------------------------------------- by device (public, tensor.c) */

void *ct_device_alloc(CtDevice dev, size_t nbytes)
{
    const CtBackend *be = ct_backend_for(dev);
    return be ? ct_backend_alloc(be, nbytes) : NULL;
}

void ct_device_free(CtDevice dev, void *p, size_t nbytes)
{
    const CtBackend *be = p ? ct_backend_for(dev) : NULL;
    if (be) ct_backend_free(be, p, nbytes);
}

/* The functions below report on instances that exist: a device never used
 * has nothing in use or cached, and asking does not create its context. */

void ct_alloc_empty_cache(CtDevice dev)
{
    const CtBackend *be = ct_backend_peek(dev);
    if (be) ct_backend_empty_cache(be);
}

CtAllocStats ct_alloc_stats(CtDevice dev)
{
    const CtBackend *be = ct_backend_peek(dev);
    CtAllocStats st = {0};
    return be ? ct_backend_alloc_stats(be) : st;
}

CtMemoryStats ct_memory_stats(CtDevice dev)
{
    CtAllocStats st = ct_alloc_stats(dev);
    CtMemoryStats m = {.allocated = st.in_use, .cached = st.cached, .peak = st.peak};
    return m;
}

void ct_alloc_reset_peak(CtDevice dev)
{
    const CtBackend *be = ct_backend_peek(dev);
    if (!be) return;
    pthread_mutex_lock(&be->cache->mu);
    be->cache->st.peak = be->cache->st.in_use;
    pthread_mutex_unlock(&be->cache->mu);
}
