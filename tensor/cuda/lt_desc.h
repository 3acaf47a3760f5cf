/* Private to tensor/cuda: the descriptors of one cuBLASLt matmul
 * (matmul.cu) as plain values, built by pure functions that name no CUDA
 * type, so they are unit tested on the CPU (tests/tensor/test_lt_desc.c).
 * C and C++.
 *
 * cuBLASLt computes D = epilogue(alpha·op(A)·op(B) + beta·C) over
 * column-major matrices, each described by a layout: the rows and columns
 * of the matrix as stored, its leading dimension, and for a strided batch
 * the count and the element distance between matrices. The operands are
 * those of gemm_desc.h (Lt's A is our B, its B our A, its M our n), so a
 * stored matrix of op N is (rows, cols) = (M or K, K or N) and one of op T
 * the transpose. C and D are our C (updated in place). The bias of a bias
 * epilogue is a vector of Lt's M = our n entries, added to every row of our
 * C: linear's bias, whose output features are C's columns. A GELU epilogue
 * with an aux output also stores GELU's input in a matrix laid out as C
 * (linear_gelu's pre-activation, which its backward reads); cuBLASLt wants
 * that matrix's leading dimension a multiple of 8 and no batch. A bias
 * gradient epilogue (BGRADB, CtMatmulParams.bias_grad) sums Lt's B, our A,
 * over k into a vector of Lt's N = our m entries, written through the bias
 * pointer: for a linear layer's weight gradient gᵀ·x, the bias gradient,
 * g's column sums. cuBLASLt takes BGRADB only with op(B) = T (our A stored
 * transposed, as gᵀ is); it refuses op(B) = N.
 */
#ifndef CTRAINER_TENSOR_CUDA_LT_DESC_H
#define CTRAINER_TENSOR_CUDA_LT_DESC_H

#include <stddef.h>

#include "gemm_desc.h"

/* cuBLASLt's epilogues we use (the CUBLASLT_EPILOGUE_* of the same name). */
typedef enum CtLtEpilogue {
    CT_LT_EPI_DEFAULT, /* none */
    CT_LT_EPI_RELU,
    CT_LT_EPI_BIAS,
    CT_LT_EPI_RELU_BIAS,
    CT_LT_EPI_GELU, /* tanh approximation */
    CT_LT_EPI_GELU_BIAS,
    CT_LT_EPI_GELU_AUX, /* GELU, its input stored in the aux matrix */
    CT_LT_EPI_GELU_AUX_BIAS,
    CT_LT_EPI_BGRADB, /* the sums of Lt's B (our A) over k into the bias pointer */
} CtLtEpilogue;

/* A cublasLtMatrixLayout: the matrix as stored, column-major. */
typedef struct CtLtLayout {
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;  /* CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT */
    int64_t stride; /* CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, elements */
} CtLtLayout;

typedef struct CtLtDesc {
    CtGemmDesc gemm;    /* ops, sizes, dtype, compute and scale types */
    CtLtLayout a, b, c; /* c describes both C and D */
    /* the bytes every matrix of Lt's A, B and C = D is aligned to
     * (ct_lt_desc_align; 256, cuBLASLt's default assumption, until set) */
    uint32_t align_a, align_b, align_c;
    /* the bytes the epilogue's bias (or bias gradient) vector and aux
     * matrix are aligned to: the heuristic reads those pointers too */
    uint32_t align_e;
    CtLtEpilogue epilogue;
    int64_t aux_ld;      /* of the aux matrix (GELU_AUX*); 0 without one */
    bool reduction_free; /* restrict the heuristic to algorithms without a
                          * split-K reduction (the deterministic switch) */
    size_t workspace;    /* bytes the heuristic may ask for */
} CtLtDesc;

/* The workspace offered to cuBLASLt: enough for split-K partial sums of up
 * to CT_LT_WORKSPACE_SLICES copies of one D matrix in the accumulation type,
 * within [CT_LT_WORKSPACE_MIN, CT_LT_WORKSPACE_MAX] (NVIDIA recommends 32 MiB
 * on Hopper). The block comes from the instance's caching allocator. */
#define CT_LT_WORKSPACE_SLICES 4
#define CT_LT_WORKSPACE_MIN    ((size_t)1 << 20)
#define CT_LT_WORKSPACE_MAX    ((size_t)32 << 20)

