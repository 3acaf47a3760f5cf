/* safetensors files: save and load state dicts.
 *
 * Layout (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian u64 N, N bytes of JSON header, then the data buffer:
 *
 *   {"__metadata__": {"k": "v"},
 *    "fc1.weight": {"dtype": "F32", "shape": [128, 784], "data_offsets": [0, 401408]},
 *    ...}
 *
 * data_offsets are [begin, end) byte offsets into the data buffer. We write
 * tensors in the dict's order without gaps and pad the header with spaces to
 * a multiple of 8, as the Python library does. The loader trusts nothing: it
 * validates the header length, the JSON, every entry and the absence of
 * overlaps before it reads any data, and reads with pread at validated
 * offsets only. It accepts gaps and trailing bytes, and any entry order. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrainer/io.h"
#include "ctrainer/nn.h"

/* A header larger than this is rejected before it is read: real headers
 * are a few hundred bytes per tensor. */
#define ST_MAX_HEADER (100u * 1024u * 1024u)

static const struct {
    const char *name;
    CtDType dt;
} st_dtypes[] = {
    {"F32", CT_F32}, {"F64", CT_F64}, {"BF16", CT_BF16}, {"F16", CT_F16},
    {"I64", CT_I64}, {"I32", CT_I32}, {"U8", CT_U8},     {"BOOL", CT_BOOL},
};
#define ST_NDTYPES (int)(sizeof st_dtypes / sizeof st_dtypes[0])

static const char *st_dtype_name(CtDType dt)
{
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dt == dt) return st_dtypes[i].name;
    return NULL;
}

static bool host_is_little_endian(void)
{
    uint16_t x = 1;
    unsigned char b;
    memcpy(&b, &x, 1);
    return b == 1;
}

/* "[128, 784]" into buf. */
static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "",
                              (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* ================================================================ save */

static CtStatus check_save_args(const char *path, const CtStateDict *d, int n_meta,
                                const char *const *keys, const char *const *values)
{
    if (!path || !d)
        return ct_error(CT_ERR_NULL, "nn_safetensors_save: NULL path or dict");
    if (!host_is_little_endian())
        return ct_error(CT_ERR_UNSUPPORTED, "%s: safetensors needs a little-endian host",
                        path);
    if (n_meta < 0 || (n_meta > 0 && (!keys || !values)))
        return ct_error(CT_ERR_INVALID,
                        "%s: bad metadata (n_meta %d, keys %p, values %p)", path, n_meta,
                        (const void *)keys, (const void *)values);
    for (int i = 0; i < n_meta; i++)
        if (!keys[i] || !values[i])
            return ct_error(CT_ERR_NULL, "%s: metadata entry %d has a NULL key or value",
                            path, i);
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        const char *name = ct_state_dict_name(d, i);
        Tensor *t = ct_state_dict_tensor(d, i);
        if (strcmp(name, "__metadata__") == 0)
            return ct_error(CT_ERR_INVALID,
                            "%s: \"__metadata__\" is reserved and cannot name a tensor",
                            path);
        if (!t) return ct_error(CT_ERR_NULL, "%s: tensor \"%s\" is NULL", path, name);
        if (!st_dtype_name(tensor_dtype(t)))
            return ct_error(CT_ERR_DTYPE,
                            "%s: tensor \"%s\": dtype %s has no safetensors name", path,
                            name, ct_dtype_name(tensor_dtype(t)));
    }
    return CT_OK;
}

static json_t *tensor_entry(const Tensor *t, uint64_t begin, uint64_t end)
{
    json_t *shape = json_array();
    for (int i = 0; shape && i < tensor_ndim(t); i++)
        json_array_append_new(shape, json_integer(tensor_shape(t)[i]));
    return json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtype_name(tensor_dtype(t)),
                     "shape", shape, "data_offsets", (json_int_t)begin, (json_int_t)end);
}

static size_t tensor_nbytes(const Tensor *t)
{
    return (size_t)tensor_numel(t) * ct_dtype_size(tensor_dtype(t));
}

/* The JSON header, or NULL with the error recorded. Free with free(). */
static char *build_header(const char *path, const CtStateDict *d, int n_meta,
                          const char *const *keys, const char *const *values)
{
    json_t *root = json_object();
    bool ok = root != NULL;
    if (ok && n_meta > 0) {
        json_t *meta = json_object();
        for (int i = 0; ok && i < n_meta; i++)
            ok = meta && json_object_set_new(meta, keys[i], json_string(values[i])) == 0;
        ok = ok && json_object_set_new(root, "__metadata__", meta) == 0;
        if (!ok) {
            json_decref(root);
            ct_error(CT_ERR_INVALID, "%s: metadata is not valid UTF-8 (or out of memory)",
                     path);
            return NULL;
        }
    }
    uint64_t off = 0;
    for (int64_t i = 0; ok && i < ct_state_dict_size(d); i++) {
        const Tensor *t = ct_state_dict_tensor(d, i);
        uint64_t end = off + tensor_nbytes(t);
        json_t *e = tensor_entry(t, off, end);
        ok = e && json_object_set_new(root, ct_state_dict_name(d, i), e) == 0;
        if (!ok) {
            json_decref(root);
            ct_error(CT_ERR_INVALID,
                     "%s: tensor \"%s\": name is not valid UTF-8 (or out of memory)",
                     path, ct_state_dict_name(d, i));
            return NULL;
        }
        off = end;
    }
    char *s = ok ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!s) ct_error(CT_ERR_OOM, "%s: out of memory building the header", path);
    return s;
}

