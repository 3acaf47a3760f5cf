/* REDUCE (sum/mean, max/min with their index, var) and ARG_REDUCE (the
 * scatter behind max/min's gradient) on f32 and f64, over any dims of
 * strided inputs: one thread per output element, or, with few outputs and
 * long slices, runs of each slice on threads of their own folded by a
 * second kernel (reduce_body.h, which states the accumulation order and
 * how results compare with the CPU's). */
#include "common.cuh"
#include "reduce_body.h"

template <typename T, int M>
__global__ void reduce_kernel(T *y, int64_t *yi, const T *x, double scale, CtCudaReduce g)
{
    ct_reduce_thread<T, M>(ct_cuda_thread(), y, yi, x, scale, g);
}

template <typename T, int M>
__global__ void part_kernel(double *pv, int64_t *pi, const T *x, const double *mean,
                            CtCudaReduce g, CtReduceSplit s)
{
    ct_reduce_part_thread<T, M>(ct_cuda_thread(), pv, pi, x, mean, g, s);
}

template <typename T, int M>
__global__ void fold_kernel(T *y, int64_t *yi, double *mean, const double *pv,
                            const int64_t *pi, double scale, CtCudaReduce g,
                            CtReduceSplit s)
{
    ct_reduce_fold_thread<T, M>(ct_cuda_thread(), y, yi, mean, pv, pi, scale, g, s);
}

template <typename T>
__global__ void scatter_kernel(T *out, const T *gy, const int64_t *idx, CtCudaReduce g)
{
    ct_scatter_thread<T>(ct_cuda_thread(), out, gy, idx, g);
}

/* Both passes of a split reduction (ct_reduce_split), VAR's mean first. The
 * runs' results live in scratch from the instance's caching allocator
 * (reused only by later work on the same stream). */
template <typename T, int M>
static CtStatus launch_split(CtCudaCtx *c, const CtOpCall *call, const CtCudaReduce &g,
                             CtReduceSplit s, T *y, int64_t *yi)
{
    const CtReduceParams *p = (const CtReduceParams *)call->params;
    const T *x = (const T *)ct_ptr(call->in[0]);
    const bool ext = M == CT_RED_MAX || M == CT_RED_MIN, var = M == CT_RED_VAR;
    const int64_t nq = g.kn * s.parts;
    size_t nbytes = (size_t)nq * sizeof(double);
    if (ext) nbytes += (size_t)nq * sizeof(int64_t);
    if (var) nbytes += (size_t)g.kn * sizeof(double);
    void *scratch;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(call->backend, nbytes, &scratch));
    double *pv = (double *)scratch;
    int64_t *pi = ext ? (int64_t *)(pv + nq) : NULL;
    double *mean = var ? pv + nq : NULL;
    const unsigned bq = ct_cuda_blocks(nq), bk = ct_cuda_blocks(g.kn);
    cudaStream_t st = c->stream;
    if (var) {
        part_kernel<T, CT_RED_SUM>
            <<<bq, CT_CUDA_THREADS, 0, st>>>(pv, NULL, x, NULL, g, s);
        fold_kernel<T, CT_RED_SUM><<<bk, CT_CUDA_THREADS, 0, st>>>(
            NULL, NULL, mean, pv, NULL, 1.0 / (double)g.rn, g, s);
    }
    part_kernel<T, M><<<bq, CT_CUDA_THREADS, 0, st>>>(pv, pi, x, mean, g, s);
    fold_kernel<T, M>
        <<<bk, CT_CUDA_THREADS, 0, st>>>(y, yi, NULL, pv, pi, p->scale, g, s);
    CtStatus launched =
        ct_cuda_status_at(ct_cuda_after_launch(st), "launch of part_kernel/fold_kernel",
                          __FILE__, __LINE__);
    ct_cuda_scratch_free(call->backend, scratch, nbytes);
    return launched;
}

