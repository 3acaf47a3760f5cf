/* INDEX_SELECT, INDEX_ADD, GATHER, SCATTER_ADD and ONE_HOT (index_body.h).
 * Copies serve every dtype by element size; the accumulating ops take f32
 * and f64 and add without atomics, in index order, bit-identical to the
 * CPU. Each op checks its index first (range.cuh) and reports the first bad
 * one as the CPU does, writing nothing. */
#include "index_body.h"
#include "range.cuh"

template <typename W>
__global__ void index_select_kernel(CtIndexParams p, const int64_t *ix, const W *src,
                                    W *out)
{
    ct_index_select_thread<W>(ct_cuda_thread(), p, ix, src, out);
}

template <typename T>
__global__ void index_add_kernel(CtIndexParams p, const int64_t *ix, const T *src, T *out)
{
    ct_index_add_thread<T>(ct_cuda_thread(), p, ix, src, out);
}

template <typename W>
__global__ void gather_kernel(CtGatherGeom g, int64_t n, const int64_t *ix, const W *src,
                              W *out)
{
    ct_gather_thread<W>(ct_cuda_thread(), g, n, ix, src, out);
}

template <typename T>
__global__ void scatter_add_kernel(CtGatherGeom g, int64_t outer, const int64_t *ix,
                                   const T *src, T *out)
{
    ct_scatter_add_thread<T>(ct_cuda_thread(), g, outer, ix, src, out);
}

template <typename W>
__global__ void one_hot_kernel(int64_t n, int64_t classes, const int64_t *ix, W one,
                               W *out)
{
    ct_one_hot_thread<W>(ct_cuda_thread(), n, classes, ix, one, out);
}

/* Queues the check that every index is in [0, size) (range.cuh: a bad one
 * is reported later, with the CPU's message). dim < 0: size is a number of
 * classes (one_hot). */
static CtStatus check_index(CtCudaCtx *c, const char *name, const Tensor *index, int dim,
                            int64_t size)
{
    const CtRangeMsg m = {name, "index", "position", dim, size};
    return ct_cuda_check_range(c, index, (CtRangeCheck){size, false, 0}, &m);
}

static const int64_t *index_ptr(const Tensor *t)
{
    return (const int64_t *)ct_ptr(t);
}

/* ---------------------------------------------------- index_select / add */

