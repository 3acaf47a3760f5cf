/* The CUDA backend: device discovery, the context of each cuda:N instance
 * (stream, cuBLAS/cuBLASLt/cuDNN handles, pinned-block cache), memory,
 * checks, and the iface
 * shared by every cuda:N instance. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "range.cuh"

/* ------------------------------------------------------------------ checks */

CtStatus ct_cuda_fail(cudaError_t e, const char *call, const char *file, int line)
{
    (void)cudaGetLastError(); /* clear it so the next call does not report it */
    return ct_error(CT_ERR_BACKEND, "%s failed at %s:%d: %s (%s)", call, file, line,
                    cudaGetErrorString(e), cudaGetErrorName(e));
}

CtStatus ct_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line)
{
    return ct_error(CT_ERR_BACKEND, "%s failed at %s:%d: %s", call, file, line,
                    cublasGetStatusString(s));
}

CtStatus ct_cudnn_fail(cudnnStatus_t s, const char *call, const char *file, int line)
{
    return ct_error(CT_ERR_BACKEND, "%s failed at %s:%d: %s", call, file, line,
                    cudnnGetErrorString(s));
}

static pthread_once_t sync_once = PTHREAD_ONCE_INIT;
static bool sync_mode;

static void read_sync_env(void)
{
    const char *v = getenv("CTRAINER_CUDA_SYNC");
    sync_mode = v && strcmp(v, "0") != 0 && v[0] != '\0';
}

bool ct_cuda_sync_mode(void)
{
    pthread_once(&sync_once, read_sync_env);
    return sync_mode;
}

cudaError_t ct_cuda_after_launch(cudaStream_t stream)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && ct_cuda_sync_mode()) e = cudaStreamSynchronize(stream);
    return e;
}

/* ----------------------------------------------------------------- devices */

static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int n_devices;
/* a device was used (a context made): counting devices alone makes none */
static bool used;

/* No driver or no GPU is a normal configuration (CPU-only machines), not an
 * error: the count is 0 and nothing is recorded. Any other failure of the
 * runtime also leaves the backend unavailable. */
static void count_devices(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) n = 0;
    (void)cudaGetLastError();
    n_devices = n < CT_MAX_CUDA_DEVICES ? n : CT_MAX_CUDA_DEVICES;
}

extern "C" int ct_cuda_device_count(void)
{
    pthread_once(&count_once, count_devices);
    return n_devices;
}

extern "C" bool ct_cuda_initialized(void)
{
    return __atomic_load_n(&used, __ATOMIC_ACQUIRE);
}

/* Called on every op (ct_cuda_select_device): stores once, then only reads. */
void ct_cuda_mark_used(void)
{
    if (!__atomic_load_n(&used, __ATOMIC_RELAXED))
        __atomic_store_n(&used, true, __ATOMIC_RELEASE);
}

/* Makes device current on this thread. Every op calls it: the device this
 * thread last set is remembered, and cudaSetDevice (about 0.1 us) only runs
 * when that differs, or when something else made another device current
 * since (cudaGetDevice, a thread-local read, tells). */
extern "C" CtStatus ct_cuda_select_device(int device)
{
    ct_cuda_mark_used();
    static thread_local int set = -1;
    int cur;
    if (set == device && cudaGetDevice(&cur) == cudaSuccess && cur == device)
        return CT_OK;
    CT_CUDA_CHECK(cudaSetDevice(device));
    set = device;
    return CT_OK;
}

/* ---------------------------------------------------------------- contexts */

/* The instance's context: its device's stream, made current on this thread. */
CtStatus ct_cuda_enter(const CtBackend *be, CtCudaCtx **out)
{
    CT_RETURN_IF_ERROR(ct_cuda_select_device(be->device.index));
    *out = (CtCudaCtx *)be->context;
    return CT_OK;
}

/* The context of another CUDA device (a peer copy's other side). */
static CtStatus enter_device(CtDevice dev, CtCudaCtx **out)
{
    const CtBackend *be = ct_backend_for(dev);
    return be ? ct_cuda_enter(be, out) : ct_last_status();
}

