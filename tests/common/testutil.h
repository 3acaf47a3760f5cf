/* Helpers shared by the check suites. */
#ifndef CTRAINER_TESTUTIL_H
#define CTRAINER_TESTUTIL_H

#include <check.h>
#include <string.h>

#include "ctrainer/tensor.h"

/* Runs a suite and returns the process exit status (0 when all passed). */
int tu_run(Suite *s);

/* Persistent CPU tensor from doubles, converted to dt. Free with tensor_free. */
Tensor *tu_tensor(CtDType dt, int ndim, const int64_t *shape, const double *v);
/* Persistent f64 CPU tensor of deterministic pseudo-random values in
 * [lo, hi), from `seed`; requires grad when `grad` is set. */
Tensor *tu_rand64(int ndim, const int64_t *shape, double lo, double hi, unsigned seed,
                  bool grad);

/* Asserts t's elements (row-major, read as f64) equal expect[] within
 * atol + rtol*|expect|, and that it has n elements. */
#define tu_assert_values(t, expect, n, atol, rtol)                                       \
    tu_assert_values_at(__FILE__, __LINE__, (t), (expect), (n), (atol), (rtol))
void tu_assert_values_at(const char *file, int line, const Tensor *t,
                         const double *expect, int64_t n, double atol, double rtol);

/* Asserts t's shape. */
#define tu_assert_shape(t, ndim, ...)                                                    \
    tu_assert_shape_at(__FILE__, __LINE__, (t), (ndim), (const int64_t[]){__VA_ARGS__})
void tu_assert_shape_at(const char *file, int line, const Tensor *t, int ndim,
                        const int64_t *shape);

/* Asserts a and b (any strides) have one dtype and shape and hold the same
 * bytes, element by element; `what` names them in the failure. Call it
 * inside a scope (it may make contiguous copies). */
#define tu_assert_same_bits(what, a, b)                                                  \
    tu_assert_same_bits_at(__FILE__, __LINE__, (what), (a), (b))
void tu_assert_same_bits_at(const char *file, int line, const char *what, Tensor *a,
                            Tensor *b);

/* Asserts that the last error has status st and contains `needle`, then
 * clears it. */
#define tu_assert_error(st, needle) tu_assert_error_at(__FILE__, __LINE__, (st), (needle))
void tu_assert_error_at(const char *file, int line, CtStatus st, const char *needle);

/* Finite-difference gradient check in f64.
 * fn builds the output from inputs[] (ctx is passed through). Inputs must be
 * contiguous persistent CPU f64 tensors; those that require grad are checked
 * element by element with central differences of <fn(x), g> for a fixed
 * random g. Asserts |analytic - numeric| <= atol + rtol*|numeric|. */
typedef Tensor *(*TuGradFn)(Tensor **inputs, void *ctx);
#define tu_gradcheck(name, fn, ctx, n, inputs)                                           \
    tu_gradcheck_at(__FILE__, __LINE__, (name), (fn), (ctx), (n), (inputs), 1e-6, 1e-7,  \
                    1e-5)
void tu_gradcheck_at(const char *file, int line, const char *name, TuGradFn fn, void *ctx,
                     int n, Tensor **inputs, double eps, double atol, double rtol);

/* Leak check for a test body: the CPU allocator's in-use bytes before and
 * after must match. */
#define TU_MEM_BEGIN size_t tu_mem0_ = ct_alloc_stats(ct_cpu()).in_use
#define TU_MEM_END                                                                       \
    ck_assert_msg(ct_alloc_stats(ct_cpu()).in_use == tu_mem0_,                           \
                  "tensor memory leaked: %zu bytes in use, %zu before",                  \
                  ct_alloc_stats(ct_cpu()).in_use, tu_mem0_)

/* A fresh directory "/tmp/<prefix>_XXXXXX" written into buf (n bytes). */
void tu_make_temp_dir(char *buf, size_t n, const char *prefix);
/* Removes dir and everything in it. */
void tu_remove_dir(const char *dir);

#endif
