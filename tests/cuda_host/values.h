/* Buffer comparison for bodies whose NaNs may differ in sign or payload.
 *
 * When both operands of an arithmetic operation are NaN, which one the
 * result carries depends on the order the compiler gives the operands (on
 * x86 and on the GPU alike), so two correct compilations of one formula may
 * return NaNs with different bits. Everything else must match bit for bit. */
#ifndef CTRAINER_TESTS_CUDA_HOST_VALUES_H
#define CTRAINER_TESTS_CUDA_HOST_VALUES_H

#include "harness.h"

/* Whether element i of a dt buffer is a NaN. */
static inline bool ch_is_nan(const unsigned char *p, CtDType dt)
{
    uint64_t u = 0;
    memcpy(&u, p, ct_dtype_size(dt));
    switch (dt) {
    case CT_F32: return (u & 0x7fffffffu) > 0x7f800000u;
    case CT_F64: return (u & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    case CT_BF16: return (u & 0x7fffu) > 0x7f80u;
    case CT_F16: return (u & 0x7fffu) > 0x7c00u;
    default: return false;
    }
}

/* Asserts two buffers of one dtype and size hold the same bytes, except
 * that a NaN matches any NaN. */
#define ch_assert_same_values(want, got, what)                                           \
    ch_assert_same_values_at(__LINE__, (want), (got), (what))
static inline void ch_assert_same_values_at(int line, const Tensor *want,
                                            const Tensor *got, const char *what)
{
    CtDType dt = tensor_dtype(want);
    size_t es = ct_dtype_size(dt);
    int64_t n = tensor_numel(want);
    ck_assert_int_eq(n, tensor_numel(got));
    const unsigned char *w = (const unsigned char *)ct_ptr(want);
    const unsigned char *g = (const unsigned char *)ct_ptr(got);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *a = w + i * es, *b = g + i * es;
        bool same = memcmp(a, b, es) == 0 || (ch_is_nan(a, dt) && ch_is_nan(b, dt));
        if (!same)
            ck_abort_msg("line %d: %s: element %lld of %lld differs", line, what,
                         (long long)i, (long long)n);
    }
}

#endif
