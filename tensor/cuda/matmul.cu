/* MATMUL through cuBLASLt (descriptors from lt_desc.h): f32 and f64
 * natively, bf16 and f16 on the tensor cores with f32 accumulation, f32
 * under autocast with the operands rounded to bf16/f16 (C stays f32), f32
 * on TF32 tensor cores only when ct_allow_tf32() (off by default), strided
 * batches, and the bias + ReLU/GELU epilogues (CtMatmulParams.bias/act),
 * GELU's storing its input in out1 when CtMatmulParams.aux asks, and the
 * bias gradient epilogue (CtMatmulParams.bias_grad: out1 <- the sums of
 * op(A)'s rows, through the bias pointer) for f32 without TF32. A call
 * with an epilogue for which cuBLASLt offers no algorithm queues nothing
 * and is CT_ERR_UNSUPPORTED, so the caller can run the plain forms.
 * The algorithm is cuBLASLt's first heuristic choice for a workspace from
 * the caching allocator and the operands' actual alignment (an operand
 * inside a larger block can be aligned to its element size alone), asked
 * once per descriptor and instance
 * (lt_cache.h); with ct_deterministic() the heuristic is limited to
 * algorithms without a split-K reduction. When cuBLASLt offers no algorithm
 * for a plain product (some f64 or odd-alignment shapes), the product runs
 * through cublasGemmStridedBatchedEx (gemm_desc.h) instead, which is
 * reproducible run to run on one GPU model. */
#include "common.cuh"
#include "lt_desc.h"

static cudaDataType_t cuda_type(CtDType dt)
{
    switch (dt) {
    case CT_F64: return CUDA_R_64F;
    case CT_BF16: return CUDA_R_16BF;
    case CT_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
    }
}

static cublasComputeType_t compute_type(CtGemmCompute c)
{
    switch (c) {
    case CT_GEMM_COMPUTE_64F: return CUBLAS_COMPUTE_64F;
    case CT_GEMM_COMPUTE_32F_FAST_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case CT_GEMM_COMPUTE_32F_FAST_16BF: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case CT_GEMM_COMPUTE_32F_FAST_16F: return CUBLAS_COMPUTE_32F_FAST_16F;
    default: return CUBLAS_COMPUTE_32F;
    }
}

static cublasOperation_t op(CtGemmOp o)
{
    return o == CT_GEMM_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
}

static cublasLtEpilogue_t epilogue(CtLtEpilogue e)
{
    switch (e) {
    case CT_LT_EPI_RELU: return CUBLASLT_EPILOGUE_RELU;
    case CT_LT_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case CT_LT_EPI_RELU_BIAS: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case CT_LT_EPI_GELU: return CUBLASLT_EPILOGUE_GELU;
    case CT_LT_EPI_GELU_BIAS: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case CT_LT_EPI_GELU_AUX: return CUBLASLT_EPILOGUE_GELU_AUX;
    case CT_LT_EPI_GELU_AUX_BIAS: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case CT_LT_EPI_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

/* The operands of one call: pointers and the alpha/beta of the scale type. */
typedef struct MatmulArgs {
    const void *A, *B, *bias;
    void *C, *aux;
    float alpha32, beta32;
    double alpha64, beta64;
} MatmulArgs;

static const void *alpha_of(const CtGemmDesc *g, const MatmulArgs *a)
{
    return g->scale_f64 ? (const void *)&a->alpha64 : (const void *)&a->alpha32;
}

static const void *beta_of(const CtGemmDesc *g, const MatmulArgs *a)
{
    return g->scale_f64 ? (const void *)&a->beta64 : (const void *)&a->beta32;
}

/* Every cuBLASLt object of one call, in memory of the caller's own
 * (initialised with the ...Init calls: no allocation and nothing to
 * destroy, where Create and Destroy cost a heap allocation each, and a
 * product used 5 of each per call). */
typedef struct LtObjects {
    cublasLtMatmulDescOpaque_t op;
    cublasLtMatrixLayoutOpaque_t a, b, c;
} LtObjects;

static CtStatus layout_init(const CtLtLayout *l, CtDType dt,
                            cublasLtMatrixLayoutOpaque_t *out)
{
    CT_CUBLAS_CHECK(
        cublasLtMatrixLayoutInit(out, cuda_type(dt), l->rows, l->cols, l->ld));
    if (l->batch <= 1) return CT_OK;
    CT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &l->batch, sizeof l->batch));
    CT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l->stride, sizeof l->stride));
    return CT_OK;
}

