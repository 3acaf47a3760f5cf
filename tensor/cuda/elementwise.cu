/* Elementwise kernels: BINARY (arithmetic and comparisons) on f32, f64,
 * bf16 and f16 (computed in f32), i64 and i32 (arithmetic but division,
 * wrapping around, and comparisons), u8 and bool (comparisons),
 * and WHERE on every dtype, strided, broadcasting through stride-0 operands.
 * Semantics follow tensor/cpu/elementwise.c (max/min propagate a NaN in the
 * first operand). */
#include "common.cuh"
#include "elementwise_body.h"

/* out, a, b are operands 0, 1, 2 of ix (elementwise_body.h). */
template <int DT, int K, typename T = typename CtHdType<DT>::S>
__global__ void arith_kernel(T *out, const T *a, const T *b, CtCudaIndex ix, int64_t n)
{
    ct_arith_thread<DT, K>(ct_cuda_thread(), out, a, b, ix, n);
}

template <int DT, int K, typename T = typename CtHdType<DT>::S>
__global__ void arith_packed_kernel(T *out, const T *a, const T *b, int64_t n)
{
    ct_arith_packed_thread<DT, K>(ct_cuda_thread(), out, a, b, n);
}

template <int DT, int K, typename T = typename CtHdType<DT>::S>
__global__ void compare_kernel(uint8_t *out, const T *a, const T *b, CtCudaIndex ix,
                               int64_t n)
{
    ct_compare_thread<DT, K>(ct_cuda_thread(), out, a, b, ix, n);
}

template <typename W>
__global__ void where_kernel(W *out, const uint8_t *cond, const W *a, const W *b,
                             CtCudaIndex ix, int64_t n)
{
    ct_where_thread<W>(ct_cuda_thread(), out, cond, a, b, ix, n);
}

template <int DT, int K>
static CtStatus launch_arith(CtCudaCtx *c, const CtOpCall *call, const CtCudaIndex &ix,
                             int64_t n)
{
    typedef typename CtHdType<DT>::S T;
    T *out = (T *)ct_ptr(call->out[0]);
    const T *a = (const T *)ct_ptr(call->in[0]), *b = (const T *)ct_ptr(call->in[1]);
    const void *ptrs[3] = {out, a, b};
    if (ct_cuda_packed_ok(ix, 3, ptrs)) {
        int64_t items = (n + CtPack<T>::N - 1) / CtPack<T>::N;
        arith_packed_kernel<DT, K>
            <<<ct_cuda_blocks(items), CT_CUDA_THREADS, 0, c->stream>>>(out, a, b, n);
    } else {
        arith_kernel<DT, K>
            <<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(out, a, b, ix, n);
    }
    CT_CUDA_CHECK_LAUNCH("arith_kernel", c->stream);
    return CT_OK;
}

template <int DT, int K>
static CtStatus launch_compare(CtCudaCtx *c, const CtOpCall *call, const CtCudaIndex &ix,
                               int64_t n)
{
    typedef typename CtHdType<DT>::S T;
    compare_kernel<DT, K><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        (uint8_t *)ct_ptr(call->out[0]), (const T *)ct_ptr(call->in[0]),
        (const T *)ct_ptr(call->in[1]), ix, n);
    CT_CUDA_CHECK_LAUNCH("compare_kernel", c->stream);
    return CT_OK;
}

/* The comparisons of dtype T. */
template <int T>
static CtStatus run_compare(CtCudaCtx *c, CtBinaryKind kind, const CtOpCall *call,
                            const CtCudaIndex &ix, int64_t n)
{
    switch (kind) {
    case CT_BIN_EQ: return launch_compare<T, CT_BIN_EQ>(c, call, ix, n);
    case CT_BIN_NE: return launch_compare<T, CT_BIN_NE>(c, call, ix, n);
    case CT_BIN_LT: return launch_compare<T, CT_BIN_LT>(c, call, ix, n);
    case CT_BIN_LE: return launch_compare<T, CT_BIN_LE>(c, call, ix, n);
    case CT_BIN_GT: return launch_compare<T, CT_BIN_GT>(c, call, ix, n);
    case CT_BIN_GE: return launch_compare<T, CT_BIN_GE>(c, call, ix, n);
    default: break;
    }
    return ct_error(CT_ERR_INVALID, "binary: kind %d on cuda for %s", (int)kind,
                    ct_dtype_name((CtDType)T));
}

