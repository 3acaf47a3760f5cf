/* Private to the native bf16 GEMM engines (gemm_bf16_avx512.c,
 * gemm_bf16_amx.c): packing f32 operands into bf16 pairs.
 *
 * Both engines multiply pairs of bf16 values along k (VDPBF16PS, TDPBF16PS),
 * so an operand (rows, k) is packed as 32-bit pairs: pair p of row r holds
 * the row's elements 2p (low half) and 2p + 1 (high half), rounded to
 * nearest even (VCVTNEPS2BF16). It is packed in panels of R rows, each
 * holding kst >= kp = ceil(k / 2) pairs per row (pairs from kp on, an odd
 * k's last high half and rows past the operand's end are zeros), in one of
 * two layouts:
 *   rows: pair p of panel row r at panel[r * kst + p] (a row's pairs
 *         contiguous);
 *   cols: pair p of panel row r at panel[p * R + r] (a pair's rows
 *         contiguous: a k-contiguous operand is transposed 16 x 16 in
 *         registers).
 * Panel i starts at base + i * R * kst.
 *
 * Included by files compiled with -mavx512f -mavx512bw -mavx512vl
 * -mavx512bf16 only. */
#ifndef CTRAINER_TENSOR_CPU_GEMM_BF16_PACK_H
#define CTRAINER_TENSOR_CPU_GEMM_BF16_PACK_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline __mmask16 bf16_lanes(int64_t n)
{
    return n >= 16  ? (__mmask16)0xffff
           : n <= 0 ? (__mmask16)0
                    : (__mmask16)((1u << n) - 1);
}

/* 16 f32 pairs (x[2q], x[2q+1]) of 32 consecutive floats (cnt valid) as bf16
 * pairs. */
static inline __m512i bf16_pairs_of_run(const float *x, int64_t cnt)
{
    __m512 lo = _mm512_maskz_loadu_ps(bf16_lanes(cnt), x);
    __m512 hi = _mm512_maskz_loadu_ps(bf16_lanes(cnt - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* 16 pairs (x0[q], x1[q]) from two runs of cnt valid floats (x1 may be
 * NULL: zeros). */
static inline __m512i bf16_pairs_of_rows(const float *x0, const float *x1, int64_t cnt)
{
    __mmask16 mk = bf16_lanes(cnt);
    __m512i v0 =
        _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, x0)));
    if (!x1) return v0;
    __m512i v1 =
        _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, x1)));
    return _mm512_or_si512(v0, _mm512_slli_epi32(v1, 16));
}

/* Transposes the 16 x 16 dwords in r (row i in r[i]) in place. */
static inline void bf16_transpose16(__m512i r[16])
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

/* One panel from a k-contiguous operand (element (r, l) at src[r * rs + l]),
 * cols layout: 16 rows x 16 pairs at a time, transposed. R is a multiple
 * of 16. */
static inline void bf16_pack_kc_cols(uint32_t *d, const float *src, int64_t rs,
                                     int64_t r0, int64_t rows, int64_t k, int R,
                                     int64_t kst)
{
    for (int r16 = 0; r16 < R; r16 += 16)
        for (int64_t p0 = 0; p0 < kst; p0 += 16) {
            __m512i v[16];
            for (int q = 0; q < 16; q++) {
                int64_t r = r0 + r16 + q;
                v[q] = r < rows ? bf16_pairs_of_run(src + r * rs + 2 * p0, k - 2 * p0)
                                : _mm512_setzero_si512();
            }
            bf16_transpose16(v);
            int64_t c_n = kst - p0 < 16 ? kst - p0 : 16;
            for (int64_t c = 0; c < c_n; c++)
                _mm512_storeu_si512(d + (p0 + c) * R + r16, v[c]);
        }
}

/* One panel from a k-contiguous operand, rows layout. */
static inline void bf16_pack_kc_rows(uint32_t *d, const float *src, int64_t rs,
                                     int64_t r0, int64_t rows, int64_t k, int R,
                                     int64_t kst)
{
    for (int r = 0; r < R; r++)
        for (int64_t p0 = 0; p0 < kst; p0 += 16) {
            __m512i v = r0 + r < rows
                            ? bf16_pairs_of_run(src + (r0 + r) * rs + 2 * p0, k - 2 * p0)
                            : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(d + r * kst + p0, bf16_lanes(kst - p0), v);
        }
}

