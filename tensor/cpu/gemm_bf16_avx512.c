/* The avx512_bf16 engine of the bf16-autocast GEMM (gemm_bf16.h).
 *
 * VDPBF16PS multiplies pairs of bf16 values and adds both products into one
 * f32 lane, so both operands are packed as 32-bit "pairs" along k:
 *   A: panels of MR rows, pair p of row i at ap[p * MR + i], or at
 *      ap[i * kp + p] when A is k-contiguous (the kernel only broadcasts
 *      A's pairs, so its layout is free: no transposition);
 *   B: panels of NR columns, pair p of column j at bp[p * NR + j] (a
 *      k-contiguous B is transposed 16 x 16 in registers).
 * Packing rounds f32 to bf16 to nearest even (VCVTNEPS2BF16) and pads the
 * panels and an odd k with zeros. The MR x NR micro-kernel keeps C in 16
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
 * when the CPU has them (ct_cpu_bf16_native). */
#include "gemm_bf16.h"

#ifdef __AVX512BF16__
#include <immintrin.h>
#include <string.h>

#include "workers.h"

#define MR  8
#define NR  32
#define KCP 256 /* pairs of k per block */
/* Column blocks below which pool items are row panels instead. */
#define MIN_COL_ITEMS 4

static inline __mmask16 lanes(int64_t n)
{
    return n >= 16  ? (__mmask16)0xffff
           : n <= 0 ? (__mmask16)0
                    : (__mmask16)((1u << n) - 1);
}

/* 16 f32 pairs (x[2q], x[2q+1]) of 32 consecutive floats (cnt valid) as bf16
 * pairs. */
static inline __m512i pairs_of_run(const float *x, int64_t cnt)
{
    __m512 lo = _mm512_maskz_loadu_ps(lanes(cnt), x);
    __m512 hi = _mm512_maskz_loadu_ps(lanes(cnt - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* 16 pairs (x0[q], x1[q]) from two runs of cnt valid floats (x1 may be
 * NULL: zeros). */
static inline __m512i pairs_of_rows(const float *x0, const float *x1, int64_t cnt)
{
    __mmask16 mk = lanes(cnt);
    __m512i v0 =
        _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, x0)));
    if (!x1) return v0;
    __m512i v1 =
        _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, x1)));
    return _mm512_or_si512(v0, _mm512_slli_epi32(v1, 16));
}

/* Transposes the 16 x 16 dwords in r (row i in r[i]) in place. */
static void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + c], 128-bit lane L: column 4L + c of rows 4i .. 4i + 3 */
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i x0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
        __m512i x1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
        __m512i y0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
        __m512i y1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
        r[c] = _mm512_shuffle_i32x4(x0, y0, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
        r[8 + c] = _mm512_shuffle_i32x4(x1, y1, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
    }
}

/* Packs rows [r0, r0 + R) of a (rows, k) operand whose element (r, l) is at
 * src[r * rs + l] (k contiguous) into d as [p][r]: 16 rows x 16 pairs at a
 * time, transposed in registers. R is a multiple of 16. */
static void pack_kc_cols(uint32_t *d, const float *src, int64_t rs, int64_t r0,
                         int64_t rows, int64_t k, int R)
{
    const int64_t kp = (k + 1) / 2;
    for (int r16 = 0; r16 < R; r16 += 16)
        for (int64_t p0 = 0; p0 < kp; p0 += 16) {
            __m512i v[16];
            for (int q = 0; q < 16; q++) {
                int64_t r = r0 + r16 + q;
                v[q] = r < rows ? pairs_of_run(src + r * rs + 2 * p0, k - 2 * p0)
                                : _mm512_setzero_si512();
            }
            transpose16(v);
            int64_t c_n = kp - p0 < 16 ? kp - p0 : 16;
            for (int64_t c = 0; c < c_n; c++)
                _mm512_storeu_si512(d + (p0 + c) * R + r16, v[c]);
        }
}

/* Packs rows [r0, r0 + R) of a k-contiguous operand into d as [r][p]
 * (row r's pairs contiguous, kp apart). */
static void pack_kc_rows(uint32_t *d, const float *src, int64_t rs, int64_t r0,
                         int64_t rows, int64_t k, int R)
{
    const int64_t kp = (k + 1) / 2;
    for (int r = 0; r < R; r++)
        for (int64_t p0 = 0; p0 < kp; p0 += 16) {
            __m512i v = r0 + r < rows
                            ? pairs_of_run(src + (r0 + r) * rs + 2 * p0, k - 2 * p0)
                            : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(d + r * kp + p0, lanes(kp - p0), v);
        }
}

/* Packs rows [r0, r0 + R) of an operand whose element (r, l) is at
 * src[r + l * ks] (rows contiguous) into d as [p][r]. */
static void pack_rc(uint32_t *d, const float *src, int64_t ks, int64_t r0, int64_t rows,
                    int64_t k, int R)
{
    const int64_t kp = (k + 1) / 2;
    for (int64_t p = 0; p < kp; p++) {
        const float *x0 = src + 2 * p * ks + r0;
        const float *x1 = 2 * p + 1 < k ? x0 + ks : NULL;
        for (int r = 0; r < R; r += 16) {
            __m512i v = pairs_of_rows(x0 + r, x1 ? x1 + r : NULL, rows - r0 - r);
            _mm512_mask_storeu_epi32(d + p * R + r, lanes(R - r), v);
        }
    }
}

/* One packed operand: panels of R rows, pair p of panel row r at
 * panel + r * rstride + p * pstride; panel i at base + i * R * kp. */
typedef struct Panels {
    uint32_t *base;
    int64_t rstride, pstride;
} Panels;

/* Packs a (rows, k) operand with element (r, l) at src[r * rs + l * ks]
 * (rs == 1 or ks == 1). cols_layout forces [p][r] (B's vector loads need
 * it); otherwise a k-contiguous operand keeps its rows ([r][p]). */
static Panels pack(uint32_t *dst, const float *src, int64_t rs, int64_t ks, int64_t rows,
                   int64_t k, int R, bool cols_layout)
{
    const int64_t kp = (k + 1) / 2;
    bool kc = ks == 1 && !(rs == 1 && rows == 1);
    Panels pn = {dst, kc && !cols_layout ? kp : 1, kc && !cols_layout ? 1 : R};
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
        uint32_t *d = dst + r0 * kp;
        if (!kc)
            pack_rc(d, src, ks, r0, rows, k, R);
        else if (cols_layout)
            pack_kc_cols(d, src, rs, r0, rows, k, R);
        else
            pack_kc_rows(d, src, rs, r0, rows, k, R);
    }
    return pn;
}

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
    const __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
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
    Panels a;
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
    pk.a = pack(ap, g->a, g->trans_a ? 1 : g->lda, g->trans_a ? g->lda : 1, g->m, g->k,
                MR, false);
    /* column j of op(B) as a row: B is (k, n) or (n, k) transposed */
    pack(bp, g->b, g->trans_b ? g->ldb : 1, g->trans_b ? 1 : g->ldb, g->n, g->k, NR,
         true);
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
