/* Backend instances: one per device from a thread-safe registry, each with
 * its own allocator cache, and ops and `supports` queries answered through
 * the instance (tensor/backend.h). Runs without a GPU: a second device is a
 * private instance (ct_backend_create) or a test iface. */
#include <pthread.h>
#include <stdlib.h>

#include "tensor/internal.h"
#include "testutil.h"

/* ------------------------------------------------ a test iface on the host */

static const CtBackend *seen_by_kernel, *seen_by_supports;
static int n_init, n_teardown;
static bool fail_alloc;

static void *host_alloc(const CtBackend *be, size_t nbytes)
{
    (void)be;
    return fail_alloc ? NULL : malloc(nbytes);
}

static void host_free(const CtBackend *be, void *p)
{
    (void)be;
    free(p);
}

static CtStatus host_memcpy(const CtBackend *be, void *dst, CtDevice ddev,
                            const void *src, CtDevice sdev, size_t n)
{
    (void)be, (void)ddev, (void)sdev;
    memcpy(dst, src, n);
    return CT_OK;
}

static CtStatus test_init(CtBackend *be)
{
    n_init++;
    be->context = malloc(32); /* owned by the instance: teardown frees it */
    return be->context ? CT_OK : ct_error(CT_ERR_OOM, "test context");
}

static CtStatus failing_init(CtBackend *be)
{
    (void)be;
    return ct_error(CT_ERR_BACKEND, "test device: init failed");
}

static void test_teardown(CtBackend *be)
{
    n_teardown++;
    free(be->context);
}

static CtStatus fill_kernel(const CtOpCall *c)
{
    seen_by_kernel = c->backend;
    return CT_OK;
}

static bool fill_supports(const CtOpCall *c)
{
    seen_by_supports = c->backend;
    return c->out[0]->dtype == CT_F32;
}

/* A device failure inside a kernel, as a CUDA check macro records it. */
static CtStatus failing_kernel(const CtOpCall *c)
{
    (void)c;
    return ct_error(CT_ERR_BACKEND, "test device: launch failed");
}

/* A kernel whose workspace allocation fails, as cudaMalloc's does. */
static CtStatus oom_kernel(const CtOpCall *c)
{
    (void)c;
    return ct_error(CT_ERR_OOM, "test device: workspace of 4096 bytes failed");
}

static CtKernelFn test_kernels[CT_OP_COUNT] = {[CT_OP_FILL] = fill_kernel,
                                               [CT_OP_ONE_HOT] = failing_kernel,
                                               [CT_OP_GATHER] = oom_kernel};
static CtSupportsFn test_supports[CT_OP_COUNT] = {[CT_OP_FILL] = fill_supports};

static const CtBackendIface test_iface = {
    .name = "test",
    .type = CT_DEVICE_CPU,
    .init = test_init,
    .teardown = test_teardown,
    .alloc = host_alloc,
    .free = host_free,
    .memcpy = host_memcpy,
    .kernels = test_kernels,
    .supports = test_supports,
};

static void assert_stats_eq(CtAllocStats a, CtAllocStats b)
{
    ck_assert_uint_eq(a.in_use, b.in_use);
    ck_assert_uint_eq(a.cached, b.cached);
    ck_assert_uint_eq(a.peak, b.peak);
    ck_assert_uint_eq(a.n_allocs, b.n_allocs);
}

/* ------------------------------------------------------------------ tests */

/* ct_memory_stats on the CPU: a tensor's bytes are allocated while it
 * lives, cached after it is freed, and the peak remembers them. */
