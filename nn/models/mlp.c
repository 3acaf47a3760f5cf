/* The MLP: nn.Sequential(Linear, ReLU, Linear, ..., ReLU, Linear), so its
 * state-dict names are "0.weight", "2.weight", ... as in PyTorch. */
#include <stdlib.h>

#include "zoo_internal.h"

static CtStatus check_args(int64_t in, int n_hidden, const int64_t *hidden, int64_t out,
                           const CtGenerator *g)
{
    if (in <= 0 || out <= 0)
        return ct_error(CT_ERR_INVALID, "mlp: in %lld and out %lld must be positive",
                        (long long)in, (long long)out);
    if (n_hidden < 0)
        return ct_error(CT_ERR_INVALID, "mlp: n_hidden %d must be >= 0", n_hidden);
    if (n_hidden > 0 && !hidden)
        return ct_error(CT_ERR_NULL, "mlp: hidden is NULL with n_hidden %d", n_hidden);
    for (int i = 0; i < n_hidden; i++) {
        if (hidden[i] <= 0)
            return ct_error(CT_ERR_INVALID, "mlp: hidden[%d] = %lld must be positive", i,
                            (long long)hidden[i]);
    }
    return zoo_check_generator("mlp", g);
}

Module *nn_model_mlp(int64_t in, int n_hidden, const int64_t *hidden, int64_t out,
                     CtGenerator *g)
{
    if (check_args(in, n_hidden, hidden, out, g) != CT_OK) return NULL;
    int n = 2 * n_hidden + 1;
    Module **mods = calloc((size_t)n, sizeof *mods);
    if (!mods) {
        ct_error(CT_ERR_OOM, "mlp: cannot allocate %d layers", n);
        return NULL;
    }
    int64_t width = in;
    for (int i = 0; i < n_hidden; i++) {
        mods[2 * i] = nn_linear(width, hidden[i], true, g);
        mods[2 * i + 1] = nn_relu();
        width = hidden[i];
    }
    mods[n - 1] = nn_linear(width, out, true, g);
    Module *seq = zoo_sequential(n, mods);
    free(mods);
    return seq;
}
