/* Freezing: requires_grad by name pattern, by layer group, and the
 * classifier head. */
#include <fnmatch.h>
#include <string.h>

#include "nn_internal.h"

int64_t nn_module_set_requires_grad(Module *m, const char *pattern, bool on)
{
    CtStateDict *ps = nn_module_parameters(m);
    if (!ps) return -1;
    int64_t n = 0;
    for (int64_t i = 0; i < ct_state_dict_size(ps); i++) {
        if (pattern && fnmatch(pattern, ct_state_dict_name(ps, i), 0) != 0) continue;
        if (tensor_set_requires_grad(ct_state_dict_tensor(ps, i), on) != CT_OK) {
            n = -1;
            break;
        }
        n++;
    }
    ct_state_dict_free(ps);
    return n;
}

/* BatchNorm1d/2d and SyncBatchNorm, as ModelFreezer's batch-norm types */
static bool is_batch_norm(const Module *m)
{
    return nn_is_batch_norm(m);
}

/* Sets requires_grad on every parameter of m's subtree, except BatchNorm
 * parameters when keep_bn (they stay trainable). */
static CtStatus set_tree(Module *m, bool on, bool keep_bn)
{
    bool bn = keep_bn && is_batch_norm(m);
    for (int i = 0; i < m->reg->n_params; i++) {
        CtStatus st = tensor_set_requires_grad(m->reg->params[i].t, bn ? true : on);
        if (st != CT_OK) return st;
    }
    for (int i = 0; i < m->reg->n_children; i++) {
        CtStatus st = set_tree(m->reg->children[i].m, on, keep_bn);
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

CtStatus nn_module_freeze_groups(Module *m, int n_trainable, bool bn_trainable)
{
    if (!m || !m->reg)
        return ct_error(CT_ERR_NULL, "nn_module_freeze_groups: NULL module");
    int n = m->reg->n_children;
    if (n == 0)
        return ct_error(CT_ERR_INVALID,
                        "%s: freeze_groups: the module has no children (layer groups)",
                        m->vt->type);
    int first_trainable = n_trainable <= 0 ? n : n - (n_trainable < n ? n_trainable : n);
    for (int i = 0; i < n; i++) {
        bool frozen = i < first_trainable;
        CtStatus st = set_tree(m->reg->children[i].m, !frozen, frozen && bn_trainable);
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

CtStatus nn_module_unfreeze(Module *m)
{
    return nn_module_set_requires_grad(m, NULL, true) < 0 ? ct_last_status() : CT_OK;
}

Module *nn_module_classifier(const Module *m)
{
    int n = nn_module_num_children(m);
    if (n == 0) {
        ct_error(CT_ERR_INVALID, "nn_module_classifier: %s has no children",
                 m ? m->vt->type : "NULL module");
        return NULL;
    }
    return nn_module_child_at(m, n - 1);
}
