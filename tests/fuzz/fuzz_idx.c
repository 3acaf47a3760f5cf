/* libFuzzer target for IDX files: the parser (data_idx_parse) as label
 * (1-d) and image (3-d) files, and the whole reading path of an image
 * dataset (data_idx_dataset_create: libdeflate for a gzip member, zlib for
 * the rest) on the same bytes as a file. Built with -DCTRAINER_FUZZ=ON and
 * clang. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes as an image file: a dataset, or a recorded error. A plain file
 * the parser accepts loads with its first dim as the length, unless its
 * shape cannot be addressed (an empty dim beside huge ones). */
static void load_as_file(const uint8_t *data, size_t size, bool parsed, int64_t n)
{
    int fd = memfd_create("fuzz.idx", 0);
    if (fd < 0) return;
    if (write(fd, data, size) == (ssize_t)size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        Dataset *d = data_idx_dataset_create(&(DataIdxArgs){.images = path});
        if (!d && ct_last_status() == CT_OK) __builtin_trap();
        if (parsed && !d && !strstr(ct_last_error(), "too large to address"))
            __builtin_trap();
        if (d && (data_dataset_len(d) < 1 || (parsed && data_dataset_len(d) != n)))
            __builtin_trap();
        data_dataset_free(d);
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool parsed3 = false;
    int64_t n3 = 0;
    for (int nd = 1; nd <= 3; nd += 2) {
        int64_t dims[3];
        size_t off;
        if (data_idx_parse(data, size, "fuzz.idx", nd, dims, &off) != CT_OK) continue;
        /* the contract: the payload is exactly the product of the dims */
        uint64_t n = 1;
        for (int d = 0; d < nd; d++) n *= (uint64_t)dims[d];
        if (dims[0] < 1 || off != 4 + 4 * (size_t)nd || off + n != size) __builtin_trap();
        volatile uint8_t x = 0;
        for (size_t i = off; i < size; i++) x ^= data[i];
        (void)x;
        if (nd == 3) parsed3 = true, n3 = dims[0];
    }
    load_as_file(data, size, parsed3, n3);
    ct_clear_error();
    return 0;
}
