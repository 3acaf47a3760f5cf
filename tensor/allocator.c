/* Caching allocator: per device, free lists by size class.
 *
 * Sizes are rounded up to one of four classes per power of two (at most 25%
 * waste), and freed blocks go back to their class's list instead of to the
 * system, so a training step that repeats the same shapes allocates from the
 * system only in its first iteration. On a failed system allocation the
 * device's cache is emptied and the allocation retried once.
 */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

#define NBINS            256
#define MAX_CUDA_DEVICES 16

typedef struct FreeBlock {
    void *p;
    struct FreeBlock *next;
} FreeBlock;

typedef struct DevCache {
    pthread_mutex_t mu;
    FreeBlock *bins[NBINS];
    CtAllocStats st;
} DevCache;

static DevCache caches[1 + MAX_CUDA_DEVICES];
static pthread_once_t caches_once = PTHREAD_ONCE_INIT;

static void caches_init(void)
{
    for (int i = 0; i <= MAX_CUDA_DEVICES; i++) pthread_mutex_init(&caches[i].mu, NULL);
}

static DevCache *cache_for(CtDevice dev)
{
    pthread_once(&caches_once, caches_init);
    if (dev.type == CT_DEVICE_CPU) return &caches[0];
    if (dev.index < 0 || dev.index >= MAX_CUDA_DEVICES) return NULL;
    return &caches[1 + dev.index];
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

void *ct_device_alloc(CtDevice dev, size_t nbytes)
{
    DevCache *c = cache_for(dev);
    const CtBackend *be = ct_backend_for(dev);
    if (!c || !be) return NULL;
    int bin;
    size_t size = size_class(nbytes, &bin);
    if (ct_alloc_injected()) { /* the test hook of mem.h */
        char d[16];
        ct_error(CT_ERR_OOM, "allocating %zu bytes on %s failed (injected)", size,
                 ct_device_str(dev, d));
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
    if (!p) {
        p = be->alloc(dev.index, size);
        if (!p) {
            ct_alloc_empty_cache(dev);
            p = be->alloc(dev.index, size);
        }
        if (!p) {
            char d[16];
            ct_error(CT_ERR_OOM, "allocating %zu bytes on %s failed", size,
                     ct_device_str(dev, d));
            return NULL;
        }
        pthread_mutex_lock(&c->mu);
        c->st.n_allocs++;
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_lock(&c->mu);
    c->st.in_use += size;
    if (c->st.in_use > c->st.peak) c->st.peak = c->st.in_use;
    pthread_mutex_unlock(&c->mu);
    return p;
}

void ct_device_free(CtDevice dev, void *p, size_t nbytes)
{
    if (!p) return;
    DevCache *c = cache_for(dev);
    int bin;
    size_t size = size_class(nbytes, &bin);
    FreeBlock *fb = malloc(sizeof *fb);
    if (!fb) { /* cannot cache it: give it back */
        ct_backend_for(dev)->free(dev.index, p);
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

void ct_alloc_empty_cache(CtDevice dev)
{
    DevCache *c = cache_for(dev);
    const CtBackend *be = ct_backend_for(dev);
    if (!c || !be) return;
    pthread_mutex_lock(&c->mu);
    for (int b = 0; b < NBINS; b++) {
        FreeBlock *fb = c->bins[b];
        while (fb) {
            FreeBlock *next = fb->next;
            be->free(dev.index, fb->p);
            free(fb);
            fb = next;
        }
        c->bins[b] = NULL;
    }
    c->st.cached = 0;
    pthread_mutex_unlock(&c->mu);
}

CtAllocStats ct_alloc_stats(CtDevice dev)
{
    DevCache *c = cache_for(dev);
    CtAllocStats st = {0};
    if (!c) return st;
    pthread_mutex_lock(&c->mu);
    st = c->st;
    pthread_mutex_unlock(&c->mu);
    return st;
}

void ct_alloc_reset_peak(CtDevice dev)
{
    DevCache *c = cache_for(dev);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->st.peak = c->st.in_use;
    pthread_mutex_unlock(&c->mu);
}