/* Every kind of dtype T; integers never divide. */
template <int T>
static CtStatus run_binary(CtCudaCtx *c, CtBinaryKind kind, const CtOpCall *call,
                           const CtCudaIndex &ix, int64_t n)
{
    switch (kind) {
    case CT_BIN_ADD: return launch_arith<T, CT_BIN_ADD>(c, call, ix, n);
    case CT_BIN_SUB: return launch_arith<T, CT_BIN_SUB>(c, call, ix, n);
    case CT_BIN_MUL: return launch_arith<T, CT_BIN_MUL>(c, call, ix, n);
    case CT_BIN_DIV:
        if constexpr (!ct_hd_is_int<T>())
            return launch_arith<T, CT_BIN_DIV>(c, call, ix, n);
        break;
    case CT_BIN_POW: return launch_arith<T, CT_BIN_POW>(c, call, ix, n);
    case CT_BIN_MAX: return launch_arith<T, CT_BIN_MAX>(c, call, ix, n);
    case CT_BIN_MIN: return launch_arith<T, CT_BIN_MIN>(c, call, ix, n);
    case CT_BIN_ADD_RELU: return launch_arith<T, CT_BIN_ADD_RELU>(c, call, ix, n);
    default: break;
    }
    return run_compare<T>(c, kind, call, ix, n);
}

static CtStatus cuda_binary(const CtOpCall *call)
{
    const CtBinaryParams *p = (const CtBinaryParams *)call->params;
    Tensor *out = call->out[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CtCudaIndex ix;
    const Tensor *ops[3] = {out, call->in[0], call->in[1]};
    int64_t n = ct_cuda_index_init(&ix, out->ndim, out->shape, 3, ops);
    if (n == 0) return CT_OK;
    switch (call->in[0]->dtype) {
    case CT_F32: return run_binary<CT_F32>(c, p->kind, call, ix, n);
    case CT_BF16: return run_binary<CT_BF16>(c, p->kind, call, ix, n);
    case CT_F16: return run_binary<CT_F16>(c, p->kind, call, ix, n);
    case CT_I64: return run_binary<CT_I64>(c, p->kind, call, ix, n);
    case CT_I32: return run_binary<CT_I32>(c, p->kind, call, ix, n);
    case CT_U8: return run_compare<CT_U8>(c, p->kind, call, ix, n);
    case CT_BOOL: return run_compare<CT_BOOL>(c, p->kind, call, ix, n);
    default: return run_binary<CT_F64>(c, p->kind, call, ix, n);
    }
}

/* Inputs of one dtype, out of that dtype, or bool for the comparisons, as
 * the CPU: floats every kind, i64 and i32 every kind but DIV, u8 and bool
 * the comparisons. */
static bool cuda_binary_supports(const CtOpCall *call)
{
    const CtBinaryParams *p = (const CtBinaryParams *)call->params;
    CtDType dt = call->in[0]->dtype;
    bool cmp = p->kind >= CT_BIN_EQ;
    if (call->in[1]->dtype != dt || (unsigned)p->kind > CT_BIN_GE ||
        call->out[0]->dtype != (cmp ? CT_BOOL : dt))
        return false;
    switch (dt) {
    case CT_F32:
    case CT_F64:
    case CT_BF16:
    case CT_F16: return true;
    case CT_I64:
    case CT_I32: return p->kind != CT_BIN_DIV;
    case CT_U8:
    case CT_BOOL: return cmp;
    default: return false;
    }
}

template <typename W>
static CtStatus launch_where(CtCudaCtx *c, const CtOpCall *call, const CtCudaIndex &ix,
                             int64_t n)
{
    where_kernel<W><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, c->stream>>>(
        (W *)ct_ptr(call->out[0]), (const uint8_t *)ct_ptr(call->in[0]),
        (const W *)ct_ptr(call->in[1]), (const W *)ct_ptr(call->in[2]), ix, n);
    CT_CUDA_CHECK_LAUNCH("where_kernel", c->stream);
    return CT_OK;
}

// out <- in0 ? in1 : in2; in0 bool, all of out's shape (stride 0 broadcasts)
static CtStatus cuda_where(const CtOpCall *call)
{
    Tensor *out = call->out[0];
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    CtCudaIndex ix;
    const Tensor *ops[4] = {out, call->in[0], call->in[1], call->in[2]};
    int64_t n = ct_cuda_index_init(&ix, out->ndim, out->shape, 4, ops);
    if (n == 0) return CT_OK;
    switch (ct_dtype_size(out->dtype)) {
    case 1: return launch_where<uint8_t>(c, call, ix, n);
    case 2: return launch_where<uint16_t>(c, call, ix, n);
    case 4: return launch_where<uint32_t>(c, call, ix, n);
    default: return launch_where<uint64_t>(c, call, ix, n);
    }
}

/* A bool condition; the values and out of one dtype of 1, 2, 4 or 8 bytes. */
static bool cuda_where_supports(const CtOpCall *call)
{
    CtDType dt = call->out[0]->dtype;
    size_t sz = ct_dtype_size(dt);
    return call->in[0]->dtype == CT_BOOL && call->in[1]->dtype == dt &&
           call->in[2]->dtype == dt && (sz == 1 || sz == 2 || sz == 4 || sz == 8);
}

void ct_cuda_register_elementwise(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_BINARY] = cuda_binary;
    s[CT_OP_BINARY] = cuda_binary_supports;
    k[CT_OP_WHERE] = cuda_where;
    s[CT_OP_WHERE] = cuda_where_supports;
}