template <typename W>
static CtStatus launch_select(CtCudaCtx *c, const CtIndexParams &p, const CtOpCall *call)
{
    int64_t n = p.outer * p.k * p.inner;
    index_select_kernel<W><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        p, index_ptr(call->in[1]), (const W *)ct_ptr(call->in[0]),
        (W *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("index_select_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_index_select(const CtOpCall *call)
{
    const CtIndexParams *p = (const CtIndexParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CT_RETURN_IF_ERROR(check_index(c, p->name, call->in[1], p->dim, p->size));
    if (p->outer * p->k * p->inner == 0) return CT_OK;
    switch (ct_dtype_size(call->out[0]->dtype)) {
    case 8: return launch_select<uint64_t>(c, *p, call);
    case 4: return launch_select<uint32_t>(c, *p, call);
    case 2: return launch_select<uint16_t>(c, *p, call);
    default: return launch_select<uint8_t>(c, *p, call);
    }
}

template <typename T>
static CtStatus launch_index_add(CtCudaCtx *c, const CtIndexParams &p,
                                 const CtOpCall *call)
{
    index_add_kernel<T>
        <<<ct_cuda_blocks(p.outer * p.inner), CT_CUDA_THREADS, 0, c->stream>>>(
            p, index_ptr(call->in[1]), (const T *)ct_ptr(call->in[0]),
            (T *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("index_add_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_index_add(const CtOpCall *call)
{
    const CtIndexParams *p = (const CtIndexParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CT_RETURN_IF_ERROR(check_index(c, p->name, call->in[1], p->dim, p->size));
    if (p->outer * p->inner * p->k == 0) return CT_OK;
    if (call->out[0]->dtype == CT_F32) return launch_index_add<float>(c, *p, call);
    return launch_index_add<double>(c, *p, call);
}

/* ------------------------------------------------------ gather / scatter */

template <typename W>
static CtStatus launch_gather(CtCudaCtx *c, const CtGatherGeom &g, int64_t n,
                              const CtOpCall *call)
{
    gather_kernel<W><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        g, n, index_ptr(call->in[1]), (const W *)ct_ptr(call->in[0]),
        (W *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("gather_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_gather(const CtOpCall *call)
{
    const CtGatherParams *p = (const CtGatherParams *)call->params;
    const Tensor *src = call->in[0], *index = call->in[1];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CT_RETURN_IF_ERROR(check_index(c, p->name, index, p->dim, src->shape[p->dim]));
    int64_t n = tensor_numel(index);
    if (n == 0) return CT_OK;
    CtGatherGeom g;
    ct_gather_geom_init(&g, index, src, p->dim);
    switch (ct_dtype_size(src->dtype)) {
    case 8: return launch_gather<uint64_t>(c, g, n, call);
    case 4: return launch_gather<uint32_t>(c, g, n, call);
    case 2: return launch_gather<uint16_t>(c, g, n, call);
    default: return launch_gather<uint8_t>(c, g, n, call);
    }
}

template <typename T>
static CtStatus launch_scatter_add(CtCudaCtx *c, const CtGatherGeom &g, int64_t outer,
                                   const CtOpCall *call)
{
    scatter_add_kernel<T>
        <<<ct_cuda_blocks(outer * g.inner), CT_CUDA_THREADS, 0, c->stream>>>(
            g, outer, index_ptr(call->in[1]), (const T *)ct_ptr(call->in[0]),
            (T *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("scatter_add_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_scatter_add(const CtOpCall *call)
{
    const CtGatherParams *p = (const CtGatherParams *)call->params;
    Tensor *out = call->out[0];
    const Tensor *index = call->in[1];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CT_RETURN_IF_ERROR(check_index(c, p->name, index, p->dim, out->shape[p->dim]));
    int64_t n = tensor_numel(index);
    if (n == 0) return CT_OK;
    CtGatherGeom g;
    ct_gather_geom_init(&g, index, out, p->dim);
    int64_t outer = n / (g.j * g.inner);
    if (out->dtype == CT_F32) return launch_scatter_add<float>(c, g, outer, call);
    return launch_scatter_add<double>(c, g, outer, call);
}

/* --------------------------------------------------------------- one_hot */

template <typename W>
static CtStatus launch_one_hot(CtCudaCtx *c, const CtOneHotParams &p, W one,
                               const CtOpCall *call)
{
    int64_t n = tensor_numel(call->in[0]);
    one_hot_kernel<W><<<ct_cuda_blocks(n * p.classes), CT_CUDA_THREADS, 0, c->stream>>>(
        n, p.classes, index_ptr(call->in[0]), one, (W *)ct_ptr(call->out[0]));
    CT_CUDA_CHECK_LAUNCH("one_hot_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_one_hot(const CtOpCall *call)
{
    const CtOneHotParams *p = (const CtOneHotParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CT_RETURN_IF_ERROR(check_index(c, "one_hot", call->in[0], -1, p->classes));
    if (tensor_numel(call->in[0]) * p->classes == 0) return CT_OK;
    switch (call->out[0]->dtype) {
    case CT_F32: return launch_one_hot<uint32_t>(c, *p, 0x3f800000u, call);
    case CT_F64: return launch_one_hot<uint64_t>(c, *p, 0x3ff0000000000000ull, call);
    case CT_BF16: return launch_one_hot<uint16_t>(c, *p, ct_f32_to_bf16(1.0f), call);
    case CT_F16: return launch_one_hot<uint16_t>(c, *p, ct_f32_to_f16(1.0f), call);
    case CT_I64: return launch_one_hot<uint64_t>(c, *p, 1, call);
    case CT_I32: return launch_one_hot<uint32_t>(c, *p, 1, call);
    default: return launch_one_hot<uint8_t>(c, *p, 1, call);
    }
}

/* The accumulating kernels take f32 and f64. */
static bool float_out(const CtOpCall *call)
{
    return call->out[0]->dtype == CT_F32 || call->out[0]->dtype == CT_F64;
}

void ct_cuda_register_index(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_INDEX_SELECT] = cuda_index_select;
    k[CT_OP_INDEX_ADD] = cuda_index_add;
    k[CT_OP_GATHER] = cuda_gather;
    k[CT_OP_SCATTER_ADD] = cuda_scatter_add;
    k[CT_OP_ONE_HOT] = cuda_one_hot;
    s[CT_OP_INDEX_ADD] = float_out;
    s[CT_OP_SCATTER_ADD] = float_out;
}
