/* Tensor lifecycle: creation, references, destruction and accessors. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool ct_check_geometry(const char *op, int ndim, const int64_t *shape, CtDType dt)
{
    if ((unsigned)dt >= CT_DTYPE_COUNT) {
        ct_error(CT_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
        return false;
    }
    if (ndim < 0 || ndim > CT_MAX_DIMS) {
        ct_error(CT_ERR_SHAPE, "%s: ndim %d outside 0..%d", op, ndim, CT_MAX_DIMS);
        return false;
    }
    if (ndim > 0 && !shape) {
        ct_error(CT_ERR_NULL, "%s: NULL shape for ndim %d", op, ndim);
        return false;
    }
    /* bytes of the storage, and the contiguous strides (which count a size-0
     * dim as 1), must fit in int64 */
    int64_t span = (int64_t)ct_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            ct_error(CT_ERR_SHAPE, "%s: negative size %lld in dim %d", op,
                     (long long)shape[i], i);
            return false;
        }
        if (shape[i] > 1 && span > INT64_MAX / shape[i]) {
            char s[96];
            ct_error(CT_ERR_SHAPE, "%s: shape %s of %s is too large to address", op,
                     ct_shape_str(ndim, shape, s, sizeof s), ct_dtype_name(dt));
            return false;
        }
        if (shape[i] > 1) span *= shape[i];
    }
    return true;
}

/* Header cache. A data loader makes several small tensors per sample, and
 * malloc/free of their Tensor and CtStorage headers was the largest cost of
 * loading (glibc's free, worst when a worker's tensors are freed on the
 * consumer's thread). Freed headers therefore go to a bounded list of the
 * thread that frees them (whichever thread allocated them), and that
 * thread's next allocations reuse them without locks. A thread's lists are
 * freed when it exits (a pthread key destructor). Disabled under
 * AddressSanitizer, so that a use after free of a header is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#define HDR_CACHE_MAX 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HDR_CACHE_MAX 0
#endif
#endif
#ifndef HDR_CACHE_MAX
#define HDR_CACHE_MAX 256 /* per kind and thread: about 100 kB at most */
#endif

typedef struct HdrList {
    int n;
    void *v[HDR_CACHE_MAX > 0 ? HDR_CACHE_MAX : 1];
} HdrList;

typedef struct HdrCache {
    HdrList tensors, storages;
    bool keyed; /* registered with hdr_key, so hdr_drain runs at thread exit */
} HdrCache;

static _Thread_local HdrCache hdr_cache;
static pthread_key_t hdr_key;
static pthread_once_t hdr_once = PTHREAD_ONCE_INIT;
static bool hdr_key_ok;

static void hdr_drain(void *arg)
{
    HdrCache *c = arg;
    while (c->tensors.n) free(c->tensors.v[--c->tensors.n]);
    while (c->storages.n) free(c->storages.v[--c->storages.n]);
    c->keyed = false; /* a later put (another destructor) registers again */
}

static void hdr_key_init(void)
{
    hdr_key_ok = pthread_key_create(&hdr_key, hdr_drain) == 0;
}

/* A zeroed header of `size` bytes from list l, or from calloc. */
static void *hdr_get(HdrList *l, size_t size)
{
    if (ct_alloc_injected()) return NULL;
    if (!l->n) return calloc(1, size);
    void *p = l->v[--l->n];
    memset(p, 0, size);
    return p;
}

static void hdr_put(HdrList *l, void *p)
{
    HdrCache *c = &hdr_cache;
    if (HDR_CACHE_MAX > 0 && !c->keyed) {
        pthread_once(&hdr_once, hdr_key_init);
        c->keyed = hdr_key_ok && pthread_setspecific(hdr_key, c) == 0;
    }
    if (c->keyed && l->n < HDR_CACHE_MAX)
        l->v[l->n++] = p;
    else
        free(p);
}

#define tensor_hdr_new()    ((Tensor *)hdr_get(&hdr_cache.tensors, sizeof(Tensor)))
#define tensor_hdr_free(p)  hdr_put(&hdr_cache.tensors, (p))
#define storage_hdr_new()   ((CtStorage *)hdr_get(&hdr_cache.storages, sizeof(CtStorage)))
#define storage_hdr_free(p) hdr_put(&hdr_cache.storages, (p))

static Tensor *alloc_tensor(CtStorage *st, int ndim, const int64_t *shape,
                            const int64_t *stride, int64_t offset, CtDType dt)
{
    Tensor *t = tensor_hdr_new();
    if (!t) {
        ct_error(CT_ERR_OOM, "allocating a tensor header failed");
        return NULL;
    }
    t->refcount = 1;
    t->storage = st;
    t->offset = offset;
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    }
    return t;
}

