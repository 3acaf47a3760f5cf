/* libFuzzer target for reading safetensors files (nn_safetensors_load: the
 * header length, the JSON header, every entry's dtype, shape and offsets,
 * overlaps) and for loading the result into a module
 * (nn_module_load_state_dict, strict and not). A file that loads must hold
 * tensors of a safetensors dtype with every byte readable, and must come
 * back the same after nn_safetensors_save and a second load. Built with
 * -DCTRAINER_FUZZ=ON and clang. Run e.g.
 *   ./fuzz_safetensors -max_total_time=20 corpus-dir tests/fuzz/corpus/safetensors */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctrainer/nn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The module the loaded dicts go into: parameters and buffers of two
 * dtypes ("0.weight" (2, 3), "0.bias", "1.running_mean", ...,
 * "1.num_batches_tracked" i64). Made once. */
static Module *model(void)
{
    static Module *m;
    if (!m) {
        CtGenerator g = ct_generator(1, 0);
        m = nn_sequential(
            2, (Module *[]){nn_linear(3, 2, true, &g), nn_batch_norm1d(2, 1e-5, 0.1)});
        if (!m) __builtin_trap();
    }
    return m;
}

/* A memfd holding size bytes; its path ("/proc/self/fd/N") into path. */
static int memfile(const void *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("fuzz.safetensors", 0);
    if (fd < 0) return -1;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

static bool known_dtype(CtDType dt)
{
    return dt == CT_F32 || dt == CT_F64 || dt == CT_BF16 || dt == CT_F16 ||
           dt == CT_I64 || dt == CT_I32 || dt == CT_U8 || dt == CT_BOOL;
}

/* The contract of a loaded dict: known dtypes, at most CT_MAX_DIMS dims,
 * contiguous host tensors whose bytes can all be read, bools 0 or 1. */
static void check_dict(const CtStateDict *d)
{
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        Tensor *t = ct_state_dict_tensor(d, i);
        if (!t || !ct_state_dict_name(d, i) || !known_dtype(tensor_dtype(t)) ||
            tensor_ndim(t) > CT_MAX_DIMS || !tensor_is_contiguous(t))
            __builtin_trap();
        size_t n = (size_t)tensor_numel(t) * ct_dtype_size(tensor_dtype(t));
        const uint8_t *p = tensor_data(t);
        volatile uint8_t x = 0;
        for (size_t k = 0; k < n; k++) {
            if (tensor_dtype(t) == CT_BOOL && p[k] > 1) __builtin_trap();
            x ^= p[k];
        }
        (void)x;
    }
}

static bool same_dict(const CtStateDict *a, const CtStateDict *b)
{
    if (ct_state_dict_size(a) != ct_state_dict_size(b)) return false;
    for (int64_t i = 0; i < ct_state_dict_size(a); i++) {
        Tensor *x = ct_state_dict_tensor(a, i), *y = ct_state_dict_tensor(b, i);
        if (strcmp(ct_state_dict_name(a, i), ct_state_dict_name(b, i)) != 0 ||
            tensor_dtype(x) != tensor_dtype(y) || tensor_ndim(x) != tensor_ndim(y))
            return false;
        for (int k = 0; k < tensor_ndim(x); k++)
            if (tensor_shape(x)[k] != tensor_shape(y)[k]) return false;
        size_t n = (size_t)tensor_numel(x) * ct_dtype_size(tensor_dtype(x));
        if (n && memcmp(tensor_data(x), tensor_data(y), n) != 0) return false;
    }
    return true;
}

/* The round trip's file, in a private directory of tmpfs (where the
 * save's fsync costs nothing) or /tmp; removed at exit. */
static char rt_dir[64], rt_path[96];

static void remove_rt(void)
{
    unlink(rt_path);
    rmdir(rt_dir);
}

static const char *rt_file(void)
{
    if (!rt_path[0]) {
        snprintf(rt_dir, sizeof rt_dir, "/dev/shm/ct_fuzz_st_XXXXXX");
        if (!mkdtemp(rt_dir)) {
            snprintf(rt_dir, sizeof rt_dir, "/tmp/ct_fuzz_st_XXXXXX");
            if (!mkdtemp(rt_dir)) __builtin_trap();
        }
        snprintf(rt_path, sizeof rt_path, "%s/rt.safetensors", rt_dir);
        atexit(remove_rt);
    }
    return rt_path;
}

/* Saves d and loads it back: the same names, dtypes, shapes and bytes. */
static void round_trip(const CtStateDict *d)
{
    const char *path = rt_file(), *key = "format", *value = "pt";
    if (nn_safetensors_save(path, d, 1, &key, &value) != CT_OK) __builtin_trap();
    CtStateDict *again = nn_safetensors_load(path, ct_cpu());
    if (!again || !same_dict(d, again)) __builtin_trap();
    ct_state_dict_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = memfile(data, size, path, sizeof path);
    if (fd < 0) return 0;
    CtStateDict *d = nn_safetensors_load(path, ct_cpu());
    close(fd);
    if (!d) {
        if (ct_last_status() == CT_OK || !strstr(ct_last_error(), path)) __builtin_trap();
        ct_clear_error();
        return 0;
    }
    check_dict(d);
    round_trip(d);
    NnLoadReport r;
    if (nn_module_load_state_dict(model(), d, true, &r) != CT_OK &&
        !(r.n_missing || r.n_unexpected || r.n_mismatched))
        __builtin_trap(); /* a strict load fails only for a reported key */
    ct_clear_error();
    nn_module_load_state_dict(model(), d, false, &r);
    ct_clear_error();
    ct_state_dict_free(d);
    return 0;
}