/* The 16 pairs p of rows [r, r + 16) from a rows-contiguous operand
 * (element (r, l) at src[r + l * ks]); zeros from pair kp on. */
static inline __m512i bf16_pair_of_rows(const float *src, int64_t ks, int64_t r,
                                        int64_t rows, int64_t k, int64_t p)
{
    if (2 * p >= k) return _mm512_setzero_si512();
    const float *x0 = src + 2 * p * ks + r;
    return bf16_pairs_of_rows(x0, 2 * p + 1 < k ? x0 + ks : NULL, rows - r);
}

/* One panel from a rows-contiguous operand, cols layout. */
static inline void bf16_pack_rc_cols(uint32_t *d, const float *src, int64_t ks,
                                     int64_t r0, int64_t rows, int64_t k, int R,
                                     int64_t kst)
{
    for (int64_t p = 0; p < kst; p++)
        for (int r = 0; r < R; r += 16)
            _mm512_mask_storeu_epi32(d + p * R + r, bf16_lanes(R - r),
                                     bf16_pair_of_rows(src, ks, r0 + r, rows, k, p));
}

/* One panel from a rows-contiguous operand, rows layout: 16 pairs x 16 rows
 * at a time, transposed. R is a multiple of 16. */
static inline void bf16_pack_rc_rows(uint32_t *d, const float *src, int64_t ks,
                                     int64_t r0, int64_t rows, int64_t k, int R,
                                     int64_t kst)
{
    for (int r16 = 0; r16 < R; r16 += 16)
        for (int64_t p0 = 0; p0 < kst; p0 += 16) {
            __m512i v[16];
            for (int q = 0; q < 16; q++)
                v[q] = bf16_pair_of_rows(src, ks, r0 + r16, rows, k, p0 + q);
            bf16_transpose16(v);
            for (int r = 0; r < 16; r++)
                _mm512_mask_storeu_epi32(d + (r16 + r) * kst + p0, bf16_lanes(kst - p0),
                                         v[r]);
        }
}

typedef enum Bf16Layout {
    BF16_ROWS,
    BF16_COLS,
    BF16_FREE /* rows for a k-contiguous operand, else cols: no transposition */
} Bf16Layout;

/* A packed operand: pair p of panel row r at panel + r * rstride +
 * p * pstride, panel i at base + i * R * kst. */
typedef struct Bf16Panels {
    uint32_t *base;
    int64_t rstride, pstride;
} Bf16Panels;

/* Packs the row panels [i0, i1) of a (rows, k) operand with element (r, l)
 * at src[r * rs + l * ks] (rs == 1 or ks == 1) into dst, and says where
 * its pairs are (the same for any [i0, i1)). */
static inline Bf16Panels bf16_pack(uint32_t *dst, const float *src, int64_t rs,
                                   int64_t ks, int64_t rows, int64_t k, int R,
                                   int64_t kst, Bf16Layout layout, int64_t i0, int64_t i1)
{
    bool kc = ks == 1 && !(rs == 1 && rows == 1);
    bool by_rows = layout == BF16_ROWS || (layout == BF16_FREE && kc);
    Bf16Panels pn = {dst, by_rows ? kst : 1, by_rows ? 1 : R};
    for (int64_t i = i0; i < i1; i++) {
        int64_t r0 = i * R;
        uint32_t *d = dst + r0 * kst;
        if (kc && by_rows)
            bf16_pack_kc_rows(d, src, rs, r0, rows, k, R, kst);
        else if (kc)
            bf16_pack_kc_cols(d, src, rs, r0, rows, k, R, kst);
        else if (by_rows)
            bf16_pack_rc_rows(d, src, ks, r0, rows, k, R, kst);
        else
            bf16_pack_rc_cols(d, src, ks, r0, rows, k, R, kst);
    }
    return pn;
}

#endif
