/* ctrainer — CtTable, a small ordered table of entries keyed by name.
 *
 * A utility of the base layer that the library's named collections share
 * (state dicts, metric collections, the run history, the metrics logger)
 * and that user code may use too. Entries keep insertion order; each has a
 * unique name (the table owns a copy) and an item of item_size bytes,
 * zeroed when added. Lookup is a linear scan: meant for tens to thousands
 * of entries, not millions. Not thread-safe.
 *
 *     typedef struct Counter { int64_t n; } Counter;
 *     CtTable t = CT_TABLE_INIT(Counter);
 *     Counter *c = ct_table_find(&t, "loss");
 *     if (!c && !(c = ct_table_add(&t, "loss"))) return ct_last_status();
 *     c->n++;
 *     ...
 *     ct_table_free(&t);   // frees names and items, not what items point to
 */
#ifndef CTRAINER_TABLE_H
#define CTRAINER_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "ctrainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fields are read-only for users: change a table only through the
 * functions below. A zeroed table with item_size set is empty and valid. */
typedef struct CtTable {
    size_t item_size; /* bytes per item, fixed at initialisation */
    int64_t n, cap;   /* entries in use, entries allocated */
    char **names;     /* n owned copies */
    void *items;      /* n items of item_size bytes, contiguous */
} CtTable;

/* An empty table of `type` items, for initialisers. */
#define CT_TABLE_INIT(type) ((CtTable){.item_size = sizeof(type)})

/* The item of entry i (0 <= i < n), or NULL when i is out of range. Valid
 * until the next ct_table_add or ct_table_free: items move as the table
 * grows, so keep indices, not pointers, across additions. */
void *ct_table_at(const CtTable *t, int64_t i);
/* The name of entry i, or NULL when i is out of range. The table keeps the
 * string, valid until ct_table_free (names do not move). */
const char *ct_table_name(const CtTable *t, int64_t i);
/* The index of the entry called name, or -1 (also for NULL t or name). */
int64_t ct_table_index(const CtTable *t, const char *name);
/* The item of the entry called name, or NULL. */
void *ct_table_find(const CtTable *t, const char *name);

/* Appends an entry called name with a zeroed item and returns the item.
 * NULL with CT_ERR_NULL (NULL t or name), CT_ERR_INVALID ("duplicate name
 * \"x\"") or CT_ERR_OOM; the table is unchanged on failure. */
void *ct_table_add(CtTable *t, const char *name);

/* Removes entry i (its name is freed; what its item points to is the
 * caller's), keeping the order of the others. Out of range: no-op. */
void ct_table_remove(CtTable *t, int64_t i);

/* Frees the names and the items (not what items point to) and leaves t
 * empty with its item_size, ready for reuse. NULL: no-op. */
void ct_table_free(CtTable *t);

#ifdef __cplusplus
}
#endif
#endif
