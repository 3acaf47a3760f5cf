/* The f32 GEMM engine's body (sgemm.h), instantiated once per ISA. The
 * includer defines:
 *   VEC            the vector type, VL f32 lanes; MR rows per tile
 *   VLOAD(p) VSTORE(p, v) VSET1(x) VZERO()
 *   VFMA(a, b, c)  a * b + c, fused
 *   VMUL(a, b) VADD(a, b)
 *   SGEMM_FN       the entry point's name
 *
 * B is packed in panels of NR = 2 * VL columns, element (p, j) at
 * bp[p * NR + j], padded with zeros (a transposed B is transposed 8 x 8 in
 * registers), except a row-major B's whole panels when few rows reuse them
 * (b_in_place). op(A) is packed in panels of MR rows, element (i, p) at
 * ap[p * MR + i], for large products (sgemm.h, SGEMM_PACK_A_MIN_*); the
 * others read it where it lies and copy only a last panel of fewer than MR
 * rows. The micro-kernel broadcasts element (i, p) from a[i * rs + p * cs]
 * and keeps an MR x NR tile of C in 2 * MR accumulators: per k it loads
 * two vectors of B, broadcasts MR values of A and issues 2 * MR FMAs.
 *
 * Loops: columns in blocks of SGEMM_NC, k in near-equal blocks of at most
 * SGEMM_KC (B's block packed once per k block), rows in blocks of
 * SGEMM_MC, then the tiles (tiles() says in which order). A k block's
 * products restart from zero and are added to C by the epilogue, so every
 * element sees the same operations whatever the block of C it is in,
 * whatever MR and NR are. */
#include <immintrin.h>
#include <string.h>

#include "gemm_bf16.h"
#include "sgemm.h"

#define NR (2 * VL)

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Transposes the 8 x 8 floats in r (row q in r[q]) in place. */
static inline void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int q = 0; q < 8; q += 2) {
        t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
        t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
    }
    for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xee);
        u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xee);
    }
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x20);
        r[q + 4] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x31);
    }
}

/* cols columns of a transposed B (column j's k values contiguous at
 * src + j * ld) over kc values of k into one panel. */
static void pack_bt_panel(float *bp, const float *src, int64_t ld, int64_t cols,
                          int64_t kc)
{
    int64_t j8 = cols / 8 * 8, p8 = kc / 8 * 8;
    for (int64_t j = 0; j < j8; j += 8)
        for (int64_t p = 0; p < p8; p += 8) {
            __m256 r[8];
            for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(src + (j + q) * ld + p);
            transpose8(r);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(bp + (p + q) * NR + j, r[q]);
        }
    for (int64_t j = 0; j < cols; j++)
        for (int64_t p = j < j8 ? p8 : 0; p < kc; p++) bp[p * NR + j] = src[j * ld + p];
}

/* Whether B's panels are read where they lie: a row-major B's whole
 * panels (rows of NR floats, ldb apart) when few row panels reuse them
 * (packing costs more than it saves there; with many, strided rows thrash
 * L1); the others are packed. */
static inline bool b_in_place(const CtSgemm *g, int64_t cols)
{
    return !g->trans_b && cols == NR && g->m <= SGEMM_B_IN_PLACE_MAX_M &&
           g->ldb < SGEMM_B_IN_PLACE_MAX_LD;
}

/* Row p of a row-major B's columns [j0, j0 + nc) into the row p of every
 * panel (panel jr at bp + jr * kc), zero-padded; whole panels are skipped
 * when they are read in place (skip_whole). */
static void pack_b_row(float *bp, const float *src, int64_t nc, int64_t kc,
                       bool skip_whole)
{
    for (int64_t jr = 0; jr < nc; jr += NR, bp += NR * kc) {
        int64_t cols = min64(NR, nc - jr);
        if (cols == NR) {
            if (skip_whole) continue;
            VSTORE(bp, VLOAD(src + jr));
            VSTORE(bp + VL, VLOAD(src + jr + VL));
            continue;
        }
        memcpy(bp, src + jr, (size_t)cols * sizeof *bp);
        memset(bp + cols, 0, (size_t)(NR - cols) * sizeof *bp);
    }
}

/* k [p0, p0 + kc) x columns [j0, j0 + nc) of op(B): the panels that are
 * not read in place into NR-column panels at bp + jr * kc. A row-major B
 * is read row by row, each row once from start to end: panel by panel, the
 * rows ldb apart would each be a cache miss the prefetchers do not cover
 * (they stop at page boundaries). */
