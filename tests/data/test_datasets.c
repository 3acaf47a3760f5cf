/* Datasets: tensor rows, subset, concat, random_split, transforms, the
 * per-sample generator and the IDX reader (small files written here, and the
 * real Fashion-MNIST files when installed). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "ctrainer/data.h"
#include "testutil.h"

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ct_data_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* x: (5, 3) f32 with x[i][j] = 10 i + j; y: (5) i64 with y[i] = i. */
static Dataset *rows5(Tensor **x, Tensor **y)
{
    double xv[15], yv[5];
    for (int i = 0; i < 5; i++) {
        yv[i] = i;
        for (int j = 0; j < 3; j++) xv[i * 3 + j] = 10 * i + j;
    }
    *x = tu_tensor(CT_F32, 2, (const int64_t[]){5, 3}, xv);
    *y = tu_tensor(CT_I64, 1, (const int64_t[]){5}, yv);
    return data_tensor_dataset_create(2, (Tensor *[]){*x, *y});
}

/* The label (field 1) of sample i of d. */
static int64_t label_of(const Dataset *d, int64_t i)
{
    CtScope *s = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(d, i, NULL, &smp), CT_OK);
    int64_t v = (int64_t)tensor_item(smp.t[1]);
    ct_scope_close(s);
    return v;
}

START_TEST(test_tensor_dataset)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = rows5(&x, &y);
    ck_assert_int_eq(data_dataset_len(d), 5);
    CtScope *s = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(d, 2, NULL, &smp), CT_OK);
    ck_assert_int_eq(smp.n, 2);
    tu_assert_values(smp.t[0], ((double[]){20, 21, 22}), 3, 0, 0);
    ck_assert_int_eq(tensor_ndim(smp.t[1]), 0);
    tu_assert_values(smp.t[1], ((double[]){2}), 1, 0, 0);
    ck_assert(tensor_shares_storage(smp.t[0], x));
    ck_assert_int_eq(data_dataset_get(d, 5, NULL, &smp), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "dataset tensor: index 5 out of range [0, 5)");
    ck_assert_int_eq(smp.n, 0);
    ct_scope_close(s);
    /* the dataset holds its own references */
    tensor_free(x);
    tensor_free(y);
    ck_assert_int_eq(label_of(d, 4), 4);
    data_dataset_free(d);

    Tensor *a = tu_tensor(CT_F32, 1, (const int64_t[]){3}, (double[]){1, 2, 3});
    Tensor *b = tu_tensor(CT_F32, 1, (const int64_t[]){4}, (double[]){1, 2, 3, 4});
    ck_assert_ptr_null(data_tensor_dataset_create(2, (Tensor *[]){a, b}));
    tu_assert_error(CT_ERR_SHAPE, "tensor 1 has 4 rows, tensor 0 has 3");
    ck_assert_ptr_null(data_tensor_dataset_create(0, (Tensor *[]){a}));
    tu_assert_error(CT_ERR_INVALID, "0 tensors, expected 1..4");
    tensor_free(a);
    tensor_free(b);
    TU_MEM_END;
}
END_TEST

static Tensor *silent_null(Tensor *input, const DataCtx *ctx, void *user)
{
    (void)input;
    (void)ctx;
    (void)user;
    return NULL;
}

/* A transform that fails without recording why is reported as such, not
 * through an older, already handled error. */
START_TEST(test_transform_null_is_not_a_stale_error)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = rows5(&x, &y);
    Dataset *t = data_transformed_create(d, 0, (DataTransform){.fn = silent_null});
    ck_assert_ptr_nonnull(t);
    CtScope *s = ct_scope_open();
    DataSample smp;
    ct_error(CT_ERR_IO, "an old, handled error");
    ck_assert_int_eq(data_dataset_get(t, 1, NULL, &smp), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "transform returned NULL without recording an error");
    ct_scope_close(s);
    data_dataset_free(t);
    data_dataset_free(d);
    tensor_free(x);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_subset_concat)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = rows5(&x, &y);
    Dataset *sub = data_subset_create(d, 3, (const int64_t[]){4, 0, 4});
    ck_assert_int_eq(data_dataset_len(sub), 3);
    ck_assert_int_eq(label_of(sub, 0), 4);
    ck_assert_int_eq(label_of(sub, 1), 0);
    ck_assert_int_eq(label_of(sub, 2), 4);
    ck_assert_ptr_null(data_subset_create(d, 2, (const int64_t[]){1, 5}));
    tu_assert_error(CT_ERR_INVALID, "index 5 at position 1 is out of range");

    Dataset *cat = data_concat_create(3, (Dataset *[]){d, sub, d});
    ck_assert_int_eq(data_dataset_len(cat), 13);
    int64_t expect[13] = {0, 1, 2, 3, 4, 4, 0, 4, 0, 1, 2, 3, 4};
    for (int i = 0; i < 13; i++) ck_assert_int_eq(label_of(cat, i), expect[i]);
    ck_assert_ptr_null(data_concat_create(0, (Dataset *[]){d}));
    tu_assert_error(CT_ERR_INVALID, "needs at least one dataset");
    data_dataset_free(cat);
    data_dataset_free(sub);
    data_dataset_free(d);
    tensor_free(x);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

