/* Dtype sizes, names and half-precision conversions. */
#include <math.h>
#include <string.h>

#include "internal.h"

size_t ct_dtype_size(CtDType dt)
{
    static const size_t sizes[CT_DTYPE_COUNT] = {4, 8, 2, 2, 8, 4, 1, 1};
    return (unsigned)dt < CT_DTYPE_COUNT ? sizes[dt] : 0;
}

const char *ct_dtype_name(CtDType dt)
{
    static const char *names[CT_DTYPE_COUNT] = {"f32", "f64", "bf16", "f16",
                                                "i64", "i32", "u8",   "bool"};
    return (unsigned)dt < CT_DTYPE_COUNT ? names[dt] : "invalid-dtype";
}

bool ct_dtype_is_float(CtDType dt)
{
    return dt == CT_F32 || dt == CT_F64 || dt == CT_BF16 || dt == CT_F16;
}

bool ct_int_value_fits(CtDType dt, double v)
{
    double t = trunc(v);
    switch (dt) {
    case CT_I64: return t >= -9223372036854775808.0 && t < 9223372036854775808.0;
    case CT_I32: return t >= -2147483648.0 && t <= 2147483647.0;
    case CT_U8: return t >= 0 && t <= 255;
    default: return true; /* NaN fails the comparisons above */
    }
}

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t ct_f32_to_bf16(float x)
{
    return ct_bf16_round(x);
}

float ct_bf16_to_f32(uint16_t x)
{
    return ct_bf16_widen(x);
}

uint16_t ct_f32_to_f16(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {
        /* subnormal or zero in f16: value = a * 2^24 in units of 2^-24 */
        if (a < 0x33000000u) return sign; /* below half the smallest subnormal */
        uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        /* value = mant * 2^(e-150); in f16 subnormal units of 2^-24 that is
         * mant * 2^(e-126): shift right by 126 - e (14..24 here). */
        int shift = 126 - (int)(a >> 23);
        uint32_t q = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias exponent 127 -> 15, round mantissa 23 -> 10 bits */
    uint32_t r = a - 0x38000000u; /* subtract (127-15) << 23 */
    uint32_t lsb = (r >> 13) & 1u;
    r += 0xfffu + lsb;
    return sign | (uint16_t)(r >> 13);
}

float ct_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0) return bits_f32(sign);
        float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
