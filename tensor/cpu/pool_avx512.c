/* The AVX-512 2x2 max-pool kernel (pool_avx512.h): 16 outputs of a row at
 * a time. The two input rows are loaded as 32 floats each and split into
 * their even and odd columns (one permute each), which gives the four
 * candidates of 16 windows in four registers; the running maximum, the
 * NaN flag and the winner's position (0-3) then follow the scalar rules
 * lane by lane with masks, without branches. Compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq; called only when the CPU
 * has them. */
#include "pool_avx512.h"

#ifdef __AVX512F__
#include <immintrin.h>

static inline __mmask16 lanes(int64_t n)
{
    return n >= 16  ? (__mmask16)0xffff
           : n <= 0 ? (__mmask16)0
                    : (__mmask16)((1u << n) - 1);
}

/* The flat indices of 16 winners: base + 2 * lane + (code & 1) + (code >= 2
 * ? w : 0), stored for the lanes in `keep`. */
static void store_idx(int64_t *idx, __m512i code, int64_t base, int64_t w, __mmask16 keep)
{
    const __m512i two_lane = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i one = _mm512_set1_epi64(1), vw = _mm512_set1_epi64(w);
    for (int h = 0; h < 2; h++) {
        __m512i c = _mm512_cvtepi32_epi64(h ? _mm512_extracti64x4_epi64(code, 1)
                                            : _mm512_castsi512_si256(code));
        __m512i at = _mm512_add_epi64(_mm512_set1_epi64(base + 16 * h), two_lane);
        at = _mm512_add_epi64(at, _mm512_and_si512(c, one));
        __mmask8 lower = _mm512_cmpge_epi64_mask(c, _mm512_set1_epi64(2));
        at = _mm512_mask_add_epi64(at, lower, at, vw);
        _mm512_mask_storeu_epi64(idx + 8 * h, (__mmask8)(keep >> (8 * h)), at);
    }
}

void ct_cpu_max_pool_2x2_f32_avx512(const float *x, int64_t w, int64_t oh, int64_t ow,
                                    float *y, int64_t *idx)
{
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int64_t r = 0; r < oh; r++) {
        const float *r0 = x + 2 * r * w, *r1 = r0 + w;
        for (int64_t c0 = 0; c0 < ow; c0 += 16) {
            const int64_t n = ow - c0 < 16 ? ow - c0 : 16;
            const __mmask16 lo = lanes(2 * n), hi = lanes(2 * n - 16);
            __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * c0);
            __m512 a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * c0 + 16);
            __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * c0);
            __m512 b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * c0 + 16);
            const __m512 v[4] = {_mm512_permutex2var_ps(a0, even, a1),
                                 _mm512_permutex2var_ps(a0, odd, a1),
                                 _mm512_permutex2var_ps(b0, even, b1),
                                 _mm512_permutex2var_ps(b0, odd, b1)};
            __m512 m = v[0];
            __m512i code = _mm512_setzero_si512();
            __mmask16 nan = _mm512_cmp_ps_mask(m, m, _CMP_UNORD_Q);
            for (int e = 1; e < 4; e++) {
                __mmask16 vn = _mm512_cmp_ps_mask(v[e], v[e], _CMP_UNORD_Q);
                __mmask16 gt = _mm512_cmp_ps_mask(v[e], m, _CMP_GT_OQ);
                __mmask16 take = (__mmask16)(~nan & (gt | vn));
                m = _mm512_mask_mov_ps(m, take, v[e]);
                code = _mm512_mask_mov_epi32(code, take, _mm512_set1_epi32(e));
                nan |= vn;
            }
            const __mmask16 keep = lanes(n);
            _mm512_mask_storeu_ps(y + r * ow + c0, keep, m);
            if (idx) store_idx(idx + r * ow + c0, code, 2 * r * w + 2 * c0, w, keep);
        }
    }
}
#else
/* Not an x86-64 build: ct_cpu_avx512_native() is false and this never runs. */
void ct_cpu_max_pool_2x2_f32_avx512(const float *x, int64_t w, int64_t oh, int64_t ow,
                                    float *y, int64_t *idx)
{
    (void)x, (void)w, (void)oh, (void)ow, (void)y, (void)idx;
}
#endif