START_TEST(test_memory_stats)
{
    ct_alloc_reset_peak(ct_cpu());
    CtMemoryStats before = ct_memory_stats(ct_cpu());
    ck_assert_uint_eq(before.peak, before.allocated);
    Tensor *t = tensor_zeros(1, (const int64_t[]){1000}, CT_F32, ct_cpu());
    ck_assert_ptr_nonnull(t);
    CtMemoryStats during = ct_memory_stats(ct_cpu());
    size_t used = during.allocated - before.allocated;
    ck_assert_uint_ge(used, 4000); /* its size class: at most 25% more */
    ck_assert_uint_le(used, 5000);
    ck_assert_uint_eq(during.peak, during.allocated);
    tensor_free(t);
    CtMemoryStats after = ct_memory_stats(ct_cpu());
    ck_assert_uint_eq(after.allocated, before.allocated);
    ck_assert_uint_eq(after.cached, during.cached + used);
    ck_assert_uint_eq(after.peak, during.peak);
    /* a device never used, or one that does not exist: zeros, nothing recorded */
    ct_clear_error();
    CtMemoryStats none = ct_memory_stats(ct_cuda(CT_MAX_CUDA_DEVICES));
    ck_assert_uint_eq(none.allocated + none.cached + none.peak, 0);
    ck_assert_int_eq(ct_last_status(), CT_OK);
}
END_TEST

/* Failures name what was being done: a device error its op and operand,
 * an allocation failure the tensor. */
START_TEST(test_failures_name_op_and_sizes)
{
    TU_MEM_BEGIN;
    CtBackend *be = ct_backend_create(&test_iface, ct_cpu());
    ck_assert_ptr_nonnull(be);
    Tensor *out = tensor_zeros(2, (const int64_t[]){2, 3}, CT_F32, ct_cpu());
    CtOpCall c = {.op = CT_OP_ONE_HOT, .out = {out}, .in = {out}};
    ck_assert_int_eq(ct_backend_run(be, &c), CT_ERR_BACKEND);
    tu_assert_error(CT_ERR_BACKEND,
                    "one_hot on cpu (out [2, 3] f32): test device: launch failed");
    c.op = CT_OP_GATHER;
    ck_assert_int_eq(ct_backend_run(be, &c), CT_ERR_OOM);
    tu_assert_error(CT_ERR_OOM, "gather on cpu (out [2, 3] f32): test device: workspace "
                                "of 4096 bytes failed");
    tensor_free(out);
    ct_backend_destroy(be);

    /* the allocation of a tensor's storage fails: every counted allocation
     * of tensor_zeros in turn, until the storage's is the one */
    bool seen = false;
    for (int64_t n = 1; n <= 8 && !seen; n++) {
        ct_alloc_fail_at(n);
        Tensor *t = tensor_zeros(2, (const int64_t[]){3, 4}, CT_F32, ct_cpu());
        ct_alloc_fail_at(0);
        if (t) {
            tensor_free(t);
            continue;
        }
        seen = strstr(ct_last_error(), "allocating 64 bytes on cpu failed") != NULL;
        if (seen)
            tu_assert_error(
                CT_ERR_OOM,
                "tensor [3, 4] f32 on cpu: allocating 64 bytes on cpu failed");
        ct_clear_error();
    }
    ck_assert(seen);
    TU_MEM_END;
}
END_TEST

START_TEST(test_one_instance_per_device)
{
    const CtBackend *cpu = ct_backend_for(ct_cpu());
    ck_assert_ptr_nonnull(cpu);
    ck_assert_ptr_eq(ct_backend_for(ct_cpu()), cpu);
    ck_assert_ptr_eq(ct_backend_peek(ct_cpu()), cpu);
    ck_assert_ptr_eq(cpu->iface, ct_cpu_iface());
    ck_assert_str_eq(cpu->iface->name, "cpu");
    ck_assert(ct_device_eq(cpu->device, ct_cpu()));
    ck_assert_ptr_null(cpu->context); /* the CPU needs none */
    ck_assert_ptr_nonnull(cpu->cache);

    /* a device past the last one has no instance, and asking says why */
    CtDevice none = ct_cuda(ct_cuda_device_count());
    ck_assert_ptr_null(ct_backend_for(none));
    tu_assert_error(CT_ERR_DEVICE, "cuda:");
    ck_assert_ptr_null(ct_backend_peek(none));
    ck_assert_ptr_null(ct_backend_peek(ct_cuda(-1)));
    ck_assert_ptr_null(ct_backend_peek((CtDevice){(CtDeviceType)7, 0}));
    /* its statistics are zero and asking creates nothing */
    ct_clear_error();
    assert_stats_eq(ct_alloc_stats(none), (CtAllocStats){0});
    ct_alloc_reset_peak(none);
    ct_alloc_empty_cache(none);
    ck_assert_int_eq(ct_last_status(), CT_OK);
    ck_assert_ptr_null(ct_backend_peek(none));
}
END_TEST