static CtStatus write_tensor(FILE *f, const char *path, const char *name, const Tensor *t)
{
    size_t n = tensor_nbytes(t);
    if (n == 0) return CT_OK;
    const void *src = NULL;
    void *buf = NULL;
    if (tensor_device(t).type == CT_DEVICE_CPU && tensor_is_contiguous(t)) {
        src = tensor_data(t);
    } else {
        buf = malloc(n);
        if (!buf)
            return ct_error(CT_ERR_OOM, "%s: tensor \"%s\": out of memory (%zu bytes)",
                            path, name, n);
        if (tensor_copy_to_host(t, buf, tensor_dtype(t)) != CT_OK) {
            free(buf);
            return ct_last_status();
        }
        src = buf;
    }
    size_t w = fwrite(src, 1, n, f);
    free(buf);
    if (w != n)
        return ct_error(CT_ERR_IO, "%s: writing tensor \"%s\": %s", path, name,
                        strerror(errno));
    return CT_OK;
}

static CtStatus write_body(FILE *f, const char *path, const CtStateDict *d,
                           const char *header)
{
    size_t n = strlen(header), padded = (n + 7) / 8 * 8;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    static const char spaces[8] = "        ";
    if (fwrite(len, 1, 8, f) != 8 || fwrite(header, 1, n, f) != n ||
        fwrite(spaces, 1, padded - n, f) != padded - n)
        return ct_error(CT_ERR_IO, "%s: writing the header: %s", path, strerror(errno));
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        CtStatus st =
            write_tensor(f, path, ct_state_dict_name(d, i), ct_state_dict_tensor(d, i));
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

CtStatus nn_safetensors_save(const char *path, const CtStateDict *d, int n_meta,
                             const char *const *meta_keys, const char *const *meta_values)
{
    CtStatus st = check_save_args(path, d, n_meta, meta_keys, meta_values);
    if (st != CT_OK) return st;
    char *header = build_header(path, d, n_meta, meta_keys, meta_values);
    if (!header) return ct_last_status();
    CtAtomicFile *af = ct_atomic_file_open(path);
    if (af) st = write_body(ct_atomic_file_stream(af), path, d, header);
    free(header);
    if (!af) return ct_last_status();
    if (st != CT_OK) {
        ct_atomic_file_abort(af);
        return st;
    }
    return ct_atomic_file_commit(af);
}

/* ================================================================ load */

typedef struct StEntry {
    const char *name; /* points into the JSON object */
    CtDType dt;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    uint64_t begin, end;
} StEntry;

typedef struct StFile {
    const char *path;
    int fd;
    uint64_t data_start, data_len;
    json_t *header;
    StEntry *entries;
    int64_t n;
} StFile;

static bool read_exact(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return true;
}

/* Opens the file and parses the header into f->header. */
static CtStatus read_header(StFile *f)
{
    const char *path = f->path;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return ct_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(f->fd, &sb) != 0)
        return ct_error(CT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return ct_error(CT_ERR_IO, "%s: not a regular file", path);
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8)
        return ct_error(CT_ERR_FORMAT,
                        "%s: file is %llu bytes, too short for the 8-byte header length",
                        path, (unsigned long long)size);
    unsigned char len[8];
    if (!read_exact(f->fd, len, 8, 0))
        return ct_error(CT_ERR_IO, "%s: reading the header length failed", path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len[i];
    if (n > size - 8)
        return ct_error(CT_ERR_FORMAT,
                        "%s: header length %llu exceeds the %llu bytes after the length "
                        "field",
                        path, (unsigned long long)n, (unsigned long long)(size - 8));
    if (n > ST_MAX_HEADER)
        return ct_error(CT_ERR_FORMAT,
                        "%s: header length %llu exceeds the limit of %u bytes", path,
                        (unsigned long long)n, ST_MAX_HEADER);
    char *buf = malloc(n ? n : 1);
    if (!buf) return ct_error(CT_ERR_OOM, "%s: out of memory for the header", path);
    if (!read_exact(f->fd, buf, n, 8)) {
        free(buf);
        return ct_error(CT_ERR_IO, "%s: reading the header failed", path);
    }
    json_error_t err;
    f->header = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &err);
    free(buf);
    if (!f->header)
        return ct_error(CT_ERR_FORMAT, "%s: header is not valid JSON: %s (at byte %d)",
                        path, err.text, err.position);
    if (!json_is_object(f->header))
        return ct_error(CT_ERR_FORMAT, "%s: header is not a JSON object", path);
    f->data_start = 8 + n;
    f->data_len = size - 8 - n;
    return CT_OK;
}

