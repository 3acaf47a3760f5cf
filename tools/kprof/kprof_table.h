/* The kernel profiler's table (kprof_cupti.c): GPU activity records (a
 * kernel, copy or memset: its name and its start and end on the device
 * clock, in ns) summed per name. Plain C, no CUDA: tests/tools exercises it
 * on the CPU. */
#ifndef CTRAINER_TOOLS_KPROF_TABLE_H
#define CTRAINER_TOOLS_KPROF_TABLE_H

#include <stdint.h>
#include <stdio.h>

typedef struct KprofTable KprofTable;

/* An empty table, or NULL when out of memory. */
KprofTable *kprof_table_new(void);
void kprof_table_free(KprofTable *t);

/* Records one activity (name copied; end >= start). Returns 0, or -1 when
 * out of memory (the record is dropped). */
int kprof_table_add(KprofTable *t, const char *name, uint64_t start, uint64_t end);

/* Writes the summary of the records that start within window_ns before the
 * last end (window_ns 0: every record): a header line giving the record
 * count, the window and the summed time, then one line per name, largest
 * total first (ties in the order the names were first seen): total ms,
 * share of the summed time in %, calls, name.
 * Returns 0, or -1 on a write error. */
int kprof_table_write(const KprofTable *t, uint64_t window_ns, FILE *f);

#endif