static inline size_t ct_lt_workspace(const CtGemmDesc *g)
{
    size_t acc = g->compute == CT_GEMM_COMPUTE_64F ? 8 : 4;
    size_t ws = (size_t)g->m * (size_t)g->n * acc * CT_LT_WORKSPACE_SLICES;
    if (ws < CT_LT_WORKSPACE_MIN) return CT_LT_WORKSPACE_MIN;
    return ws > CT_LT_WORKSPACE_MAX ? CT_LT_WORKSPACE_MAX : ws;
}

/* What cuBLASLt assumes of an operand's alignment when told nothing. */
#define CT_LT_ALIGN_MAX 256u

/* The epilogue of a bias flag, an activation and an aux flag (GELU only;
 * ct_lt_aux_ok). */
static inline CtLtEpilogue ct_lt_epilogue(bool bias, CtMatmulAct act, bool aux)
{
    switch (act) {
    case CT_MATMUL_ACT_RELU: return bias ? CT_LT_EPI_RELU_BIAS : CT_LT_EPI_RELU;
    case CT_MATMUL_ACT_GELU_TANH:
        if (aux) return bias ? CT_LT_EPI_GELU_AUX_BIAS : CT_LT_EPI_GELU_AUX;
        return bias ? CT_LT_EPI_GELU_BIAS : CT_LT_EPI_GELU;
    default: return bias ? CT_LT_EPI_BIAS : CT_LT_EPI_DEFAULT;
    }
}

/* Whether cuBLASLt can store p's pre-activation (p->aux): a GELU epilogue
 * over one matrix whose rows (our n, the aux leading dimension) are a
 * multiple of 8 entries. True when p asks for no aux. */
static inline bool ct_lt_aux_ok(const CtMatmulParams *p)
{
    return !p->aux ||
           (p->act == CT_MATMUL_ACT_GELU_TANH && p->batch == 1 && p->n % 8 == 0);
}

/* The layout of an operand of op `op` whose op(X) is (rows, cols). */
static inline CtLtLayout ct_lt_layout(CtGemmOp op, int rows, int cols, int ld, int batch,
                                      long long stride)
{
    CtLtLayout l;
    l.rows = (uint64_t)(op == CT_GEMM_OP_N ? rows : cols);
    l.cols = (uint64_t)(op == CT_GEMM_OP_N ? cols : rows);
    l.ld = ld;
    l.batch = batch;
    l.stride = stride;
    return l;
}

/* Fills d for p over matrices of dtype dt: ct_gemm_desc's checks and
 * errors, then the layouts, epilogue, reduction restriction and workspace.
 * A bias, bias gradient or activation on f64 is CT_ERR_UNSUPPORTED
 * (cuBLASLt has no f64 epilogue), and so is a bias gradient over a batch
 * or beside another epilogue. */
static inline CtStatus ct_lt_desc(const CtMatmulParams *p, CtDType dt, bool allow_tf32,
                                  bool deterministic, CtLtDesc *d)
{
    CtGemmDesc *g = &d->gemm;
    CtStatus st = ct_gemm_desc(p, dt, allow_tf32, g);
    if (st != CT_OK) return st;
    d->epilogue =
        p->bias_grad ? CT_LT_EPI_BGRADB : ct_lt_epilogue(p->bias, p->act, p->aux);
    if (d->epilogue != CT_LT_EPI_DEFAULT && dt == CT_F64)
        return ct_error(
            CT_ERR_UNSUPPORTED,
            "matmul: cuBLASLt has no bias/activation epilogue for f64 on cuda");
    if (p->bias_grad &&
        (p->batch != 1 || p->bias || p->aux || p->act != CT_MATMUL_ACT_NONE))
        return ct_error(CT_ERR_UNSUPPORTED,
                        "matmul: a bias gradient epilogue takes one matrix and no other "
                        "epilogue on cuda");
    if (p->bias_grad && !p->trans_a) /* Lt's op(B) = N */
        return ct_error(CT_ERR_UNSUPPORTED,
                        "matmul: a bias gradient epilogue sums a transposed left operand "
                        "on cuda");
    if (!ct_lt_aux_ok(p))
        return ct_error(CT_ERR_UNSUPPORTED,
                        "matmul: cuBLASLt stores a pre-activation only for GELU over one "
                        "matrix with a multiple of 8 columns (got %lld) on cuda",
                        (long long)p->n);
    d->aux_ld = p->aux ? g->ldc : 0;
    d->a = ct_lt_layout(g->op_a, g->m, g->k, g->lda, g->batch, g->stride_a);
    d->b = ct_lt_layout(g->op_b, g->k, g->n, g->ldb, g->batch, g->stride_b);
    d->c = ct_lt_layout(CT_GEMM_OP_N, g->m, g->n, g->ldc, g->batch, g->stride_c);
    d->reduction_free = deterministic;
    d->workspace = ct_lt_workspace(g);
    d->align_a = d->align_b = d->align_c = d->align_e = CT_LT_ALIGN_MAX;
    return CT_OK;
}

