/* Strided iterator setup (see cpu.h). */
#include "cpu.h"
#include "workers.h"

void ct_iter_init(CtIter *it, int ndim, const int64_t *shape, int nops,
                  const Tensor *const *ts)
{
    int64_t sh[CT_MAX_DIMS], st[CT_ITER_MAX_OPS][CT_MAX_DIMS];
    int n = 0;
    it->nops = nops;
    it->numel = ct_shape_numel(ndim, shape);
    /* drop size-1 dims, merge dims that are contiguous for every operand */
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        bool merge = n > 0;
        for (int k = 0; merge && k < nops; k++)
            merge = st[k][n - 1] == ts[k]->stride[d] * shape[d];
        if (merge) {
            sh[n - 1] *= shape[d];
            for (int k = 0; k < nops; k++) st[k][n - 1] = ts[k]->stride[d];
        } else {
            sh[n] = shape[d];
            for (int k = 0; k < nops; k++) st[k][n] = ts[k]->stride[d];
            n++;
        }
    }
    it->chunk_tail = 0;
    if (n == 0) { /* scalar or empty */
        it->ndim = 0;
        it->inner = it->numel;
        it->rows = it->numel ? 1 : 0;
        for (int k = 0; k < nops; k++) it->istride[k] = 1;
        return;
    }
    it->inner = sh[n - 1];
    for (int k = 0; k < nops; k++) it->istride[k] = st[k][n - 1];
    it->ndim = n - 1;
    for (int d = 0; d < n - 1; d++) {
        it->shape[d] = sh[d];
        for (int k = 0; k < nops; k++) it->stride[k][d] = st[k][d];
    }
    it->rows = it->numel / (it->inner ? it->inner : 1);
    if (it->numel == 0) it->rows = 0;
    if (it->ndim == 0 && it->inner > CT_ITER_CHUNK) {
        /* one flat dim: split into chunks so rows can run in parallel */
        int64_t total = it->inner;
        it->rows = (total + CT_ITER_CHUNK - 1) / CT_ITER_CHUNK;
        it->ndim = 1;
        it->shape[0] = it->rows;
        for (int k = 0; k < nops; k++) it->stride[k][0] = it->istride[k] * CT_ITER_CHUNK;
        it->inner = CT_ITER_CHUNK;
        it->chunk_tail = total - (it->rows - 1) * CT_ITER_CHUNK;
    }
}

void ct_cpu_items(int64_t n, int64_t elems, void (*fn)(void *ctx, int64_t i, int slot),
                  void *ctx)
{
    if (elems < CT_CPU_POOL_MIN)
        for (int64_t i = 0; i < n; i++) fn(ctx, i, 0);
    else
        ct_workers_run(n, ct_workers_max(), fn, ctx);
}

void ct_cpu_rows(const CtIter *it, void (*fn)(void *ctx, int64_t r, int slot), void *ctx)
{
    ct_cpu_items(it->rows, it->numel, fn, ctx);
}