template <typename T, int M>
static CtStatus launch_reduce(CtCudaCtx *c, const CtOpCall *call, const CtCudaReduce &g)
{
    const CtReduceParams *p = (const CtReduceParams *)call->params;
    bool ext = M == CT_RED_MAX || M == CT_RED_MIN;
    T *y = (T *)ct_ptr(call->out[0]);
    int64_t *yi = ext && call->out[1] ? (int64_t *)ct_ptr(call->out[1]) : NULL;
    CtReduceSplit s = ct_reduce_split(g);
    if (s.parts > 1) return launch_split<T, M>(c, call, g, s, y, yi);
    reduce_kernel<T, M><<<ct_cuda_blocks(g.kn), CT_CUDA_THREADS, 0, c->stream>>>(
        y, yi, (const T *)ct_ptr(call->in[0]), p->scale, g);
    CT_CUDA_CHECK_LAUNCH("reduce_kernel", c->stream);
    return CT_OK;
}

template <typename T>
static CtStatus run_reduce(CtCudaCtx *c, const CtOpCall *call, const CtCudaReduce &g)
{
    const CtReduceParams *p = (const CtReduceParams *)call->params;
    switch (p->kind) {
    case CT_RED_SUM: return launch_reduce<T, CT_RED_SUM>(c, call, g);
    case CT_RED_MAX: return launch_reduce<T, CT_RED_MAX>(c, call, g);
    case CT_RED_MIN: return launch_reduce<T, CT_RED_MIN>(c, call, g);
    case CT_RED_VAR: return launch_reduce<T, CT_RED_VAR>(c, call, g);
    }
    return ct_error(CT_ERR_INVALID, "reduce: unknown kind %d on cuda", (int)p->kind);
}

static CtStatus cuda_reduce(const CtOpCall *call)
{
    const CtReduceParams *p = (const CtReduceParams *)call->params;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    bool ext = p->kind == CT_RED_MAX || p->kind == CT_RED_MIN;
    CtCudaReduce g;
    ct_cuda_reduce_init(&g, call->in[0], call->out[0], ext ? call->out[1] : NULL);
    if (g.kn == 0) return CT_OK;
    if (call->in[0]->dtype == CT_F32) return run_reduce<float>(c, call, g);
    return run_reduce<double>(c, call, g);
}

template <typename T>
static CtStatus launch_scatter(CtCudaCtx *c, const CtOpCall *call, const CtCudaReduce &g)
{
    scatter_kernel<T><<<ct_cuda_blocks(g.kn), CT_CUDA_THREADS, 0, c->stream>>>(
        (T *)ct_ptr(call->out[0]), (const T *)ct_ptr(call->in[0]),
        (const int64_t *)ct_ptr(call->in[1]), g);
    CT_CUDA_CHECK_LAUNCH("scatter_kernel", c->stream);
    return CT_OK;
}

static CtStatus cuda_scatter(const CtOpCall *call)
{
    Tensor *out = call->out[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    size_t nbytes = (size_t)tensor_numel(out) * ct_dtype_size(out->dtype);
    if (nbytes == 0) return CT_OK;
    CT_CUDA_CHECK(cudaMemsetAsync(ct_ptr(out), 0, nbytes, c->stream));
    CtCudaReduce g;
    ct_cuda_reduce_init(&g, out, call->in[0], call->in[1]);
    if (g.kn == 0) return CT_OK;
    if (out->dtype == CT_F32) return launch_scatter<float>(c, call, g);
    return launch_scatter<double>(c, call, g);
}

/* x and y of one dtype, f32 or f64; the index output of MAX/MIN is i64. */
static bool cuda_reduce_supports(const CtOpCall *call)
{
    const CtReduceParams *p = (const CtReduceParams *)call->params;
    CtDType dt = call->in[0]->dtype;
    if ((dt != CT_F32 && dt != CT_F64) || call->out[0]->dtype != dt) return false;
    bool ext = p->kind == CT_RED_MAX || p->kind == CT_RED_MIN;
    return !ext || !call->out[1] || call->out[1]->dtype == CT_I64;
}

/* As the CPU: f32 or f64, a contiguous out, i64 indices. */
static bool cuda_scatter_supports(const CtOpCall *call)
{
    CtDType dt = call->in[0]->dtype;
    return (dt == CT_F32 || dt == CT_F64) && call->out[0]->dtype == dt &&
           tensor_is_contiguous(call->out[0]) && call->in[1]->dtype == CT_I64;
}

void ct_cuda_register_reduce(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_REDUCE] = cuda_reduce;
    s[CT_OP_REDUCE] = cuda_reduce_supports;
    k[CT_OP_ARG_REDUCE] = cuda_scatter;
    s[CT_OP_ARG_REDUCE] = cuda_scatter_supports;
}