static CtStorage *storage_new(size_t nbytes, CtDevice dev)
{
    CtStorage *st = storage_hdr_new();
    if (!st) {
        ct_error(CT_ERR_OOM, "allocating a storage header failed");
        return NULL;
    }
    st->data = ct_device_alloc(dev, nbytes ? nbytes : 1);
    if (!st->data) {
        storage_hdr_free(st);
        return NULL;
    }
    st->refcount = 1;
    st->nbytes = nbytes;
    st->device = dev;
    return st;
}

static void storage_release(CtStorage *st)
{
    if (ct_ref_dec(&st->refcount) != 0) return;
    if (st->pinned)
        ct_pinned_free(st->data);
    else if (!st->external)
        ct_device_free(st->device, st->data, st->nbytes ? st->nbytes : 1);
    storage_hdr_free(st);
}

Tensor *ct_tensor_new_persistent(int ndim, const int64_t *shape, CtDType dt, CtDevice dev)
{
    if (!ct_check_geometry("tensor_empty", ndim, shape, dt)) return NULL;
    if (!ct_backend_for(dev)) return NULL;
    int64_t numel = ct_shape_numel(ndim, shape);
    CtStorage *st = storage_new((size_t)numel * ct_dtype_size(dt), dev);
    if (!st) { /* name the tensor: the allocator names only bytes */
        char s[96], d[16];
        ct_error_wrap(CT_OK, "tensor %s %s on %s", ct_shape_str(ndim, shape, s, sizeof s),
                      ct_dtype_name(dt), ct_device_str(dev, d));
        return NULL;
    }
    int64_t stride[CT_MAX_DIMS];
    ct_contiguous_strides(ndim, shape, stride);
    Tensor *t = alloc_tensor(st, ndim, shape, stride, 0, dt);
    if (!t) storage_release(st);
    return t;
}

Tensor *ct_tensor_new(int ndim, const int64_t *shape, CtDType dt, CtDevice dev)
{
    return ct_scope_adopt(ct_tensor_new_persistent(ndim, shape, dt, dev));
}

Tensor *ct_tensor_wrap(void *data, int ndim, const int64_t *shape, CtDType dt,
                       CtDevice dev)
{
    if (!ct_check_geometry("tensor_wrap", ndim, shape, dt)) return NULL;
    CtStorage *st = storage_hdr_new();
    if (!st) {
        ct_error(CT_ERR_OOM, "allocating a storage header failed");
        return NULL;
    }
    st->refcount = 1;
    st->data = data;
    st->nbytes = (size_t)ct_shape_numel(ndim, shape) * ct_dtype_size(dt);
    st->device = dev;
    st->external = true;
    int64_t stride[CT_MAX_DIMS];
    ct_contiguous_strides(ndim, shape, stride);
    Tensor *t = alloc_tensor(st, ndim, shape, stride, 0, dt);
    if (!t) {
        storage_hdr_free(st);
        return NULL;
    }
    return ct_scope_adopt(t);
}

Tensor *ct_tensor_view(Tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                       int64_t offset)
{
    if (!t) return NULL;
    Tensor *v = alloc_tensor(t->storage, ndim, shape, stride, offset, t->dtype);
    if (!v) return NULL;
    ct_ref_inc(&t->storage->refcount);
    return ct_scope_adopt(v);
}

Tensor *ct_tensor_alias(const Tensor *t)
{
    if (!t) return NULL;
    Tensor *v =
        alloc_tensor(t->storage, t->ndim, t->shape, t->stride, t->offset, t->dtype);
    if (v) ct_ref_inc(&t->storage->refcount);
    return v;
}

Tensor *tensor_empty(int ndim, const int64_t *shape, CtDType dt, CtDevice dev)
{
    return ct_tensor_new(ndim, shape, dt, dev);
}

Tensor *tensor_retain(Tensor *t)
{
    if (t) ct_ref_inc(&t->refcount);
    return t;
}

/* Releasing a tensor can release its graph node's inputs, and so on down a
 * long chain; a worklist keeps that iterative instead of recursive. */
typedef struct Worklist {
    Tensor **v;
    size_t n, cap;
    Tensor *inline_buf[32];
} Worklist;

/* An empty worklist on its inline buffer (not zeroed: an initialiser
 * would clear the buffer's 256 bytes on every tensor_free). */
static inline void wl_init(Worklist *w)
{
    w->v = w->inline_buf;
    w->n = 0;
    w->cap = sizeof w->inline_buf / sizeof *w->inline_buf;
}

static void wl_push(Worklist *w, Tensor *t)
{
    if (!t) return;
    if (w->n == w->cap) {
        size_t cap = w->cap * 2;
        Tensor **v = w->v == w->inline_buf ? ct_malloc(cap * sizeof *v)
                                           : ct_realloc(w->v, cap * sizeof *v);
        if (!v) { /* fall back to recursion for this one */
            tensor_free(t);
            return;
        }
        if (w->v == w->inline_buf) memcpy(v, w->inline_buf, sizeof w->inline_buf);
        w->v = v;
        w->cap = cap;
    }
    w->v[w->n++] = t;
}

