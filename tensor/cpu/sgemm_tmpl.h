/* The f32 GEMM engine's body (sgemm.h), instantiated once per ISA. The
 * includer defines:
 *   VEC            the vector type, VL f32 lanes
 *   VLOAD(p) VSTORE(p, v) VSET1(x) VZERO()
 *   VFMA(a, b, c)  a * b + c, fused
 *   VMUL(a, b) VADD(a, b)
 *   SGEMM_FN       the entry point's name
 *
 * Packing: op(A) in panels of MR rows, element (i, p) of a panel at
 * ap[p * MR + i]; op(B) in panels of NR = 2 * VL columns, (p, j) at
 * bp[p * NR + j]; both padded with zeros to whole panels. The micro-kernel
 * keeps an MR x NR tile of C in 2 * MR accumulators: per k it loads two
 * vectors of B, broadcasts MR values of A and issues 2 * MR FMAs.
 *
 * Loops: columns in blocks of SGEMM_NC, k in blocks of SGEMM_KC (B's block
 * packed once per k block), rows in blocks of SGEMM_MC (A's block packed
 * once per row block); tiles of the packed blocks in order. A block's
 * products restart from zero and are added to C by the epilogue, so every
 * element sees the same operations whatever the block of C it is in. */
#include <string.h>

#include "gemm_bf16.h"
#include "sgemm.h"

#define MR SGEMM_MR
#define NR (2 * VL)

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Rows [i0, i0 + mc) x k [p0, p0 + kc) of op(A) into MR-row panels. */
static void pack_a(float *ap, const CtSgemm *g, int64_t i0, int64_t mc, int64_t p0,
                   int64_t kc)
{
    for (int64_t ir = 0; ir < mc; ir += MR, ap += MR * kc) {
        int64_t rows = min64(MR, mc - ir);
        if (rows < MR) memset(ap, 0, (size_t)(MR * kc) * sizeof *ap);
        for (int64_t i = 0; i < rows; i++) {
            int64_t r = i0 + ir + i;
            if (g->trans_a)
                for (int64_t p = 0; p < kc; p++)
                    ap[p * MR + i] = g->a[(p0 + p) * g->lda + r];
            else
                for (int64_t p = 0; p < kc; p++)
                    ap[p * MR + i] = g->a[r * g->lda + p0 + p];
        }
    }
}

/* k [p0, p0 + kc) x columns [j0, j0 + nc) of op(B) into NR-column panels. */
static void pack_b(float *bp, const CtSgemm *g, int64_t j0, int64_t nc, int64_t p0,
                   int64_t kc)
{
    for (int64_t jr = 0; jr < nc; jr += NR, bp += NR * kc) {
        int64_t cols = min64(NR, nc - jr);
        if (cols < NR) memset(bp, 0, (size_t)(NR * kc) * sizeof *bp);
        if (g->trans_b) {
            for (int64_t j = 0; j < cols; j++) {
                const float *src = g->b + (j0 + jr + j) * g->ldb + p0;
                for (int64_t p = 0; p < kc; p++) bp[p * NR + j] = src[p];
            }
        } else {
            for (int64_t p = 0; p < kc; p++)
                memcpy(bp + p * NR, g->b + (p0 + p) * g->ldb + j0 + jr,
                       (size_t)cols * sizeof *bp);
        }
    }
}

/* One element: c <- alpha * acc + beta * c (beta == 0: C not read). The
 * vector epilogue below does the same operations lane by lane. */
static inline float blend(float acc, float alpha, float beta, const float *c)
{
    float v = alpha * acc;
    return beta == 0 ? v : beta == 1 ? *c + v : v + beta * *c;
}

static inline VEC blend_v(VEC acc, VEC alpha, float beta, VEC vbeta, const float *c)
{
    VEC v = VMUL(alpha, acc);
    if (beta == 0) return v;
    VEC old = VLOAD(c);
    return beta == 1 ? VADD(old, v) : VADD(v, VMUL(vbeta, old));
}

/* The MR x NR tile at c (rows x cols valid) += the packed panels' product
 * over kc, through blend. */
static void micro(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
                  int rows, int cols, float alpha, float beta)
{
    VEC acc[MR][2];
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = VZERO();
    for (int64_t p = 0; p < kc; p++, ap += MR, bp += NR) {
        VEC b0 = VLOAD(bp), b1 = VLOAD(bp + VL);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            VEC a = VSET1(ap[i]);
            acc[i][0] = VFMA(a, b0, acc[i][0]);
            acc[i][1] = VFMA(a, b1, acc[i][1]);
        }
    }
    if (rows == MR && cols == NR) {
        VEC va = VSET1(alpha), vb = VSET1(beta);
        for (int i = 0; i < MR; i++) {
            float *ci = c + i * ldc;
            VSTORE(ci, blend_v(acc[i][0], va, beta, vb, ci));
            VSTORE(ci + VL, blend_v(acc[i][1], va, beta, vb, ci + VL));
        }
        return;
    }
    float tile[MR][NR];
    for (int i = 0; i < MR; i++) {
        VSTORE(tile[i], acc[i][0]);
        VSTORE(tile[i] + VL, acc[i][1]);
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            c[i * ldc + j] = blend(tile[i][j], alpha, beta, c + i * ldc + j);
}

/* Every tile of the packed blocks: rows [i0, i0 + mc), columns [j0, j0 +
 * nc) of C. */
static void tiles(const CtSgemm *g, const float *ap, const float *bp, int64_t i0,
                  int64_t mc, int64_t j0, int64_t nc, int64_t kc, float beta)
{
    for (int64_t jr = 0; jr < nc; jr += NR)
        for (int64_t ir = 0; ir < mc; ir += MR)
            micro(kc, ap + ir * kc, bp + jr * kc, g->c + (i0 + ir) * g->ldc + j0 + jr,
                  g->ldc, (int)min64(MR, mc - ir), (int)min64(NR, nc - jr), g->alpha,
                  beta);
}

bool SGEMM_FN(const CtSgemm *g)
{
    const int64_t m = g->m, n = g->n, k = g->k;
    const int64_t kc_max = min64(k, SGEMM_KC);
    const int64_t nc_max = (min64(n, SGEMM_NC) + NR - 1) / NR * NR;
    const int64_t mc_max = (min64(m, SGEMM_MC) + MR - 1) / MR * MR;
    float *bp = ct_cpu_gemm_scratch((size_t)((nc_max + mc_max) * kc_max) * sizeof *bp);
    if (!bp) return false;
    float *ap = bp + nc_max * kc_max;
    for (int64_t j0 = 0; j0 < n; j0 += SGEMM_NC) {
        int64_t nc = min64(SGEMM_NC, n - j0);
        for (int64_t p0 = 0; p0 < k; p0 += SGEMM_KC) {
            int64_t kc = min64(SGEMM_KC, k - p0);
            pack_b(bp, g, j0, nc, p0, kc);
            for (int64_t i0 = 0; i0 < m; i0 += SGEMM_MC) {
                int64_t mc = min64(SGEMM_MC, m - i0);
                pack_a(ap, g, i0, mc, p0, kc);
                tiles(g, ap, bp, i0, mc, j0, nc, kc, p0 == 0 ? g->beta : 1.0f);
            }
        }
    }
    return true;
}

#undef MR
#undef NR