static void pack_b(float *bp, const CtSgemm *g, int64_t j0, int64_t nc, int64_t p0,
                   int64_t kc)
{
    if (!g->trans_b) {
        const bool skip_whole = b_in_place(g, NR);
        for (int64_t p = 0; p < kc; p++)
            pack_b_row(bp + p * NR, g->b + (p0 + p) * g->ldb + j0, nc, kc, skip_whole);
        return;
    }
    for (int64_t jr = 0; jr < nc; jr += NR, bp += NR * kc) {
        int64_t cols = min64(NR, nc - jr);
        if (cols < NR) memset(bp, 0, (size_t)(NR * kc) * sizeof *bp);
        pack_bt_panel(bp, g->b + (j0 + jr) * g->ldb + p0, g->ldb, cols, kc);
    }
}

/* Rows [i0, i0 + rows) of op(A) over k [p0, p0 + kc) into panels of MR
 * rows, element (i, p) of a panel at ap[p * MR + i], the last panel
 * zero-padded. A row-major A is transposed 8 x 8 in registers and stored
 * 8 floats per k, in order of k: with MR = 6 each store's last two lanes
 * spill into the next k's first two, which the next store (or the scalar
 * tail, or the next panel) overwrites; after the last panel they land in
 * the scratch's 8 spare floats. */
static void pack_a(float *ap, const CtSgemm *g, int64_t i0, int64_t rows, int64_t p0,
                   int64_t kc)
{
    for (int64_t ir = 0; ir < rows; ir += MR, ap += MR * kc) {
        const int r = (int)min64(MR, rows - ir);
        if (r < MR) memset(ap, 0, (size_t)(MR * kc) * sizeof *ap);
        if (g->trans_a) {
            const float *src = g->a + p0 * g->lda + i0 + ir;
            for (int64_t p = 0; p < kc; p++)
                for (int i = 0; i < r; i++) ap[p * MR + i] = src[p * g->lda + i];
            continue;
        }
        const float *src = g->a + (i0 + ir) * g->lda + p0;
        int64_t p8 = 0;
        if (r == MR)
            for (; p8 + 8 <= kc; p8 += 8)
                for (int q0 = 0; q0 < MR; q0 += 8) {
                    __m256 t[8];
                    for (int q = 0; q < 8; q++)
                        t[q] = q0 + q < MR ? _mm256_loadu_ps(src + (q0 + q) * g->lda + p8)
                                           : _mm256_setzero_ps();
                    transpose8(t);
                    for (int q = 0; q < 8; q++)
                        _mm256_storeu_ps(ap + (p8 + q) * MR + q0, t[q]);
                }
        for (int i = 0; i < r; i++)
            for (int64_t p = p8; p < kc; p++) ap[p * MR + i] = src[i * g->lda + p];
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

/* acc[0..R) <- the products of R rows of A's panel (element (i, p) at
 * a[i * rs + p * cs]) and B's panel (row p's NR floats at bp + p * bs)
 * over kc. Inlined with R a constant, so an edge panel of fewer than MR rows
 * issues only its own rows' FMAs (a 32-row C is 5 panels of 6 and one of 2). */
static inline __attribute__((always_inline)) void accumulate(const int R, int64_t kc,
                                                             const float *a, int64_t rs,
                                                             int64_t cs, const float *bp,
                                                             int64_t bs, VEC acc[MR][2])
{
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = VZERO();
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; p++, a += cs, bp += bs) {
        VEC b0 = VLOAD(bp), b1 = VLOAD(bp + VL);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            VEC ai = VSET1(a[i * rs]);
            acc[i][0] = VFMA(ai, b0, acc[i][0]);
            acc[i][1] = VFMA(ai, b1, acc[i][1]);
        }
    }
}

#define ACCUMULATE_CASE(R)                                                               \
    case R: accumulate(R, kc, a, rs, cs, bp, bs, acc); break;

/* The MR x NR tile at c (rows x cols valid) <- blend of the product of A's
 * panel and B's panel over kc (accumulate). */