START_TEST(test_caches_are_per_instance)
{
    const CtBackend *shared = ct_backend_for(ct_cpu());
    CtBackend *mine = ct_backend_create(ct_cpu_iface(), ct_cpu());
    ck_assert_ptr_nonnull(mine);
    ck_assert_ptr_ne(mine, shared);
    ck_assert_ptr_ne(mine->cache, shared->cache);
    CtAllocStats before = ct_backend_alloc_stats(shared);

    /* 1000 bytes round up to the 1024-byte class */
    void *p = ct_backend_alloc(mine, 1000);
    ck_assert_ptr_nonnull(p);
    memset(p, 7, 1000);
    CtAllocStats st = ct_backend_alloc_stats(mine);
    ck_assert_uint_eq(st.in_use, 1024);
    ck_assert_uint_eq(st.peak, 1024);
    ck_assert_uint_eq(st.n_allocs, 1);
    ct_backend_free(mine, p, 1000);
    st = ct_backend_alloc_stats(mine);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.cached, 1024);
    /* the block comes back from this instance's cache, not the system */
    ck_assert_ptr_eq(ct_backend_alloc(mine, 1000), p);
    ck_assert_uint_eq(ct_backend_alloc_stats(mine).n_allocs, 1);
    ct_backend_free(mine, p, 1000);
    assert_stats_eq(ct_backend_alloc_stats(shared), before); /* untouched */

    /* and the registry's instance works on its own cache */
    void *q = ct_device_alloc(ct_cpu(), 5000);
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(ct_alloc_stats(ct_cpu()).in_use, before.in_use + 5120);
    ck_assert_uint_eq(ct_backend_alloc_stats(mine).in_use, 0);
    ck_assert_uint_eq(ct_backend_alloc_stats(mine).cached, 1024);
    ct_device_free(ct_cpu(), q, 5000);
    ck_assert_uint_eq(ct_alloc_stats(ct_cpu()).in_use, before.in_use);

    ct_backend_destroy(mine); /* returns its cached block (ASan: no leak) */
}
END_TEST

START_TEST(test_failed_system_allocation)
{
    TU_MEM_BEGIN;
    CtBackend *be = ct_backend_create(&test_iface, ct_cpu());
    ck_assert_ptr_nonnull(be);
    fail_alloc = true;
    ck_assert_ptr_null(ct_backend_alloc(be, 1000));
    fail_alloc = false;
    tu_assert_error(CT_ERR_OOM, "allocating 1024 bytes on cpu failed");
    assert_stats_eq(ct_backend_alloc_stats(be), (CtAllocStats){0});
    ct_backend_destroy(be);
    TU_MEM_END;
}
END_TEST

enum { N_THREADS = 8 };

typedef struct Racer {
    pthread_barrier_t *start;
    const CtBackend *got;
    bool alloc_ok;
} Racer;

static void *race(void *arg)
{
    Racer *r = arg;
    pthread_barrier_wait(r->start);
    r->got = ct_backend_for(ct_cpu());
    r->alloc_ok = true;
    for (int i = 0; i < 200; i++) {
        size_t n = 64 + (size_t)(i % 5) * 1000;
        void *p = ct_device_alloc(ct_cpu(), n);
        if (!p) r->alloc_ok = false;
        ct_device_free(ct_cpu(), p, n);
    }
    return NULL;
}

