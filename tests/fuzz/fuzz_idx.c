/* libFuzzer target for the IDX parser (data_idx_parse), as label (1-d) and
 * image (3-d) files. Built with -DCTRAINER_FUZZ=ON and clang. */
#include <stddef.h>
#include <stdint.h>

#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
    }
    ct_clear_error();
    return 0;
}
