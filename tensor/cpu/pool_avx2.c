/* The AVX2 max-pool kernels (pool_avx2.h), 8 outputs of a row at a time.
 *
 * 2x2, stride 2: pool_avx512.c's method on 8 lanes. The two input rows are loaded
 * as 16 floats each and split into their even and odd columns (a shuffle
 * and a permute each), which gives the four candidates of 8 windows in four
 * registers; the running maximum, the NaN flag and the winner's position
 * (0-3) follow the scalar rules lane by lane with blends, without
 * branches.
 *
 * Any window with a column stride of 1 or 2 (ResNet's 3x3 stride-2 padded
 * pool): each window row and column offset j gives one candidate per lane,
 * read with masked loads (a stride of 2 takes the even half of 16 floats);
 * columns outside the input read as -INF and so are never taken, as the
 * scalar loop never visits them. The winner's flat index is tracked in
 * 32 bits (planes below 2^31 elements, checked by the caller).
 *
 * Masked loads and stores are used only where a row ends inside a vector:
 * on AMD's Zen cores they cost far more than plain ones (the 2x2 kernel
 * spent 10 % of a BasicNet step on Zen 3 in them, about 35 ns a vector).
 *
 * Compiled with -mavx2 -mfma; called only when the CPU has them. */
#include "pool_avx2.h"

#ifdef __AVX2__
#include <immintrin.h>
#include <math.h>

/* Lanes [0, n) of 8 (32-bit) as a mask vector. */
static inline __m256i lanes8(int64_t n)
{
    const int v = n <= 0 ? 0 : n >= 8 ? 8 : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(v),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Lanes [0, n) of 4 (64-bit) as a mask vector. */
static inline __m256i lanes4(int64_t n)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}

/* The 8 floats at p, lanes [cnt, 8) read as 0 (not read). */
static inline __m256 load8(const float *p, int64_t cnt)
{
    if (cnt >= 8) return _mm256_loadu_ps(p);
    return cnt > 0 ? _mm256_maskload_ps(p, lanes8(cnt)) : _mm256_setzero_ps();
}

/* The 8 floats at p in the lanes of `in` (each all-ones or zero), 0 in the
 * others (not read). */
static inline __m256 load_in(const float *p, __m256i in)
{
    return _mm256_movemask_ps(_mm256_castsi256_ps(in)) == 0xff
               ? _mm256_loadu_ps(p)
               : _mm256_maskload_ps(p, in);
}

/* Lanes [0, n) of v to p. */
static inline void store8(float *p, __m256 v, int64_t n)
{
    if (n >= 8)
        _mm256_storeu_ps(p, v);
    else if (n > 0)
        _mm256_maskstore_ps(p, lanes8(n), v);
}

/* Lanes [0, n) of the four 64-bit lanes of v to p. */
static inline void store4_i64(int64_t *p, __m256i v, int64_t n)
{
    if (n >= 4)
        _mm256_storeu_si256((__m256i *)p, v);
    else if (n > 0)
        _mm256_maskstore_epi64((long long *)p, lanes4(n), v);
}

/* The even and odd elements of the 16 floats at p (cnt valid, the rest
 * read as 0). */
static inline void split(const float *p, int64_t cnt, __m256 *even, __m256 *odd)
{
    __m256 a = load8(p, cnt), b = load8(p + 8, cnt - 8);
    /* per 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6, then 64-bit pairs 0 2 1 3 */
    __m256 e = _mm256_shuffle_ps(a, b, 0x88), o = _mm256_shuffle_ps(a, b, 0xdd);
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xd8));
}

/* The flat indices of 8 winners: base + 2 * lane + (code & 1) + (code >= 2
 * ? w : 0), stored for lanes [0, n). */
static void store_idx(int64_t *idx, __m256i code, int64_t base, int64_t w, int64_t n)
{
    const __m256i two_lane = _mm256_setr_epi64x(0, 2, 4, 6), one = _mm256_set1_epi64x(1);
    for (int h = 0; h < 2; h++) {
        __m256i c = _mm256_cvtepi32_epi64(h ? _mm256_extracti128_si256(code, 1)
                                            : _mm256_castsi256_si128(code));
        __m256i at = _mm256_add_epi64(_mm256_set1_epi64x(base + 8 * h), two_lane);
        at = _mm256_add_epi64(at, _mm256_and_si256(c, one));
        __m256i lower =
            _mm256_cmpgt_epi64(c, one); /* code >= 2: the window's second row */
        at = _mm256_add_epi64(at, _mm256_and_si256(lower, _mm256_set1_epi64x(w)));
        store4_i64(idx + 4 * h, at, n - 4 * h);
    }
}