static CtStatus op_init(const CtLtDesc *d, const MatmulArgs *a,
                        cublasLtMatmulDescOpaque_t *out)
{
    const CtGemmDesc *g = &d->gemm;
    cudaDataType_t scale = g->scale_f64 ? CUDA_R_64F : CUDA_R_32F;
    CT_CUBLAS_CHECK(cublasLtMatmulDescInit(out, compute_type(g->compute), scale));
    cublasOperation_t ta = op(g->op_a), tb = op(g->op_b);
    cublasLtEpilogue_t epi = epilogue(d->epilogue);
    CT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(out, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(out, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (epi != CUBLASLT_EPILOGUE_DEFAULT)
        CT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(out, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                       &epi, sizeof epi));
    if (a->bias)
        CT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            out, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias, sizeof a->bias));
    if (!d->aux_ld) return CT_OK;
    CT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        out, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &a->aux, sizeof a->aux));
    CT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        out, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &d->aux_ld, sizeof d->aux_ld));
    return CT_OK;
}

/* The heuristic's preference: only built when the cache has no choice. */
static CtStatus pref_init(const CtLtDesc *d, cublasLtMatmulPreferenceOpaque_t *out)
{
    uint64_t ws = d->workspace;
    CT_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(out));
    CT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        out, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    const struct {
        cublasLtMatmulPreferenceAttributes_t attr;
        uint32_t bytes;
    } align[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, d->align_a},
                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, d->align_b},
                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, d->align_c},
                 {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d->align_c}};
    for (const auto &a : align)
        CT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(out, a.attr, &a.bytes, sizeof a.bytes));
    if (!d->reduction_free) return CT_OK;
    uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    CT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        out, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof none));
    return CT_OK;
}

static CtStatus lt_build(const CtLtDesc *d, const MatmulArgs *a, LtObjects *o)
{
    CT_RETURN_IF_ERROR(op_init(d, a, &o->op));
    CT_RETURN_IF_ERROR(layout_init(&d->a, d->gemm.dtype, &o->a));
    CT_RETURN_IF_ERROR(layout_init(&d->b, d->gemm.dtype, &o->b));
    return layout_init(&d->c, d->gemm.dtype, &o->c);
}

static_assert(sizeof(cublasLtMatmulAlgo_t) == CT_LT_ALGO_BYTES, "lt_cache.h's algo size");
static_assert(CUBLAS_STATUS_SUCCESS == CT_LT_STATUS_SUCCESS &&
                  CUBLAS_STATUS_NOT_SUPPORTED == CT_LT_STATUS_NOT_SUPPORTED,
              "lt_desc.h's statuses");

static void lt_remember(CtCudaCtx *c, const CtLtKey *key, const CtLtChoice *ch)
{
    pthread_mutex_lock(&c->mu);
    (void)ct_lt_cache_put(&c->lt_algos, key, ch);
    pthread_mutex_unlock(&c->mu);
}

/* The heuristic's first choice for d (key): from the instance's cache,
 * else asked (and stored); not found where cuBLASLt has none, whether it
 * says so by NOT_SUPPORTED or by no result (ct_lt_heuristic). */
static CtStatus lt_choose(CtCudaCtx *c, cublasLtHandle_t lt, const CtLtDesc *d,
                          const CtLtKey *key, LtObjects *o, CtLtChoice *out)
{
    pthread_mutex_lock(&c->mu);
    bool cached = ct_lt_cache_get(&c->lt_algos, key, out);
    pthread_mutex_unlock(&c->mu);
    if (cached) return CT_OK;
    cublasLtMatmulPreferenceOpaque_t pref;
    CT_RETURN_IF_ERROR(pref_init(d, &pref));
    cublasLtMatmulHeuristicResult_t r = {};
    int n = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, &o->op, &o->a, &o->b, &o->c,
                                                       &o->c, &pref, 1, &r, &n);
    CtLtHeur h = ct_lt_heuristic(hs, n, r.state);
    if (h == CT_LT_HEUR_ERROR) return CT_CUBLAS_STATUS(hs);
    *out = CtLtChoice{};
    out->found = h == CT_LT_HEUR_FOUND;
    if (out->found) {
        memcpy(out->algo, &r.algo, sizeof r.algo);
        out->workspace = r.workspaceSize;
    }
    lt_remember(c, key, out);
    return CT_OK;
}