static CtStatus check_metadata(const char *path, json_t *meta)
{
    if (!json_is_object(meta))
        return ct_error(CT_ERR_FORMAT, "%s: \"__metadata__\" is not a JSON object", path);
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v)
    {
        if (!json_is_string(v))
            return ct_error(CT_ERR_FORMAT, "%s: metadata value of \"%s\" is not a string",
                            path, k);
    }
    return CT_OK;
}

static bool json_u64(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static CtStatus parse_shape(const char *path, const char *name, json_t *js, StEntry *e)
{
    if (!json_is_array(js))
        return ct_error(CT_ERR_FORMAT,
                        "%s: tensor \"%s\": shape is missing or not an array", path,
                        name);
    size_t nd = json_array_size(js);
    if (nd > CT_MAX_DIMS)
        return ct_error(CT_ERR_UNSUPPORTED, "%s: tensor \"%s\": %zu dims (at most %d)",
                        path, name, nd, CT_MAX_DIMS);
    e->ndim = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        uint64_t s;
        if (!json_u64(json_array_get(js, i), &s))
            return ct_error(CT_ERR_FORMAT,
                            "%s: tensor \"%s\": shape entry %zu is not a non-negative "
                            "integer",
                            path, name, i);
        e->shape[i] = (int64_t)s;
    }
    return CT_OK;
}

/* Checks one entry against the data buffer (not against the others). */
static CtStatus parse_entry(const StFile *f, const char *name, json_t *v, StEntry *e)
{
    const char *path = f->path;
    e->name = name;
    if (!json_is_object(v))
        return ct_error(CT_ERR_FORMAT, "%s: tensor \"%s\": entry is not a JSON object",
                        path, name);
    json_t *jdt = json_object_get(v, "dtype");
    if (!json_is_string(jdt))
        return ct_error(CT_ERR_FORMAT,
                        "%s: tensor \"%s\": dtype is missing or not a string", path,
                        name);
    int k = 0;
    while (k < ST_NDTYPES && strcmp(st_dtypes[k].name, json_string_value(jdt)) != 0) k++;
    if (k == ST_NDTYPES)
        return ct_error(
            CT_ERR_FORMAT,
            "%s: tensor \"%s\": unknown dtype \"%s\" (supported: F32, F64, BF16, "
            "F16, I64, I32, U8, BOOL)",
            path, name, json_string_value(jdt));
    e->dt = st_dtypes[k].dt;
    CtStatus st = parse_shape(path, name, json_object_get(v, "shape"), e);
    if (st != CT_OK) return st;
    json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        !json_u64(json_array_get(off, 0), &e->begin) ||
        !json_u64(json_array_get(off, 1), &e->end) || e->begin > e->end)
        return ct_error(CT_ERR_FORMAT,
                        "%s: tensor \"%s\": data_offsets must be [begin, end] with 0 <= "
                        "begin <= end",
                        path, name);
    if (e->end > f->data_len)
        return ct_error(
            CT_ERR_FORMAT,
            "%s: tensor \"%s\": data_offsets [%llu, %llu] lie outside the data "
            "buffer of %llu bytes (truncated file?)",
            path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
            (unsigned long long)f->data_len);
    /* numel * size, refusing anything that overflows. An empty tensor's
     * strides count its size-0 dims as 1, so its other dims must still be
     * addressable (an empty [0, 2^62, 2^62] is not). */
    uint64_t bytes = ct_dtype_size(e->dt);
    bool overflow = false, empty = false;
    for (int i = 0; i < e->ndim; i++) {
        empty |= e->shape[i] == 0;
        if (e->shape[i] > 0)
            overflow |= __builtin_mul_overflow(bytes, (uint64_t)e->shape[i], &bytes);
    }
    if (empty && (overflow || bytes > INT64_MAX)) {
        char s[160];
        return ct_error(
            CT_ERR_FORMAT, "%s: tensor \"%s\": shape %s of %s is too large to address",
            path, name, shape_str(e->ndim, e->shape, s, sizeof s), st_dtypes[k].name);
    }
    if (empty) bytes = 0;
    if (overflow || e->end - e->begin != bytes) {
        char s[160], b[32] = "overflow";
        if (!overflow) snprintf(b, sizeof b, "%llu", (unsigned long long)bytes);
        return ct_error(
            CT_ERR_FORMAT,
            "%s: tensor \"%s\": data_offsets [%llu, %llu] do not match shape %s "
            "of %s (%s bytes)",
            path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
            shape_str(e->ndim, e->shape, s, sizeof s), st_dtypes[k].name, b);
    }
    return CT_OK;
}

