/* safetensors: round trips, a file written by Python's safetensors library,
 * malformed files and failed saves. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctrainer/nn.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/ct_safetensors_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static int count_files(const char *d)
{
    DIR *dp = opendir(d);
    ck_assert_ptr_nonnull(dp);
    int n = 0;
    for (struct dirent *e; (e = readdir(dp));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dp);
    return n;
}

static void remove_dir(void)
{
    DIR *dp = opendir(dir);
    ck_assert_ptr_nonnull(dp);
    for (struct dirent *e; (e = readdir(dp));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(dp);
    ck_assert_int_eq(rmdir(dir), 0);
}

static const char *in_dir(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Writes the 8-byte length n_decl, the header text and n_data bytes of data
 * (0, 1, 2, ...) to `path`. */
static void write_raw(const char *path, uint64_t n_decl, const char *header,
                      size_t n_data)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n_decl >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < n_data; i++) fputc((int)(i & 0xff), f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A file with this header and n_data bytes of data. */
static void write_file(const char *path, const char *header, size_t n_data)
{
    write_raw(path, strlen(header), header, n_data);
}

static void assert_bytes_equal(const Tensor *a, const Tensor *b)
{
    ck_assert_int_eq(tensor_dtype(a), tensor_dtype(b));
    ck_assert_int_eq(tensor_ndim(a), tensor_ndim(b));
    for (int i = 0; i < tensor_ndim(a); i++)
        ck_assert_int_eq(tensor_shape(a)[i], tensor_shape(b)[i]);
    size_t n = (size_t)tensor_numel(a) * ct_dtype_size(tensor_dtype(a));
    unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
    ck_assert_int_eq(tensor_copy_to_host(a, x, tensor_dtype(a)), CT_OK);
    ck_assert_int_eq(tensor_copy_to_host(b, y, tensor_dtype(b)), CT_OK);
    ck_assert(memcmp(x, y, n) == 0);
    free(x);
    free(y);
}

/* ------------------------------------------------------------ round trip */

/* One tensor of every dtype, a 0-d, an empty and a non-contiguous one. */
static CtStateDict *sample_dict(void)
{
    CtScope *s = ct_scope_open();
    CtStateDict *d = ct_state_dict_create();
    const double v[] = {1.5, 2.25, 0, 3, 255, 1e-3}; /* fits every dtype */
    const int64_t s23[] = {2, 3};
    const char *names[] = {"f32", "f64", "bf16", "f16", "i64", "i32", "u8", "bool"};
    for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) {
        Tensor *t = tu_tensor((CtDType)dt, 2, s23, v);
        ck_assert_int_eq(ct_state_dict_add(d, names[dt], t), CT_OK);
        tensor_free(t);
    }
    ck_assert_int_eq(ct_state_dict_add(d, "layer.0.num_batches_tracked",
                                       tensor_scalar(42, CT_I64, ct_cpu())),
                     CT_OK);
    ck_assert_int_eq(
        ct_state_dict_add(d, "empty",
                          tensor_zeros(2, (const int64_t[]){0, 4}, CT_F32, ct_cpu())),
        CT_OK);
    Tensor *m = tensor_view(tensor_arange(0, 12, 1, CT_F32, ct_cpu()), 2,
                            (const int64_t[]){3, 4});
    ck_assert_int_eq(ct_state_dict_add(d, "transposed", tensor_transpose(m, 0, 1)),
                     CT_OK);
    ct_scope_close(s);
    return d;
}

