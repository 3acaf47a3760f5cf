/* The AVX2 2x2 max-pool kernel (pool_avx2.h): 8 outputs of a row at a
 * time, pool_avx512.c's method on 8 lanes. The two input rows are loaded
 * as 16 floats each and split into their even and odd columns (a shuffle
 * and a permute each), which gives the four candidates of 8 windows in four
 * registers; the running maximum, the NaN flag and the winner's position
 * (0-3) follow the scalar rules lane by lane with blends, without
 * branches. Compiled with -mavx2 -mfma; called only when the CPU has them. */
#include "pool_avx2.h"

#ifdef __AVX2__
#include <immintrin.h>

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

/* The even and odd elements of the 16 floats at p (cnt valid, the rest
 * read as 0). */
static inline void split(const float *p, int64_t cnt, __m256 *even, __m256 *odd)
{
    __m256 a = _mm256_maskload_ps(p, lanes8(cnt));
    __m256 b = _mm256_maskload_ps(p + 8, lanes8(cnt - 8));
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
        _mm256_maskstore_epi64((long long *)(idx + 4 * h), lanes4(n - 4 * h), at);
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
            _mm256_maskstore_ps(y + r * ow + c0, lanes8(n), m);
            if (idx) store_idx(idx + r * ow + c0, code, 2 * r * w + 2 * c0, w, n);
        }
    }
}
#else
/* Not an x86-64 build: ct_cpu_avx2_native() is false and this never runs. */
void ct_cpu_max_pool_2x2_f32_avx2(const float *x, int64_t w, int64_t oh, int64_t ow,
                                  float *y, int64_t *idx)
{
    (void)x, (void)w, (void)oh, (void)ow, (void)y, (void)idx;
}
#endif
