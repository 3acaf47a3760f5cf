/* IDX files (MNIST and friends): reading, parsing and the IDX dataset. */
#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data_internal.h"

/* Deflate's largest expansion: 258 bytes from 2 bits, at most 1032:1. */
#define DEFLATE_MAX_RATIO 1032u

/* Up to want bytes of f into dst (fewer only at the end of the file);
 * *got: how many. done: bytes of the file read before, for the message. */
static CtStatus gz_read(gzFile f, const char *path, uint8_t *dst, size_t want,
                        size_t done, size_t *got)
{
    *got = 0;
    while (*got < want) {
        size_t ask = want - *got > (1u << 30) ? (1u << 30) : want - *got;
        int n = gzread(f, dst + *got, (unsigned)ask);
        if (n < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            /* zlib's message starts with the path */
            size_t pl = strlen(path);
            if (!strncmp(msg, path, pl) && !strncmp(msg + pl, ": ", 2)) msg += pl + 2;
            return ct_error(CT_ERR_IO, "%s: read error after %zu bytes: %s", path,
                            done + *got, zerr == Z_ERRNO ? strerror(errno) : msg);
        }
        if (n == 0) break;
        *got += (size_t)n;
    }
    return CT_OK;
}

static gzFile gz_open(const char *path)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        ct_error(CT_ERR_IO, "%s: cannot open: %s", path,
                 errno ? strerror(errno) : "out of memory");
    return f;
}

CtStatus data_read_file(const char *path, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    gzFile f = gz_open(path);
    if (!f) return ct_last_status();
    size_t cap = 1 << 16, n = 0, got = 1;
    uint8_t *b = malloc(cap);
    CtStatus st = b ? CT_OK : ct_error(CT_ERR_OOM, "%s: out of memory", path);
    while (st == CT_OK && got > 0) {
        if (n == cap) {
            uint8_t *nb = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
            if (!nb) {
                st = ct_error(CT_ERR_OOM, "%s: out of memory after %zu bytes", path, n);
                break;
            }
            b = nb;
            cap *= 2;
        }
        st = gz_read(f, path, b + n, cap - n, n, &got);
        n += got;
    }
    gzclose(f);
    if (st != CT_OK) {
        free(b);
        return st;
    }
    *buf = b;
    *len = n;
    return CT_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The header of an IDX file of ndim dims, its first len bytes at buf (len
 * may stop after the header): dims, the header's size and the payload's. */
static CtStatus idx_header(const uint8_t *buf, size_t len, const char *path, int ndim,
                           int64_t *dims, size_t *hdr_out, uint64_t *total_out)
{
    if (len < 4)
        return ct_error(CT_ERR_FORMAT,
                        "%s: truncated IDX header: %zu bytes, the magic number needs 4",
                        path, len);
    uint32_t magic = be32(buf);
    uint32_t want = 0x0800u | (uint32_t)ndim;
    if (magic != want)
        return ct_error(CT_ERR_FORMAT,
                        "%s: offset 0: magic number 0x%08x, expected 0x%08x (unsigned "
                        "bytes, %d dims)",
                        path, magic, want, ndim);
    size_t hdr = 4 + 4 * (size_t)ndim;
    if (len < hdr)
        return ct_error(CT_ERR_FORMAT,
                        "%s: truncated IDX header: %zu bytes, %d dims need %zu", path,
                        len, ndim, hdr);
    uint64_t total = 1;
    for (int d = 0; d < ndim; d++) {
        dims[d] = be32(buf + 4 + 4 * d);
        /* each dim < 2^32, so the product stays exact while it is < 2^62 */
        if (dims[d] && total > ((uint64_t)1 << 62) / (uint64_t)dims[d])
            return ct_error(CT_ERR_FORMAT, "%s: offset %d: dims too large", path,
                            4 + 4 * d);
        total *= (uint64_t)dims[d];
    }
    if (dims[0] == 0)
        return ct_error(CT_ERR_FORMAT, "%s: offset 4: the file holds no items", path);
    *hdr_out = hdr;
    *total_out = total;
    return CT_OK;
}

/* The payload's size against the file's (len bytes after the header). */
static CtStatus idx_size_check(const char *path, size_t hdr, uint64_t total, uint64_t len)
{
    if (total == len) return CT_OK;
    return ct_error(CT_ERR_FORMAT,
                    "%s: offset %zu: %s: the dims give %llu bytes of data, the file has "
                    "%llu",
                    path, hdr, total > len ? "truncated data" : "trailing bytes",
                    (unsigned long long)total, (unsigned long long)len);
}

CtStatus data_idx_parse(const uint8_t *buf, size_t len, const char *path, int ndim,
                        int64_t *dims, size_t *payload_off)
{
    size_t hdr;
    uint64_t total;
    CtStatus st = idx_header(buf, len, path, ndim, dims, &hdr, &total);
    if (st == CT_OK) st = idx_size_check(path, hdr, total, len - hdr);
    if (st == CT_OK) *payload_off = hdr;
    return st;
}

/* The bytes left in f after the payload (0 for a well-formed file). */
static CtStatus gz_rest(gzFile f, const char *path, size_t done, uint64_t *rest)
{
    uint8_t tmp[4096];
    size_t got = 1;
    CtStatus st = CT_OK;
    for (*rest = 0; st == CT_OK && got > 0; *rest += got)
        st = gz_read(f, path, tmp, sizeof tmp, done + *rest, &got);
    return st;
}

/* The shape of an IDX tensor: dims (dims[0], [1,] dims[1], ...), with
 * `channel` a size-1 dim inserted after the first. Returns its ndim. */
static int idx_shape(int ndim, bool channel, const int64_t *dims, int64_t *shape)
{
    int nd = 0;
    shape[nd++] = dims[0];
    if (channel) shape[nd++] = 1;
    for (int d = 1; d < ndim; d++) shape[nd++] = dims[d];
    return nd;
}

/* Before allocating what the header asks: a plain file holds its payload
 * (the size check's error otherwise); a gzip file expands at most 1032:1,
 * deflate's limit. */
static CtStatus idx_bound(gzFile f, const char *path, size_t hdr, uint64_t total)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return CT_OK;
    uint64_t size = (uint64_t)sb.st_size;
    if (gzdirect(f))
        return size < hdr ? CT_OK : idx_size_check(path, hdr, total, size - hdr);
    if (total <= size * DEFLATE_MAX_RATIO) return CT_OK;
    return ct_error(CT_ERR_FORMAT,
                    "%s: offset %zu: truncated data: the dims give %llu bytes of data, a "
                    "gzip file of %llu bytes holds at most %llu",
                    path, hdr, (unsigned long long)total, (unsigned long long)size,
                    (unsigned long long)(size * DEFLATE_MAX_RATIO));
}