static int cmp_begin(const void *a, const void *b)
{
    const StEntry *x = *(const StEntry *const *)a, *y = *(const StEntry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Non-empty byte ranges must be disjoint (empty tensors may sit anywhere). */
static CtStatus check_overlaps(const StFile *f)
{
    const StEntry **sorted = malloc((size_t)(f->n ? f->n : 1) * sizeof *sorted);
    if (!sorted) return ct_error(CT_ERR_OOM, "%s: out of memory", f->path);
    int64_t m = 0;
    for (int64_t i = 0; i < f->n; i++)
        if (f->entries[i].end > f->entries[i].begin) sorted[m++] = &f->entries[i];
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_begin);
    CtStatus st = CT_OK;
    for (int64_t i = 1; i < m && st == CT_OK; i++) {
        const StEntry *a = sorted[i - 1], *b = sorted[i];
        if (b->begin < a->end)
            st = ct_error(CT_ERR_FORMAT,
                          "%s: tensor \"%s\": data_offsets [%llu, %llu] overlap those of "
                          "tensor \"%s\" [%llu, %llu]",
                          f->path, b->name, (unsigned long long)b->begin,
                          (unsigned long long)b->end, a->name,
                          (unsigned long long)a->begin, (unsigned long long)a->end);
    }
    free(sorted);
    return st;
}

static CtStatus parse_entries(StFile *f)
{
    size_t n = json_object_size(f->header);
    f->entries = calloc(n ? n : 1, sizeof *f->entries);
    if (!f->entries) return ct_error(CT_ERR_OOM, "%s: out of memory", f->path);
    const char *name;
    json_t *v;
    json_object_foreach(f->header, name, v)
    {
        CtStatus st = strcmp(name, "__metadata__") == 0
                          ? check_metadata(f->path, v)
                          : parse_entry(f, name, v, &f->entries[f->n++]);
        if (st != CT_OK) return st;
    }
    return check_overlaps(f);
}

/* A new tensor on dev holding entry e's bytes; owned by the current scope. */
static Tensor *read_tensor(const StFile *f, const StEntry *e, CtDevice dev)
{
    bool cpu = dev.type == CT_DEVICE_CPU;
    Tensor *t = tensor_empty(e->ndim, e->shape, e->dt, cpu ? dev : ct_cpu());
    if (!t || e->end == e->begin) return cpu || !t ? t : tensor_to_device(t, dev);
    unsigned char *p = tensor_data(t);
    size_t n = (size_t)(e->end - e->begin);
    if (!read_exact(f->fd, p, n, f->data_start + e->begin)) {
        ct_error(CT_ERR_IO, "%s: tensor \"%s\": reading %zu bytes failed (file changed?)",
                 f->path, e->name, n);
        return NULL;
    }
    if (e->dt == CT_BOOL)
        for (size_t i = 0; i < n; i++) p[i] = p[i] != 0;
    return cpu ? t : tensor_to_device(t, dev);
}

static CtStateDict *read_all(const StFile *f, CtDevice dev)
{
    CtScope *sc = ct_scope_open();
    CtStateDict *d = sc ? ct_state_dict_create() : NULL;
    if (!d) {
        ct_scope_close(sc);
        ct_error(CT_ERR_OOM, "%s: out of memory", f->path);
        return NULL;
    }
    for (int64_t i = 0; i < f->n; i++) {
        Tensor *t = read_tensor(f, &f->entries[i], dev);
        if (!t || ct_state_dict_add(d, f->entries[i].name, t) != CT_OK) {
            ct_state_dict_free(d);
            d = NULL;
            break;
        }
    }
    ct_scope_close(sc); /* the dict holds the only references */
    return d;
}

CtStateDict *nn_safetensors_load(const char *path, CtDevice dev)
{
    if (!path) {
        ct_error(CT_ERR_NULL, "nn_safetensors_load: NULL path");
        return NULL;
    }
    if (!host_is_little_endian()) {
        ct_error(CT_ERR_UNSUPPORTED, "%s: safetensors needs a little-endian host", path);
        return NULL;
    }
    StFile f = {.path = path, .fd = -1};
    CtStatus st = read_header(&f);
    if (st == CT_OK) st = parse_entries(&f);
    CtStateDict *d = st == CT_OK ? read_all(&f, dev) : NULL;
    free(f.entries);
    json_decref(f.header);
    if (f.fd >= 0) close(f.fd);
    return d;
}
