/* The avx512_bf16 engine of the bf16-autocast GEMM (gemm_bf16.h).
 *
 * VDPBF16PS multiplies pairs of bf16 values and adds both products into one
 * f32 lane, so both operands are packed as 32-bit "pairs" along k:
 *   A: panels of MR rows, pair p of row i at ap[p * MR + i], or at
 *      ap[i * kp + p] when A is k-contiguous (the kernel only broadcasts
 *      A's pairs, so its layout is free: no transposition);
 *   B: panels of NR columns, pair p of column j at bp[p * NR + j] (a
 *      k-contiguous B is transposed 16 x 16 in registers).
 * (gemm_bf16_pack.h: rounded to nearest even, panels and an odd k padded
 * with zeros). The MR x NR micro-kernel keeps C in 16
 * zmm accumulators: per pair it loads two B vectors, broadcasts one A pair
 * per row and issues 16 VDPBF16PS.
 *
 * Loops: for each block of NR columns, for each KC-pair block of k, for each
 * MR-row panel. The B block (NR x KC pairs, 32 KiB) stays in L1 across the
 * row panels; A's KC block stays in L2. Threads (the engine pool, workers.h)
 * take whole column blocks, or whole row panels when C has fewer than
 * MIN_COL_ITEMS column blocks; which of the two is a function of the shape
 * alone. Either way every element of C is summed over k in the same order
 * by one thread, so the result is bitwise the same for any thread count.
 *
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16; called only
 * when the CPU has them (ct_cpu_bf16_engine). */
#include "gemm_bf16.h"

#ifdef __AVX512BF16__
#include "gemm_bf16_pack.h"
#include "workers.h"

#define MR  8
#define NR  32
#define KCP 256 /* pairs of k per block */
/* Column blocks below which pool items are row panels instead. */
#define MIN_COL_ITEMS 4

/* C tile (mr <= MR rows, nr <= NR columns) from kp pairs; `first`: the
 * first k block (C = alpha*acc + beta*C), else C += alpha*acc. */
static void micro(int64_t kp, const uint32_t *ap, int64_t ars, int64_t aps,
                  const uint32_t *bp, float *c, int64_t ldc, int mr, int nr, float alpha,
                  float beta, bool first)
{
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * NR);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + p * NR + 16);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)ap[i * ars + p * aps]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m0 = bf16_lanes(nr), m1 = bf16_lanes(nr - 16);
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        for (int h = 0; h < 2; h++) {
            __mmask16 mk = h ? m1 : m0;
            if (!mk) continue;
            __m512 r = _mm512_mul_ps(va, acc[i][h]);
            if (!first)
                r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mk, ci + 16 * h));
            else if (beta != 0)
                r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk, ci + 16 * h), r);
            _mm512_mask_storeu_ps(ci + 16 * h, mk, r);
        }
    }
}

typedef struct Packed {
    const CtGemmBf16 *g;
    Bf16Panels a;
    const uint32_t *bp;
    int64_t kp, n_it, n_jt;
} Packed;

/* C tile (row panel it, column block jt) over pairs [p0, p0 + kc). */
static void tile_k(const Packed *pk, int64_t jt, int64_t it, int64_t p0, int64_t kc)
{
    const CtGemmBf16 *g = pk->g;
    int mr = g->m - it * MR < MR ? (int)(g->m - it * MR) : MR;
    int nr = g->n - jt * NR < NR ? (int)(g->n - jt * NR) : NR;
    micro(kc, pk->a.base + it * MR * pk->kp + p0 * pk->a.pstride, pk->a.rstride,
          pk->a.pstride, pk->bp + jt * NR * pk->kp + p0 * NR,
          g->c + it * MR * (int64_t)g->ldc + jt * NR, g->ldc, mr, nr, g->alpha, g->beta,
          p0 == 0);
}

/* Column block jt x row panel it, every k block. */
static void tile(const Packed *pk, int64_t jt, int64_t it)
{
    for (int64_t p0 = 0; p0 < pk->kp; p0 += KCP)
        tile_k(pk, jt, it, p0, pk->kp - p0 < KCP ? pk->kp - p0 : KCP);
}

/* Pool item: column block jt, its k blocks outermost, so its B block is
 * reused across the row panels. */
static void column_block(void *ctx, int64_t jt, int slot)
{
    (void)slot;
    const Packed *pk = ctx;
    for (int64_t p0 = 0; p0 < pk->kp; p0 += KCP)
        for (int64_t it = 0; it < pk->n_it; it++)
            tile_k(pk, jt, it, p0, pk->kp - p0 < KCP ? pk->kp - p0 : KCP);
}

/* Pool item: row panel it, every column block. */
static void row_panel(void *ctx, int64_t it, int slot)
{
    (void)slot;
    const Packed *pk = ctx;
    for (int64_t jt = 0; jt < pk->n_jt; jt++) tile(pk, jt, it);
}

void ct_cpu_gemm_bf16_avx512(const CtGemmBf16 *g, int nt)
{
    Packed pk = {.g = g,
                 .kp = ((int64_t)g->k + 1) / 2,
                 .n_it = ((int64_t)g->m + MR - 1) / MR,
                 .n_jt = ((int64_t)g->n + NR - 1) / NR};
    size_t na = (size_t)(pk.n_it * MR * pk.kp), nb = (size_t)(pk.n_jt * NR * pk.kp);
    uint32_t *ap = ct_cpu_gemm_scratch((na + nb) * sizeof *ap);
    if (!ap) {
        ct_cpu_gemm_bf16_naive(g);
        return;
    }
    uint32_t *bp = ap + na;
    /* op(A)(i, l): A is (m, k) with row stride lda, or (k, m) transposed */
    pk.a = bf16_pack(ap, g->a, g->trans_a ? 1 : g->lda, g->trans_a ? g->lda : 1, g->m,
                     g->k, MR, pk.kp, BF16_FREE, 0, pk.n_it);
    /* column j of op(B) as a row: B is (k, n) or (n, k) transposed */
    bf16_pack(bp, g->b, g->trans_b ? g->ldb : 1, g->trans_b ? 1 : g->ldb, g->n, g->k, NR,
              pk.kp, BF16_COLS, 0, pk.n_jt);
    pk.bp = bp;
    if (pk.n_jt >= MIN_COL_ITEMS || pk.n_it == 1)
        ct_workers_run(pk.n_jt, nt, column_block, &pk);
    else
        ct_workers_run(pk.n_it, nt, row_panel, &pk);
}
#else
/* Not an x86-64 build: ct_cpu_bf16_native() is false and this never runs. */
void ct_cpu_gemm_bf16_avx512(const CtGemmBf16 *g, int nt)
{
    (void)nt;
    ct_cpu_gemm_bf16_naive(g);
}
#endif
