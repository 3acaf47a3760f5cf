/* Helpers shared by the model zoo: registration that keeps the first error,
 * input checks, the ResNet convolution initialisation. */
#include <stdio.h>

#include "zoo_internal.h"

Module *zoo_child(Module *m, const char *name, Module *child)
{
    if (!child) return NULL;
    return nn_module_register_child(m, name, child);
}

void zoo_free_all(int n, Module **mods)
{
    for (int i = 0; i < n; i++) nn_module_free(mods[i]);
}

Module *zoo_sequential(int n, Module **mods)
{
    for (int i = 0; i < n; i++) {
        if (!mods[i]) {
            zoo_free_all(n, mods);
            return NULL;
        }
    }
    return nn_sequential(n, mods);
}

CtStatus zoo_check_generator(const char *model, const CtGenerator *g)
{
    if (!g) return ct_error(CT_ERR_NULL, "%s: generator is NULL", model);
    return CT_OK;
}

CtStatus zoo_check_input(const char *model, const Tensor *x, int64_t c, int64_t h,
                         int64_t w)
{
    if (!x) return CT_ERR_NULL;
    const int64_t *s = tensor_shape(x);
    bool ok =
        tensor_ndim(x) == 4 && s[1] == c && (h < 0 || s[2] == h) && (w < 0 || s[3] == w);
    if (ok) return CT_OK;
    char desc[96], hs[24] = "H", ws[24] = "W";
    if (h >= 0) snprintf(hs, sizeof hs, "%lld", (long long)h);
    if (w >= 0) snprintf(ws, sizeof ws, "%lld", (long long)w);
    return ct_error(CT_ERR_SHAPE, "%s: expected input (N, %lld, %s, %s), got %s", model,
                    (long long)c, hs, ws, tensor_describe(x, desc, sizeof desc));
}

Module *zoo_conv_kaiming(int64_t in, int64_t out, int k, int s, CtGenerator *g)
{
    CtConv2dArgs args = {.stride = {s, s}, .padding = {k / 2, k / 2}};
    Module *conv = nn_conv2d(in, out, k, &args, false, g);
    if (conv && nn_init_kaiming_normal_(nn_module_get(conv, "weight"), 0.0, NN_FAN_OUT,
                                        NN_NONLIN_RELU, g) != CT_OK) {
        nn_module_free(conv);
        return NULL;
    }
    return conv;
}