/* Runs the product through cuBLASLt; *found = false (nothing queued) when
 * it has no algorithm for it: its heuristic found none, or the matmul
 * refused the chosen one (NOT_SUPPORTED, then remembered as none). */
static CtStatus lt_run(const CtBackend *be, CtCudaCtx *c, const CtLtDesc *d,
                       const MatmulArgs *a, LtObjects *o, bool *found)
{
    cublasLtHandle_t lt;
    CT_RETURN_IF_ERROR(ct_cuda_lt(c, &lt));
    CtLtKey key;
    ct_lt_key(&key, d);
    CtLtChoice ch;
    CT_RETURN_IF_ERROR(lt_choose(c, lt, d, &key, o, &ch));
    *found = ch.found;
    if (!*found) return CT_OK;
    cublasLtMatmulAlgo_t algo;
    memcpy(&algo, ch.algo, sizeof algo);
    void *ws;
    CT_RETURN_IF_ERROR(ct_cuda_scratch(be, ch.workspace, &ws));
    const CtGemmDesc *g = &d->gemm;
    /* Lt's A is our B (lt_desc.h) */
    cublasStatus_t ms = cublasLtMatmul(lt, &o->op, alpha_of(g, a), a->B, &o->a, a->A,
                                       &o->b, beta_of(g, a), a->C, &o->c, a->C, &o->c,
                                       &algo, ws, ch.workspace, c->stream);
    ct_cuda_scratch_free(be, ws, ch.workspace);
    if (ms == CUBLAS_STATUS_NOT_SUPPORTED) {
        *found = false;
        const CtLtChoice none = {};
        lt_remember(c, &key, &none);
        return CT_OK;
    }
    return CT_CUBLAS_STATUS(ms);
}

static CtStatus blas_run(CtCudaCtx *c, const CtGemmDesc *g, const MatmulArgs *a)
{
    cublasHandle_t h;
    CT_RETURN_IF_ERROR(ct_cuda_blas(c, &h));
    cudaDataType_t t = cuda_type(g->dtype);
    /* cuBLAS's A is our B (gemm_desc.h) */
    CT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        h, op(g->op_a), op(g->op_b), g->m, g->n, g->k, alpha_of(g, a), a->B, t, g->lda,
        g->stride_a, a->A, t, g->ldb, g->stride_b, beta_of(g, a), a->C, t, g->ldc,
        g->stride_c, g->batch, compute_type(g->compute), CUBLAS_GEMM_DEFAULT));
    return CT_OK;
}

/* k == 0: C = beta * C, as the CPU does, and neither cuBLASLt nor cuBLAS
 * promise (cuda_matmul_supports takes beta 0 or 1 and no epilogue): zeros
 * for beta 0, C as it is for beta 1. */
static CtStatus empty_product(const CtOpCall *call)
{
    const CtMatmulParams *p = (const CtMatmulParams *)call->params;
    if (p->beta == 1) return CT_OK;
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    size_t es = ct_dtype_size(call->out[0]->dtype);
    for (int64_t i = 0; i < p->batch; i++)
        CT_CUDA_CHECK(cudaMemsetAsync((char *)ct_ptr(call->out[0]) + i * p->stride_c * es,
                                      0, (size_t)(p->m * p->n) * es, c->stream));
    return CT_OK;
}

