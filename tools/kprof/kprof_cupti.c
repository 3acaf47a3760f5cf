/* libctrainer_kprof.so: a GPU kernel profiler for any CUDA program (a
 * ctrainer binary or a PyTorch script alike), loaded by the CUDA driver:
 *
 *     CUDA_INJECTION64_PATH=/path/to/libctrainer_kprof.so \
 *     CTRAINER_KPROF_OUT=kernels.txt CTRAINER_KPROF_WINDOW_MS=1000 program ...
 *
 * The driver calls InitializeInjection when the program first uses CUDA;
 * it turns on CUPTI's activity records for kernels, copies and memsets,
 * whose start and end come from the GPU's clock. At exit the records are
 * summed per kernel name (kprof_table.h) and written to CTRAINER_KPROF_OUT
 * (default stderr); with CTRAINER_KPROF_WINDOW_MS, only the records that
 * start in that many ms before the last one ended, so a warm-up is left
 * out. Names are as the driver gives them (C++ kernels mangled: pipe the
 * file through c++filt). */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "kprof_table.h"

#define BUFFER_BYTES (8u << 20)

static KprofTable *table;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long dropped;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(8, BUFFER_BYTES);
    *size = *buf ? BUFFER_BYTES : 0;
    *max_records = 0;
}

/* One record into the table, named by its kind for copies and memsets. */
static void take(const CUpti_Activity *r)
{
    char name[48];
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        if (kprof_table_add(table, k->name, k->start, k->end)) dropped++;
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
        snprintf(name, sizeof name, "[memcpy kind %d]", (int)m->copyKind);
        if (kprof_table_add(table, name, m->start, m->end)) dropped++;
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
        if (kprof_table_add(table, "[memset]", m->start, m->end)) dropped++;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf,
                                      size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&mu);
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) take(r);
    pthread_mutex_unlock(&mu);
    free(buf);
}

static void write_summary(void)
{
    cuptiActivityFlushAll(1);
    const char *path = getenv("CTRAINER_KPROF_OUT"),
               *w = getenv("CTRAINER_KPROF_WINDOW_MS");
    FILE *f = path && path[0] ? fopen(path, "w") : stderr;
    if (!f) {
        fprintf(stderr, "ctrainer_kprof: cannot write %s\n", path);
        return;
    }
    pthread_mutex_lock(&mu);
    uint64_t window = w ? (uint64_t)(strtod(w, NULL) * 1e6) : 0;
    if (kprof_table_write(table, window, f) || dropped)
        fprintf(stderr, "ctrainer_kprof: summary incomplete (%lu records dropped)\n",
                dropped);
    pthread_mutex_unlock(&mu);
    if (f != stderr) fclose(f);
}

/* The driver's entry point (CUDA_INJECTION64_PATH). */
int InitializeInjection(void)
{
    if (!(table = kprof_table_new())) return 0;
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) !=
            CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "ctrainer_kprof: CUPTI activity tracing unavailable\n");
        return 0;
    }
    (void)cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    (void)cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    atexit(write_summary);
    return 1;
}