static CtStatus cuda_init(CtBackend *be)
{
    CtCudaCtx *c = (CtCudaCtx *)calloc(1, sizeof *c);
    if (!c)
        return ct_error(CT_ERR_OOM, "cuda:%d: allocating the device context failed",
                        be->device.index);
    cudaStream_t s;
    CtStatus st = ct_cuda_select_device(be->device.index);
    if (st == CT_OK)
        st = CT_CUDA_STATUS(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (st != CT_OK) {
        free(c);
        return st;
    }
    c->device = be->device.index;
    c->stream = s;
    pthread_mutex_init(&c->mu, NULL);
    ct_cuda_pinned_init(&c->pinned);
    be->context = c;
    return CT_OK;
}

/* Runs at registry shutdown (process exit): failures are recorded, not
 * acted on. */
static void cuda_teardown(CtBackend *be)
{
    CtCudaCtx *c = (CtCudaCtx *)be->context;
    (void)ct_cuda_select_device(c->device);
    ct_cuda_range_free(c);
    ct_cuda_host_empty_cache(c);
    ct_cuda_conv_free(c);
    if (c->blas) (void)CT_CUBLAS_STATUS(cublasDestroy(c->blas));
    if (c->lt) (void)CT_CUBLAS_STATUS(cublasLtDestroy(c->lt));
    if (c->dnn) (void)CT_CUDNN_STATUS(cudnnDestroy(c->dnn));
    (void)CT_CUDA_STATUS(cudaStreamDestroy(c->stream));
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->pinned.mu);
    free(c);
    be->context = NULL;
}

/* *slot, made by make() under the context's lock on first use. */
template <typename H>
static CtStatus lazy_handle(CtCudaCtx *c, H *slot, CtStatus (*make)(CtCudaCtx *, H *),
                            H *out)
{
    H h = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!h) {
        pthread_mutex_lock(&c->mu);
        CtStatus st = CT_OK;
        if (!*slot && (st = make(c, &h)) == CT_OK)
            __atomic_store_n(slot, h, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&c->mu);
        CT_RETURN_IF_ERROR(st);
        h = *slot;
    }
    *out = h;
    return CT_OK;
}

static CtStatus blas_create(CtCudaCtx *c, cublasHandle_t *out)
{
    cublasHandle_t h;
    CT_CUBLAS_CHECK(cublasCreate(&h));
    CtStatus st = CT_CUBLAS_STATUS(cublasSetStream(h, c->stream));
    /* deterministic or not: no atomics (cuBLAS's default, stated here) */
    if (st == CT_OK)
        st = CT_CUBLAS_STATUS(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED));
    if (st != CT_OK) {
        cublasDestroy(h);
        return st;
    }
    *out = h;
    return CT_OK;
}

static CtStatus lt_create(CtCudaCtx *c, cublasLtHandle_t *out)
{
    (void)c;
    CT_CUBLAS_CHECK(cublasLtCreate(out));
    return CT_OK;
}

static CtStatus dnn_create(CtCudaCtx *c, cudnnHandle_t *out)
{
    cudnnHandle_t h;
    CT_CUDNN_CHECK(cudnnCreate(&h));
    CtStatus st = CT_CUDNN_STATUS(cudnnSetStream(h, c->stream));
    if (st != CT_OK) {
        cudnnDestroy(h);
        return st;
    }
    *out = h;
    return CT_OK;
}

CtStatus ct_cuda_blas(CtCudaCtx *c, cublasHandle_t *out)
{
    return lazy_handle(c, &c->blas, blas_create, out);
}

CtStatus ct_cuda_lt(CtCudaCtx *c, cublasLtHandle_t *out)
{
    return lazy_handle(c, &c->lt, lt_create, out);
}

CtStatus ct_cuda_dnn(CtCudaCtx *c, cudnnHandle_t *out)
{
    return lazy_handle(c, &c->dnn, dnn_create, out);
}

CtStatus ct_cuda_scratch(const CtBackend *be, size_t nbytes, void **out)
{
    *out = NULL;
    if (nbytes == 0) return CT_OK;
    *out = ct_backend_alloc(be, nbytes);
    return *out ? CT_OK : ct_last_status();
}

void ct_cuda_scratch_free(const CtBackend *be, void *p, size_t nbytes)
{
    if (p) ct_backend_free(be, p, nbytes);
}

extern "C" void *ct_cuda_stream(const CtBackend *be)
{
    return ((CtCudaCtx *)be->context)->stream;
}

/* ------------------------------------------------------------------ memory */

/* The caching allocator (tensor/allocator.c) calls these on a cache miss and
 * records the out-of-memory error itself. */