START_TEST(test_round_trip)
{
    TU_MEM_BEGIN;
    make_dir();
    CtStateDict *d = sample_dict();
    const char *path = in_dir("model.safetensors");
    const char *keys[] = {"format", "epoch"}, *vals[] = {"pt", "3"};
    ck_assert_int_eq(nn_safetensors_save(path, d, 2, keys, vals), CT_OK);
    ck_assert_int_eq(count_files(dir), 1); /* no temp file left */

    CtStateDict *r = nn_safetensors_load(path, ct_cpu());
    ck_assert_msg(r != NULL, "%s", ct_last_error());
    ck_assert_int_eq(ct_state_dict_size(r), ct_state_dict_size(d));
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        ck_assert_str_eq(ct_state_dict_name(r, i), ct_state_dict_name(d, i));
        assert_bytes_equal(ct_state_dict_tensor(r, i), ct_state_dict_tensor(d, i));
    }
    ck_assert_int_eq(tensor_ndim(ct_state_dict_get(r, "layer.0.num_batches_tracked")), 0);
    tu_assert_values(ct_state_dict_get(r, "transposed"),
                     ((double[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}), 12, 0, 0);
    tu_assert_values(ct_state_dict_get(r, "bool"), ((double[]){1, 1, 0, 1, 1, 1}), 6, 0,
                     0);

    /* the layout: header padded with spaces to 8, metadata, data without gaps */
    FILE *f = fopen(path, "rb");
    unsigned char len[8];
    ck_assert_int_eq(fread(len, 1, 8, f), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len[i];
    ck_assert_uint_eq(n % 8, 0);
    char *h = malloc(n + 1);
    ck_assert_uint_eq(fread(h, 1, n, f), n);
    h[n] = '\0';
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    json_t *j = json_loads(h, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(j, "__metadata__"), "epoch")),
        "3");
    json_t *e = json_object_get(j, "bf16");
    ck_assert_str_eq(json_string_value(json_object_get(e, "dtype")), "BF16");
    json_t *off = json_object_get(e, "data_offsets");
    /* bf16 follows f32 (24 bytes) and f64 (48 bytes) */
    ck_assert_int_eq(json_integer_value(json_array_get(off, 0)), 72);
    ck_assert_int_eq(json_integer_value(json_array_get(off, 1)), 84);
    int64_t data = 0;
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        const Tensor *t = ct_state_dict_tensor(d, i);
        data += tensor_numel(t) * (int64_t)ct_dtype_size(tensor_dtype(t));
    }
    ck_assert_int_eq(size, (long)(8 + n + data));
    json_decref(j);
    free(h);

    /* saving again replaces the file atomically */
    ck_assert_int_eq(nn_safetensors_save(path, r, 0, NULL, NULL), CT_OK);
    ck_assert_int_eq(count_files(dir), 1);
    ct_state_dict_free(r);
    ct_state_dict_free(d);
    remove_dir();
    TU_MEM_END;
}
END_TEST

