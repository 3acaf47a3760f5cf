/* The Module constructors: one group with every parameter of a model.
 * Kept apart from the algorithms so that programs using only explicit groups
 * do not link the nn layer. */
#include <stdlib.h>

#include "optim_internal.h"

Optimizer *optim_create_from_module(const OptimVtable *vt, const char *who, Module *model,
                                    const OptimDefaults *def, const OptimFlags *flags)
{
    if (!model) {
        ct_error(CT_ERR_NULL, "%s: NULL model", who);
        return NULL;
    }
    CtStateDict *named = nn_module_parameters(model);
    if (!named) return NULL;
    int64_t n = ct_state_dict_size(named);
    Tensor **params = malloc((size_t)(n ? n : 1) * sizeof *params);
    if (!params) {
        ct_state_dict_free(named);
        ct_error(CT_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) params[i] = ct_state_dict_tensor(named, i);
    /* The model keeps its parameters alive; the optimizer borrows them. */
    ct_state_dict_free(named);
    OptimGroup g = optim_group(params, n);
    Optimizer *o = n ? optim_create_common(vt, who, 1, &g, def, flags) : NULL;
    if (!n) ct_error(CT_ERR_INVALID, "%s: the model has no parameters", who);
    free(params);
    return o;
}

#define MODULE_CTOR(FN, ARGS, SETTINGS, VT)                                              \
    Optimizer *FN(Module *model, const ARGS *args)                                       \
    {                                                                                    \
        if (!args) {                                                                     \
            ct_error(CT_ERR_NULL, #FN ": NULL args");                                    \
            return NULL;                                                                 \
        }                                                                                \
        OptimDefaults d;                                                                 \
        OptimFlags f;                                                                    \
        SETTINGS(args, &d, &f);                                                          \
        return optim_create_from_module(&VT, #FN, model, &d, &f);                        \
    }

MODULE_CTOR(optim_sgd_create, SgdArgs, optim_sgd_settings, optim_sgd_vt)
MODULE_CTOR(optim_adam_create, AdamArgs, optim_adam_settings, optim_adam_vt)
MODULE_CTOR(optim_adamw_create, AdamArgs, optim_adam_settings, optim_adamw_vt)
MODULE_CTOR(optim_rmsprop_create, RmspropArgs, optim_rmsprop_settings, optim_rmsprop_vt)