static void *cuda_alloc(const CtBackend *be, size_t nbytes)
{
    void *p = NULL;
    if (ct_cuda_select_device(be->device.index) != CT_OK) return NULL;
    if (cudaMalloc(&p, nbytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cuda_free(const CtBackend *be, void *p)
{
    if (ct_cuda_select_device(be->device.index) != CT_OK) return;
    (void)CT_CUDA_STATUS(cudaFree(p));
}

/* Copies run on the stream of the GPU side's instance, after the kernels
 * already queued there, and are waited for. */
static CtStatus cuda_memcpy(const CtBackend *be, void *dst, CtDevice ddev,
                            const void *src, CtDevice sdev, size_t n)
{
    (void)be;
    if (n == 0) return CT_OK;
    bool dgpu = ddev.type == CT_DEVICE_CUDA, sgpu = sdev.type == CT_DEVICE_CUDA;
    if (!dgpu && !sgpu) {
        memmove(dst, src, n);
        return CT_OK;
    }
    CtCudaCtx *dc = NULL, *sc = NULL;
    if (dgpu) CT_RETURN_IF_ERROR(enter_device(ddev, &dc));
    if (sgpu) CT_RETURN_IF_ERROR(enter_device(sdev, &sc));
    if (dgpu && sgpu && ddev.index != sdev.index) {
        CT_CUDA_CHECK(cudaStreamSynchronize(dc->stream)); /* dst may still be in use */
        CT_CUDA_CHECK(
            cudaMemcpyPeerAsync(dst, ddev.index, src, sdev.index, n, sc->stream));
        CT_CUDA_CHECK(cudaStreamSynchronize(sc->stream));
        CT_RETURN_IF_ERROR(ct_cuda_range_report(dc));
        return ct_cuda_range_report(sc);
    }
    CtCudaCtx *c = sgpu ? sc : dc;
    cudaMemcpyKind kind = dgpu && sgpu ? cudaMemcpyDeviceToDevice
                          : dgpu       ? cudaMemcpyHostToDevice
                                       : cudaMemcpyDeviceToHost;
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, c->stream));
    CT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return ct_cuda_range_report(c); /* waited anyway: the queued index checks */
}

/* As cuda_memcpy without the wait: the copy is only queued on be's stream
 * (be is the GPU side's instance; the host side is pinned, tensor/async.c
 * checks). Copies between two GPUs take the synchronous path. */
static CtStatus cuda_memcpy_async(const CtBackend *be, void *dst, CtDevice ddev,
                                  const void *src, CtDevice sdev, size_t n)
{
    bool dgpu = ddev.type == CT_DEVICE_CUDA, sgpu = sdev.type == CT_DEVICE_CUDA;
    if (n == 0) return CT_OK;
    if (dgpu == sgpu) return cuda_memcpy(be, dst, ddev, src, sdev, n);
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_enter(be, &c));
    /* before the copy: pinned frees must wait for it */
    __atomic_store_n(&c->async_copies, true, __ATOMIC_RELAXED);
    CT_CUDA_CHECK(cudaMemcpyAsync(
        dst, src, n, dgpu ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, c->stream));
    return CT_OK;
}

static CtStatus cuda_synchronize(const CtBackend *be)
{
    CtCudaCtx *c;
    CT_RETURN_IF_ERROR(ct_cuda_enter(be, &c));
    CT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return ct_cuda_range_report(c);
}

/* ------------------------------------------------------------------- table */

static CtKernelFn kernels[CT_OP_COUNT];
static CtSupportsFn supports[CT_OP_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void register_all(void)
{
    ct_cuda_register_copy(kernels, supports);
    ct_cuda_register_elementwise(kernels, supports);
    ct_cuda_register_matmul(kernels, supports);
    ct_cuda_register_random(kernels, supports);
    ct_cuda_register_softmax(kernels, supports);
    ct_cuda_register_layer_norm(kernels, supports);
    ct_cuda_register_index(kernels, supports);
    ct_cuda_register_conv(kernels, supports);
    ct_cuda_register_bnorm(kernels, supports);
    ct_cuda_register_pool(kernels, supports);
    ct_cuda_register_unary(kernels, supports);
    ct_cuda_register_reduce(kernels, supports);
    ct_cuda_register_unscale(kernels, supports);
    ct_cuda_register_optim(kernels, supports);
}

/* One iface for every cuda:N; the instance's context tells them apart. */
static const CtBackendIface iface = {
    "cuda",
    CT_DEVICE_CUDA,
    cuda_init,
    cuda_teardown,
    cuda_alloc,
    cuda_free,
    cuda_memcpy,
    ct_cuda_host_alloc,
    ct_cuda_host_free,
    cuda_memcpy_async,
    cuda_synchronize,
    kernels,
    supports,
};

extern "C" const CtBackendIface *ct_cuda_iface(void)
{
    pthread_once(&table_once, register_all);
    return &iface;
}
