/* CtTable: ordered entries keyed by name (ctrainer/table.h). */
#include <stdlib.h>
#include <string.h>

#include "ctrainer/table.h"
#include "mem.h"

void *ct_table_at(const CtTable *t, int64_t i)
{
    if (!t || i < 0 || i >= t->n) return NULL;
    return (char *)t->items + (size_t)i * t->item_size;
}

const char *ct_table_name(const CtTable *t, int64_t i)
{
    return t && i >= 0 && i < t->n ? t->names[i] : NULL;
}

int64_t ct_table_index(const CtTable *t, const char *name)
{
    for (int64_t i = 0; t && name && i < t->n; i++)
        if (strcmp(t->names[i], name) == 0) return i;
    return -1;
}

void *ct_table_find(const CtTable *t, const char *name)
{
    return ct_table_at(t, ct_table_index(t, name));
}

/* Room for one more entry; both arrays grow together. */
static CtStatus reserve(CtTable *t)
{
    if (t->n < t->cap) return CT_OK;
    int64_t cap = t->cap ? 2 * t->cap : 8;
    char **names = ct_realloc(t->names, (size_t)cap * sizeof *names);
    if (!names) return CT_ERR_OOM;
    t->names = names;
    void *items = ct_realloc(t->items, (size_t)cap * (t->item_size ? t->item_size : 1));
    if (!items) return CT_ERR_OOM;
    t->items = items;
    t->cap = cap;
    return CT_OK;
}

void *ct_table_add(CtTable *t, const char *name)
{
    if (!t || !name) {
        ct_error(CT_ERR_NULL, "ct_table_add: NULL %s", t ? "name" : "table");
        return NULL;
    }
    if (ct_table_index(t, name) >= 0) {
        ct_error(CT_ERR_INVALID, "ct_table_add: duplicate name \"%s\"", name);
        return NULL;
    }
    char *copy = strdup(name);
    if (!copy || reserve(t) != CT_OK) {
        free(copy);
        ct_error(CT_ERR_OOM, "ct_table_add: out of memory adding \"%s\"", name);
        return NULL;
    }
    t->names[t->n] = copy;
    void *item = (char *)t->items + (size_t)t->n * t->item_size;
    memset(item, 0, t->item_size);
    t->n++;
    return item;
}

void ct_table_remove(CtTable *t, int64_t i)
{
    if (!t || i < 0 || i >= t->n) return;
    free(t->names[i]);
    int64_t after = t->n - i - 1;
    memmove(t->names + i, t->names + i + 1, (size_t)after * sizeof *t->names);
    char *item = ct_table_at(t, i);
    memmove(item, item + t->item_size, (size_t)after * t->item_size);
    t->n--;
}

void ct_table_free(CtTable *t)
{
    if (!t) return;
    for (int64_t i = 0; i < t->n; i++) free(t->names[i]);
    free(t->names);
    free(t->items);
    *t = (CtTable){.item_size = t->item_size};
}