void ct_cpu_max_pool_2x2_f32_avx2(const float *x, int64_t w, int64_t oh, int64_t ow,
                                  float *y, int64_t *idx)
{
    for (int64_t r = 0; r < oh; r++) {
        const float *r0 = x + 2 * r * w, *r1 = r0 + w;
        for (int64_t c0 = 0; c0 < ow; c0 += 8) {
            const int64_t n = ow - c0 < 8 ? ow - c0 : 8;
            __m256 v[4];
            split(r0 + 2 * c0, 2 * n, &v[0], &v[1]);
            split(r1 + 2 * c0, 2 * n, &v[2], &v[3]);
            __m256 m = v[0];
            __m256i code = _mm256_setzero_si256();
            __m256 nan = _mm256_cmp_ps(m, m, _CMP_UNORD_Q);
            for (int e = 1; e < 4; e++) {
                __m256 vn = _mm256_cmp_ps(v[e], v[e], _CMP_UNORD_Q);
                __m256 gt = _mm256_cmp_ps(v[e], m, _CMP_GT_OQ);
                __m256 take = _mm256_andnot_ps(nan, _mm256_or_ps(gt, vn));
                m = _mm256_blendv_ps(m, v[e], take);
                code = _mm256_blendv_epi8(code, _mm256_set1_epi32(e),
                                          _mm256_castps_si256(take));
                nan = _mm256_or_ps(nan, vn);
            }
            store8(y + r * ow + c0, m, n);
            if (idx) store_idx(idx + r * ow + c0, code, 2 * r * w + 2 * c0, w, n);
        }
    }
}

/* Lanes whose column (32-bit lanes of cols) lies in [0, w). */
static inline __m256i cols_in(__m256i cols, int64_t w)
{
    const __m256i below = _mm256_cmpgt_epi32(_mm256_setzero_si256(), cols);
    return _mm256_andnot_si256(below,
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)w), cols));
}

/* The candidates at columns cols = c + s * lane of row (s = 1 or 2): -INF
 * where the column lies outside [0, w). */
static inline __m256 candidates(const float *row, int64_t c, int s, int64_t w,
                                __m256i cols)
{
    const __m256i in = cols_in(cols, w);
    __m256 v;
    if (s == 1) {
        v = load_in(row + c, in);
    } else {
        const __m256i e = _mm256_add_epi32(_mm256_set1_epi32((int)c),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 a = load_in(row + c, cols_in(e, w));
        __m256 b =
            load_in(row + c + 8, cols_in(_mm256_add_epi32(e, _mm256_set1_epi32(8)), w));
        __m256 ev = _mm256_shuffle_ps(a, b, 0x88);
        v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8));
    }
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(in));
}

/* Stores lanes [0, n) of the 32-bit indices at as 64-bit ones. */
static void store_at(int64_t *idx, __m256i at, int64_t n)
{
    for (int h = 0; h < 2; h++) {
        __m256i q = _mm256_cvtepi32_epi64(h ? _mm256_extracti128_si256(at, 1)
                                            : _mm256_castsi256_si128(at));
        store4_i64(idx + 4 * h, q, n - 4 * h);
    }
}

/* Outputs [ow0, ow0 + n) of output row oh (n <= 8). */
static void max_window8(const CtPool2dParams *p, const float *x, int64_t oh, int64_t ow0,
                        int64_t n, float *y, int64_t *idx)
{
    const int64_t h0 = oh * p->sh - p->ph, c0 = ow0 * p->sw - p->pw;
    const int64_t i0 = h0 > 0 ? h0 : 0, i1 = h0 + p->kh < p->h ? h0 + p->kh : p->h;
    const __m256i start =
        _mm256_add_epi32(_mm256_set1_epi32((int)c0),
                         _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(p->sw)));
    /* as the scalar loop: -INF, the window's first element until taken */
    __m256 m = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
    __m256i best = _mm256_add_epi32(_mm256_set1_epi32((int)(i0 * p->w)),
                                    _mm256_max_epi32(start, _mm256_setzero_si256()));
    for (int64_t ih = i0; ih < i1; ih++) {
        const float *row = x + ih * p->w;
        const __m256i row_at = _mm256_set1_epi32((int)(ih * p->w));
        for (int j = 0; j < p->kw; j++) {
            const __m256i cols = _mm256_add_epi32(start, _mm256_set1_epi32(j));
            const __m256 v = candidates(row, c0 + j, p->sw, p->w, cols);
            const __m256 vn = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
            const __m256 gt = _mm256_cmp_ps(v, m, _CMP_GT_OQ);
            const __m256 take = _mm256_andnot_ps(nan, _mm256_or_ps(gt, vn));
            m = _mm256_blendv_ps(m, v, take);
            best = _mm256_blendv_epi8(best, _mm256_add_epi32(row_at, cols),
                                      _mm256_castps_si256(take));
            nan = _mm256_or_ps(nan, vn);
        }
    }
    store8(y + oh * p->ow + ow0, m, n);
    if (idx) store_at(idx + oh * p->ow + ow0, best, n);
}

void ct_cpu_max_pool_f32_avx2(const CtPool2dParams *p, const float *x, float *y,
                              int64_t *idx)
{
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow0 = 0; ow0 < p->ow; ow0 += 8)
            max_window8(p, x, oh, ow0, p->ow - ow0 < 8 ? p->ow - ow0 : 8, y, idx);
}
#else
/* Not an x86-64 build: ct_cpu_avx2_native() is false and this never runs. */
void ct_cpu_max_pool_2x2_f32_avx2(const float *x, int64_t w, int64_t oh, int64_t ow,
                                  float *y, int64_t *idx)
{
    (void)x, (void)w, (void)oh, (void)ow, (void)y, (void)idx;
}

void ct_cpu_max_pool_f32_avx2(const CtPool2dParams *p, const float *x, float *y,
                              int64_t *idx)
{
    (void)p, (void)x, (void)y, (void)idx;
}
#endif