static CtStatus cuda_matmul(const CtOpCall *call)
{
    const CtMatmulParams *p = (const CtMatmulParams *)call->params;
    Tensor *out = call->out[0];
    if (p->batch == 0 || p->m == 0 || p->n == 0) return CT_OK;
    if (p->k == 0) return empty_product(call);
    CtLtDesc d = {};
    CT_RETURN_IF_ERROR(
        ct_lt_desc(p, out->dtype, ct_allow_tf32(), ct_deterministic(), &d));
    MatmulArgs a = {ct_ptr(call->in[0]),
                    ct_ptr(call->in[1]),
                    p->bias        ? ct_ptr(call->in[2])
                    : p->bias_grad ? ct_ptr(call->out[1])
                                   : NULL,
                    ct_ptr(out),
                    p->aux ? ct_ptr(call->out[1]) : NULL,
                    (float)p->alpha,
                    (float)p->beta,
                    p->alpha,
                    p->beta};
    /* Lt's A is our B */
    ct_lt_desc_align(&d, (uintptr_t)a.B, (uintptr_t)a.A, (uintptr_t)a.C,
                     (uintptr_t)a.bias | (uintptr_t)a.aux);
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_call_ctx(call, &c));
    LtObjects o;
    bool found = false;
    CT_RETURN_IF_ERROR(lt_build(&d, &a, &o));
    CT_RETURN_IF_ERROR(lt_run(call->backend, c, &d, &a, &o, &found));
    if (!found && d.epilogue != CT_LT_EPI_DEFAULT)
        return ct_error(CT_ERR_UNSUPPORTED,
                        "matmul: cuBLASLt has no algorithm for a %s (%lld, %lld) x "
                        "(%lld, %lld) product with a bias, bias gradient or activation "
                        "epilogue on cuda:%d",
                        ct_dtype_name(out->dtype), (long long)p->m, (long long)p->k,
                        (long long)p->k, (long long)p->n, c->device);
    if (!found) CT_RETURN_IF_ERROR(blas_run(c, &d.gemm, &a));
    if (ct_cuda_sync_mode()) CT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return CT_OK;
}

/* Whether t (an epilogue's bias, bias gradient or aux matrix) is aligned
 * as cuBLASLt's epilogues may assume (lt_desc.h); one that is not goes the
 * caller's unfused way. */
static bool epilogue_aligned(const Tensor *t)
{
    return (uintptr_t)ct_ptr(t) % CT_LT_EPILOGUE_ALIGN == 0;
}

/* A bias gradient (out1): f32 operands on f32 arithmetic (the sums of
 * op(A) as the caller's REDUCE would make them: not under autocast, not on
 * TF32, which would round A first), one matrix, A stored transposed (the
 * only form cuBLASLt's BGRADB takes, lt_desc.h), no other epilogue, and a
 * contiguous, aligned f32 out1 of m entries. */
static bool bias_grad_ok(const CtOpCall *call)
{
    const CtMatmulParams *p = (const CtMatmulParams *)call->params;
    const Tensor *db = call->out[1];
    return call->out[0]->dtype == CT_F32 && !ct_allow_tf32() && p->autocast == CT_F32 &&
           p->batch == 1 && p->trans_a && !p->bias && !p->aux &&
           p->act == CT_MATMUL_ACT_NONE && db && db->dtype == CT_F32 &&
           tensor_is_contiguous(db) && tensor_numel(db) == p->m && epilogue_aligned(db);
}

/* A, B and C of one dtype among f32, f64, bf16, f16; f32 under autocast; a
 * bias of C's dtype and n entries; an aux output (GELU, ct_lt_aux_ok) of
 * C's dtype, contiguous, m × n; a bias gradient as bias_grad_ok says; the
 * bias and aux aligned (epilogue_aligned). */
static bool cuda_matmul_supports(const CtOpCall *call)
{
    const CtMatmulParams *p = (const CtMatmulParams *)call->params;
    CtDType dt = call->out[0]->dtype;
    if (p->bias_grad && !bias_grad_ok(call)) return false;
    if (p->autocast != CT_F32 && dt != CT_F32) return false;
    if (dt != CT_F32 && dt != CT_F64 && dt != CT_BF16 && dt != CT_F16) return false;
    bool epilogue = p->bias || p->act != CT_MATMUL_ACT_NONE;
    if (epilogue && (dt == CT_F64 || p->autocast != CT_F32)) return false;
    if (p->k == 0 &&
        (epilogue || p->aux || p->bias_grad || (p->beta != 0 && p->beta != 1)))
        return false; /* empty_product */
    if (p->bias &&
        (!call->in[2] || call->in[2]->dtype != dt || tensor_numel(call->in[2]) != p->n ||
         !tensor_is_contiguous(call->in[2]) || !epilogue_aligned(call->in[2])))
        return false;
    const Tensor *aux = call->out[1];
    if (p->aux &&
        (!ct_lt_aux_ok(p) || !aux || aux->dtype != dt || !tensor_is_contiguous(aux) ||
         tensor_numel(aux) != p->m * p->n || !epilogue_aligned(aux)))
        return false;
    return call->in[0]->dtype == dt && call->in[1]->dtype == dt;
}

void ct_cuda_register_matmul(CtKernelFn *k, CtSupportsFn *s)
{
    k[CT_OP_MATMUL] = cuda_matmul;
    s[CT_OP_MATMUL] = cuda_matmul_supports;
}
