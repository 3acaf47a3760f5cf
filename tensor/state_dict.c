/* CtStateDict: an ordered list of named tensors. */
#include <stdlib.h>

#include "ctrainer/table.h"
#include "internal.h"

struct CtStateDict {
    CtTable tensors; /* of Tensor *, each holding a reference */
};

CtStateDict *ct_state_dict_create(void)
{
    CtStateDict *d = ct_malloc(sizeof *d);
    if (!d) {
        ct_error(CT_ERR_OOM, "ct_state_dict_create: out of memory");
        return NULL;
    }
    d->tensors = CT_TABLE_INIT(Tensor *);
    return d;
}

void ct_state_dict_free(CtStateDict *d)
{
    if (!d) return;
    for (int64_t i = 0; i < d->tensors.n; i++) tensor_free(ct_state_dict_tensor(d, i));
    ct_table_free(&d->tensors);
    free(d);
}

CtStatus ct_state_dict_add(CtStateDict *d, const char *name, Tensor *t)
{
    if (!d || !name || !t) {
        CtStatus st = ct_last_status();
        return t || st == CT_OK
                   ? ct_error(CT_ERR_NULL, "ct_state_dict_add: NULL argument")
                   : st;
    }
    if (ct_table_index(&d->tensors, name) >= 0)
        return ct_error(CT_ERR_INVALID, "ct_state_dict_add: duplicate name \"%s\"", name);
    Tensor **slot = ct_table_add(&d->tensors, name);
    if (!slot) return ct_error(CT_ERR_OOM, "ct_state_dict_add: out of memory");
    *slot = tensor_retain(t);
    return CT_OK;
}

int64_t ct_state_dict_size(const CtStateDict *d)
{
    return d ? d->tensors.n : 0;
}

const char *ct_state_dict_name(const CtStateDict *d, int64_t i)
{
    return d ? ct_table_name(&d->tensors, i) : NULL;
}

Tensor *ct_state_dict_tensor(const CtStateDict *d, int64_t i)
{
    Tensor **slot = d ? ct_table_at(&d->tensors, i) : NULL;
    return slot ? *slot : NULL;
}

Tensor *ct_state_dict_get(const CtStateDict *d, const char *name)
{
    return d ? ct_state_dict_tensor(d, ct_table_index(&d->tensors, name)) : NULL;
}

bool ct_state_dict_remove(CtStateDict *d, const char *name)
{
    int64_t i = d && name ? ct_table_index(&d->tensors, name) : -1;
    if (i < 0) return false;
    tensor_free(ct_state_dict_tensor(d, i));
    ct_table_remove(&d->tensors, i);
    return true;
}