/* The alignment cuBLASLt may assume of an address: the largest power of two
 * up to CT_LT_ALIGN_MAX bytes (what it assumes when told nothing) that
 * divides it. */
static inline uint32_t ct_lt_alignment(uint64_t addr)
{
    uint32_t a = CT_LT_ALIGN_MAX;
    while (a > 1 && addr % a != 0) a /= 2;
    return a;
}

/* The alignment of every matrix of a strided batch from `base` whose
 * matrices are `stride` elements of esz bytes apart. */
static inline uint32_t ct_lt_batch_alignment(uint64_t base, int64_t stride, size_t esz,
                                             int batch)
{
    uint64_t step = batch > 1 ? (uint64_t)stride * esz : 0;
    return ct_lt_alignment(base | step);
}

/* Records where the operands are (device addresses; Lt's A is our B, its B
 * our A; epi the epilogue's bias or bias-gradient address OR'ed with its aux
 * matrix's, 0 without either): the heuristic is then told how A, B and C are
 * aligned, so it offers only algorithms that work with them (an operand
 * inside a larger block, such as a parameter packed into the parameter
 * block, can be aligned to as little as its element size, where cuBLASLt
 * assumes 256 bytes and an algorithm that needs more would fault). It reads
 * the epilogue's pointers' alignment from their values, so the algorithm
 * cache keys on all four. */
static inline void ct_lt_desc_align(CtLtDesc *d, uint64_t lt_a, uint64_t lt_b, uint64_t c,
                                    uint64_t epi)
{
    const CtGemmDesc *g = &d->gemm;
    size_t esz = ct_dtype_size(g->dtype);
    d->align_a = ct_lt_batch_alignment(lt_a, g->stride_a, esz, g->batch);
    d->align_b = ct_lt_batch_alignment(lt_b, g->stride_b, esz, g->batch);
    d->align_c = ct_lt_batch_alignment(c, g->stride_c, esz, g->batch);
    d->align_e = ct_lt_alignment(epi);
}

/* cublasStatus_t values the heuristic's answer is read by (matmul.cu
 * asserts them). */
#define CT_LT_STATUS_SUCCESS       0
#define CT_LT_STATUS_NOT_SUPPORTED 15

/* What cublasLtMatmulAlgoGetHeuristic answered: the status it returned, the
 * results it wrote and the first result's state. cuBLASLt says it has no
 * algorithm for a configuration either way: NOT_SUPPORTED (a layout or
 * epilogue it refuses, such as BGRADB with op(B) = N), or success with no
 * usable result. Both are CT_LT_HEUR_NONE, so the caller's fallback runs;
 * any other status is an error. */
typedef enum CtLtHeur { CT_LT_HEUR_FOUND, CT_LT_HEUR_NONE, CT_LT_HEUR_ERROR } CtLtHeur;

static inline CtLtHeur ct_lt_heuristic(int status, int results, int first_state)
{
    if (status == CT_LT_STATUS_NOT_SUPPORTED) return CT_LT_HEUR_NONE;
    if (status != CT_LT_STATUS_SUCCESS) return CT_LT_HEUR_ERROR;
    return results > 0 && first_state == CT_LT_STATUS_SUCCESS ? CT_LT_HEUR_FOUND
                                                              : CT_LT_HEUR_NONE;
}

/* The least alignment, in bytes, of an epilogue's vector (a bias, a bias
 * gradient) or aux matrix: cuBLASLt's alignment preferences cover A, B, C
 * and D only, and its epilogues may assume this much of the others. */
#define CT_LT_EPILOGUE_ALIGN 16u

#endif
