/* Sequential: children "0", "1", ... applied in order. */
#include <stdio.h>

#include "nn_internal.h"

/* Runs child c, fused with the activation module `next` (NULL at the end)
 * when c can apply it to its output; *fused tells whether it did. */
static Tensor *child_forward(Module *c, const Module *next, Tensor *x, bool *fused)
{
    CtGeluApprox approx;
    *fused = true;
    if (c->vt->forward_relu && nn_is_relu(next)) return nn_forward_relu(c, x);
    if (c->vt->forward_gelu && nn_is_gelu(next, &approx))
        return nn_forward_gelu(c, x, approx);
    *fused = false;
    return nn_forward(c, x);
}

/* A child followed by a ReLU or GELU runs as one op where the child can
 * fuse it (nn_forward_relu, nn_forward_gelu); the pre-activation is never
 * seen outside. */
static Tensor *sequential_forward(Module *m, Tensor *x)
{
    const int n = nn_module_num_children(m);
    for (int i = 0; x && i < n; i++) {
        bool fused;
        x = child_forward(nn_module_child_at(m, i),
                          i + 1 < n ? nn_module_child_at(m, i + 1) : NULL, x, &fused);
        i += fused; /* the activation ran inside the child */
    }
    return x;
}

static const ModuleVtable sequential_vt = {.type = "Sequential",
                                           .forward = sequential_forward};

CtStatus nn_sequential_append(Module *seq, Module *m)
{
    if (!seq || seq->vt != &sequential_vt) {
        nn_module_free(m);
        return ct_error(CT_ERR_INVALID, "nn_sequential_append: %s is not a Sequential",
                        seq ? seq->vt->type : "NULL");
    }
    char name[24];
    snprintf(name, sizeof name, "%d", nn_module_num_children(seq));
    return nn_module_register_child(seq, name, m) ? CT_OK : ct_last_status();
}

Module *nn_sequential(int n, Module *const *mods)
{
    CtStatus st =
        n < 0 || (n > 0 && !mods)
            ? ct_error(CT_ERR_INVALID, "Sequential: bad module list (n = %d)", n)
            : CT_OK;
    for (int i = 0; st == CT_OK && i < n; i++)
        if (!mods[i]) {
            if (ct_last_status() == CT_OK)
                ct_error(CT_ERR_NULL, "Sequential: module %d is NULL", i);
            st = ct_last_status();
        }
    Module *seq = st == CT_OK ? nn_module_alloc(sizeof(Module), &sequential_vt) : NULL;
    if (!seq) {
        for (int i = 0; mods && i < n; i++) nn_module_free(mods[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (st == CT_OK)
            st = nn_sequential_append(seq, mods[i]);
        else
            nn_module_free(mods[i]); /* ownership passed: release the rest */
    }
    if (st != CT_OK) {
        nn_module_free(seq);
        return NULL;
    }
    return seq;
}