/* Reads path through zlib, the payload decompressed straight into the
 * tensor (the file is never held twice): any gzip file, or a plain one. */
static Tensor *idx_load_zlib(const char *path, int ndim, bool channel, int64_t *dims)
{
    gzFile f = gz_open(path);
    if (!f) return NULL;
    gzbuffer(f, 1u << 17);
    uint8_t head[16];
    size_t hdr, got;
    uint64_t total, rest = 0;
    Tensor *t = NULL;
    CtStatus st = gz_read(f, path, head, 4 + 4 * (size_t)ndim, 0, &got);
    if (st == CT_OK) st = idx_header(head, got, path, ndim, dims, &hdr, &total);
    if (st == CT_OK) st = idx_bound(f, path, hdr, total);
    if (st == CT_OK) {
        int64_t shape[4];
        int nd = idx_shape(ndim, channel, dims, shape);
        /* a private scope: the one reference we keep is ours whatever scope
         * the caller has open */
        CtScope *s = ct_scope_open();
        if (s) {
            t = tensor_retain(tensor_empty(nd, shape, CT_U8, ct_cpu()));
            ct_scope_close(s);
        }
        st = t ? gz_read(f, path, tensor_data(t), (size_t)total, hdr, &got)
               : ct_last_status();
    }
    if (st == CT_OK && got == total) st = gz_rest(f, path, hdr + got, &rest);
    if (st == CT_OK) st = idx_size_check(path, hdr, total, got + rest);
    gzclose(f);
    if (st != CT_OK) {
        tensor_free(t);
        return NULL;
    }
    return t;
}

/* The pages of a fresh output buffer, made present by a helper thread while
 * the inflater fills them: otherwise each first write to a page stops the
 * inflater for a page fault (Fashion-MNIST's train images: 11 500 faults,
 * 200 ms of inflating become 140 ms on a 2-core Zen 3). MADV_POPULATE_WRITE
 * maps pages without touching their contents, so it may run beside the
 * writes; before Linux 5.14 it fails and nothing changes. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
/* Smaller outputs fault in less time than a thread takes to start. */
#define PREFAULT_MIN (4u << 20)