/* Labels of all samples of parts[0..n), checking that together they are a
 * permutation of 0..total-1. */
static void assert_partition(Dataset **parts, int n, int64_t total)
{
    int seen[64] = {0};
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < data_dataset_len(parts[k]); i++)
            seen[label_of(parts[k], i)]++;
    for (int64_t i = 0; i < total; i++) ck_assert_int_eq(seen[i], 1);
}

START_TEST(test_random_split)
{
    TU_MEM_BEGIN;
    Tensor *y = tensor_arange(0, 11, 1, CT_I64, ct_cpu());
    Dataset *d = data_tensor_dataset_create(2, (Tensor *[]){y, y});
    Dataset *p[4], *q[4];
    ck_assert_int_eq(data_random_split(d, 3, (const int64_t[]){5, 0, 6}, 7, p), CT_OK);
    ck_assert_int_eq(data_dataset_len(p[0]), 5);
    ck_assert_int_eq(data_dataset_len(p[1]), 0);
    assert_partition(p, 3, 11);
    /* the same seed gives the same split; another seed another one */
    ck_assert_int_eq(data_random_split(d, 3, (const int64_t[]){5, 0, 6}, 7, q), CT_OK);
    bool other = false;
    for (int i = 0; i < 5; i++) ck_assert_int_eq(label_of(p[0], i), label_of(q[0], i));
    for (int k = 0; k < 3; k++) data_dataset_free(q[k]);
    ck_assert_int_eq(data_random_split(d, 3, (const int64_t[]){5, 0, 6}, 8, q), CT_OK);
    for (int i = 0; i < 5; i++) other |= label_of(p[0], i) != label_of(q[0], i);
    ck_assert(other);
    for (int k = 0; k < 3; k++) {
        data_dataset_free(p[k]);
        data_dataset_free(q[k]);
    }
    /* fractions: sizes from PyTorch 1.13 (tests/fixtures/data_split.py) */
    ck_assert_int_eq(
        data_random_split_fractions(d, 4, (const double[]){0.1, 0.2, 0.3, 0.4}, 0, p),
        CT_OK);
    int64_t want[4] = {2, 2, 3, 4};
    for (int k = 0; k < 4; k++) ck_assert_int_eq(data_dataset_len(p[k]), want[k]);
    assert_partition(p, 4, 11);
    for (int k = 0; k < 4; k++) data_dataset_free(p[k]);
    Dataset *d5 = data_subset_create(d, 5, (const int64_t[]){0, 1, 2, 3, 4});
    ck_assert_int_eq(data_random_split_fractions(
                         d5, 4, (const double[]){0.25, 0.25, 0.25, 0.25}, 0, p),
                     CT_OK);
    int64_t want5[4] = {2, 1, 1, 1};
    for (int k = 0; k < 4; k++) ck_assert_int_eq(data_dataset_len(p[k]), want5[k]);
    for (int k = 0; k < 4; k++) data_dataset_free(p[k]);
    Dataset *d10 =
        data_subset_create(d, 10, (const int64_t[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    ck_assert_int_eq(
        data_random_split_fractions(d10, 3, (const double[]){0.33, 0.33, 0.34}, 0, p),
        CT_OK);
    int64_t want10[3] = {4, 3, 3};
    for (int k = 0; k < 3; k++) ck_assert_int_eq(data_dataset_len(p[k]), want10[k]);
    for (int k = 0; k < 3; k++) data_dataset_free(p[k]);
    /* bad sizes: nothing returned */
    p[0] = p[1] = d;
    ck_assert_int_eq(data_random_split(d, 2, (const int64_t[]){5, 5}, 0, p),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "sizes sum to 10, the dataset has 11 samples");
    ck_assert_ptr_null(p[0]);
    ck_assert_ptr_null(p[1]);
    ck_assert_int_eq(data_random_split_fractions(d, 2, (const double[]){0.5, 0.6}, 0, p),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "fractions sum to 1.1, not 1");
    data_dataset_free(d10);
    data_dataset_free(d5);
    data_dataset_free(d);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_random_split_sizes_past_int64_refused)
{
    /* sizes whose int64 sum wraps around to the dataset's length */
    TU_MEM_BEGIN;
    Tensor *y = tensor_arange(0, 4, 1, CT_I64, ct_cpu());
    Dataset *d = data_tensor_dataset_create(1, (Tensor *[]){y});
    Dataset *p[3] = {d, d, d};
    ck_assert_int_eq(
        data_random_split(d, 3, (const int64_t[]){INT64_MAX, INT64_MAX, 6}, 1, p),
        CT_ERR_INVALID);
    tu_assert_error(
        CT_ERR_INVALID,
        "random_split: sizes sum to more than the dataset's 4 samples (size 0 "
        "is 9223372036854775807)");
    for (int k = 0; k < 3; k++) ck_assert_ptr_null(p[k]);
    ck_assert_int_eq(data_random_split(d, 3, (const int64_t[]){2, 2, INT64_MAX}, 1, p),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "(size 2 is 9223372036854775807)");
    data_dataset_free(d);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

START_TEST(test_ctx_generator)
{
    CtScope *s = ct_scope_open();
    DataCtx a = {1, 2, 3}, b = {1, 2, 4}, c = {1, 3, 3}, e = {2, 2, 3};
    const int64_t n = 4;
    CtGenerator ga = data_ctx_generator(&a, 9), ga2 = data_ctx_generator(&a, 9);
    Tensor *ra = tensor_rand(&ga, 1, &n, CT_F64, ct_cpu());
    Tensor *ra2 = tensor_rand(&ga2, 1, &n, CT_F64, ct_cpu());
    double va[4], v[4];
    tensor_copy_to_host(ra, va, CT_F64);
    tu_assert_values(ra2, va, 4, 0, 0);
    /* any change of seed, epoch, index or purpose gives other numbers */
    CtGenerator others[4] = {data_ctx_generator(&b, 9), data_ctx_generator(&c, 9),
                             data_ctx_generator(&e, 9), data_ctx_generator(&a, 10)};
    for (int k = 0; k < 4; k++) {
        tensor_copy_to_host(tensor_rand(&others[k], 1, &n, CT_F64, ct_cpu()), v, CT_F64);
        ck_assert(v[0] != va[0] && v[1] != va[1]);
    }
    ct_scope_close(s);
}
END_TEST

static Tensor *times_two(Tensor *t, const DataCtx *ctx, void *user)
{
    *(int *)user += 1;
    return tensor_mul_scalar(t, 2);
}

START_TEST(test_transformed)
{
    TU_MEM_BEGIN;
    Tensor *x, *y;
    Dataset *d = rows5(&x, &y);
    int calls = 0;
    Dataset *m = data_transformed_create(d, 0, (DataTransform){times_two, &calls});
    CtScope *s = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(m, 1, NULL, &smp), CT_OK);
    tu_assert_values(smp.t[0], ((double[]){20, 22, 24}), 3, 0, 0);
    tu_assert_values(smp.t[1], ((double[]){1}), 1, 0, 0);
    ck_assert_int_eq(calls, 1);
    ct_scope_close(s);
    Dataset *bad = data_transformed_create(d, 3, (DataTransform){times_two, &calls});
    s = ct_scope_open();
    ck_assert_int_eq(data_dataset_get(bad, 0, NULL, &smp), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "sample 0 has 2 fields, no field 3");
    ct_scope_close(s);
    data_dataset_free(bad);
    data_dataset_free(m);
    data_dataset_free(d);
    tensor_free(x);
    tensor_free(y);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------------ IDX */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Writes an IDX file: magic, dims, then `payload` bytes of value i % 251. */
static const char *write_idx(const char *name, bool gz, uint32_t magic, int nd,
                             const uint32_t *dims, size_t payload)
{
    static char path[8][256];
    static int slot;
    char *p = path[slot++ % 8];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    size_t n = 4 + 4 * (size_t)nd + payload;
    uint8_t *b = malloc(n);
    put32(b, magic);
    for (int d = 0; d < nd; d++) put32(b + 4 + 4 * d, dims[d]);
    for (size_t i = 0; i < payload; i++) b[4 + 4 * nd + i] = (uint8_t)(i % 251);
    if (gz) {
        gzFile f = gzopen(p, "wb");
        ck_assert_int_eq(gzwrite(f, b, (unsigned)n), (int)n);
        gzclose(f);
    } else {
        FILE *f = fopen(p, "wb");
        ck_assert_uint_eq(fwrite(b, 1, n, f), n);
        fclose(f);
    }
    free(b);
    return p;
}

static void check_idx(bool gz)
{
    const char *img =
        write_idx(gz ? "img.gz" : "img", gz, 0x803, 3, (const uint32_t[]){3, 2, 4}, 24);
    const char *lab =
        write_idx(gz ? "lab.gz" : "lab", gz, 0x801, 1, (const uint32_t[]){3}, 3);
    Dataset *d = data_idx_dataset_create(&(DataIdxArgs){.images = img, .labels = lab});
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(data_dataset_len(d), 3);
    CtScope *s = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(d, 1, NULL, &smp), CT_OK);
    ck_assert_int_eq(smp.n, 2);
    tu_assert_shape(smp.t[0], 3, 1, 2, 4);
    ck_assert_int_eq(tensor_dtype(smp.t[0]), CT_U8);
    tu_assert_values(smp.t[0], ((double[]){8, 9, 10, 11, 12, 13, 14, 15}), 8, 0, 0);
    ck_assert_int_eq(tensor_dtype(smp.t[1]), CT_I64);
    ck_assert_int_eq(tensor_ndim(smp.t[1]), 0);
    tu_assert_values(smp.t[1], ((double[]){1}), 1, 0, 0);
    ct_scope_close(s);
    data_dataset_free(d);
    /* without labels: one field */
    d = data_idx_dataset_create(&(DataIdxArgs){.images = img});
    s = ct_scope_open();
    ck_assert_int_eq(data_dataset_get(d, 2, NULL, &smp), CT_OK);
    ck_assert_int_eq(smp.n, 1);
    ct_scope_close(s);
    data_dataset_free(d);
}

START_TEST(test_idx_plain_and_gzip)
{
    TU_MEM_BEGIN;
    make_tmpdir();
    check_idx(false);
    check_idx(true);
    remove_tmpdir();
    TU_MEM_END;
}
END_TEST

/* Creating the dataset fails with `st` and a message containing `needle`. */
static void idx_fails(const char *img, const char *lab, int64_t classes, CtStatus st,
                      const char *needle)
{
    ck_assert_ptr_null(data_idx_dataset_create(
        &(DataIdxArgs){.images = img, .labels = lab, .num_classes = classes}));
    tu_assert_error(st, needle);
}

/* A wrong magic number, a short payload, a short header and no items, in
 * plain or gzip'd image files (named m, t, h, e, with ".gz" when gz). */
static void header_errors(const char *lab, bool gz)
{
    const uint32_t d3[3] = {3, 2, 4};
    const char *ext = gz ? ".gz" : "";
    char name[4][8], want[4][96];
    for (int i = 0; i < 4; i++) snprintf(name[i], sizeof name[i], "%c%s", "mthe"[i], ext);
    snprintf(want[0], sizeof want[0],
             "%s: offset 0: magic number 0x00000804, expected 0x00000803", name[0]);
    snprintf(want[1], sizeof want[1],
             "%s: offset 16: truncated data: the dims give 24 bytes of data, the file "
             "has 20",
             name[1]);
    snprintf(want[2], sizeof want[2], "%s: truncated IDX header: 8 bytes, 3 dims need 16",
             name[2]);
    snprintf(want[3], sizeof want[3], "%s: offset 4: the file holds no items", name[3]);
    idx_fails(write_idx(name[0], gz, 0x804, 3, d3, 24), lab, 0, CT_ERR_FORMAT, want[0]);
    idx_fails(write_idx(name[1], gz, 0x803, 3, d3, 20), lab, 0, CT_ERR_FORMAT, want[1]);
    idx_fails(write_idx(name[2], gz, 0x803, 1, d3, 0), lab, 0, CT_ERR_FORMAT, want[2]);
    idx_fails(write_idx(name[3], gz, 0x803, 3, (const uint32_t[]){0, 2, 4}, 0), lab, 0,
              CT_ERR_FORMAT, want[3]);
}

START_TEST(test_idx_errors)
{
    TU_MEM_BEGIN;
    make_tmpdir();
    const uint32_t d3[3] = {3, 2, 4};
    const char *img = write_idx("img", false, 0x803, 3, d3, 24);
    const char *lab = write_idx("lab", true, 0x801, 1, (const uint32_t[]){3}, 3);
    char missing[256];
    snprintf(missing, sizeof missing, "%s/nope", tmpdir);
    idx_fails(missing, lab, 0, CT_ERR_IO, "nope: cannot open");
    header_errors(lab, false);
    idx_fails(write_idx("x", true, 0x803, 3, d3, 25), lab, 0, CT_ERR_FORMAT,
              "x: offset 16: trailing bytes");
    idx_fails(img, write_idx("l2", false, 0x801, 1, (const uint32_t[]){2}, 2), 0,
              CT_ERR_FORMAT, "l2: 2 labels, but the image file has 3 images");
    /* labels are 0, 1, 2: out of range for 2 classes at item 2 */
    idx_fails(img, lab, 2, CT_ERR_FORMAT,
              "lab: offset 10: label 2 of item 2 is out of range for 2 classes");
    ck_assert_ptr_null(data_idx_dataset_create(&(DataIdxArgs){0}));
    tu_assert_error(CT_ERR_NULL, "no image file given");
    /* a root without the files */
    ck_assert_ptr_null(
        data_fashion_mnist_create(&(DataFashionMnistArgs){.root = tmpdir}));
    tu_assert_error(CT_ERR_IO, "train-images-idx3-ubyte: cannot open");
    remove_tmpdir();
    TU_MEM_END;
}
END_TEST

/* Rewrites the file at path: its first `keep` bytes (keep < 0: all), and,
 * when `flip` >= 0, byte `flip` counted from the end inverted. */
static void damage(const char *path, long keep, long flip)
{
    FILE *f = fopen(path, "rb");
    uint8_t b[4096];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    ck_assert_uint_lt(n, sizeof b);
    if (keep >= 0) n = (size_t)keep;
    if (flip >= 0) b[n - 1 - (size_t)flip] ^= 0xff;
    f = fopen(path, "wb");
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* gzip files take libdeflate's path when they are one whole member, and
 * zlib's otherwise; both give the same values and the same errors. */
START_TEST(test_idx_gzip_paths)
{
    TU_MEM_BEGIN;
    make_tmpdir();
    const uint32_t d3[3] = {3, 2, 4};
    const char *lab = write_idx("lab.gz", true, 0x801, 1, (const uint32_t[]){3}, 3);
    /* two members: the file appended to itself after its header's member */
    const char *two = write_idx("two.gz", true, 0x803, 3, d3, 8);
    gzFile f = gzopen(two, "ab");
    uint8_t rest[16];
    for (int i = 0; i < 16; i++) rest[i] = (uint8_t)(8 + i);
    ck_assert_int_eq(gzwrite(f, rest, 16), 16);
    gzclose(f);
    Dataset *d = data_idx_dataset_create(&(DataIdxArgs){.images = two, .labels = lab});
    ck_assert_ptr_nonnull(d);
    CtScope *s = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(d, 2, NULL, &smp), CT_OK);
    tu_assert_values(smp.t[0], ((double[]){16, 17, 18, 19, 20, 21, 22, 23}), 8, 0, 0);
    ct_scope_close(s);
    data_dataset_free(d);
    /* the header and size errors of plain files, from gzip files */
    header_errors(lab, true);
    /* damaged gzip: a cut stream, a wrong checksum, a wrong ISIZE */
    const char *cut = write_idx("cut.gz", true, 0x803, 3, d3, 24);
    damage(cut, 30, -1);
    idx_fails(cut, lab, 0, CT_ERR_FORMAT, "cut.gz: offset 16: truncated data");
    const char *crc = write_idx("crc.gz", true, 0x803, 3, d3, 24);
    damage(crc, -1, 5);
    idx_fails(crc, lab, 0, CT_ERR_IO,
              "crc.gz: read error after 0 bytes: incorrect data check");
    const char *isz = write_idx("isize.gz", true, 0x803, 3, d3, 24);
    damage(isz, -1, 1);
    idx_fails(isz, lab, 0, CT_ERR_IO,
              "isize.gz: read error after 0 bytes: incorrect length check");
    remove_tmpdir();
    TU_MEM_END;
}
END_TEST

/* A gzip file of several MiB: the path whose output pages a helper thread
 * populates while libdeflate writes them. Every byte arrives. */
START_TEST(test_idx_gzip_large)
{
    TU_MEM_BEGIN;
    make_tmpdir();
    const uint32_t n = 6144, hw = 32 * 32; /* 6 MiB of pixels */
    const char *img = write_idx("large.gz", true, 0x803, 3, (const uint32_t[]){n, 32, 32},
                                (size_t)n * hw);
    Dataset *d = data_idx_dataset_create(&(DataIdxArgs){.images = img});
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(data_dataset_len(d), n);
    for (uint32_t i = 0; i < n; i++) {
        CtScope *s = ct_scope_open();
        DataSample smp;
        ck_assert_int_eq(data_dataset_get(d, i, NULL, &smp), CT_OK);
        const uint8_t *px = tensor_data(smp.t[0]);
        uint32_t e = 0;
        while (e < hw && px[e] == ((size_t)i * hw + e) % 251) e++;
        ck_assert_msg(e == hw, "image %u byte %u: %u", i, e, px[e < hw ? e : 0]);
        ct_scope_close(s);
    }
    data_dataset_free(d);
    remove(img);
    TU_MEM_END;
}
END_TEST

START_TEST(test_fashion_mnist)
{
    if (access(DATA_FASHION_MNIST_DIR "/train-labels-idx1-ubyte.gz", R_OK)) {
        printf("test_fashion_mnist: skipped: %s not installed\n", DATA_FASHION_MNIST_DIR);
        return;
    }
    Dataset *train = data_fashion_mnist_create(NULL);
    Dataset *test = data_fashion_mnist_create(&(DataFashionMnistArgs){.test = true});
    ck_assert_ptr_nonnull(train);
    ck_assert_ptr_nonnull(test);
    ck_assert_int_eq(data_dataset_len(train), 60000);
    ck_assert_int_eq(data_dataset_len(test), 10000);
    /* facts from tests/fixtures/data_split.py */
    int64_t tr[5] = {9, 0, 0, 3, 0}, te[5] = {9, 2, 1, 1, 6};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(label_of(train, i), tr[i]);
        ck_assert_int_eq(label_of(test, i), te[i]);
    }
    CtScope *s = ct_scope_open();
    DataSample smp;
    ck_assert_int_eq(data_dataset_get(train, 0, NULL, &smp), CT_OK);
    tu_assert_shape(smp.t[0], 3, 1, 28, 28);
    Tensor *f = tensor_cast(smp.t[0], CT_F32);
    tu_assert_values(tensor_sum_all(f), ((double[]){76247}), 1, 0, 0);
    const uint8_t *px = tensor_data(smp.t[0]);
    ck_assert_int_eq(px[14 * 28 + 14], 217);
    ct_scope_close(s);
    data_dataset_free(train);
    data_dataset_free(test);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("data_datasets");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tensor_dataset);
    tcase_add_test(tc, test_subset_concat);
    tcase_add_test(tc, test_random_split);
    tcase_add_test(tc, test_random_split_sizes_past_int64_refused);
    tcase_add_test(tc, test_ctx_generator);
    tcase_add_test(tc, test_transformed);
    tcase_add_test(tc, test_idx_plain_and_gzip);
    tcase_add_test(tc, test_idx_errors);
    tcase_add_test(tc, test_idx_gzip_paths);
    tcase_add_test(tc, test_idx_gzip_large);
    tcase_add_test(tc, test_fashion_mnist);
    tcase_add_test(tc, test_transform_null_is_not_a_stale_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
