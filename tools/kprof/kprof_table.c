/* Per-name sums of GPU activity records (kprof_table.h). Names are interned
 * in an open-addressing hash table; records keep the name's index. */
#include "kprof_table.h"

#include <stdlib.h>
#include <string.h>

typedef struct Record {
    uint64_t start, end;
    uint32_t name;
} Record;

struct KprofTable {
    Record *recs;
    size_t nrec, caprec;
    char **names; /* by index */
    uint32_t nnames;
    uint32_t *slots; /* hash slot -> name index + 1 (0: empty) */
    uint32_t nslots; /* a power of two, at least twice nnames */
};

KprofTable *kprof_table_new(void)
{
    KprofTable *t = calloc(1, sizeof *t);
    if (t && !(t->slots = calloc(t->nslots = 256, sizeof *t->slots))) {
        free(t);
        return NULL;
    }
    return t;
}

void kprof_table_free(KprofTable *t)
{
    if (!t) return;
    for (uint32_t i = 0; i < t->nnames; i++) free(t->names[i]);
    free(t->names);
    free(t->slots);
    free(t->recs);
    free(t);
}

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Doubles the slot array and re-inserts every name. */
static int grow(KprofTable *t)
{
    uint32_t n = t->nslots * 2, *slots = calloc(n, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t i = 0; i < t->nnames; i++) {
        uint32_t s = hash(t->names[i]) & (n - 1);
        while (slots[s]) s = (s + 1) & (n - 1);
        slots[s] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return 0;
}

/* The index of name, added when new; -1 when out of memory. */
static int64_t intern(KprofTable *t, const char *name)
{
    uint32_t s = hash(name) & (t->nslots - 1);
    for (; t->slots[s]; s = (s + 1) & (t->nslots - 1))
        if (!strcmp(t->names[t->slots[s] - 1], name)) return t->slots[s] - 1;
    if ((t->nnames + 1) * 2 > t->nslots) {
        if (grow(t)) return -1;
        return intern(t, name);
    }
    char **names = realloc(t->names, (t->nnames + 1) * sizeof *names);
    if (!names) return -1;
    t->names = names;
    if (!(names[t->nnames] = strdup(name))) return -1;
    t->slots[s] = t->nnames + 1;
    return t->nnames++;
}

int kprof_table_add(KprofTable *t, const char *name, uint64_t start, uint64_t end)
{
    int64_t id = intern(t, name);
    if (id < 0) return -1;
    if (t->nrec == t->caprec) {
        size_t cap = t->caprec ? t->caprec * 2 : 4096;
        Record *r = realloc(t->recs, cap * sizeof *r);
        if (!r) return -1;
        t->recs = r;
        t->caprec = cap;
    }
    t->recs[t->nrec++] = (Record){start, end, (uint32_t)id};
    return 0;
}

typedef struct Row {
    uint64_t ns;
    uint64_t calls;
    uint32_t name;
} Row;

static int by_time(const void *a, const void *b)
{
    const Row *x = a, *y = b;
    if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
    return x->name < y->name ? -1 : x->name > y->name;
}

int kprof_table_write(const KprofTable *t, uint64_t window_ns, FILE *f)
{
    uint64_t last = 0, first = UINT64_MAX, total = 0, count = 0;
    for (size_t i = 0; i < t->nrec; i++)
        if (t->recs[i].end > last) last = t->recs[i].end;
    uint64_t from = window_ns && last > window_ns ? last - window_ns : 0;
    Row *rows = calloc(t->nnames ? t->nnames : 1, sizeof *rows);
    if (!rows) return -1;
    for (uint32_t i = 0; i < t->nnames; i++) rows[i].name = i;
    for (size_t i = 0; i < t->nrec; i++) {
        const Record *r = &t->recs[i];
        if (r->start < from) continue;
        if (r->start < first) first = r->start;
        rows[r->name].ns += r->end - r->start;
        rows[r->name].calls++;
        total += r->end - r->start;
        count++;
    }
    qsort(rows, t->nnames, sizeof *rows, by_time);
    int bad = fprintf(f, "# %llu records over %.3f ms, summed time %.3f ms\n",
                      (unsigned long long)count, count ? (last - first) / 1e6 : 0.0,
                      total / 1e6) < 0;
    bad |= fprintf(f, "#%12s %7s %8s  name\n", "ms", "%", "calls") < 0;
    for (uint32_t i = 0; i < t->nnames && !bad; i++) {
        if (!rows[i].calls) continue;
        bad |= fprintf(f, "%13.3f %7.2f %8llu  %s\n", rows[i].ns / 1e6,
                       total ? 100.0 * (double)rows[i].ns / (double)total : 0.0,
                       (unsigned long long)rows[i].calls, t->names[rows[i].name]) < 0;
    }
    free(rows);
    return bad ? -1 : 0;
}