typedef struct Prefault {
    pthread_t thread;
    bool started;
    void *start;
    size_t len;
} Prefault;

static void *prefault_main(void *arg)
{
    const Prefault *pf = arg;
    madvise(pf->start, pf->len, MADV_POPULATE_WRITE);
    return NULL;
}

/* Starts populating the whole pages of [p, p + n) (nothing for small n). */
static void prefault_start(Prefault *pf, void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
    const uintptr_t b = ((uintptr_t)p + n) & ~(page - 1);
    pf->started = false;
    if (n < PREFAULT_MIN || b <= a) return;
    pf->start = (void *)a;
    pf->len = b - a;
    pf->started = pthread_create(&pf->thread, NULL, prefault_main, pf) == 0;
}

static void prefault_join(Prefault *pf)
{
    if (pf->started) pthread_join(pf->thread, NULL);
}

/* The whole file, a single gzip member, inflated by libdeflate into a
 * tensor of its ISIZE bytes, then the payload viewed past the header.
 * Returns false, having recorded nothing, when that does not apply (no
 * gzip magic, several members, damaged data, too little memory): the zlib
 * path then reads the file and gives any error. True: *out is the tensor,
 * or NULL with the header's or the size's error (the same the zlib path
 * gives, the whole content being known). */
static bool idx_inflate(const uint8_t *in, size_t n, const char *path, int ndim,
                        bool channel, int64_t *dims, Tensor **out)
{
    if (n < 18 || in[0] != 0x1f || in[1] != 0x8b) return false;
    int64_t isize = (int64_t)in[n - 4] | (int64_t)in[n - 3] << 8 |
                    (int64_t)in[n - 2] << 16 | (int64_t)in[n - 1] << 24;
    /* a larger ISIZE is damage (or a file of several members, or of 4 GiB or
     * more) */
    if ((uint64_t)isize > (uint64_t)n * DEFLATE_MAX_RATIO) return false;
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d) return false;
    bool ok = false;
    CtScope *s = ct_scope_open();
    Tensor *flat = s && isize ? tensor_empty(1, &isize, CT_U8, ct_cpu()) : NULL;
    size_t used = 0, got = 0;
    if (flat) {
        Prefault pf;
        prefault_start(&pf, tensor_data(flat), (size_t)isize);
        ok = libdeflate_gzip_decompress_ex(d, in, n, tensor_data(flat), (size_t)isize,
                                           &used, &got) == LIBDEFLATE_SUCCESS &&
             used == n && got == (size_t)isize;
        prefault_join(&pf);
    }
    libdeflate_free_decompressor(d);
    *out = NULL;
    if (ok) {
        size_t hdr;
        uint64_t total;
        const uint8_t *data = tensor_data(flat);
        if (idx_header(data, got, path, ndim, dims, &hdr, &total) == CT_OK &&
            idx_size_check(path, hdr, total, got - hdr) == CT_OK) {
            int64_t shape[4];
            int nd = idx_shape(ndim, channel, dims, shape);
            *out = tensor_retain(
                tensor_view(tensor_slice(flat, 0, (int64_t)hdr, isize, 1), nd, shape));
        }
    }
    /* out of memory: the zlib path, which needs less, records it if it fails */
    if (!s || (isize && !flat)) ct_clear_error();
    if (s) ct_scope_close(s);
    return ok;
}

/* Reads path as an IDX file of ndim (<= 3) dims into a new persistent u8
 * tensor (idx_shape). A gzip file is mapped and inflated by libdeflate;
 * the zlib path reads what that does not take. */
static Tensor *idx_load(const char *path, int ndim, bool channel, int64_t *dims)
{
    Tensor *t = NULL;
    bool done = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size > 0) {
        void *in = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (in != MAP_FAILED) {
            madvise(in, (size_t)sb.st_size, MADV_SEQUENTIAL);
            done = idx_inflate(in, (size_t)sb.st_size, path, ndim, channel, dims, &t);
            munmap(in, (size_t)sb.st_size);
        }
    }
    if (fd >= 0) close(fd);
    return done ? t : idx_load_zlib(path, ndim, channel, dims);
}