static void node_move_refs(CtNode *n, Worklist *w)
{
    for (int i = 0; i < n->n_in; i++) wl_push(w, n->in[i]);
    for (int i = 0; i < CT_NODE_MAX_SAVED; i++) wl_push(w, n->saved[i]);
    wl_push(w, n->act_x);
    wl_push(w, n->grad_acc);
    n->act_x = NULL;
    memset(n->in, 0, sizeof n->in);
    memset(n->saved, 0, sizeof n->saved);
    n->grad_acc = NULL;
}

void ct_node_free(CtNode *n)
{
    if (!n) return;
    Worklist w;
    wl_init(&w);
    node_move_refs(n, &w);
    for (size_t i = 0; i < w.n; i++) tensor_free(w.v[i]);
    if (w.v != w.inline_buf) free(w.v);
}

void tensor_free(Tensor *t)
{
    if (!t) return;
    Worklist w;
    wl_init(&w);
    wl_push(&w, t);
    while (w.n) {
        Tensor *x = w.v[--w.n];
        if (ct_ref_dec(&x->refcount) != 0) continue;
        if (x->grad_fn) {
            node_move_refs(x->grad_fn, &w);
            free(x->grad_fn);
        }
        wl_push(&w, x->grad);
        storage_release(x->storage);
        tensor_hdr_free(x);
    }
    if (w.v != w.inline_buf) free(w.v);
}

int tensor_ndim(const Tensor *t)
{
    return t ? t->ndim : 0;
}
const int64_t *tensor_shape(const Tensor *t)
{
    return t ? t->shape : NULL;
}
const int64_t *tensor_strides(const Tensor *t)
{
    return t ? t->stride : NULL;
}
CtDType tensor_dtype(const Tensor *t)
{
    return t ? t->dtype : CT_F32;
}
CtDevice tensor_device(const Tensor *t)
{
    return t ? t->storage->device : ct_cpu();
}
void ct_byte_span(const Tensor *t, size_t *lo, size_t *hi)
{
    int64_t first = t->offset, last = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            *lo = *hi = (size_t)t->offset * ct_dtype_size(t->dtype);
            return;
        }
        int64_t reach = (t->shape[d] - 1) * t->stride[d];
        if (reach < 0)
            first += reach;
        else
            last += reach;
    }
    size_t es = ct_dtype_size(t->dtype);
    *lo = (size_t)first * es;
    *hi = (size_t)(last + 1) * es;
}

/* Sets s's zeroed ranges to r[0..n), keeping the CT_ZERO_RANGES largest
 * (a range left out only costs backward an addition). */
static void set_zero_ranges(CtStorage *s, CtByteRange *r, int n)
{
    while (n > CT_ZERO_RANGES) {
        int small = 0;
        for (int i = 1; i < n; i++)
            if (r[i].hi - r[i].lo < r[small].hi - r[small].lo) small = i;
        r[small] = r[--n];
    }
    memcpy(s->zero, r, (size_t)n * sizeof *r);
    s->nzero = n;
}

/* Cuts [lo, hi) out of s's zeroed ranges. */
static void cut_zero_ranges(CtStorage *s, size_t lo, size_t hi)
{
    CtByteRange keep[2 * CT_ZERO_RANGES];
    int n = 0;
    for (int i = 0; i < s->nzero; i++) {
        CtByteRange r = s->zero[i];
        if (hi <= r.lo || lo >= r.hi) {
            keep[n++] = r;
            continue;
        }
        if (r.lo < lo) keep[n++] = (CtByteRange){r.lo, lo};
        if (hi < r.hi) keep[n++] = (CtByteRange){hi, r.hi};
    }
    set_zero_ranges(s, keep, n);
}

/* A write through t, by an op or (by_op false) through tensor_data's
 * pointer: counted (atomically: loader workers read samples of one dataset
 * storage through tensor_data at once), or while backward runs, cut out of
 * the zeroed ranges. */
static void count_write(const Tensor *t, bool by_op)
{
    if (!ct_in_backward()) {
        __atomic_add_fetch(&t->storage->version, 1, __ATOMIC_RELAXED);
        if (by_op) __atomic_add_fetch(&t->storage->op_version, 1, __ATOMIC_RELAXED);
        return;
    }
    size_t lo, hi;
    ct_byte_span(t, &lo, &hi);
    if (lo < hi) cut_zero_ranges(t->storage, lo, hi);
}

void ct_storage_written(const Tensor *t)
{
    count_write(t, true);
}

void *tensor_data(const Tensor *t)
{
    if (!t) return NULL;
    count_write(t, false); /* the caller may write through it */
    return ct_ptr(t);
}