START_TEST(test_python_fixture)
{
    /* written by tests/fixtures/safetensors_fixture.py (safetensors 0.8.0) */
    TU_MEM_BEGIN;
    CtStateDict *d =
        nn_safetensors_load(CTRAINER_FIXTURES_DIR "/python.safetensors", ct_cpu());
    ck_assert_msg(d != NULL, "%s", ct_last_error());
    ck_assert_int_eq(ct_state_dict_size(d), 9);
    const struct {
        const char *name;
        CtDType dt;
        int ndim;
        int64_t shape[2];
        double v[6];
    } want[] = {
        {"steps", CT_I64, 0, {0}, {7}},
        {"fc1.bias", CT_F64, 1, {2}, {1.5, -2.25}},
        {"empty", CT_F32, 2, {0, 4}, {0}},
        {"fc1.weight", CT_F32, 2, {2, 3}, {-1, -0.5, 0, 0.5, 1, 1.5}},
        {"idx", CT_I32, 1, {3}, {-3, 0, 2147483647}},
        {"brain", CT_BF16, 2, {2, 2}, {1, -0.5, 3, 256}},
        {"half", CT_F16, 1, {3}, {0.5, -1, 65504}},
        {"bytes", CT_U8, 1, {3}, {0, 255, 17}},
        {"mask", CT_BOOL, 1, {3}, {1, 0, 1}},
    };
    for (int i = 0; i < 9; i++) {
        /* entries come in the file's header order */
        ck_assert_str_eq(ct_state_dict_name(d, i), want[i].name);
        Tensor *t = ct_state_dict_tensor(d, i);
        ck_assert_int_eq(tensor_dtype(t), want[i].dt);
        tu_assert_shape_at(__FILE__, __LINE__, t, want[i].ndim, want[i].shape);
        tu_assert_values(t, want[i].v, tensor_numel(t), 0, 0);
    }
    ct_state_dict_free(d);
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ malformed */

static void assert_rejected(const char *path, const char *needle)
{
    ck_assert_ptr_null(nn_safetensors_load(path, ct_cpu()));
    ck_assert_msg(strstr(ct_last_error(), path) != NULL, "message does not name %s: %s",
                  path, ct_last_error());
    tu_assert_error(CT_ERR_FORMAT, needle);
}

#define W784 "{\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[128,784],\"data_offsets\":"

START_TEST(test_malformed_files)
{
    TU_MEM_BEGIN;
    make_dir();
    const char *p = in_dir("model.safetensors");
    FILE *f = fopen(p, "wb");
    fwrite("abcd", 1, 4, f);
    fclose(f);
    assert_rejected(p, "file is 4 bytes, too short for the 8-byte header length");

    write_raw(p, 1000, "{}", 40);
    assert_rejected(p, "header length 1000 exceeds the 42 bytes after the length field");
    write_raw(p, UINT64_MAX, "{}", 0);
    assert_rejected(p, "header length 18446744073709551615 exceeds");
    /* a sparse 200 MB file: the header cap applies before anything is read */
    write_raw(p, 150u << 20, "{", 0);
    ck_assert_int_eq(truncate(p, 200 << 20), 0);
    assert_rejected(p, "header length 157286400 exceeds the limit of 104857600 bytes");

    write_file(p, "{\"a\": {\"dtype\": \"F32\",", 0);
    assert_rejected(p, "header is not valid JSON");
    write_file(p, "[1, 2]", 0);
    assert_rejected(p, "header is not a JSON object");
    write_file(p,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8);
    assert_rejected(p, "duplicate object key");

    write_file(p, "{\"w\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4);
    assert_rejected(p, "tensor \"w\": unknown dtype \"I8\"");
    write_file(p, "{\"w\":{\"shape\":[4],\"data_offsets\":[0,4]}}", 4);
    assert_rejected(p, "tensor \"w\": dtype is missing");
    write_file(p, "{\"w\":{\"dtype\":\"U8\",\"shape\":[-4],\"data_offsets\":[0,4]}}", 4);
    assert_rejected(p, "tensor \"w\": shape entry 0 is not a non-negative integer");
    write_file(p, "{\"w\":{\"dtype\":\"U8\",\"shape\":[2.0],\"data_offsets\":[0,2]}}", 4);
    assert_rejected(p, "shape entry 0 is not a non-negative integer");
    write_file(p, "{\"w\":{\"dtype\":\"U8\",\"shape\":4,\"data_offsets\":[0,4]}}", 4);
    assert_rejected(p, "tensor \"w\": shape is missing or not an array");
    write_file(p, "{\"w\":{\"dtype\":\"U8\",\"shape\":[4]}}", 4);
    assert_rejected(p, "tensor \"w\": data_offsets must be [begin, end]");
    write_file(p, "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4);
    assert_rejected(p, "data_offsets must be [begin, end] with 0 <= begin <= end");
    write_file(p, "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}}", 8);
    assert_rejected(p, "data_offsets must be [begin, end]");
    write_file(p, "{\"w\":[1]}", 4);
    assert_rejected(p, "tensor \"w\": entry is not a JSON object");
    write_file(p, "{\"__metadata__\":{\"epoch\":3}}", 0);
    assert_rejected(p, "metadata value of \"epoch\" is not a string");

    /* offsets outside the data, overlapping, or not matching the shape */
    write_file(p, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
               16);
    assert_rejected(p, "tensor \"w\": data_offsets [8, 24] lie outside the data buffer "
                       "of 16 bytes");
    write_file(p,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]},"
               "\"c\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}",
               24);
    assert_rejected(p, "tensor \"c\": data_offsets [8, 24] overlap those of tensor \"a\" "
                       "[0, 16]");
    write_file(p, W784 "[0,100]}}", 100);
    assert_rejected(p,
                    "model.safetensors: tensor \"fc1.weight\": data_offsets [0, 100] do "
                    "not match shape [128, 784] of F32 (401408 bytes)");
    write_file(p,
               "{\"w\":{\"dtype\":\"F64\",\"shape\":[1099511627776,1099511627776],"
               "\"data_offsets\":[0,8]}}",
               8);
    assert_rejected(p,
                    "do not match shape [1099511627776, 1099511627776] of F64 (overflow "
                    "bytes)");
    write_file(p,
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,2,3,4,5,6,7,8,9],"
               "\"data_offsets\":[0,8]}}",
               8);
    ck_assert_ptr_null(nn_safetensors_load(p, ct_cpu()));
    tu_assert_error(CT_ERR_UNSUPPORTED, "9 dims (at most 8)");

    /* a valid file cut short */
    CtStateDict *d = sample_dict();
    ck_assert_int_eq(nn_safetensors_save(p, d, 0, NULL, NULL), CT_OK);
    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq(truncate(p, sb.st_size - 3), 0);
    assert_rejected(p, "tensor \"transposed\": data_offsets [188, 236] lie outside the "
                       "data buffer of 233 bytes (truncated file?)");
    ct_state_dict_free(d);

    ck_assert_ptr_null(nn_safetensors_load(in_dir("missing.safetensors"), ct_cpu()));
    tu_assert_error(CT_ERR_IO, "missing.safetensors: cannot open: No such file");
    ck_assert_ptr_null(nn_safetensors_load(dir, ct_cpu()));
    tu_assert_error(CT_ERR_IO, "not a regular file");
    remove_dir();
    TU_MEM_END;
}
END_TEST