/* ------------------------------------------------------------ dataset */

typedef struct IdxDataset {
    Dataset base;
    int64_t n;
    Tensor *images;  /* (n, 1, H, W) u8 */
    int64_t *labels; /* (n) or NULL */
    DataTransform transform, target_transform;
} IdxDataset;

static int64_t idx_len(const Dataset *d)
{
    return ((const IdxDataset *)d)->n;
}

static CtStatus idx_get(const Dataset *d, int64_t i, const DataCtx *ctx, DataSample *out)
{
    const IdxDataset *x = (const IdxDataset *)d;
    out->t[0] = tensor_select(x->images, 0, i);
    if (!out->t[0] || !data_apply(x->transform, &out->t[0], ctx)) return ct_last_status();
    out->n = 1;
    if (x->labels) {
        out->t[1] = data_label(x->labels[i]);
        if (!out->t[1] || !data_apply(x->target_transform, &out->t[1], ctx))
            return ct_last_status();
        out->n = 2;
    }
    return CT_OK;
}

static void idx_free(Dataset *d)
{
    IdxDataset *x = (IdxDataset *)d;
    tensor_free(x->images);
    free(x->labels);
    free(x);
}

static const DatasetVtable idx_vt = {"idx", idx_len, idx_get, idx_free};

/* Labels as i64, checked against num_classes (when > 0). */
static int64_t *idx_labels(const char *path, int64_t n_images, int64_t num_classes)
{
    int64_t dims[1];
    Tensor *t = idx_load(path, 1, false, dims);
    if (!t) return NULL;
    int64_t *lab = NULL;
    if (dims[0] != n_images) {
        ct_error(CT_ERR_FORMAT, "%s: %lld labels, but the image file has %lld images",
                 path, (long long)dims[0], (long long)n_images);
    } else if (!(lab = malloc((size_t)n_images * sizeof *lab))) {
        ct_error(CT_ERR_OOM, "%s: out of memory", path);
    } else {
        const uint8_t *v = tensor_data(t);
        for (int64_t i = 0; i < n_images; i++) {
            if (num_classes > 0 && v[i] >= num_classes) {
                ct_error(
                    CT_ERR_FORMAT,
                    "%s: offset %lld: label %d of item %lld is out of range for %lld "
                    "classes",
                    path, (long long)(8 + i), v[i], (long long)i, (long long)num_classes);
                free(lab);
                lab = NULL;
                break;
            }
            lab[i] = v[i];
        }
    }
    tensor_free(t);
    return lab;
}

Dataset *data_idx_dataset_create(const DataIdxArgs *args)
{
    if (!args || !args->images) {
        ct_error(CT_ERR_NULL, "idx dataset: no image file given");
        return NULL;
    }
    int64_t dims[3];
    Tensor *images = idx_load(args->images, 3, true, dims);
    if (!images) return NULL;
    int64_t *labels = NULL;
    if (args->labels &&
        !(labels = idx_labels(args->labels, dims[0], args->num_classes))) {
        tensor_free(images);
        return NULL;
    }
    IdxDataset *x = calloc(1, sizeof *x);
    if (!x) {
        tensor_free(images);
        free(labels);
        ct_error(CT_ERR_OOM, "idx dataset: out of memory");
        return NULL;
    }
    *x = (IdxDataset){{&idx_vt}, dims[0],         images,
                      labels,    args->transform, args->target_transform};
    return &x->base;
}

/* dir/name.gz when it exists, else dir/name. */
static void find_file(char *path, size_t n, const char *dir, const char *name)
{
    snprintf(path, n, "%s/%s.gz", dir, name);
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    else
        snprintf(path, n, "%s/%s", dir, name);
}

Dataset *data_fashion_mnist_create(const DataFashionMnistArgs *args)
{
    DataFashionMnistArgs a = args ? *args : (DataFashionMnistArgs){0};
    const char *root = a.root ? a.root : DATA_FASHION_MNIST_DIR;
    const char *split = a.test ? "t10k" : "train";
    char images[4096], labels[4096], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
    find_file(images, sizeof images, root, name);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    find_file(labels, sizeof labels, root, name);
    return data_idx_dataset_create(
        &(DataIdxArgs){.images = images,
                       .labels = labels,
                       .num_classes = 10,
                       .transform = a.transform,
                       .target_transform = a.target_transform});
}