static void micro(int64_t kc, const float *a, int64_t rs, int64_t cs, const float *bp,
                  int64_t bs, float *c, int64_t ldc, int rows, int cols, float alpha,
                  float beta)
{
    VEC acc[MR][2];
    for (int i = 0; i < rows; i++) { /* C's tile arrives while the FMAs run */
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
    switch (rows) {
        ACCUMULATE_CASE(1)
        ACCUMULATE_CASE(2)
        ACCUMULATE_CASE(3)
        ACCUMULATE_CASE(4)
        ACCUMULATE_CASE(5)
        ACCUMULATE_CASE(6)
#if MR > 6
        ACCUMULATE_CASE(7)
        ACCUMULATE_CASE(8)
#endif
    default: return;
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
    for (int i = 0; i < rows; i++) {
        VSTORE(tile[i], acc[i][0]);
        VSTORE(tile[i] + VL, acc[i][1]);
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            c[i * ldc + j] = blend(tile[i][j], alpha, beta, c + i * ldc + j);
}

#undef ACCUMULATE_CASE

/* The tile at row panel ir and column panel jr of the block: A's panel
 * from ap (packed, or only an edge panel packed there) or in place. */
static inline void tile(const CtSgemm *g, const float *ap, const float *bp, int64_t i0,
                        int64_t mc, int64_t j0, int64_t nc, int64_t p0, int64_t kc,
                        float beta, bool a_packed, int64_t ir, int64_t jr)
{
    const int rows = (int)min64(MR, mc - ir), cols = (int)min64(NR, nc - jr);
    const bool b_here = b_in_place(g, cols);
    const float *b = b_here ? g->b + p0 * g->ldb + j0 + jr : bp + jr * kc;
    const float *a = a_packed ? ap + ir * kc : ap;
    int64_t rs = 1, cs = MR;
    if (!a_packed && rows == MR) {
        rs = g->trans_a ? 1 : g->lda;
        cs = g->trans_a ? g->lda : 1;
        a = g->a + (i0 + ir) * rs + p0 * cs;
    }
    micro(kc, a, rs, cs, b, b_here ? g->ldb : NR, g->c + (i0 + ir) * g->ldc + j0 + jr,
          g->ldc, rows, cols, g->alpha, beta);
}

/* Every tile of rows [i0, i0 + mc) x columns [j0, j0 + nc) of C for k
 * [p0, p0 + kc), B's block packed at bp; ap: scratch for A's rows.
 *
 * Large products (a_packed: sgemm.h, SGEMM_PACK_A_MIN_*) pack A's rows
 * and go column panel by column panel: each B panel stays in L1 while
 * every row panel of A streams from L2. The others read A where it lies (only an edge
 * panel of fewer than MR rows is packed) and go row panel by row panel:
 * A's panel stays in L1 while B's block streams from L2, and packing A
 * would cost more than it saves on a few column panels or a short k. */
static void tiles(const CtSgemm *g, float *ap, const float *bp, int64_t i0, int64_t mc,
                  int64_t j0, int64_t nc, int64_t p0, int64_t kc, float beta,
                  bool a_packed)
{
    if (a_packed) {
        pack_a(ap, g, i0, mc, p0, kc);
        for (int64_t jr = 0; jr < nc; jr += NR)
            for (int64_t ir = 0; ir < mc; ir += MR)
                tile(g, ap, bp, i0, mc, j0, nc, p0, kc, beta, true, ir, jr);
        return;
    }
    if (mc % MR) pack_a(ap, g, i0 + mc / MR * MR, mc % MR, p0, kc);
    for (int64_t ir = 0; ir < mc; ir += MR)
        for (int64_t jr = 0; jr < nc; jr += NR)
            tile(g, ap, bp, i0, mc, j0, nc, p0, kc, beta, false, ir, jr);
}

bool SGEMM_FN(const CtSgemm *g)
{
    const int64_t m = g->m, n = g->n, k = g->k;
    const int64_t kblocks = (k + SGEMM_KC - 1) / SGEMM_KC;
    const int64_t kc_step = ((k + kblocks - 1) / kblocks + 7) / 8 * 8;
    const int64_t nc_max = (min64(n, SGEMM_NC) + NR - 1) / NR * NR;
    const int64_t mc_max = (min64(m, SGEMM_MC) + MR - 1) / MR * MR;
    float *bp =
        ct_cpu_gemm_scratch((size_t)((nc_max + mc_max) * kc_step + 8) * sizeof *bp);
    if (!bp) return false;
    float *ap = bp + nc_max * kc_step;
    const bool a_packed = m >= SGEMM_PACK_A_MIN_M && n >= SGEMM_PACK_A_MIN_N;
    for (int64_t j0 = 0; j0 < n; j0 += SGEMM_NC) {
        int64_t nc = min64(SGEMM_NC, n - j0);
        for (int64_t p0 = 0; p0 < k; p0 += kc_step) {
            int64_t kc = min64(kc_step, k - p0);
            pack_b(bp, g, j0, nc, p0, kc);
            for (int64_t i0 = 0; i0 < m; i0 += SGEMM_MC)
                tiles(g, ap, bp, i0, min64(SGEMM_MC, m - i0), j0, nc, p0, kc,
                      p0 == 0 ? g->beta : 1.0f, a_packed);
        }
    }
    return true;
}

#undef NR