/* Found by fuzz_safetensors: an empty tensor whose other dims cannot be
 * addressed (strides count the size-0 dim as 1) is a format error naming
 * the file, in any dim order; empty tensors of addressable shapes load. */
START_TEST(test_empty_beside_huge_dims)
{
    TU_MEM_BEGIN;
    make_dir();
    const char *p = in_dir("model.safetensors");
    write_file(p,
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,9223372036854775807,"
               "9223372036854775807],\"data_offsets\":[0,0]}}",
               0);
    assert_rejected(p, "tensor \"w\": shape [0, 9223372036854775807, "
                       "9223372036854775807] of F32 is too large to address");
    write_file(p,
               "{\"w\":{\"dtype\":\"BF16\",\"shape\":[4611686018427387904,0],"
               "\"data_offsets\":[0,0]}}",
               0);
    assert_rejected(p, "tensor \"w\": shape [4611686018427387904, 0] of BF16 is too "
                       "large to address");
    write_file(p,
               "{\"w\":{\"dtype\":\"F64\",\"shape\":[1099511627776,0,4],"
               "\"data_offsets\":[0,0]}}",
               0);
    CtStateDict *d = nn_safetensors_load(p, ct_cpu());
    ck_assert_msg(d != NULL, "%s", ct_last_error());
    tu_assert_shape(ct_state_dict_get(d, "w"), 3, 1099511627776, 0, 4);
    ct_state_dict_free(d);
    remove_dir();
    TU_MEM_END;
}
END_TEST

/* ------------------------------------------------------------ failed saves */

