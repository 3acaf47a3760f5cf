/* Private to tensor/ (and tests): the heap entry points of the tensor layer
 * and the allocation-failure injection hook.
 *
 * Every allocation a training step makes in this layer (tensor and storage
 * headers, device memory through the caching allocator, autograd nodes,
 * scopes, the backward engine's lists, kernels' scratch) goes through
 * ct_alloc_injected(), so a test can make exactly the Nth of them fail and
 * check that the failure is reported, never skipped. Disarmed, the hook is
 * one thread-local load and a predictable branch, so it is always built.
 */
#ifndef CTRAINER_TENSOR_MEM_H
#define CTRAINER_TENSOR_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* malloc / calloc / realloc that fail (return NULL, nothing recorded) when
 * the injection hook says so. ct_realloc leaves p untouched on failure. */
void *ct_malloc(size_t nbytes);
void *ct_calloc(size_t n, size_t size);
void *ct_realloc(void *p, size_t nbytes);

/* Counts one allocation on this thread; true when it must fail. */
bool ct_alloc_injected(void);

/* Test hook, per thread: after ct_alloc_fail_at(n) with n >= 1 the nth
 * counted allocation from now fails (only that one); n == 0 disarms the hook
 * and counts nothing. ct_alloc_fail_at(INT64_MAX) counts without failing.
 * ct_alloc_counted() is the number counted since the last ct_alloc_fail_at. */
void ct_alloc_fail_at(int64_t n);
int64_t ct_alloc_counted(void);

#ifdef __cplusplus
}
#endif
#endif
