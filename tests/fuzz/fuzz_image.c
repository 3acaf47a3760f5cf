/* libFuzzer target for image decoding from memory (PNG via libpng, JPEG via
 * libjpeg): any input must decode or fail with an error, never crash, leak
 * or exit. Built with -DCTRAINER_FUZZ=ON and clang. Run e.g.
 *   ./fuzz_image -max_total_time=20 corpus-dir tests/fuzz/corpus/image */
#include <stddef.h>
#include <stdint.h>

#include "ctrainer/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CtScope *s = ct_scope_open();
    /* as stored, and forced to grey (exercises the channel conversion) */
    for (int channels = 0; channels <= 1; channels++) {
        Tensor *t = data_image_decode(data, size, channels, "fuzz");
        if (!t) continue;
        /* the contract: u8 (H, W, C), C = 1 or 3, every byte readable */
        const int64_t *sh = tensor_shape(t);
        if (tensor_dtype(t) != CT_U8 || tensor_ndim(t) != 3 || sh[0] < 1 || sh[1] < 1 ||
            (sh[2] != 1 && sh[2] != 3) || (channels && sh[2] != channels))
            __builtin_trap();
        volatile uint8_t x = 0;
        const uint8_t *p = tensor_data(t);
        for (int64_t i = 0; i < tensor_numel(t); i++) x ^= p[i];
        (void)x;
    }
    ct_scope_close(s);
    ct_clear_error();
    return 0;
}