START_TEST(test_registry_is_thread_safe)
{
    /* start from an empty registry, so the threads race to create the cpu
     * instance; nothing may be in use across a shutdown */
    ck_assert_uint_eq(ct_alloc_stats(ct_cpu()).in_use, 0);
    ct_backend_registry_shutdown();
    ck_assert_ptr_null(ct_backend_peek(ct_cpu()));

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N_THREADS);
    Racer r[N_THREADS];
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        r[i] = (Racer){.start = &start};
        ck_assert_int_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);

    const CtBackend *cpu = ct_backend_peek(ct_cpu());
    ck_assert_ptr_nonnull(cpu);
    for (int i = 0; i < N_THREADS; i++) {
        ck_assert_ptr_eq(r[i].got, cpu);
        ck_assert(r[i].alloc_ok);
    }
    CtAllocStats st = ct_alloc_stats(ct_cpu());
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_gt(st.cached, 0);
    /* five sizes, at most one live block per thread and size */
    ck_assert_uint_le(st.n_allocs, 5 * N_THREADS);
}
END_TEST

START_TEST(test_supports_answers_through_the_instance)
{
    TU_MEM_BEGIN;
    n_init = n_teardown = 0;
    CtBackend *be = ct_backend_create(&test_iface, ct_cpu());
    ck_assert_ptr_nonnull(be);
    ck_assert_int_eq(n_init, 1);
    ck_assert_ptr_nonnull(be->context);
    Tensor *f = tensor_empty(1, (const int64_t[]){3}, CT_F32, ct_cpu());
    Tensor *d = tensor_empty(1, (const int64_t[]){3}, CT_F64, ct_cpu());
    CtFillParams p = {.value = 1};
    CtOpCall fill_f = {.op = CT_OP_FILL, .out = {f}, .params = &p};
    CtOpCall fill_d = {.op = CT_OP_FILL, .out = {d}, .params = &p};
    CtOpCall copy = {.op = CT_OP_COPY, .out = {f}, .in = {d}};

    seen_by_supports = NULL;
    ck_assert(ct_backend_supports(be, &fill_f));
    ck_assert_ptr_eq(seen_by_supports, be); /* the query sees the instance */
    ck_assert(!ct_backend_supports(be, &fill_d));
    ck_assert(!ct_backend_supports(be, &copy)); /* no kernel: unsupported */
    /* the same calls on the registry's cpu instance: its own table */
    const CtBackend *cpu = ct_backend_for(ct_cpu());
    ck_assert(ct_backend_supports(cpu, &fill_d));
    ck_assert(ct_backend_supports(cpu, &copy));

    seen_by_kernel = NULL;
    ck_assert_int_eq(ct_backend_run(be, &fill_f), CT_OK);
    ck_assert_ptr_eq(seen_by_kernel, be); /* the kernel gets the instance */
    ck_assert_int_eq(ct_backend_run(be, &fill_d), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED, "fill: not supported on cpu for f64");
    /* ct_dispatch goes through the registry's instance of the device */
    ck_assert_int_eq(ct_dispatch(&fill_d), CT_OK);
    tu_assert_values(d, ((double[]){1, 1, 1}), 3, 0, 0);

    tensor_free(f);
    tensor_free(d);
    ct_backend_destroy(be);
    ck_assert_int_eq(n_teardown, 1);
    TU_MEM_END;
}
END_TEST

START_TEST(test_failed_init_creates_nothing)
{
    CtBackendIface broken = test_iface;
    broken.init = failing_init;
    n_teardown = 0;
    ck_assert_ptr_null(ct_backend_create(&broken, ct_cpu()));
    tu_assert_error(CT_ERR_BACKEND, "test device: init failed");
    ck_assert_int_eq(n_teardown, 0); /* nothing to tear down; ASan: no leak */
}
END_TEST

Suite *backend_suite(void)
{
    Suite *s = suite_create("tensor_backend");
    TCase *tc = tcase_create("backend");
    tcase_add_test(tc, test_one_instance_per_device);
    tcase_add_test(tc, test_caches_are_per_instance);
    tcase_add_test(tc, test_failed_system_allocation);
    tcase_add_test(tc, test_registry_is_thread_safe);
    tcase_add_test(tc, test_supports_answers_through_the_instance);
    tcase_add_test(tc, test_failed_init_creates_nothing);
    tcase_add_test(tc, test_memory_stats);
    tcase_add_test(tc, test_failures_name_op_and_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(backend_suite());
}