void ct_storage_zeroed(const Tensor *t)
{
    CtStorage *s = t->storage;
    CtByteRange add, keep[CT_ZERO_RANGES + 1];
    int n = 0;
    ct_byte_span(t, &add.lo, &add.hi);
    /* the counted write before this fill was a zero fill too: its ranges
     * still hold, and those that meet this one merge with it */
    uint64_t version = __atomic_load_n(&s->version, __ATOMIC_RELAXED);
    for (int i = 0; s->zeroed_at + 1 == version && i < s->nzero; i++) {
        CtByteRange r = s->zero[i];
        if (r.hi < add.lo || r.lo > add.hi) {
            keep[n++] = r;
        } else {
            add.lo = r.lo < add.lo ? r.lo : add.lo;
            add.hi = r.hi > add.hi ? r.hi : add.hi;
        }
    }
    if (add.lo < add.hi) keep[n++] = add;
    set_zero_ranges(s, keep, n);
    s->zeroed_at = version;
}

bool ct_known_zero(const Tensor *t)
{
    const CtStorage *s = t->storage;
    uint64_t version = __atomic_load_n(&s->version, __ATOMIC_RELAXED);
    if (s->zeroed_at != version || version == 0) return false;
    size_t lo, hi;
    ct_byte_span(t, &lo, &hi);
    for (int i = 0; i < s->nzero; i++)
        if (lo >= s->zero[i].lo && hi <= s->zero[i].hi) return true;
    return false;
}

int64_t tensor_size(const Tensor *t, int dim)
{
    if (!t) return -1;
    int d = ct_norm_dim("tensor_size", dim, t->ndim);
    return d < 0 ? -1 : t->shape[d];
}

int64_t tensor_numel(const Tensor *t)
{
    return t ? ct_shape_numel(t->ndim, t->shape) : 0;
}

bool tensor_is_contiguous(const Tensor *t)
{
    if (!t) return false;
    if (tensor_numel(t) == 0) return true; /* no element is out of place */
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

bool tensor_shares_storage(const Tensor *a, const Tensor *b)
{
    return a && b && a->storage == b->storage;
}

const char *tensor_describe(const Tensor *t, char *buf, size_t n)
{
    if (!t) {
        snprintf(buf, n, "NULL");
        return buf;
    }
    char sh[80], dv[16];
    snprintf(buf, n, "%s%s%s%s %s", t->name[0] ? t->name : "", t->name[0] ? ": " : "",
             ct_dtype_name(t->dtype), ct_shape_str(t->ndim, t->shape, sh, sizeof sh),
             ct_device_str(t->storage->device, dv));
    return buf;
}

void tensor_set_name(Tensor *t, const char *name)
{
    if (!t) return;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
}

const char *tensor_name(const Tensor *t)
{
    return t ? t->name : "";
}

bool ct_device_eq(CtDevice a, CtDevice b)
{
    return a.type == b.type && (a.type == CT_DEVICE_CPU || a.index == b.index);
}

const char *ct_device_str(CtDevice d, char *buf)
{
    if (d.type == CT_DEVICE_CPU)
        snprintf(buf, 16, "cpu");
    else
        snprintf(buf, 16, "cuda:%d", d.index);
    return buf;
}

CtStatus tensor_rebind(Tensor *t, Tensor *block, int64_t off)
{
    if (!t || !block) return ct_error(CT_ERR_NULL, "tensor_rebind: NULL tensor");
    char d1[96], d2[96];
    int64_t n = tensor_numel(t);
    if (block->ndim != 1 || block->dtype != t->dtype || !tensor_is_contiguous(block) ||
        off < 0 || off + n > block->shape[0])
        return ct_error(CT_ERR_INVALID,
                        "tensor_rebind: cannot place %s at offset %lld of block %s",
                        tensor_describe(t, d1, sizeof d1), (long long)off,
                        tensor_describe(block, d2, sizeof d2));
    if (t->grad_fn)
        return ct_error(CT_ERR_STATE, "tensor_rebind: %s is not a leaf",
                        tensor_describe(t, d1, sizeof d1));
    Tensor *dst = ct_tensor_alias(block);
    if (!dst) return ct_last_status();
    dst->offset = block->offset + off;
    dst->ndim = t->ndim;
    memcpy(dst->shape, t->shape, sizeof dst->shape);
    ct_contiguous_strides(t->ndim, t->shape, dst->stride);
    CtStatus st = tensor_copy_(dst, t);
    if (st == CT_OK) { /* swap t onto the block's storage */
        CtStorage *old = t->storage;
        t->storage = dst->storage;
        t->offset = dst->offset;
        memcpy(t->stride, dst->stride, sizeof t->stride);
        dst->storage = old;
    }
    tensor_free(dst); /* releases the old storage (or the block ref on failure) */
    return st;
}
