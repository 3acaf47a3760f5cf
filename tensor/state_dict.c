/* CtStateDict: an ordered list of named tensors. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct Entry {
    char *name;
    Tensor *tensor;
} Entry;

struct CtStateDict {
    Entry *items;
    int64_t n, cap;
};

CtStateDict *ct_state_dict_create(void)
{
    CtStateDict *d = ct_calloc(1, sizeof *d);
    if (!d) ct_error(CT_ERR_OOM, "ct_state_dict_create: out of memory");
    return d;
}

void ct_state_dict_free(CtStateDict *d)
{
    if (!d) return;
    for (int64_t i = 0; i < d->n; i++) {
        free(d->items[i].name);
        tensor_free(d->items[i].tensor);
    }
    free(d->items);
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
    if (ct_state_dict_get(d, name))
        return ct_error(CT_ERR_INVALID, "ct_state_dict_add: duplicate name \"%s\"", name);
    if (d->n == d->cap) {
        int64_t cap = d->cap ? d->cap * 2 : 16;
        Entry *items = ct_realloc(d->items, (size_t)cap * sizeof *items);
        if (!items) return ct_error(CT_ERR_OOM, "ct_state_dict_add: out of memory");
        d->items = items;
        d->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return ct_error(CT_ERR_OOM, "ct_state_dict_add: out of memory");
    d->items[d->n].name = copy;
    d->items[d->n].tensor = tensor_retain(t);
    d->n++;
    return CT_OK;
}

int64_t ct_state_dict_size(const CtStateDict *d)
{
    return d ? d->n : 0;
}

const char *ct_state_dict_name(const CtStateDict *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->items[i].name : NULL;
}

Tensor *ct_state_dict_tensor(const CtStateDict *d, int64_t i)
{
    return d && i >= 0 && i < d->n ? d->items[i].tensor : NULL;
}

Tensor *ct_state_dict_get(const CtStateDict *d, const char *name)
{
    if (!d || !name) return NULL;
    for (int64_t i = 0; i < d->n; i++)
        if (!strcmp(d->items[i].name, name)) return d->items[i].tensor;
    return NULL;
}
