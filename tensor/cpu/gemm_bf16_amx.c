/* The AMX engine of the bf16-autocast GEMM (gemm_bf16.h), for CPUs with
 * AMX-BF16 (Intel Xeon from Sapphire Rapids on).
 *
 * TDPBF16PS adds the product of a 16 x 32 bf16 tile of A (16 rows of 16
 * pairs along k) and a 32 x 16 bf16 tile of B (16 rows of pairs, each row
 * the 16 columns' pair p) into a 16 x 16 f32 tile of C: 8192 multiply-adds
 * per instruction, 3.6 times the f32 FMA rate of a Sapphire Rapids core
 * (bench_gemm_bf16's peaks) with tiles reloaded as below. The
 * operands are packed as in gemm_bf16_pack.h, padded with zero pairs to a
 * whole number of tile steps (16 pairs):
 *   A: panels of 32 rows, rows layout (a tile is 16 rows, kst pairs apart);
 *   B: panels of 32 columns, cols layout (a tile is 16 pair rows of 128
 *      bytes, either half of the panel's columns).
 * A 32 x 32 block of C lives in four tile registers over the whole k, in
 * tile steps in order; it is then stored to a buffer and written to C with
 * alpha and beta. Every element of C is thus summed over k in one order
 * whatever the split, so C is bitwise the same for any thread count.
 *
 * Loops: pool items (workers.h) pack B's panels and A's panels, then take
 * whole column panels (each visiting every row panel while its B panel stays
 * in L2), or whole row panels when C has fewer than MIN_COL_ITEMS column
 * panels. Each item loads the tile configuration and releases the tiles
 * when done.
 *
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mamx-tile
 * -mamx-bf16; called only when the CPU has them and the kernel allows the
 * process AMX state (ct_cpu_bf16_engine). */
#include "gemm_bf16.h"

#if defined(__AVX512BF16__) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include "gemm_bf16_pack.h"
#include "workers.h"

#define PANEL         32 /* rows of an A panel, columns of a B panel */
#define STEP          16 /* pairs per tile step */
#define MIN_COL_ITEMS 4

/* Palette 1; tiles 0-3: C (16 rows of 16 f32), 4-5: A (16 rows of 16
 * pairs), 6-7: B (16 pair rows of 16 columns); 64 bytes per row each. */
typedef struct __attribute__((packed, aligned(64))) TileConfig {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

static const TileConfig CONFIG = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

typedef struct Packed {
    const CtGemmBf16 *g;
    uint32_t *a, *b;
    int64_t kst, n_it, n_jt;
} Packed;

/* Pool item: B's column panel i, or A's row panel i - n_jt. */
static void pack_item(void *ctx, int64_t i, int slot)
{
    (void)slot;
    const Packed *pk = ctx;
    const CtGemmBf16 *g = pk->g;
    if (i < pk->n_jt) /* column j of op(B) as a row: B is (k, n), or (n, k) */
        bf16_pack(pk->b, g->b, g->trans_b ? g->ldb : 1, g->trans_b ? 1 : g->ldb, g->n,
                  g->k, PANEL, pk->kst, BF16_COLS, i, i + 1);
    else /* op(A)(i, l): A is (m, k), or (k, m) */
        bf16_pack(pk->a, g->a, g->trans_a ? 1 : g->lda, g->trans_a ? g->lda : 1, g->m,
                  g->k, PANEL, pk->kst, BF16_ROWS, i - pk->n_jt, i - pk->n_jt + 1);
}

/* C's block (row panel it, column panel jt) = alpha * op(A) op(B) + beta * C,
 * through buf (PANEL x PANEL floats). */
static void block(const Packed *pk, int64_t jt, int64_t it, float *buf)
{
    const CtGemmBf16 *g = pk->g;
    const uint32_t *a = pk->a + it * PANEL * pk->kst, *b = pk->b + jt * PANEL * pk->kst;
    const int64_t lda = pk->kst * 4; /* bytes between an A panel's rows */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p = 0; p < pk->kst; p += STEP) {
        _tile_loadd(4, a + p, lda);
        _tile_loadd(5, a + 16 * pk->kst + p, lda);
        _tile_loadd(6, b + p * PANEL, PANEL * 4);
        _tile_loadd(7, b + p * PANEL + 16, PANEL * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, buf, PANEL * 4);
    _tile_stored(1, buf + 16, PANEL * 4);
    _tile_stored(2, buf + 16 * PANEL, PANEL * 4);
    _tile_stored(3, buf + 16 * PANEL + 16, PANEL * 4);

    int64_t mr = g->m - it * PANEL < PANEL ? g->m - it * PANEL : PANEL;
    int64_t nr = g->n - jt * PANEL < PANEL ? g->n - jt * PANEL : PANEL;
    const __m512 va = _mm512_set1_ps(g->alpha), vb = _mm512_set1_ps(g->beta);
    float *c = g->c + it * PANEL * (int64_t)g->ldc + jt * PANEL;
    for (int64_t i = 0; i < mr; i++)
        for (int h = 0; h < PANEL; h += 16) {
            __mmask16 mk = bf16_lanes(nr - h);
            if (!mk) break;
            float *ci = c + i * g->ldc + h;
            __m512 r = _mm512_mul_ps(va, _mm512_load_ps(buf + i * PANEL + h));
            if (g->beta != 0) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk, ci), r);
            _mm512_mask_storeu_ps(ci, mk, r);
        }
}

/* Pool item: column panel jt, every row panel. */
static void column_panel(void *ctx, int64_t jt, int slot)
{
    (void)slot;
    const Packed *pk = ctx;
    float buf[PANEL * PANEL] __attribute__((aligned(64)));
    _tile_loadconfig(&CONFIG);
    for (int64_t it = 0; it < pk->n_it; it++) block(pk, jt, it, buf);
    _tile_release();
}

/* Pool item: row panel it, every column panel. */
static void row_panel(void *ctx, int64_t it, int slot)
{
    (void)slot;
    const Packed *pk = ctx;
    float buf[PANEL * PANEL] __attribute__((aligned(64)));
    _tile_loadconfig(&CONFIG);
    for (int64_t jt = 0; jt < pk->n_jt; jt++) block(pk, jt, it, buf);
    _tile_release();
}

void ct_cpu_gemm_bf16_amx(const CtGemmBf16 *g, int nt)
{
    int64_t kp = ((int64_t)g->k + 1) / 2;
    Packed pk = {.g = g,
                 .kst = (kp + STEP - 1) / STEP * STEP,
                 .n_it = ((int64_t)g->m + PANEL - 1) / PANEL,
                 .n_jt = ((int64_t)g->n + PANEL - 1) / PANEL};
    size_t na = (size_t)(pk.n_it * PANEL * pk.kst),
           nb = (size_t)(pk.n_jt * PANEL * pk.kst);
    pk.a = ct_cpu_gemm_scratch((na + nb) * sizeof *pk.a);
    if (!pk.a) {
        ct_cpu_gemm_bf16_naive(g);
        return;
    }
    pk.b = pk.a + na;
    ct_workers_run(pk.n_jt + pk.n_it, nt, pack_item, &pk);
    if (pk.n_jt >= MIN_COL_ITEMS || pk.n_it == 1)
        ct_workers_run(pk.n_jt, nt, column_panel, &pk);
    else
        ct_workers_run(pk.n_it, nt, row_panel, &pk);
}
#else
/* No AMX in this build: ct_cpu_bf16_engine() never picks this engine. */
void ct_cpu_gemm_bf16_amx(const CtGemmBf16 *g, int nt)
{
    (void)nt;
    ct_cpu_gemm_bf16_naive(g);
}
#endif