START_TEST(test_failed_saves)
{
    TU_MEM_BEGIN;
    make_dir();
    CtStateDict *d = sample_dict();
    /* no such directory; a directory that is a file */
    ck_assert_int_eq(
        nn_safetensors_save("/nonexistent-ctrainer/m.safetensors", d, 0, NULL, NULL),
        CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "/nonexistent-ctrainer/m.safetensors: cannot create "
                               "/nonexistent-ctrainer/m.safetensors.tmp.");
    write_file(in_dir("file"), "{}", 0);
    char p[300];
    snprintf(p, sizeof p, "%s/m.safetensors", in_dir("file"));
    ck_assert_int_eq(nn_safetensors_save(p, d, 0, NULL, NULL), CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "Not a directory");
    ck_assert_int_eq(count_files(dir), 1);

    /* a write that fails half-way (file size limit) leaves the old file intact
     * and no temp file */
    const char *path = in_dir("model.safetensors");
    CtStateDict *small = ct_state_dict_create();
    Tensor *one = tensor_ones(1, (const int64_t[]){4}, CT_F32, ct_cpu());
    ct_state_dict_add(small, "w", one);
    tensor_free(one);
    ck_assert_int_eq(nn_safetensors_save(path, small, 0, NULL, NULL), CT_OK);
    CtStateDict *big = ct_state_dict_create();
    Tensor *z = tensor_zeros(1, (const int64_t[]){100000}, CT_F32, ct_cpu());
    ct_state_dict_add(big, "w", z);
    tensor_free(z);
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit lim = {65536, old.rlim_max};
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    CtStatus st = nn_safetensors_save(path, big, 0, NULL, NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    ck_assert_int_eq(st, CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "model.safetensors: ");
    ck_assert_int_eq(count_files(dir), 2); /* "file" and the old model */
    CtStateDict *r = nn_safetensors_load(path, ct_cpu());
    ck_assert_ptr_nonnull(r);
    tu_assert_values(ct_state_dict_get(r, "w"), ((double[]){1, 1, 1, 1}), 4, 0, 0);
    ct_state_dict_free(r);
    ct_state_dict_free(big);

    /* bad arguments are rejected before anything is created */
    const char *k[] = {"a"}, *v[] = {NULL};
    ck_assert_int_eq(nn_safetensors_save(path, small, 1, k, v), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "metadata entry 0 has a NULL key or value");
    ck_assert_int_eq(nn_safetensors_save(path, small, -1, NULL, NULL), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "bad metadata");
    Tensor *t = tensor_zeros(1, (const int64_t[]){1}, CT_F32, ct_cpu());
    ct_state_dict_add(small, "__metadata__", t);
    tensor_free(t);
    ck_assert_int_eq(nn_safetensors_save(path, small, 0, NULL, NULL), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "\"__metadata__\" is reserved");
    ck_assert_int_eq(nn_safetensors_save(NULL, small, 0, NULL, NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "NULL path or dict");
    ck_assert_ptr_null(nn_safetensors_load(NULL, ct_cpu()));
    tu_assert_error(CT_ERR_NULL, "NULL path");
    ck_assert_int_eq(count_files(dir), 2);
    ct_state_dict_free(small);
    ct_state_dict_free(d);
    remove_dir();
    TU_MEM_END;
}
END_TEST

START_TEST(test_cuda_round_trip)
{
    if (ct_cuda_device_count() == 0) {
        fprintf(stderr, "skipped 1 CUDA test: no device\n");
        return;
    }
    make_dir();
    CtStateDict *d = sample_dict();
    const char *path = in_dir("gpu.safetensors");
    ck_assert_int_eq(nn_safetensors_save(path, d, 0, NULL, NULL), CT_OK);
    CtStateDict *g = nn_safetensors_load(path, ct_cuda(0));
    ck_assert_msg(g != NULL, "%s", ct_last_error());
    ck_assert(tensor_device(ct_state_dict_tensor(g, 0)).type == CT_DEVICE_CUDA);
    ck_assert_int_eq(nn_safetensors_save(path, g, 0, NULL, NULL), CT_OK); /* from GPU */
    CtStateDict *r = nn_safetensors_load(path, ct_cpu());
    for (int64_t i = 0; i < ct_state_dict_size(d); i++)
        assert_bytes_equal(ct_state_dict_tensor(r, i), ct_state_dict_tensor(d, i));
    ct_state_dict_free(r);
    ct_state_dict_free(g);
    ct_state_dict_free(d);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nn_safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_python_fixture);
    tcase_add_test(tc, test_malformed_files);
    tcase_add_test(tc, test_empty_beside_huge_dims);
    tcase_add_test(tc, test_failed_saves);
    tcase_add_test(tc, test_cuda_round_trip);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
